//! `mmap_lock` as a reader/writer semaphore with per-VMA locks (issue 15
//! item 10; include/linux/mmap_lock.h, mm/mmap_lock.c): faults and
//! `MADV_DONTNEED` take the VMA's read lock (`lock_vma_under_rcu`) and fall
//! back to `mmap_read_lock`; munmap takes `mmap_write_lock`, write-locks
//! its VMAs and downgrades; `collapse_huge_page` scans under
//! `mmap_read_lock`, then takes `mmap_write_lock` and `vma_start_write`.
//! Each test stops one CPU at a chosen program point and checks who may
//! run. The old model took no lock in madvise or munmap, and its faults
//! waited on any `mmap_lock` writer of the mm.

mod common;
use common::drive;
use kernel::mm::khugepaged::{Pc, ScanResult, EINVAL};
use kernel::user::UserOp;
use kernel::world::{Frame, StepKind, TaskState};
use kernel::{Effects, MmId, World};
use machine::mem::pte;
use machine::{CpuId, Scenario, HPAGE_SIZE, PAGE_SIZE};

const P: u64 = 0x7f00_0000_0000;
/// A second VMA, 4 MiB above the first.
const Q: u64 = P + 2 * HPAGE_SIZE;

/// CPU0 MADV_COLLAPSEs `[P, P + 2 MiB)` (populated but for its last
/// page); CPU1 runs `other`. A second, empty VMA at `Q`.
fn world(other: Vec<UserOp>) -> (World, MmId) {
    world_with(&[], other)
}

fn world_with(sets: &[&str], other: Vec<UserOp>) -> (World, MmId) {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    for kv in sets {
        s.set(kv).unwrap();
    }
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, P, HPAGE_SIZE);
    w.add_vma(mm, Q, HPAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + HPAGE_SIZE - PAGE_SIZE).unwrap();
    let collapse = UserOp::MadviseCollapse {
        start: P,
        len: HPAGE_SIZE,
    };
    // No `exit()` after the collapse: the program just ends, so the mm is
    // not torn down (`exit_mmap`) before the tests look at its PMD.
    w.spawn(mm, 0, vec![collapse], true);
    w.spawn(mm, 1, other, true);
    (w, mm)
}

/// The collapse ended with one `SCAN_PMD_NULL` and `MADV_COLLAPSE`
/// returned -EINVAL.
fn assert_failed_pmd_null(w: &World) {
    let pmd_null = ScanResult::ALL
        .iter()
        .position(|&r| r == ScanResult::PmdNull);
    assert_eq!(w.counters.collapse_fail[pmd_null.unwrap()], 1);
    assert_eq!(w.tasks[0].us.ret, -EINVAL);
}

/// Run only `cpu` until it cannot go on (blocked) or its task exited.
fn run_alone(w: &mut World, cpu: CpuId) {
    drive(
        w,
        |c, _| c == cpu,
        |w| !w.can_run(cpu) || w.tasks[cpu as usize].state == TaskState::Exited,
    );
}

fn collapse_pc(w: &World) -> Option<Pc> {
    w.tasks[0].kstack.iter().find_map(|f| match f {
        Frame::CollapseHugePage(c) => Some(c.pc),
        _ => None,
    })
}

fn exited(w: &World, t: usize) -> bool {
    w.tasks[t].state == TaskState::Exited
}

fn pmd(w: &World, mm: MmId, va: u64) -> u64 {
    kernel::mm::gup::read_pmd(w, mm, va).map_or(0, |(_, p)| p)
}

/// CPU0 stops where the collapse holds `mmap_write_lock` and the VMA's
/// write lock (just before `pmdp_collapse_flush`).
fn collapse_to_flush(w: &mut World) {
    drive(w, |c, _| c == 0, |w| collapse_pc(w) == Some(Pc::Flush));
    assert!(w.mms[1].mmap_lock.writer == Some(0));
    assert!(w.mms[1].vmas[0].vm_write_locked && !w.mms[1].vmas[1].vm_write_locked);
}

