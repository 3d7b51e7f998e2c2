//! Remote wake-ups through the wake list (issues 32 and 35): kernel/sched/core.c
//! `try_to_wake_up` → `ttwu_queue` → `ttwu_queue_cond` → `__ttwu_queue_wakelist`
//! → kernel/smp.c `__smp_call_single_queue` → `send_call_function_single_ipi`,
//! which sends a call-function IPI (the CAL row) unless the target's idle
//! task polls (`set_nr_if_polling(rq->idle)`). A parent sleeping in
//! `wait()` on CPU0 is woken by its child exiting on CPU1. The model before
//! this put the parent on CPU0's runqueue directly: no IPI, no CAL.

use kernel::kernel_smp::CallFunc;
use kernel::user::UserOp;
use kernel::world::{StepKind, TaskState};
use kernel::{Effects, World};
use machine::{CpuId, Scenario};

/// Parent (task 0) on CPU0 waits for its child (task 1) on `child_cpu`;
/// the child exits at once. `sets` are scenario knobs; `idle_polls` the
/// profile's `[idle] polls`.
fn world(sets: &[&str], child_cpu: CpuId, idle_polls: bool) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = 4;
    for kv in sets {
        s.set(kv).unwrap();
    }
    let mut w = World::new(&s).unwrap();
    w.cfg.idle_polls = idle_polls;
    let mm = w.mm_alloc().unwrap();
    let child_mm = w.mm_alloc().unwrap();
    w.spawn(mm, 0, vec![UserOp::Wait, UserOp::Exit], false);
    let c = w.spawn(child_mm, child_cpu, vec![UserOp::Exit], false);
    w.tasks[c as usize].us.parent = Some(0);
    w
}

fn step(w: &mut World, cpu: CpuId, k: StepKind) {
    let mut fx = Effects::default();
    w.step(cpu, k, &mut fx);
}

/// CPU0's parent goes to sleep in `wait()`; CPU `child` runs its child to
/// its exit, which wakes the parent.
fn parent_waits_child_exits(w: &mut World, child: CpuId) {
    step(w, 0, StepKind::Run); // schedule: the parent runs
    step(w, 0, StepKind::Run); // wait(): no zombie, sleep; CPU0 idles
    assert_eq!(w.tasks[0].state, TaskState::Sleeping);
    step(w, child, StepKind::Run); // schedule: the child runs
    step(w, child, StepKind::Run); // exit: do_notify_parent wakes the parent
    assert_eq!(w.tasks[1].state, TaskState::Exited);
}

/// An idle, non-polling CPU (HLT/WFI): the wake-up is one entry on its
/// wake list and one call-function IPI; the interrupt runs
/// `sched_ttwu_pending` and the CPU schedules the parent.
#[test]
fn a_wakeup_onto_an_idle_non_polling_cpu_sends_one_call_function_ipi() {
    let mut w = world(&[], 1, false);
    parent_waits_child_exits(&mut w, 1);
    assert!(w.cpus[0].curr.is_none(), "CPU0 idled");
    assert_eq!(w.counters.ttwu_wakelist, 1);
    assert_eq!(w.counters.ipis_sent, 1);
    assert!(w.cpus[0].ipi_pending);
    assert_eq!(
        w.cpus[0]
            .call_single_queue
            .iter()
            .map(|c| c.func)
            .collect::<Vec<_>>(),
        vec![CallFunc::SchedTtwuPending(0)]
    );
    // Not on CPU0's runqueue until the interrupt: the CPU has nothing to run.
    assert!(w.cpus[0].rq.is_empty());
    assert!(!w.can_run(0));
    step(&mut w, 0, StepKind::TakeIrq);
    assert_eq!(w.counters.irq_cal, vec![1, 0, 0, 0]);
    assert!(w.cpus[0].call_single_queue.is_empty());
    assert_eq!(w.cpus[0].rq.iter().copied().collect::<Vec<_>>(), vec![0]);
    step(&mut w, 0, StepKind::Run);
    assert_eq!(w.cpus[0].curr, Some(0));
    assert_eq!(w.tasks[0].state, TaskState::Running);
}

/// An idle CPU whose idle task polls (x86 MWAIT idle): the same entry on
/// its wake list, no IPI (`set_nr_if_polling`); the idle loop runs the
/// list itself and schedules the parent. CAL stays 0.
#[test]
fn a_wakeup_onto_a_polling_idle_cpu_sends_no_ipi() {
    let mut w = world(&[], 1, true);
    parent_waits_child_exits(&mut w, 1);
    assert_eq!(w.counters.ttwu_wakelist, 1);
    assert_eq!(w.counters.wake_idle_without_ipi, 1);
    assert_eq!(w.counters.ipis_sent, 0);
    assert!(!w.cpus[0].ipi_pending);
    assert!(!w.can_take_irq(0));
    assert!(w.can_run(0), "the polling idle loop leaves on need_resched");
    step(&mut w, 0, StepKind::Run);
    assert_eq!(w.cpus[0].curr, Some(0));
    assert!(w.cpus[0].call_single_queue.is_empty());
    assert_eq!(w.counters.irq_cal, vec![0; 4]);
}

/// A wake-up by a task on the same CPU never uses the wake list.
#[test]
fn a_local_wakeup_queues_nothing() {
    let mut w = world(&[], 0, false);
    // The parent sleeps first; then the child, on CPU0's runqueue, runs.
    step(&mut w, 0, StepKind::Run);
    step(&mut w, 0, StepKind::Run);
    assert_eq!(w.tasks[0].state, TaskState::Sleeping);
    step(&mut w, 0, StepKind::Run); // the child exits, waking the parent here
    assert_eq!(w.counters.ttwu_wakelist, 0);
    assert_eq!(w.counters.ipis_sent, 0);
    assert_eq!(w.cpus[0].curr, Some(0));
}

/// A busy CPU of the same last-level cache: `ttwu_queue_cond` is false
/// (`nr_running` > 0), the task is activated on its runqueue directly,
/// no IPI. A busy CPU of another LLC (`two_nodes`: CPUs 0-1 and 2-3) takes
/// the wake list all the same, and its idle task is not running, so an IPI.
#[test]
fn a_busy_cpu_is_woken_directly_within_its_llc_and_by_ipi_across() {
    for (topology, child, ipi) in [("icelake2s", 1, false), ("two_nodes", 2, true)] {
        let mut w = world(&[&format!("machine.topology={topology}")], child, true);
        // A spinning task of its own mm on CPU0, queued behind the parent.
        let spin_mm = w.mm_alloc().unwrap();
        let spin = vec![
            UserOp::Charge {
                cost: machine::Cost::UserLoop,
                n: 1,
            },
            UserOp::Loop {
                to: 0,
                times: u64::MAX,
            },
        ];
        w.spawn(spin_mm, 0, spin, false);
        parent_waits_child_exits(&mut w, child);
        // CPU0 runs the spinner now.
        assert_eq!(w.cpus[0].curr, Some(2), "{topology}");
        assert_eq!(w.counters.ttwu_wakelist, ipi as u64, "{topology}");
        assert_eq!(w.counters.ipis_sent, ipi as u64, "{topology}");
        assert_eq!(w.cpus[0].rq.contains(&0), !ipi, "{topology}");
        if ipi {
            step(&mut w, 0, StepKind::TakeIrq);
            assert_eq!(w.counters.irq_cal[0], 1);
            assert!(w.cpus[0].rq.contains(&0));
        }
    }
}
