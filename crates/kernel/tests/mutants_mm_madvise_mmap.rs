//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `mm/madvise.rs` (mm/madvise.c
//! `madvise(MADV_DONTNEED)` → `zap_page_range_single`), `mm/vmalloc.rs`
//! (`vmalloc`, `vfree` and the lazy purge's `flush_tlb_kernel_range`) and
//! `mm/mmap.rs` (`munmap`, `exit_mmap`, `free_pgtables`, the hugetlb
//! unmap). See docs/mutants.md. Every expected PTE, lock, counter and
//! freed frame is derived in a comment from the kernel.

mod common;
use common::{drive, pte_of, world};
use kernel::mm::madvise::{MadviseDontneed, Pc as MadvPc};
use kernel::mm::memory::populate_range;
use kernel::user::UserOp;
use kernel::world::{Frame, StepKind, TaskState};
use kernel::{Effects, MmId, TaskId, World};
use machine::mem::{pte, table_index, FrameUse};
use machine::scenario::Arch;
use machine::{CpuId, Pfn, HPAGE_SIZE, PAGE_SIZE};

/// A 2 MiB-aligned base: each PTE table maps [P + k * 2 MiB, + 2 MiB).
const P: u64 = 0x7f00_0000_0000;

fn exited(w: &World, t: TaskId) -> bool {
    w.tasks[t as usize].state == TaskState::Exited
}

fn all(_: CpuId, _: StepKind) -> bool {
    true
}

/// Task `t`'s `MADV_DONTNEED` in progress, if any.
fn madvise_frame(w: &World, t: TaskId) -> Option<&MadviseDontneed> {
    w.tasks[t as usize].kstack.iter().find_map(|f| match f {
        Frame::Madvise(m) => Some(m),
        _ => None,
    })
}

/// The frames mapped at `vas` in `mm` (all present).
fn pfns(w: &World, mm: MmId, vas: impl IntoIterator<Item = u64>) -> Vec<Pfn> {
    vas.into_iter()
        .map(|va| {
            let e = pte_of(w, mm, va);
            assert!(pte::present(e), "{va:#x} populated");
            pte::pfn(e)
        })
        .collect()
}

// ---------------------------------------------------------------------
// mm/madvise.rs
// ---------------------------------------------------------------------

/// One anonymous VMA [P, P + 4 MiB), populated in [P, P + 2 MiB + 8 KiB);
/// task 0 on CPU 0 runs `MADV_DONTNEED` of `[start, start + len)` (and no
/// `exit()`: the mm stays for the checks). `split_at`: two VMAs instead.
fn madvise_world(cpus: u32, start: u64, len: u64, split_at: Option<u64>) -> (World, MmId) {
    let mut w = world(Arch::X86, cpus, &[]);
    let mm = w.mm_alloc().unwrap();
    match split_at {
        // Two adjacent VMAs, as an mprotect split leaves.
        Some(s) => {
            w.add_vma(mm, P, s - P);
            w.add_vma(mm, s, P + 2 * HPAGE_SIZE - s);
        }
        None => w.add_vma(mm, P, 2 * HPAGE_SIZE),
    }
    populate_range(&mut w, mm, P, P + HPAGE_SIZE + 2 * PAGE_SIZE).unwrap();
    w.spawn(mm, 0, vec![UserOp::MadviseDontneed { start, len }], true);
    (w, mm)
}

