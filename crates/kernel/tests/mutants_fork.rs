//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `mm/fork.rs` (kernel/fork.c `dup_mmap`,
//! mm/memory.c `copy_page_range` → `copy_pte_range` →
//! `copy_present_pte`). See docs/mutants.md. The copy was before tested
//! only through the CLI's fork workloads (`cli/tests/fork_exit.rs`), which
//! the kernel + sim mutation runs do not build. Every expected PTE,
//! reference count and charge is derived in a comment from the kernel.

mod common;
use common::pte_of;
use kernel::effects::Charge;
use kernel::mm::memory::populate_range;
use kernel::user::UserOp;
use kernel::world::StepKind;
use kernel::{Effects, MmId, World};
use machine::mem::pte;
use machine::{Cost, Scenario, HPAGE_SIZE, PAGE_SIZE};
use std::sync::Arc;

/// A 2 MiB-aligned base: each PTE table maps [P + k * 2 MiB, + 2 MiB).
const P: u64 = 0x7f00_0000_0000;

/// The parent's layout (adjacent VMAs, as an `mprotect` split leaves):
///
/// ```text
///   A  anon   [P,            P + 4K)          populated: P
///   B  anon   [P + 4K,       P + 2M + 8K)     populated: P+4K, P+8K, P+2M, P+2M+4K
///   C  anon   [P + 2M + 8K,  P + 2M + 12K)    populated: P+2M+8K
///   F  shared file [P + 4M,  P + 4M + 8K)     populated: both pages
/// ```
///
/// B starts at an odd page and crosses a PTE-table boundary; A's page is
/// the first entry of B's first table, C's page the entry just past B's
/// end in B's second table.
const A: (u64, u64) = (P, P + PAGE_SIZE);
const B: (u64, u64) = (P + PAGE_SIZE, P + HPAGE_SIZE + 2 * PAGE_SIZE);
const C: (u64, u64) = (B.1, B.1 + PAGE_SIZE);
const F: (u64, u64) = (P + 2 * HPAGE_SIZE, P + 2 * HPAGE_SIZE + 2 * PAGE_SIZE);

/// The populated pages: (address, anonymous private i.e. COW).
fn pages() -> Vec<(u64, bool)> {
    vec![
        (P, true),
        (P + PAGE_SIZE, true),
        (P + 2 * PAGE_SIZE, true),
        (P + HPAGE_SIZE, true),
        (P + HPAGE_SIZE + PAGE_SIZE, true),
        (C.0, true),
        (F.0, false),
        (F.0 + PAGE_SIZE, false),
    ]
}

/// The parent (task 0, CPU 0) is about to fork a child for CPU 1 (which
/// exits at once), then spins. Returns the world and the parent's mm.
fn fork_setup() -> (World, MmId) {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    for (start, end) in [A, B, C] {
        w.add_vma(mm, start, end - start);
    }
    let file = w.create_file(2).unwrap();
    w.add_vma_file(mm, F.0, F.1 - F.0, file);
    for (start, end) in [(P, P + 3 * PAGE_SIZE), (P + HPAGE_SIZE, C.1), (F.0, F.1)] {
        populate_range(&mut w, mm, start, end).unwrap();
    }
    let child: Arc<[UserOp]> = vec![UserOp::Exit].into();
    w.spawn(
        mm,
        0,
        vec![
            UserOp::Fork {
                child_cpu: 1,
                child,
            },
            UserOp::Spin,
        ],
        false,
    );
    (w, mm)
}

/// [`fork_setup`], run on CPU 0 until the child exists. Returns the world
/// and every charge of the fork's steps.
fn fork_world() -> (World, Vec<Charge>) {
    let (mut w, _) = fork_setup();
    let mut charges = Vec::new();
    let mut steps = 0;
    while w.tasks.len() < 2 {
        let mut fx = Effects::default();
        w.step(0, StepKind::Run, &mut fx);
        charges.extend(fx.charges);
        steps += 1;
        assert!(steps < 1000, "the fork never completed");
    }
    (w, charges)
}

/// `copy_present_pte` of every present PTE of every VMA: the child maps
/// the same page (`folio_try_dup_anon_rmap_pte` / `folio_get`: one more
/// reference, 2 in all: the populate's and the child's); in a COW mapping
/// (`is_cow_mapping`: private and may write: A, B, C) a writable PTE is
/// write-protected in both (`ptep_set_wrprotect(src_mm)`, `pte_wrprotect`
/// for the child), while the shared file mapping F keeps both writable.
/// Each page is copied exactly once, though B starts one page into the
/// table that holds A's page and ends one page before C's: no page of a
/// neighbouring VMA is copied twice. The child gets the same VMAs,
/// unlocked (`vm_area_dup`).
#[test]
fn dup_mmap_copies_every_present_pte_once_and_write_protects_cow_ones() {
    let (w, _) = fork_world();
    let parent = w.tasks[0].mm;
    let child = w.tasks[1].mm;
    assert_ne!(parent, child);
    assert_eq!(w.counters.forks, 1);
    // wake_up_new_task: the parent is pinned (not `cpus_allowed_all`), so
    // its child is too and goes where the workload put it, CPU 1;
    // `sched_balance_fork` did not place it, so no remote fork is counted
    // although CPU 1 is not the parent's.
    assert_eq!(w.tasks[1].cpu, 1);
    assert_eq!(w.tasks[1].us.parent, Some(0));
    assert_eq!(w.counters.sched_fork_remote, 0);
    for (va, cow) in pages() {
        let (pe, ce) = (pte_of(&w, parent, va), pte_of(&w, child, va));
        assert!(pte::present(pe) && pte::present(ce), "{va:#x}");
        assert_eq!(pte::pfn(pe), pte::pfn(ce), "{va:#x}: the same page");
        assert_eq!(w.mem.refs(pte::pfn(pe)), 2, "{va:#x}: copied once");
        assert_eq!(pte::writable(pe), !cow, "{va:#x}: parent");
        assert_eq!(pte::writable(ce), !cow, "{va:#x}: child");
    }
    // Nothing else in the child: the entries around the copied ones.
    for va in [P + 3 * PAGE_SIZE, C.1, F.1, P + HPAGE_SIZE - PAGE_SIZE] {
        assert!(!pte::present(pte_of(&w, child, va)), "{va:#x}");
    }
    let vmas = |mm: MmId| -> Vec<(u64, u64, bool)> {
        w.mms[mm as usize]
            .vmas
            .iter()
            .map(|v| (v.start, v.end, v.file.is_some()))
            .collect()
    };
    assert_eq!(vmas(child), vmas(parent));
    assert!(w.mms[child as usize]
        .vmas
        .iter()
        .all(|v| !v.vm_write_locked && v.vm_readers == 0));
}

