//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `mm/madvise.rs` (mm/madvise.c
//! `madvise(MADV_DONTNEED)` → `zap_page_range_single`), `mm/vmalloc.rs`
//! (`vmalloc`, `vfree` and the lazy purge's `flush_tlb_kernel_range`) and
//! `mm/mmap.rs` (`munmap`, `exit_mmap`, `free_pgtables`, the hugetlb
//! unmap). See docs/mutants.md. Every expected PTE, lock, counter and
//! freed frame is derived in a comment from the kernel.

use kernel::mm::madvise::{MadviseDontneed, Pc as MadvPc};
use kernel::mm::memory::{populate_range, pte_table};
use kernel::user::UserOp;
use kernel::world::{Frame, StepKind, TaskState};
use kernel::{Effects, MmId, TaskId, World};
use machine::mem::{pte, table_index, FrameUse};
use machine::{CpuId, Pfn, Scenario, HPAGE_SIZE, PAGE_SIZE};

/// A 2 MiB-aligned base: each PTE table maps [P + k * 2 MiB, + 2 MiB).
const P: u64 = 0x7f00_0000_0000;

fn new_world(cpus: u32, sets: &[&str]) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = cpus;
    for kv in sets {
        s.set(kv).unwrap();
    }
    World::new(&s).unwrap()
}

fn pte_of(w: &World, mm: MmId, va: u64) -> u64 {
    let Some(t) = pte_table(w, mm, va) else {
        return 0;
    };
    w.mem.read(t, table_index(va, 1)).unwrap_or(0)
}

fn exited(w: &World, t: TaskId) -> bool {
    w.tasks[t as usize].state == TaskState::Exited
}

/// Step the enabled CPUs allowed by `allow` (first enabled first) until
/// `done`.
fn drive(w: &mut World, allow: impl Fn(CpuId, StepKind) -> bool, done: impl Fn(&World) -> bool) {
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    for _ in 0..200_000 {
        if done(w) {
            return;
        }
        w.enabled(&mut en);
        let Some(&(c, k)) = en.iter().find(|&&(c, k)| allow(c, k)) else {
            panic!("stuck: nothing allowed among {en:?}");
        };
        fx.clear();
        w.step(c, k, &mut fx);
    }
    panic!("did not finish");
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
    let mut w = new_world(cpus, &[]);
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
    let mut w = new_world(1, &[]);
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
    let mut w = new_world(cpus, &[]);
    let mm = w.mm_alloc().unwrap();
    (w, mm)
}

/// `__vmalloc_node_range`: `__get_vm_area_node` reserves the pages plus
/// a guard page (`va_size`), first fit from `VMALLOC_START`
/// (`__alloc_vmap_area`); `vmap_pages_range` maps one new page per PTE in
/// `init_mm`, writable (kernel data: `PAGE_KERNEL` is RW, accessed and
/// dirty), the guard page unmapped. A second area starts after the
/// first's guard page. A `vmalloc` of an object that exists, or of 0
/// pages, does nothing.
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