/// A fault in the VMA the collapse write-locked misses the VMA lock and
/// sleeps in `mmap_read_lock` until `mmap_write_unlock`; then the huge PMD
/// maps the page (a spurious fault). One fallback, no VMA-lock success.
#[test]
fn a_fault_waits_for_a_collapse_holding_the_write_lock() {
    let last = P + HPAGE_SIZE - PAGE_SIZE;
    let touch = UserOp::Touch {
        addr: last,
        write: true,
    };
    let (mut w, mm) = world(vec![touch, UserOp::Exit]);
    collapse_to_flush(&mut w);
    run_alone(&mut w, 1);
    assert!(!w.can_run(1), "the fault sleeps");
    assert!(matches!(
        w.tasks[1].kstack.last(),
        Some(Frame::PageFault(_))
    ));
    assert_eq!(
        (w.counters.vma_lock_fallback, w.counters.vma_lock_success),
        (1, 0)
    );
    drive(
        &mut w,
        |c, k| c == 0 || k == StepKind::TakeIrq,
        |w| exited(w, 0),
    );
    assert!(w.mms[mm as usize].mmap_lock.writer.is_none());
    assert!(w.can_run(1), "mmap_write_unlock woke it");
    drive(&mut w, |_, _| true, |w| exited(w, 1));
    assert!(w.violations.is_empty());
    assert_eq!(w.counters.collapses, 1);
    assert_eq!(w.counters.spurious_faults, 1);
    assert_eq!(w.mms[mm as usize].mmap_lock.readers, 0);
}

/// A fault in another VMA takes that VMA's read lock and completes while
/// the collapse holds `mmap_write_lock` (what per-VMA locks are for). The
/// old model blocked it: its faults waited on any `mmap_lock` writer.
#[test]
fn a_fault_in_another_vma_runs_under_its_vma_lock() {
    let touch = UserOp::Touch {
        addr: Q,
        write: true,
    };
    let (mut w, mm) = world(vec![touch, UserOp::Exit]);
    collapse_to_flush(&mut w);
    run_alone(&mut w, 1);
    assert!(exited(&w, 1), "CPU1 faulted and exited during the collapse");
    assert_eq!(collapse_pc(&w), Some(Pc::Flush));
    assert_eq!(
        (w.counters.vma_lock_fallback, w.counters.vma_lock_success),
        (0, 1)
    );
    assert_eq!(w.counters.page_faults, 1);
    assert_eq!(w.mms[mm as usize].vmas[1].vm_readers, 0);
}

/// `vma_start_write` waits for a `MADV_DONTNEED` that holds the VMA's read
/// lock: the collapse (scanned, `mmap_write_lock` taken: the madvise holds
/// no `mmap_lock`) sleeps before clearing the PMD until the zap is over.
/// The old model's madvise took no lock, so the collapse cleared the PMD
/// under the zap. PT_RECLAIM is off: with it the zap's first step frees
/// the PTE table (next test).
#[test]
fn collapse_waits_for_a_madvise_holding_the_vma_read_lock() {
    let zap = UserOp::MadviseDontneed {
        start: P,
        len: HPAGE_SIZE,
    };
    let (mut w, mm) = world_with(&["mm.pt_reclaim=off"], vec![zap, UserOp::Exit]);
    let before = pmd(&w, mm, P);
    // madvise_lock + the first zap_pte_range step.
    drive(&mut w, |c, _| c == 1, |w| w.mms[1].vmas[0].vm_readers == 1);
    assert_eq!(w.counters.vma_lock_success, 1);
    run_alone(&mut w, 0);
    assert_eq!(collapse_pc(&w), Some(Pc::VmaStartWrite));
    assert!(!w.can_run(0));
    assert_eq!(w.mms[mm as usize].mmap_lock.writer, Some(0));
    assert_eq!(pmd(&w, mm, P), before, "PMD not cleared under the zap");
    drive(
        &mut w,
        |c, k| c == 1 || k == StepKind::TakeIrq,
        |w| exited(w, 1),
    );
    assert!(w.can_run(0), "vma_end_read woke the collapse");
    drive(&mut w, |_, _| true, |w| exited(w, 0));
    assert!(w.violations.is_empty());
    assert_eq!(w.counters.collapses, 1);
    assert!(pte::huge(pmd(&w, mm, P)));
}