/// `copy_pte_range` charges one `CopyPte` per present PTE it copies: the
/// 8 populated pages, in the 5 steps of one PTE table each (A; B's two
/// tables; C; F).
#[test]
fn copy_pte_range_charges_one_copy_per_present_pte() {
    let (_, charges) = fork_world();
    let copies: Vec<u32> = charges
        .iter()
        .filter_map(|c| match c {
            Charge::Cost(Cost::CopyPte, n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(copies.iter().sum::<u32>(), pages().len() as u32);
    // A: 1; B's first table: 2, its second: 2; C: 1; F: 2.
    assert_eq!(copies, vec![1, 2, 2, 1, 2]);
}

/// `dup_mmap`'s locks. A reader (task 1, a thread of the parent on CPU 1)
/// holds `mmap_lock`: the fork's `mmap_write_lock(oldmm)` queues it
/// (`rwsem_down_write_slowpath`: the writer sleeps, not runnable) before
/// anything is copied. The reader's `mmap_read_unlock` (`up_read`, the
/// last reader: `rwsem_wake` of the writer at the head) makes it runnable;
/// its next step takes the lock and `vma_start_write`s every VMA, but a
/// page fault under the per-VMA lock (`lock_vma_under_rcu` on B, taken
/// before the writer got there) still reads B: `vma_start_write` waits
/// for it (`__vma_enter_locked`; 6.1 - 6.12: `down_write(&vma->vm_lock->lock)`
/// against the reader's `down_read_trylock`), so the fork sleeps again,
/// holding `mmap_lock`, with nothing copied. Once the fault ends
/// (`vma_end_read`) the copy runs to the end, and `mmap_write_unlock`
/// (`vma_end_write_all`, `up_write`) leaves the lock and every VMA free.
#[test]
fn dup_mmap_waits_for_the_mmap_lock_and_the_vma_readers() {
    use kernel::mm::mmap_lock::{
        lock_vma_under_rcu, mmap_lock_sleeping, mmap_read_lock, mmap_read_unlock, vma_end_read,
    };
    let (mut w, mm) = fork_setup();
    let reader = w.spawn(mm, 1, vec![UserOp::Spin], false);
    let mut fx = Effects::default();
    assert!(mmap_read_lock(&mut w, mm, reader, &mut fx));
    let mut steps = 0;
    while !mmap_lock_sleeping(&w, mm, 0) {
        w.step(0, StepKind::Run, &mut Effects::default());
        steps += 1;
        assert!(steps < 100, "the fork never queued on mmap_lock");
    }
    assert!(!w.can_run(0), "asleep in mmap_write_lock");
    assert_eq!(w.counters.forks, 0);
    assert_eq!(w.mms[mm as usize].mmap_lock.writer, None);
    assert!(w.mms[mm as usize].vmas.iter().all(|v| !v.vm_write_locked));
    // A fault on B takes B's per-VMA lock (not write-locked yet).
    assert_eq!(lock_vma_under_rcu(&mut w, mm, B.0, &mut fx), Some(B.0));
    mmap_read_unlock(&mut w, mm, &mut fx);
    assert!(!mmap_lock_sleeping(&w, mm, 0));
    assert!(w.can_run(0), "woken by up_read");
    w.step(0, StepKind::Run, &mut Effects::default());
    assert_eq!(w.mms[mm as usize].mmap_lock.writer, Some(0));
    assert!(w.mms[mm as usize].vmas.iter().all(|v| v.vm_write_locked));
    assert!(!w.can_run(0), "waiting for B's reader");
    assert_eq!(w.counters.forks, 0, "nothing copied under a reader");
    vma_end_read(&mut w, mm, B.0, &mut fx);
    assert!(w.can_run(0));
    let mut steps = 0;
    while w.tasks.len() < 3 {
        w.step(0, StepKind::Run, &mut Effects::default());
        steps += 1;
        assert!(steps < 1000, "the fork never completed");
    }
    assert_eq!(w.counters.forks, 1);
    assert!(!w.mms[mm as usize].mmap_lock.locked());
    assert!(w.mms[mm as usize].vmas.iter().all(|v| !v.vm_write_locked));
}
