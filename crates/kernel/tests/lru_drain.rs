//! The per-CPU LRU add batches and `MADV_COLLAPSE`'s `lru_add_drain_all`
//! (issues 32 and 35; mm/swap.c `folio_add_lru` / `folio_batch_add_and_move`,
//! `cpu_needs_drain`, `__lru_add_drain_all`; kernel/workqueue.c
//! `queue_work_on`, `flush_work`). A CPU whose batch holds folios it
//! faulted since its last drain gets the drain work, its kworker woken
//! through its wake list: one call-function IPI when it idles in HLT/WFI,
//! none when its idle polls. The model before this had no batches: a
//! collapse sent only its `tlb_remove_table_sync_one` IPIs.

use kernel::user::UserOp;
use kernel::world::{StepKind, TaskState};
use kernel::{Effects, World};
use machine::{CpuId, Scenario, HPAGE_SIZE, PAGE_SIZE};

const P: u64 = 0x7f00_0000_0000;
/// A second VMA the other threads fault in.
const Q: u64 = P + 2 * HPAGE_SIZE;

/// CPU0 MADV_COLLAPSEs a populated 2 MiB at `P`; before it, a process on
/// CPU `c` (1..=3) writes `faults[c - 1]` pages of its own `Q` and exits.
fn world(faults: [u32; 3], idle_polls: bool, sets: &[&str]) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = 4;
    for kv in sets {
        s.set(kv).unwrap();
    }
    let mut w = World::new(&s).unwrap();
    w.cfg.idle_polls = idle_polls;
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, P, HPAGE_SIZE);
    w.add_vma(mm, Q, HPAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + HPAGE_SIZE).unwrap();
    let collapse = UserOp::MadviseCollapse {
        start: P,
        len: HPAGE_SIZE,
    };
    w.spawn(mm, 0, vec![collapse, UserOp::Exit], false);
    for (i, &n) in faults.iter().enumerate() {
        let mut prog: Vec<UserOp> = (0..n as u64)
            .map(|p| UserOp::Touch {
                addr: Q + (i as u64 * 64 + p) * PAGE_SIZE,
                write: true,
            })
            .collect();
        prog.push(UserOp::Exit);
        // A process of its own: its exit leaves its CPU lazy in its mm,
        // not in the collapsing one (which would take the collapse's flush).
        let own = w.mm_alloc().unwrap();
        w.add_vma(own, Q, HPAGE_SIZE);
        w.spawn(own, i as CpuId + 1, prog, false);
    }
    w
}

/// Run the enabled steps that `allow` admits, lowest CPU first, until
/// `done`.
fn drive(w: &mut World, allow: impl Fn(CpuId) -> bool, done: impl Fn(&World) -> bool) {
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    for _ in 0..100_000 {
        if done(w) {
            return;
        }
        w.enabled(&mut en);
        let Some(&(c, k)) = en.iter().find(|&&(c, _)| allow(c)) else {
            panic!("stuck: {en:?}");
        };
        fx.clear();
        w.step(c, k, &mut fx);
    }
    panic!("did not finish");
}

/// The three threads fault and exit (CPUs 1-3 idle after), then CPU0
/// collapses, every CPU taking its steps as they come.
fn run(w: &mut World) {
    drive(
        w,
        |c| c != 0,
        |w| (1..4).all(|t| w.tasks[t].state == TaskState::Exited),
    );
    drive(w, |_| true, |w| w.tasks[0].state == TaskState::Exited);
}