/// A writer waiting for a VMA's readers refuses new ones
/// (`vma_start_write` adds `VMA_LOCK_OFFSET` to `vm_refcnt` before it
/// waits; before 6.15 the queued writer failed `down_read_trylock`): with
/// the collapse waiting in `vma_start_write` for the madvise's zap, a new
/// `lock_vma_under_rcu` of the VMA fails (the fault or madvise falls back
/// to `mmap_read_lock`, which the collapse holds), and a munmap waiting
/// for the zap holds `mmap_write_lock` with the VMA marked likewise. The
/// old model marked the VMA only once its readers had gone, so readers
/// kept coming in and could starve the writer.
#[test]
fn a_waiting_vma_writer_refuses_new_readers() {
    use kernel::mm::mmap_lock::lock_vma_under_rcu;
    let zap = UserOp::MadviseDontneed {
        start: P,
        len: HPAGE_SIZE,
    };
    let (mut w, mm) = world_with(&["mm.pt_reclaim=off"], vec![zap.clone(), UserOp::Exit]);
    drive(&mut w, |c, _| c == 1, |w| w.mms[1].vmas[0].vm_readers == 1);
    run_alone(&mut w, 0);
    assert_eq!(collapse_pc(&w), Some(Pc::VmaStartWrite));
    assert!(w.mms[mm as usize].vmas[0].vm_write_locked);
    assert!(lock_vma_under_rcu(&mut w, mm, P, &mut Effects::default()).is_none());
    assert_eq!(w.mms[mm as usize].mmap_lock.writer, Some(0));
    assert_eq!(w.mms[mm as usize].vmas[0].vm_readers, 1);
    // munmap in place of the collapse.
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    s.set("mm.pt_reclaim=off").unwrap();
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, P, HPAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + HPAGE_SIZE).unwrap();
    let unmap = UserOp::Munmap {
        start: P,
        len: HPAGE_SIZE,
    };
    w.spawn(mm, 0, vec![unmap, UserOp::Exit], true);
    w.spawn(mm, 1, vec![zap, UserOp::Exit], true);
    drive(&mut w, |c, _| c == 1, |w| w.mms[1].vmas[0].vm_readers == 1);
    run_alone(&mut w, 0);
    assert!(!w.can_run(0), "munmap waits for the zap");
    assert_eq!(w.mms[mm as usize].mmap_lock.writer, Some(0));
    assert!(lock_vma_under_rcu(&mut w, mm, P, &mut Effects::default()).is_none());
    drive(&mut w, |_, _| true, |w| exited(w, 0) && exited(w, 1));
    assert!(w.violations.is_empty());
    assert!(w.mms[mm as usize].vmas.is_empty());
}

/// With PT_RECLAIM (x86's default) the same `MADV_DONTNEED` zaps the
/// whole PTE table in its first step and frees it (PMD cleared, table
/// gathered with `freed_tables`): the collapse's scan finds no table
/// (`SCAN_PMD_NULL`, -EINVAL) and never takes `mmap_write_lock`.
#[test]
fn with_pt_reclaim_the_madvise_frees_the_table_the_collapse_wanted() {
    let zap = UserOp::MadviseDontneed {
        start: P,
        len: HPAGE_SIZE,
    };
    let (mut w, mm) = world(vec![zap, UserOp::Exit]);
    drive(&mut w, |c, _| c == 1, |w| w.mms[1].vmas[0].vm_readers == 1);
    assert_eq!(pmd(&w, mm, P), 0, "PT_RECLAIM cleared the PMD");
    run_alone(&mut w, 0);
    assert!(exited(&w, 0));
    assert_eq!(w.counters.collapses, 0);
    assert_failed_pmd_null(&w);
    drive(&mut w, |_, _| true, |w| exited(w, 1));
    assert!(w.violations.is_empty());
}