/// `madvise_dontneed_single_vma` → `zap_page_range_single` of
/// [P + 4K, P + 2M + 4K), inside one VMA: `madvise_lock` takes the VMA's
/// read lock (`try_vma_read_lock`, `MADVISE_VMA_READ_LOCK`), not
/// `mmap_lock`; the zap clears exactly the range's PTEs across the PTE
/// table boundary (511 + 1), leaves P and P + 2M + 4K mapped, frees the
/// zapped pages (after the flush) and keeps the VMA; `madvise_unlock`
/// drops the VMA lock.
#[test]
fn madvise_dontneed_in_one_vma_zaps_the_range_under_the_vma_lock() {
    let (start, end) = (P + PAGE_SIZE, P + HPAGE_SIZE + PAGE_SIZE);
    let (mut w, mm) = madvise_world(1, start, end - start, None);
    let zapped = pfns(&w, mm, (start..end).step_by(PAGE_SIZE as usize));
    let kept = pfns(&w, mm, [P, end]);
    drive(&mut w, all, |w| {
        madvise_frame(w, 0).is_some_and(|m| matches!(m.pc, MadvPc::Zap(a) if a > start))
    });
    assert_eq!(w.mms[mm as usize].vmas[0].vm_readers, 1, "VMA read lock");
    assert!(!w.mms[mm as usize].mmap_lock.locked(), "no mmap_lock");
    assert_eq!(w.counters.vma_lock_success, 1);
    assert_eq!(w.counters.vma_lock_fallback, 0);
    drive(&mut w, all, |w| exited(w, 0));
    for va in (start..end).step_by(PAGE_SIZE as usize) {
        assert!(!pte::present(pte_of(&w, mm, va)), "{va:#x} zapped");
    }
    for (va, pfn) in [P, end].into_iter().zip(&kept) {
        let e = pte_of(&w, mm, va);
        assert!(pte::present(e) && pte::pfn(e) == *pfn, "{va:#x} kept");
    }
    assert!(zapped.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
    assert_eq!(w.mms[mm as usize].vmas.len(), 1, "the VMA stays");
    assert_eq!(w.mms[mm as usize].vmas[0].vm_readers, 0, "unlocked");
    assert!(!w.mms[mm as usize].mmap_lock.locked());
    assert_eq!(w.counters.vma_lock_success, 1);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// A range across two VMAs (split at P + 2M) is not one VMA's:
/// `madvise_lock` drops the first VMA's read lock and falls back to
/// `mmap_read_lock` (one fallback, no success); the zap covers both VMAs
/// under it, and `madvise_unlock` is `mmap_read_unlock`.
#[test]
fn madvise_dontneed_across_two_vmas_takes_mmap_read_lock() {
    let (start, end) = (P + HPAGE_SIZE - PAGE_SIZE, P + HPAGE_SIZE + PAGE_SIZE);
    let (mut w, mm) = madvise_world(1, start, end - start, Some(P + HPAGE_SIZE));
    let zapped = pfns(&w, mm, [start, P + HPAGE_SIZE]);
    drive(&mut w, all, |w| {
        madvise_frame(w, 0).is_some_and(|m| m.pc != MadvPc::Enter)
    });
    let lock = &w.mms[mm as usize].mmap_lock;
    assert_eq!((lock.readers, lock.writer), (1, None), "mmap_read_lock");
    assert!(w.mms[mm as usize].vmas.iter().all(|v| v.vm_readers == 0));
    assert_eq!(w.counters.vma_lock_success, 0);
    assert_eq!(w.counters.vma_lock_fallback, 1);
    drive(&mut w, all, |w| exited(w, 0));
    assert!(!pte::present(pte_of(&w, mm, start)));
    assert!(!pte::present(pte_of(&w, mm, P + HPAGE_SIZE)));
    assert!(pte::present(pte_of(&w, mm, end)));
    assert!(pte::present(pte_of(&w, mm, start - PAGE_SIZE)));
    assert!(zapped.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
    assert!(!w.mms[mm as usize].mmap_lock.locked(), "mmap_read_unlock");
    assert_eq!(w.counters.vma_lock_fallback, 1);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// With a writer holding `mmap_lock` (task 1 on CPU 1), the fallback's
/// `mmap_read_lock` queues the madvise (`rwsem_down_read_slowpath`): it
/// sleeps, not runnable, nothing zapped. `mmap_write_unlock` grants it
/// the lock (`rwsem_mark_wake` hands queued readers the lock), so it is
/// runnable, holds one read reference without calling `madvise_lock`
/// again (still one fallback), zaps and unlocks.
#[test]
fn madvise_dontneed_queued_in_mmap_read_lock_runs_once_granted() {
    use kernel::mm::mmap::mmap_write_unlock;
    use kernel::mm::mmap_lock::{mmap_lock_sleeping, mmap_write_lock};
    let (start, end) = (P + HPAGE_SIZE - PAGE_SIZE, P + HPAGE_SIZE + PAGE_SIZE);
    let (mut w, mm) = madvise_world(2, start, end - start, Some(P + HPAGE_SIZE));
    let writer = w.spawn(mm, 1, vec![UserOp::Spin], false);
    let mut fx = Effects::default();
    assert!(mmap_write_lock(&mut w, mm, writer, &mut fx));
    drive(&mut w, |c, _| c == 0, |w| mmap_lock_sleeping(w, mm, 0));
    assert!(!w.can_run(0), "asleep in mmap_read_lock");
    assert!(pte::present(pte_of(&w, mm, start)), "nothing zapped");
    assert_eq!(w.counters.vma_lock_fallback, 1);
    mmap_write_unlock(&mut w, mm, &mut fx);
    assert!(!mmap_lock_sleeping(&w, mm, 0));
    assert!(w.can_run(0), "granted the lock");
    assert_eq!(w.mms[mm as usize].mmap_lock.readers, 1);
    drive(
        &mut w,
        |c, _| c == 0,
        |w| madvise_frame(w, 0).is_some_and(|m| m.pc != MadvPc::Enter),
    );
    assert_eq!(w.mms[mm as usize].mmap_lock.readers, 1, "one reference");
    assert_eq!(w.counters.vma_lock_fallback, 1, "madvise_lock once");
    drive(&mut w, all, |w| exited(w, 0));
    assert!(!pte::present(pte_of(&w, mm, start)));
    assert!(!pte::present(pte_of(&w, mm, P + HPAGE_SIZE)));
    assert!(!w.mms[mm as usize].mmap_lock.locked());
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// 20 populated PTE tables (10,240 pages) in one `MADV_DONTNEED`: the
/// gather holds `GATHER_CAPACITY` (9,678) pages, so after the 19th table
/// (9,728 pages) `zap_pte_range`'s `force_flush` flushes and frees the
/// batches (`tlb_flush_mmu`) before the 20th table is zapped: exactly one
/// mid-zap flush, at P + 38 MiB, when the first 19 tables' pages are free
/// and the 20th table's still mapped; then `tlb_finish_mmu` for the rest.
#[test]
fn madvise_dontneed_flushes_once_mid_zap_when_the_batches_fill() {
    const TABLES: u64 = 20;
    let mut w = world(Arch::X86, 1, &[]);
    let mm = w.mm_alloc().unwrap();
    let end = P + TABLES * HPAGE_SIZE;
    w.add_vma(mm, P, end - P);
    populate_range(&mut w, mm, P, end).unwrap();
    w.spawn(
        mm,
        0,
        vec![UserOp::MadviseDontneed {
            start: P,
            len: end - P,
        }],
        true,
    );
    let mid = P + 19 * HPAGE_SIZE;
    let first = pfns(&w, mm, [P, mid - PAGE_SIZE]);
    let last = pfns(&w, mm, [mid, end - PAGE_SIZE]);
    let mut batch_flushes = Vec::new();
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    for _ in 0..1000 {
        if exited(&w, 0) {
            break;
        }
        w.enabled(&mut en);
        fx.clear();
        w.step(en[0].0, en[0].1, &mut fx);
        match madvise_frame(&w, 0).map(|m| m.pc) {
            Some(MadvPc::BatchFlush(a)) if batch_flushes.last() != Some(&a) => {
                batch_flushes.push(a)
            }
            Some(MadvPc::Zap(a)) if a == mid && !batch_flushes.is_empty() => {
                // tlb_flush_mmu done: the first batch freed, the rest mapped.
                assert!(first.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
                assert!(pte::present(pte_of(&w, mm, mid)));
                assert!(last.iter().all(|&p| w.mem.usage(p) != FrameUse::Free));
            }
            _ => {}
        }
    }
    assert!(exited(&w, 0));
    assert_eq!(batch_flushes, vec![mid], "one force_flush, after table 19");
    assert!(last.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
    assert!(!pte::present(pte_of(&w, mm, end - PAGE_SIZE)));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

// ---------------------------------------------------------------------
// mm/vmalloc.rs
// ---------------------------------------------------------------------

use kernel::mm::vmalloc::{lazy_max_pages, obj_va, VMALLOC_START};
use kernel::Label;

/// `VMALLOC_START` plus `n` pages.
fn vpage(n: u64) -> u64 {
    VMALLOC_START + n * PAGE_SIZE
}

/// `init_mm`'s PTE for kernel address `va` (0: none).
fn kpte(w: &World, va: u64) -> u64 {
    pte_of(w, kernel::INIT_MM, va)
}

/// Run `op` as a system call of a new task on CPU 0 (of mm `mm`) to its
/// end; returns its labels.
fn syscall(w: &mut World, mm: MmId, op: UserOp) -> Vec<Label> {
    let t = w.spawn(mm, 0, vec![op], false);
    let (mut en, mut fx, mut labels) = (Vec::new(), Effects::default(), Vec::new());
    fx.tracing = true;
    for _ in 0..100_000 {
        if exited(w, t) {
            return labels;
        }
        w.enabled(&mut en);
        fx.clear();
        w.step(en[0].0, en[0].1, &mut fx);
        labels.append(&mut fx.labels);
    }
    panic!("the system call did not finish");
}

fn vmalloc(w: &mut World, mm: MmId, obj: u8, pages: u32, reset_perms: bool) -> Vec<Label> {
    let op = UserOp::Vmalloc {
        obj,
        pages,
        reset_perms,
    };
    syscall(w, mm, op)
}

fn vfree(w: &mut World, mm: MmId, obj: u8) -> Vec<Label> {
    syscall(w, mm, UserOp::Vfree { obj })
}

/// `(start, end)` of each `__purge_vmap_area_lazy` in `labels`.
fn purges(labels: &[Label]) -> Vec<(u64, u64)> {
    labels
        .iter()
        .filter_map(|l| match *l {
            Label::VmapPurge { start, end } => Some((start, end)),
            _ => None,
        })
        .collect()
}

fn vmap_world(cpus: u32) -> (World, MmId) {
    let mut w = world(Arch::X86, cpus, &[]);
    let mm = w.mm_alloc().unwrap();
    (w, mm)
}

/// `__vmalloc_node_range`: `__get_vm_area_node` reserves the pages plus
/// a guard page (`va_size`), first fit from `VMALLOC_START`
/// (`__alloc_vmap_area`); `vmap_pages_range` maps one new page per PTE in
/// `init_mm`, writable (kernel data: `PAGE_KERNEL` is RW, accessed and
/// dirty), the guard page unmapped. A second area starts after the
/// first's guard page. A `vmalloc` of an object that exists, or of 0
/// pages, does nothing. `vfree` (`vunmap_range_noflush`, `__free_page`)
/// clears each of the area's PTEs and frees each page.
#[test]
fn vmalloc_maps_each_page_and_leaves_a_guard_page() {
    let (mut w, mm) = vmap_world(1);
    vmalloc(&mut w, mm, 0, 3, false);
    assert_eq!(obj_va(&w, 0), Some(vpage(0)));
    let mut frames = Vec::new();
    for i in 0..3 {
        let e = kpte(&w, vpage(i));
        assert!(pte::present(e) && pte::writable(e), "page {i}");
        assert_eq!(e & (pte::ACCESSED | pte::DIRTY), pte::ACCESSED | pte::DIRTY);
        frames.push(pte::pfn(e));
    }
    frames.sort_unstable();
    frames.dedup();
    assert_eq!(frames.len(), 3, "one page per PTE");
    assert!(!pte::present(kpte(&w, vpage(3))), "guard page");
    vmalloc(&mut w, mm, 1, 2, false);
    assert_eq!(obj_va(&w, 1), Some(vpage(4)), "after the guard page");
    // Object 0 exists: no second area for it; 0 pages: no area.
    vmalloc(&mut w, mm, 0, 1, false);
    vmalloc(&mut w, mm, 2, 0, false);
    assert_eq!(obj_va(&w, 0), Some(vpage(0)));
    assert_eq!(obj_va(&w, 2), None);
    assert!(
        !pte::present(kpte(&w, vpage(7))),
        "nothing mapped after object 1"
    );
    vmalloc(&mut w, mm, 3, 1, false);
    assert_eq!(obj_va(&w, 3), Some(vpage(7)));
    // vfree: every page's PTE cleared, every page freed.
    vfree(&mut w, mm, 0);
    for (i, &pfn) in frames.iter().enumerate() {
        assert!(!pte::present(kpte(&w, vpage(i as u64))), "page {i}");
        assert_eq!(w.mem.usage(pfn), FrameUse::Free);
    }
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `vfree` → `remove_vm_area` → `vunmap_range_noflush` clears the area's
/// PTEs without a flush and `free_vmap_area_noflush` puts it on the lazy
/// list (`vmap_lazy_nr` += pages + guard); the pages are freed at once
/// (`__free_page`), but the address range is not free before a purge:
/// the next `vmalloc` does not reuse it. Lazy areas merge with their
/// neighbours (`merge_or_add_vmap_area`): freeing A and C leaves two lazy
/// ranges, freeing B between them one.
#[test]
fn vfree_unmaps_lazily_and_merges_the_lazy_areas() {
    let (mut w, mm) = vmap_world(1);
    for obj in 0..3 {
        vmalloc(&mut w, mm, obj, 1, false);
    }
    // A [0, 2), B [2, 4), C [4, 6) (in pages from VMALLOC_START).
    let frames: Vec<Pfn> = (0..3).map(|i| pte::pfn(kpte(&w, vpage(2 * i)))).collect();
    let labels = vfree(&mut w, mm, 0);
    assert!(purges(&labels).is_empty(), "no purge below lazy_max_pages");
    assert!(!pte::present(kpte(&w, vpage(0))), "unmapped");
    assert_eq!(w.mem.usage(frames[0]), FrameUse::Free);
    assert_eq!(obj_va(&w, 0), None);
    assert_eq!(w.vmap.lazy, vec![(vpage(0), vpage(2))]);
    assert_eq!(w.vmap.lazy_nr, 2, "one page and the guard page");
    vfree(&mut w, mm, 2);
    assert_eq!(
        w.vmap.lazy,
        vec![(vpage(0), vpage(2)), (vpage(4), vpage(6))]
    );
    assert_eq!(w.vmap.lazy_nr, 4);
    assert!(pte::present(kpte(&w, vpage(2))), "B still mapped");
    // The lazy ranges are not free address space.
    vmalloc(&mut w, mm, 3, 1, false);
    assert_eq!(obj_va(&w, 3), Some(vpage(6)));
    let labels = vfree(&mut w, mm, 1);
    assert!(labels.iter().any(|l| matches!(
        l,
        Label::Vunmap { va, pages: 1, nr_lazy: 6 } if *va == vpage(2)
    )));
    assert_eq!(w.vmap.lazy, vec![(vpage(0), vpage(6))], "merged");
    assert_eq!(w.vmap.lazy_nr, 6);
    assert_eq!(w.vmap.purges, 0);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `lazy_max_pages` is 32 MiB of pages times `fls(num_online_cpus())`:
/// 8,192 pages per bit of the CPU count.
#[test]
fn lazy_max_pages_is_32_mib_times_fls_of_the_cpus() {
    let m = (32 << 20) / PAGE_SIZE;
    for (cpus, fls) in [(1, 1), (2, 2), (3, 2), (4, 3), (8, 4), (64, 7)] {
        assert_eq!(lazy_max_pages(cpus), fls * m, "{cpus} CPUs");
    }
}

/// The purge is due once `vmap_lazy_nr` passes `lazy_max_pages()`
/// (2 CPUs: 16,384 pages): a `vfree` that brings it to exactly 16,384
/// purges nothing; the next one (16,386) runs `__purge_vmap_area_lazy`:
/// one `flush_tlb_kernel_range` of the merged lazy range
/// [VMALLOC_START, + 16,386 pages), then `purge_vmap_node` frees the
/// range (`vmap_lazy_nr` back to 0, nothing lazy or purging), so the
/// next `vmalloc` starts at `VMALLOC_START` again.
#[test]
fn vfree_purges_once_vmap_lazy_nr_passes_lazy_max_pages() {
    let (mut w, mm) = vmap_world(2);
    let max = lazy_max_pages(2);
    assert_eq!(max, 16_384);
    vmalloc(&mut w, mm, 0, (max - 1) as u32, false);
    let labels = vfree(&mut w, mm, 0);
    assert_eq!(w.vmap.lazy_nr, max);
    assert!(purges(&labels).is_empty(), "not past lazy_max_pages");
    assert_eq!(w.counters.kernel_range_flushes, 0);
    vmalloc(&mut w, mm, 1, 1, false);
    assert_eq!(obj_va(&w, 1), Some(vpage(max)));
    let labels = vfree(&mut w, mm, 1);
    assert_eq!(purges(&labels), vec![(vpage(0), vpage(max + 2))]);
    assert!(labels
        .iter()
        .any(|l| matches!(l, Label::VmapPurged { pages } if *pages == max + 2)));
    assert_eq!(w.counters.kernel_range_flushes, 1);
    assert_eq!(w.vmap.purges, 1);
    assert_eq!(w.vmap.lazy_nr, 0);
    assert!(w.vmap.lazy.is_empty() && w.vmap.purging.is_empty());
    vmalloc(&mut w, mm, 2, 1, false);
    assert_eq!(obj_va(&w, 2), Some(vpage(0)), "the purged range is free");
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `VM_FLUSH_RESET_PERMS` (`vm_reset_perms` → `_vm_unmap_aliases`):
/// `vfree` purges at once, however few lazy pages, and the flush spans
/// the direct map too: a full flush (`do_flush_tlb_all`) on every CPU,
/// which drops CPU 1's cached global translation of the area. The
/// purged hole then takes a first-fit area that fits exactly (1 page +
/// guard, before B) but not a bigger one (2 pages + guard: after B).
#[test]
fn vfree_with_reset_perms_purges_at_once_with_a_full_flush() {
    use kernel::hw::mmu::{kernel_access, KERNEL_TLB_TAG};
    let (mut w, mm) = vmap_world(2);
    vmalloc(&mut w, mm, 0, 1, true);
    vmalloc(&mut w, mm, 1, 1, false);
    let mut fx = Effects::default();
    assert!(kernel_access(&mut w, 1, vpage(0), &mut fx));
    assert!(w.cpus[1].tlb.lookup(KERNEL_TLB_TAG, vpage(0)).is_some());
    let labels = vfree(&mut w, mm, 0);
    assert_eq!(purges(&labels), vec![(vpage(0), vpage(2))]);
    assert_eq!(w.counters.kernel_range_flushes, 1);
    let alls = labels
        .iter()
        .filter(
            |l| matches!(l, Label::KernelRangeFlush { pages } if *pages == kernel::TLB_FLUSH_ALL),
        )
        .count();
    assert_eq!(alls, 2, "do_flush_tlb_all on both CPUs");
    assert!(w.cpus[1].tlb.lookup(KERNEL_TLB_TAG, vpage(0)).is_none());
    assert_eq!((w.vmap.lazy_nr, w.vmap.purges), (0, 1));
    assert!(w.vmap.lazy.is_empty() && w.vmap.purging.is_empty());
    // The hole [0, 2) before B [2, 4).
    vmalloc(&mut w, mm, 2, 2, false);
    assert_eq!(obj_va(&w, 2), Some(vpage(4)), "3 pages do not fit in 2");
    vmalloc(&mut w, mm, 3, 1, false);
    assert_eq!(obj_va(&w, 3), Some(vpage(0)), "an exact fit");
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

// ---------------------------------------------------------------------
// mm/mmap.rs
// ---------------------------------------------------------------------

use kernel::mm::mmap::{pud_table, Munmap, Pc as MunmapPc};

/// Task `t`'s munmap (or `exit_mmap`) in progress, if any.
fn munmap_frame(w: &World, t: TaskId) -> Option<&Munmap> {
    w.tasks[t as usize].kstack.iter().find_map(|f| match f {
        Frame::Munmap(m) => Some(m),
        _ => None,
    })
}

/// The PMD entry mapping `va`'s PTE table in `mm` (0: none).
fn pmd(w: &World, mm: MmId, va: u64) -> u64 {
    kernel::mm::gup::read_pmd(w, mm, va).map_or(0, |(_, e)| e)
}

/// Task 0 runs `prog` on CPU 0 to its end; returns the distinct program
/// points its munmaps went through, in order.
fn run_munmaps(w: &mut World) -> Vec<MunmapPc> {
    let (mut en, mut fx, mut pcs) = (Vec::new(), Effects::default(), Vec::new());
    for _ in 0..100_000 {
        if exited(w, 0) {
            return pcs;
        }
        w.enabled(&mut en);
        fx.clear();
        w.step(en[0].0, en[0].1, &mut fx);
        if let Some(pc) = munmap_frame(w, 0).map(|m| m.pc) {
            if pcs.last() != Some(&pc) {
                pcs.push(pc);
            }
        }
    }
    panic!("the munmaps did not finish");
}

/// One PTE table's span (2 MiB): offsets from P below are in tables.
/// Anonymous VMAs at `[s, e)` offsets from P, populated in the offsets
/// `pop`; task 0 on CPU 0 runs `prog`.
fn mm_world(vmas: &[(u64, u64)], pop: &[(u64, u64)], prog: Vec<UserOp>) -> (World, MmId) {
    let mut w = world(Arch::X86, 1, &[]);
    let mm = w.mm_alloc().unwrap();
    for &(s, e) in vmas {
        w.add_vma(mm, P + s, e - s);
    }
    for &(s, e) in pop {
        populate_range(&mut w, mm, P + s, P + e).unwrap();
    }
    w.spawn(mm, 0, prog, true);
    (w, mm)
}

fn munmap(s: u64, e: u64) -> UserOp {
    UserOp::Munmap {
        start: P + s,
        len: e - s,
    }
}

const M: u64 = HPAGE_SIZE;
const K: u64 = PAGE_SIZE;

/// `free_pgtables` → `free_pgd_range`: after the zap, a PTE table is
/// freed (its PMD cleared) when no VMA left in the mm overlaps the 2 MiB
/// it maps, whatever the munmap's alignment. In tables (M = 2 MiB):
/// A [0, 2M+4K) keeps table 2 (its page there) when B [2M+4K, 6M) goes,
/// while tables 3 to 5 go although B did not start on a table boundary;
/// C [6M, 8M) starts right at table 5's end and ends right at table 8's
/// start, E [12M, 14M) starts right after D [8M, 12M): neither keeps a
/// table of B or D. D's tables 10 and 11, never populated, have none.
/// The VMAs go (`vms_gather_munmap_vmas`), the zapped pages are freed,
/// `mmap_lock` and the VMA locks are released.
#[test]
fn munmap_frees_the_pte_tables_no_remaining_vma_overlaps() {
    let vmas = [
        (0, 2 * M + K),
        (2 * M + K, 6 * M),
        (6 * M, 8 * M),
        (8 * M, 12 * M),
        (12 * M, 14 * M),
    ];
    let pop = [(0, 10 * M), (12 * M, 14 * M)];
    let prog = vec![munmap(2 * M + K, 6 * M), munmap(8 * M, 12 * M)];
    let (mut w, mm) = mm_world(&vmas, &pop, prog);
    let gone = pfns(
        &w,
        mm,
        [2 * M + K, 4 * M, 6 * M - K, 8 * M, 10 * M - K].map(|o| P + o),
    );
    run_munmaps(&mut w);
    let left: Vec<(u64, u64)> = w.mms[mm as usize]
        .vmas
        .iter()
        .map(|v| (v.start - P, v.end - P))
        .collect();
    assert_eq!(left, vec![vmas[0], vmas[2], vmas[4]]);
    for t in 0..14u64 {
        let kept = matches!(t, 0..=2 | 6 | 7 | 12 | 13);
        assert_eq!(pte::present(pmd(&w, mm, P + t * M)), kept, "table {t}");
    }
    for off in [0, 2 * M, 6 * M, 8 * M - K, 12 * M] {
        assert!(pte::present(pte_of(&w, mm, P + off)), "{off:#x} kept");
    }
    assert!(gone.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
    assert!(!w.mms[mm as usize].mmap_lock.locked());
    assert!(w.mms[mm as usize].vmas.iter().all(|v| !v.vm_write_locked));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `unmap_vmas` walks the VMAs in the range one by one, `tlb_end_vma`
/// after each one that ends inside it (B at 2M+4K, mid-table; C at 4M;
/// M = 2 MiB), and nowhere else; the outer VMAs are split
/// (`__split_vma`) and keep their outer parts; the PTEs of [4K, 5M) are
/// gone, tables 1 to 4 (no VMA left there) too, tables 0 and 5 stay.
#[test]
fn munmap_across_vmas_ends_each_vma_inside_the_range() {
    let vmas = [(0, 2 * M + K), (2 * M + K, 4 * M), (4 * M, 6 * M)];
    let (mut w, mm) = mm_world(&vmas, &[(0, 6 * M)], vec![munmap(K, 5 * M)]);
    let pcs = run_munmaps(&mut w);
    let ends: Vec<u64> = pcs
        .iter()
        .filter_map(|pc| match *pc {
            MunmapPc::EndVma(a) if a < P + 5 * M => Some(a - P),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![2 * M + K, 4 * M]);
    assert!(!pcs.iter().any(|pc| matches!(pc, MunmapPc::BatchFlush(_))));
    let left: Vec<(u64, u64)> = w.mms[mm as usize]
        .vmas
        .iter()
        .map(|v| (v.start - P, v.end - P))
        .collect();
    assert_eq!(left, vec![(0, K), (5 * M, 6 * M)]);
    assert!(pte::present(pte_of(&w, mm, P)));
    assert!(pte::present(pte_of(&w, mm, P + 5 * M)));
    for off in [K, 2 * M - K, 2 * M, 2 * M + K, 4 * M, 5 * M - K] {
        assert!(!pte::present(pte_of(&w, mm, P + off)), "{off:#x}");
    }
    for t in 0..6u64 {
        let kept = t == 0 || t == 5;
        assert_eq!(pte::present(pmd(&w, mm, P + t * M)), kept, "table {t}");
    }
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// A munmap inside one VMA splits it in three (`__split_vma` twice): the
/// lower and upper parts stay, in address order between the neighbours
/// (X before, Z after), and only the middle's PTEs go.
#[test]
fn munmap_inside_a_vma_keeps_its_lower_and_upper_parts() {
    let vmas = [(0, M), (M, 5 * M), (5 * M, 6 * M)];
    let (mut w, mm) = mm_world(&vmas, &[(0, 6 * M)], vec![munmap(2 * M, 3 * M + K)]);
    run_munmaps(&mut w);
    let left: Vec<(u64, u64)> = w.mms[mm as usize]
        .vmas
        .iter()
        .map(|v| (v.start - P, v.end - P))
        .collect();
    assert_eq!(
        left,
        vec![(0, M), (M, 2 * M), (3 * M + K, 5 * M), (5 * M, 6 * M)]
    );
    for (off, mapped) in [
        (2 * M - K, true),
        (2 * M, false),
        (3 * M, false),
        (3 * M + K, true),
    ] {
        assert_eq!(pte::present(pte_of(&w, mm, P + off)), mapped, "{off:#x}");
    }
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// 20 populated PTE tables in one munmap: as for `MADV_DONTNEED`, the
/// full batches force one `tlb_flush_mmu` after the 19th table (the
/// first 19 tables' pages free, the 20th table's still mapped), then the
/// rest; one VMA, so no `tlb_end_vma`.
#[test]
fn munmap_flushes_once_mid_zap_when_the_batches_fill() {
    let (mut w, mm) = mm_world(&[(0, 20 * M)], &[(0, 20 * M)], vec![munmap(0, 20 * M)]);
    let first = pfns(&w, mm, [P, P + 19 * M - K]);
    let last = pfns(&w, mm, [P + 19 * M, P + 20 * M - K]);
    let (mut en, mut fx, mut flushes) = (Vec::new(), Effects::default(), Vec::new());
    for _ in 0..10_000 {
        if exited(&w, 0) {
            break;
        }
        w.enabled(&mut en);
        fx.clear();
        w.step(en[0].0, en[0].1, &mut fx);
        match munmap_frame(&w, 0).map(|m| m.pc) {
            Some(MunmapPc::BatchFlush(a)) if flushes.last() != Some(&a) => flushes.push(a),
            Some(MunmapPc::Zap(a)) if a == P + 19 * M && !flushes.is_empty() => {
                assert!(first.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
                assert!(last.iter().all(|&p| w.mem.usage(p) != FrameUse::Free));
            }
            Some(MunmapPc::EndVma(a)) => panic!("tlb_end_vma at {a:#x}"),
            _ => {}
        }
    }
    assert!(exited(&w, 0));
    assert_eq!(flushes, vec![P + 19 * M]);
    assert!(last.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
    assert!(w.mms[mm as usize].vmas.is_empty());
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `free_pgtables` is a step of its own: the PTE table is unhooked (PMD
/// cleared) and the munmap stops there, before `tlb_finish_mmu`'s flush,
/// so other CPUs may run between the unhook and the flush (the window the
/// table freeing's RCU and `tlb_remove_table_sync_one` exist for).
#[test]
fn munmap_unhooks_the_tables_in_a_step_before_the_flush() {
    let (mut w, mm) = mm_world(&[(0, M)], &[(0, M)], vec![munmap(0, M)]);
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    for _ in 0..1000 {
        assert!(!exited(&w, 0), "the PMD was never cleared");
        w.enabled(&mut en);
        fx.clear();
        w.step(en[0].0, en[0].1, &mut fx);
        if !pte::present(pmd(&w, mm, P)) {
            break;
        }
    }
    assert_eq!(munmap_frame(&w, 0).map(|m| m.pc), Some(MunmapPc::Flush));
    drive(&mut w, all, |w| exited(w, 0));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `exit()` of the mm's last task: `exit_mm` → `mmput` → `exit_mmap`
/// tears down every VMA under a `fullmm` gather (from the lowest VMA's
/// start to the highest one's end, 2 GiB apart here: two PUD entries),
/// frees every page,
/// and `free_pgtables` frees the PTE tables and, the mm being empty, the
/// PMD and PUD tables too (the PGD entries cleared), in one step before
/// the flush.
#[test]
fn exit_mmap_tears_down_every_vma_and_the_tables_above_them() {
    const G: u64 = 2 << 30;
    let vmas = [(0, M), (G, G + 2 * M)];
    let (mut w, mm) = mm_world(&vmas, &[(0, M), (G, G + 2 * M)], vec![UserOp::Exit]);
    let pages = pfns(&w, mm, [P, P + M - K, P + G, P + G + 2 * M - K]);
    step_until_exit_mmap_freed_the_upper_tables(&mut w, mm);
    drive(&mut w, all, |w| exited(w, 0));
    assert!(w.mms[mm as usize].vmas.is_empty());
    assert!(pages.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
    for off in [0, G] {
        assert_eq!(pud_table(&w, mm, P + off), None, "PGD entry at {off:#x}");
    }
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// Step task 0's exit until the PGD entry of P is cleared, and check that
/// `free_pgtables` (the PTE tables and the levels above) was one step of
/// `exit_mmap`'s `fullmm` gather, before its flush.
fn step_until_exit_mmap_freed_the_upper_tables(w: &mut World, mm: MmId) {
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    for _ in 0..10_000 {
        assert!(!exited(w, 0), "the PGD entry was never cleared");
        w.enabled(&mut en);
        fx.clear();
        w.step(en[0].0, en[0].1, &mut fx);
        if pud_table(w, mm, P).is_none() {
            break;
        }
    }
    let m = munmap_frame(w, 0).expect("exit_mmap");
    assert!(m.fullmm);
    assert_eq!(m.pc, MunmapPc::Flush);
}

/// An mm whose VMAs are all gone still has the PMD and PUD tables its
/// munmaps left (munmap frees PTE tables only); its last task's `exit()`
/// frees them (`free_pgd_range` with no VMA: every level), in a step of
/// its own before the flush.
#[test]
fn exit_mmap_of_an_empty_mm_frees_the_upper_tables() {
    let prog = vec![munmap(0, M), UserOp::Exit];
    let (mut w, mm) = mm_world(&[(0, M)], &[(0, M)], prog);
    drive(&mut w, all, |w| w.tasks[0].us.pc == 1);
    assert!(w.mms[mm as usize].vmas.is_empty());
    assert!(
        pud_table(&w, mm, P).is_some(),
        "munmap left the upper tables"
    );
    step_until_exit_mmap_freed_the_upper_tables(&mut w, mm);
    drive(&mut w, all, |w| exited(w, 0));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `mmput` tears the mm down only when its last user exits: the first
/// of two tasks of one mm to `exit()` leaves the VMAs and pages; the
/// second tears them down.
#[test]
fn exit_mmap_only_for_the_last_user_of_the_mm() {
    let (mut w, mm) = mm_world(&[(0, M)], &[(0, M)], vec![UserOp::Exit]);
    w.spawn(mm, 0, vec![UserOp::Exit], true);
    drive(&mut w, all, |w| exited(w, 0) || exited(w, 1));
    assert_eq!(w.mms[mm as usize].vmas.len(), 1, "another user left");
    assert!(pte::present(pte_of(&w, mm, P)));
    drive(&mut w, all, |w| exited(w, 0) && exited(w, 1));
    assert!(w.mms[mm as usize].vmas.is_empty());
    assert!(!pte::present(pte_of(&w, mm, P)));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// hugetlbfs: two mms map [H, H + 8 MiB) of one file and share its PMD
/// table (`huge_pmd_share`); in B, anonymous VMAs end right at H's 1 GiB
/// region and start right at its end. A's munmap only unshares
/// (`huge_pmd_unshare`: its PUD entry cleared, the share count to 1, a
/// full unshare) and leaves B's huge pages (at H, H + 2M, H + 4M; M =
/// 2 MiB) mapped. B, now the last user (`__unmap_hugepage_range`):
/// unmapping [H + 2M, H + 4M) clears that huge PMD only (512 pages
/// zapped, the huge page freed after the flush; H's and H + 4M's stay);
/// unmapping [H, H + 6M) clears the other two, but the table, empty now,
/// stays while the VMA [H + 6M, H + 8M) still maps its region; unmapping
/// that frees it (PUD entry cleared, no shared table left) and releases
/// `i_mmap_rwsem`.
#[test]
fn hugetlb_munmap_unshares_then_the_last_user_frees_the_table() {
    const H: u64 = 0x7f40_0000_0000;
    const G: u64 = 1 << 30;
    let mut w = world(Arch::X86, 2, &[]);
    let (a, b) = (w.mm_alloc().unwrap(), w.mm_alloc().unwrap());
    for mm in [a, b] {
        w.add_vma_hugetlb(mm, H, 4 * M);
    }
    w.add_vma(b, H - M, M);
    w.add_vma(b, H + G, M);
    let touch = |addr| UserOp::Touch { addr, write: true };
    let unmap = |start, len| UserOp::Munmap { start, len };
    // (Compute: a pause between B's munmaps.)
    let pause = || UserOp::Compute { ns: 1 };
    let prog = vec![
        touch(H),
        touch(H + M),
        touch(H + 2 * M),
        unmap(H + M, M),
        pause(),
        unmap(H, 3 * M),
        pause(),
        unmap(H + 3 * M, M),
    ];
    w.spawn(b, 1, prog, true);
    w.spawn(a, 0, vec![touch(H), unmap(H, 4 * M)], true);
    drive(&mut w, |c, _| c == 1, |w| w.tasks[0].us.pc == 3);
    drive(&mut w, |c, _| c == 0, |w| w.tasks[1].us.pc == 1);
    assert_eq!(w.counters.pmd_shares, 1);
    let table = pte::pfn(pte_of_pud(&w, b, H));
    let pages = [H, H + M, H + 2 * M].map(|va| {
        let e = pmd(&w, b, va);
        assert!(pte::huge(e), "{va:#x}");
        pte::pfn(e)
    });
    // A's munmap: unshare only (B's CPU takes only interrupts).
    let irq_or = |cpu| move |c, k| c == cpu || k == StepKind::TakeIrq;
    drive(&mut w, irq_or(0), |w| exited(w, 1));
    assert_eq!(pte_of_pud(&w, a, H), 0, "A's PUD entry cleared");
    assert_eq!(w.counters.pmd_unshares, 1);
    assert_eq!(w.counters.pmd_fully_unshared, 1);
    assert_eq!(w.hugetlb_pmds.len(), 1);
    assert_eq!(
        (w.hugetlb_pmds[0].table, w.hugetlb_pmds[0].users),
        (table, 1)
    );
    assert!(pages.iter().all(|&p| w.mem.usage(p) != FrameUse::Free));
    // B's first munmap: the middle huge PMD only.
    let mut zapped = Vec::new();
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    fx.tracing = true;
    while w.tasks[0].us.pc < 5 {
        w.enabled(&mut en);
        let &(c, k) = en.iter().find(|&&(c, k)| irq_or(1)(c, k)).unwrap();
        fx.clear();
        w.step(c, k, &mut fx);
        zapped.extend(fx.labels.iter().filter_map(|l| match *l {
            Label::ZapPtes { pages, start, .. } => Some((pages, start)),
            _ => None,
        }));
    }
    assert_eq!(zapped, vec![(512, H + M)], "one huge page");
    assert!(pte::huge(pmd(&w, b, H)) && pte::huge(pmd(&w, b, H + 2 * M)));
    assert_eq!(pmd(&w, b, H + M), 0);
    assert_eq!(w.mem.usage(pages[1]), FrameUse::Free);
    assert!(w.mem.usage(pages[0]) != FrameUse::Free && w.mem.usage(pages[2]) != FrameUse::Free);
    // The second: the table is empty but [H + 6M, H + 8M) still maps the region.
    drive(&mut w, irq_or(1), |w| w.tasks[0].us.pc == 7);
    assert!(pmd(&w, b, H) == 0 && pmd(&w, b, H + 2 * M) == 0);
    assert!(pages.iter().all(|&p| w.mem.usage(p) == FrameUse::Free));
    assert!(w.mem.table_empty(table));
    assert_eq!(pte::pfn(pte_of_pud(&w, b, H)), table, "the table stays");
    assert_eq!(w.hugetlb_pmds.len(), 1);
    // The third: the table goes.
    drive(&mut w, all, |w| exited(w, 0));
    assert_eq!(pte_of_pud(&w, b, H), 0, "B's PUD entry cleared");
    assert!(w.hugetlb_pmds.is_empty());
    assert_eq!(w.mms[b as usize].vmas.len(), 2, "the neighbours stay");
    assert!(w.hugetlb_i_mmap_rwsem.writer.is_none());
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// The PUD entry (in `mm`'s PUD table) that maps `va`'s PMD table (0: none).
fn pte_of_pud(w: &World, mm: MmId, va: u64) -> u64 {
    pud_table(w, mm, va).map_or(0, |pud| w.mem.read(pud, table_index(va, 3)).unwrap_or(0))
}