/// CPUs 1 and 2 faulted pages (2 and 1) and were not drained since; CPU3
/// faulted none. The collapse's `lru_add_drain_all` queues the drain on
/// CPUs 1 and 2 only: one wake-list IPI each for their kworkers, on top of
/// the one `tlb_remove_table_sync_one` IPI every other CPU takes; the
/// caller sleeps in `flush_work` and is woken through CPU0's own wake list
/// (CPU0 idles meanwhile): at least one CAL on CPU0, at most one per CPU
/// drained. Every batch is empty afterwards.
#[test]
fn a_collapse_drains_exactly_the_cpus_that_faulted_one_ipi_each() {
    let mut w = world([2, 1, 0], false, &[]);
    drive(
        &mut w,
        |c| c != 0,
        |w| (1..4).all(|t| w.tasks[t].state == TaskState::Exited),
    );
    let batched: Vec<u8> = w.cpus.iter().map(|c| c.lru_add).collect();
    assert_eq!(batched, vec![0, 2, 1, 0]);
    drive(&mut w, |_| true, |w| w.tasks[0].state == TaskState::Exited);
    assert_eq!(w.counters.collapses, 1);
    assert_eq!(w.counters.lru_add_drain_all, 1);
    assert_eq!(w.counters.lru_drain_works, 2);
    let sync = 1; // tlb_remove_table_sync_one, to each other CPU
    let cal = &w.counters.irq_cal;
    assert_eq!(
        (cal[1] - sync, cal[2] - sync, cal[3] - sync),
        (1, 1, 0),
        "one drain IPI per CPU that faulted: {cal:?}"
    );
    assert!((1..=2).contains(&cal[0]), "flush_work's wake-ups: {cal:?}");
    assert_eq!(w.counters.ttwu_wakelist, 2 + cal[0]);
    assert!(w.cpus.iter().all(|c| c.lru_add == 0 && !c.lru_drain_work));
}

/// The same on a machine whose idle polls (x86 MWAIT): the kworkers and
/// the caller are queued on the same wake lists, and no IPI is sent.
#[test]
fn polling_idle_cpus_are_drained_without_ipis() {
    let mut w = world([2, 1, 0], true, &[]);
    run(&mut w);
    assert_eq!(w.counters.lru_drain_works, 2);
    assert_eq!(w.counters.irq_cal, vec![0, 1, 1, 1], "the sync IPIs only");
    assert!(w.counters.wake_idle_without_ipi >= 3);
}

/// A batch full at `PAGEVEC_SIZE` folios moves to the LRU at once
/// (`folio_batch_add_and_move`): 31 faults leave nothing to drain at 6.12's
/// 31, and one folio at 6.1's 15 (31 = 2 x 15 + 1).
#[test]
fn a_full_batch_drains_itself() {
    for (size, left) in [(31, 0u8), (15, 1)] {
        let mut w = world([31, 0, 0], false, &[&format!("mm.pagevec_size={size}")]);
        run(&mut w);
        assert_eq!(
            w.counters.lru_drain_works,
            (left > 0) as u64,
            "pagevec_size {size}"
        );
        let drain_ipis = w.counters.irq_cal[1] - 1;
        assert_eq!(drain_ipis, (left > 0) as u64, "pagevec_size {size}");
    }
}

/// The collapsing CPU's own batch (its faults, the collapse's putback of
/// the small folios) is drained inline, no IPI, and the huge folio's
/// `folio_add_lru` empties the batch.
#[test]
fn the_callers_own_batch_needs_no_ipi() {
    let mut w = world([0, 0, 0], false, &[]);
    w.cpus[0].lru_add = 5;
    let mut fx = Effects::default();
    while w.tasks[0].state != TaskState::Exited {
        let k = if w.can_take_irq(0) {
            StepKind::TakeIrq
        } else {
            StepKind::Run
        };
        fx.clear();
        w.step(0, k, &mut fx);
        for c in 1..4 {
            if w.can_take_irq(c) {
                w.step(c, StepKind::TakeIrq, &mut fx);
            }
        }
    }
    assert_eq!(w.counters.lru_drain_works, 1);
    assert_eq!(w.counters.ttwu_wakelist, 0);
    assert_eq!(w.counters.irq_cal, vec![0, 1, 1, 1]);
    assert_eq!(w.cpus[0].lru_add, 0);
}