/// munmap downgrades to a reader while it zaps: the collapse scans (a
/// reader too), then sleeps in `mmap_write_lock`; when munmap is done the
/// PTE table is gone and the revalidation fails (SCAN_PMD_NULL, -EINVAL).
/// The old model's munmap took no lock.
#[test]
fn munmap_keeps_the_collapse_out_until_it_is_done() {
    let unmap = UserOp::Munmap {
        start: P,
        len: HPAGE_SIZE,
    };
    let (mut w, mm) = world(vec![unmap, UserOp::Exit]);
    // do_vmi_align_munmap's entry: write lock, detach, downgrade.
    drive(&mut w, |c, _| c == 1, |w| w.mms[1].mmap_lock.readers == 1);
    assert!(w.mms[mm as usize].mmap_lock.writer.is_none());
    run_alone(&mut w, 0);
    assert_eq!(
        collapse_pc(&w),
        Some(Pc::LockWait),
        "queued in mmap_write_lock"
    );
    assert!(!w.can_run(0));
    drive(
        &mut w,
        |c, k| c == 1 || k == StepKind::TakeIrq,
        |w| exited(w, 1),
    );
    drive(&mut w, |_, _| true, |w| exited(w, 0));
    assert!(w.violations.is_empty());
    assert_eq!(w.counters.collapses, 0);
    assert_failed_pmd_null(&w);
}

/// A munmap entered while the collapse holds `mmap_write_lock` sleeps in
/// `mmap_write_lock` until the collapse is done, then unmaps the huge page.
#[test]
fn munmap_waits_for_the_collapse() {
    let unmap = UserOp::Munmap {
        start: P,
        len: HPAGE_SIZE,
    };
    let (mut w, mm) = world(vec![unmap, UserOp::Exit]);
    collapse_to_flush(&mut w);
    run_alone(&mut w, 1);
    assert!(!w.can_run(1));
    assert!(matches!(w.tasks[1].kstack.last(), Some(Frame::Munmap(_))));
    assert_eq!(w.mms[mm as usize].vmas.len(), 2, "no VMA detached yet");
    drive(
        &mut w,
        |c, k| c == 0 || k == StepKind::TakeIrq,
        |w| exited(w, 0),
    );
    assert_eq!(w.counters.collapses, 1);
    drive(&mut w, |_, _| true, |w| exited(w, 1));
    assert!(w.violations.is_empty());
    assert_eq!(pmd(&w, mm, P), 0);
    assert_eq!(w.mms[mm as usize].mmap_lock.readers, 0);
}

/// `mmap_lock`'s queue (kernel/locking/rwsem.c): an mm with the collapse
/// target at `P` (populated but for its last page) and `Q` (populated),
/// and one task per program, task `i` on CPU `i`.
fn queue_world(progs: Vec<Vec<UserOp>>) -> (World, MmId) {
    let mut s = Scenario::default();
    s.machine.cpus = progs.len() as u32;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, P, HPAGE_SIZE);
    w.add_vma(mm, Q, HPAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + HPAGE_SIZE - PAGE_SIZE).unwrap();
    kernel::mm::memory::populate_range(&mut w, mm, Q, Q + HPAGE_SIZE).unwrap();
    for (i, p) in progs.into_iter().enumerate() {
        w.spawn(mm, i as CpuId, p, true);
    }
    (w, mm)
}

/// The wait list as (task, writer?), oldest first.
fn queue(w: &World, mm: MmId) -> Vec<(u32, bool)> {
    w.mms[mm as usize]
        .mmap_lock
        .waiters
        .iter()
        .map(|q| (q.task, q.write))
        .collect()
}

/// A free page-sized range for `mmap(MAP_FIXED)`, 8 MiB above `P`.
const R: u64 = P + 4 * HPAGE_SIZE;

/// `rwsem_read_trylock` fails when a writer waits (`RWSEM_FLAG_WAITERS`),
/// and the slow path does not steal a lock "very likely owned by readers":
/// a reader arriving while a writer waits for the current readers queues
/// behind it and gets the lock only after the writer's `up_write`. Here
/// munmap (CPU0) holds `mmap_lock` for read (downgraded), `mmap(MAP_FIXED)`
/// (CPU1) queues for write, then `MADV_COLLAPSE`'s scan (CPU2) asks for
/// read. The old model let the scan in at once (it waited only for a
/// writer holding the lock), so readers could starve the writer.
#[test]
fn a_reader_arriving_while_a_writer_waits_queues_behind_it() {
    let unmap = UserOp::Munmap {
        start: Q,
        len: HPAGE_SIZE,
    };
    let map = UserOp::Mmap {
        start: R,
        len: PAGE_SIZE,
    };
    let collapse = UserOp::MadviseCollapse {
        start: P,
        len: HPAGE_SIZE,
    };
    let (mut w, mm) = queue_world(vec![
        vec![unmap, UserOp::Exit],
        vec![map, UserOp::Exit],
        vec![collapse, UserOp::Exit],
    ]);
    drive(&mut w, |c, _| c == 0, |w| w.mms[1].mmap_lock.readers == 1);
    run_alone(&mut w, 1);
    assert!(!w.can_run(1), "mmap sleeps in mmap_write_lock");
    assert_eq!(queue(&w, mm), [(1, true)]);
    run_alone(&mut w, 2);
    assert!(!w.can_run(2), "the scan's mmap_read_lock queues");
    assert_eq!(queue(&w, mm), [(1, true), (2, false)]);
    assert_eq!(w.mms[mm as usize].mmap_lock.readers, 1, "munmap alone");
    let pc = w.tasks[2].kstack.iter().find_map(|f| match f {
        Frame::CollapseHugePage(c) => Some(c.pc),
        _ => None,
    });
    assert_eq!(pc, Some(Pc::ScanWait));
    assert_eq!(
        (w.counters.rwsem_sleep_writer, w.counters.rwsem_sleep_reader),
        (1, 1)
    );
    // munmap's up_read wakes the writer at the head; the reader sleeps on.
    drive(
        &mut w,
        |c, k| c == 0 || k == StepKind::TakeIrq,
        |w| exited(w, 0),
    );
    assert!(w.can_run(1) && !w.can_run(2));
    // mmap takes the lock, maps (one step), and its up_write grants the
    // reader.
    drive(
        &mut w,
        |c, k| c == 1 || k == StepKind::TakeIrq,
        |w| w.mms[1].vmas.iter().any(|v| v.start == R),
    );
    assert_eq!(
        w.mms[mm as usize].mmap_lock.readers, 1,
        "granted at up_write"
    );
    assert!(queue(&w, mm).is_empty() && w.can_run(2));
    drive(&mut w, |_, _| true, |w| exited(w, 2));
    assert!(w.violations.is_empty());
    assert_eq!(w.counters.collapses, 1);
    assert_eq!(w.mms[mm as usize].mmap_lock.readers, 0);
}

/// `rwsem_mark_wake` at `up_write` grants the lock to every reader in the
/// queue (up to `MAX_READERS_WAKEUP`), writers skipped: two faults that
/// fell back to `mmap_read_lock` behind the collapse's write lock, with a
/// munmap queued between them, both hold the lock the moment the collapse
/// unlocks (before either runs); the munmap stays queued, unwoken, until
/// both are done. The old model counted a reader only when it ran again
/// (no reader at the unlock) and let the munmap race the faults for the
/// free lock.
#[test]
fn readers_queued_behind_a_writer_are_woken_together_at_its_up_write() {
    let last = P + HPAGE_SIZE - PAGE_SIZE;
    let touch = UserOp::Touch {
        addr: last,
        write: true,
    };
    let collapse = UserOp::MadviseCollapse {
        start: P,
        len: HPAGE_SIZE,
    };
    let unmap = UserOp::Munmap {
        start: Q,
        len: HPAGE_SIZE,
    };
    let (mut w, mm) = queue_world(vec![
        vec![collapse, UserOp::Exit],
        vec![touch.clone(), UserOp::Exit],
        vec![unmap, UserOp::Exit],
        vec![touch, UserOp::Exit],
    ]);
    collapse_to_flush(&mut w);
    for c in 1..4 {
        run_alone(&mut w, c);
        assert!(!w.can_run(c));
    }
    assert_eq!(queue(&w, mm), [(1, false), (2, true), (3, false)]);
    // The collapse finishes: its mmap_write_unlock is the last step.
    drive(
        &mut w,
        |c, k| c == 0 || k == StepKind::TakeIrq,
        |w| w.mms[1].mmap_lock.writer.is_none(),
    );
    assert_eq!(w.counters.collapses, 1);
    assert_eq!(
        w.mms[mm as usize].mmap_lock.readers, 2,
        "both faults granted"
    );
    assert_eq!(queue(&w, mm), [(2, true)]);
    assert!(w.can_run(1) && w.can_run(3));
    assert!(
        !w.can_run(2),
        "the munmap is not woken: readers hold the lock"
    );
    // The first fault's up_read leaves one reader: the munmap sleeps on.
    drive(
        &mut w,
        |c, k| c == 1 || k == StepKind::TakeIrq,
        |w| exited(w, 1),
    );
    assert!(!w.can_run(2));
    // The last one wakes it.
    drive(
        &mut w,
        |c, k| c == 3 || k == StepKind::TakeIrq,
        |w| exited(w, 3),
    );
    assert!(w.can_run(2));
    drive(&mut w, |_, _| true, |w| (0..4).all(|t| exited(w, t)));
    assert!(w.violations.is_empty());
    assert_eq!(w.counters.spurious_faults, 2, "the huge PMD maps both");
    let sem = &w.mms[mm as usize].mmap_lock;
    assert!(sem.writer.is_none() && sem.readers == 0 && sem.waiters.is_empty());
}

/// The hand-off (`RWSEM_FLAG_HANDOFF`): a writer at the head of the queue
/// is woken by the unlock but takes the lock itself when it runs, so a
/// reader arriving in between steals it (`rwsem_down_read_slowpath`'s
/// optimistic lock stealing: the lock is free, no hand-off). Each failed
/// `rwsem_try_write_lock` sleeps again; once the writer has waited past
/// `RWSEM_WAIT_TIMEOUT` (4 jiffies at HZ=1000: its timeout is the jiffy it
/// queued + 4, passed at + 5) the failing try sets the hand-off bit, after
/// which a reader no longer steals the free lock but queues, and the
/// writer gets it at its next wake-up. Driven through the lock calls with
/// the model's clock (`World::now`) set by hand.
#[test]
fn a_writer_stolen_from_past_the_timeout_gets_the_lock_by_hand_off() {
    use kernel::locking::rwsem::RWSEM_WAIT_TIMEOUT;
    use kernel::mm::mmap_lock::{
        mmap_lock_sleeping, mmap_read_lock, mmap_read_unlock, mmap_write_lock, mmap_write_unlock,
    };
    let spin = vec![UserOp::Spin];
    let (mut w, mm) = queue_world(vec![spin.clone(), spin.clone(), spin.clone(), spin]);
    let fx = &mut Effects::default();
    let ms = 1_000_000;
    assert_eq!(RWSEM_WAIT_TIMEOUT, 4);
    w.now = 10 * ms;
    assert!(mmap_read_lock(&mut w, mm, 0, fx));
    assert!(!mmap_write_lock(&mut w, mm, 1, fx), "queued at jiffy 10");
    // Readers come and go; each unlock wakes the writer, a reader steals
    // the lock before it runs, its try fails.
    let mut reader = 0;
    for t in [11, 12, 13, 14, 15] {
        w.now = t * ms;
        mmap_read_unlock(&mut w, mm, fx);
        assert!(!mmap_lock_sleeping(&w, mm, 1), "woken");
        reader = 2 + (t as u32 & 1);
        assert!(
            mmap_read_lock(&mut w, mm, reader, fx),
            "stolen at jiffy {t}"
        );
        assert!(!mmap_write_lock(&mut w, mm, 1, fx));
        let handoff = w.mms[mm as usize].mmap_lock.handoff;
        assert_eq!(handoff, t == 15, "jiffy {t}: time_after(jiffies, 10 + 4)");
    }
    assert_eq!(w.counters.rwsem_wlock_handoff, 1);
    assert!(mmap_lock_sleeping(&w, mm, 1));
    // The hand-off bit stops the next reader: it queues behind the writer.
    mmap_read_unlock(&mut w, mm, fx);
    let next = 5 - reader;
    assert!(!mmap_read_lock(&mut w, mm, next, fx), "no stealing");
    assert!(mmap_write_lock(&mut w, mm, 1, fx), "handed off");
    let sem = &w.mms[mm as usize].mmap_lock;
    assert!(!sem.handoff && sem.readers == 0);
    mmap_write_unlock(&mut w, mm, fx);
    assert!(!mmap_lock_sleeping(&w, mm, next), "granted at up_write");
    assert_eq!(w.mms[mm as usize].mmap_lock.readers, 1);
}

/// The hugetlbfs file's `i_mmap_rwsem` is the same rwsem: three processes
/// sharing one hugetlbfs PMD table unmap it at once; the first to zap
/// holds `i_mmap_lock_write` through its unshare, flush and sync, the
/// others queue in the order they came (CPU2 before CPU1 here), and each
/// `up_write` wakes the head only. The old model's writer flag let every
/// waiting CPU re-check at the unlock and whichever ran first take it.
#[test]
fn hugetlb_unmappers_queue_on_i_mmap_rwsem_in_order() {
    const H: u64 = 0x7f40_0000_0000;
    let mut s = Scenario::default();
    s.machine.cpus = 3;
    let mut w = World::new(&s).unwrap();
    for c in 0..3 {
        let mm = w.mm_alloc().unwrap();
        w.add_vma_hugetlb(mm, H, HPAGE_SIZE);
        let touch = UserOp::Touch {
            addr: H,
            write: true,
        };
        let unmap = UserOp::Munmap {
            start: H,
            len: HPAGE_SIZE,
        };
        w.spawn(mm, c, vec![touch, unmap, UserOp::Exit], true);
    }
    for c in 0..3 {
        drive(&mut w, |x, _| x == c, |w| w.tasks[c as usize].us.pc == 1);
    }
    assert_eq!(w.counters.pmd_shares, 2);
    let holder = |w: &World| w.hugetlb_i_mmap_rwsem.writer;
    drive(&mut w, |c, _| c == 0, |w| holder(w) == Some(0));
    for c in [2, 1] {
        run_alone(&mut w, c);
        assert!(!w.can_run(c), "CPU{c} sleeps in i_mmap_lock_write");
    }
    let order = |w: &World| -> Vec<u32> {
        w.hugetlb_i_mmap_rwsem
            .waiters
            .iter()
            .map(|q| q.task)
            .collect()
    };
    assert_eq!(order(&w), [2, 1]);
    drive(
        &mut w,
        |c, k| c == 0 || k == StepKind::TakeIrq,
        |w| exited(w, 0),
    );
    assert!(holder(&w).is_none());
    assert!(w.can_run(2) && !w.can_run(1), "the head is woken, not CPU1");
    drive(
        &mut w,
        |c, k| c == 2 || k == StepKind::TakeIrq,
        |w| exited(w, 2),
    );
    assert!(w.can_run(1) && order(&w) == [1]);
    drive(&mut w, |_, _| true, |w| exited(w, 1));
    assert!(w.violations.is_empty());
    assert_eq!(w.counters.pmd_unshares, 2);
    assert_eq!(w.counters.rwsem_sleep_writer, 2);
}
