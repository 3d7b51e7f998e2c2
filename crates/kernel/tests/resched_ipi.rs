//! Reschedule IPIs (the RES row, issue 32): kernel/sched/core.c
//! `wake_up_new_task` and `move_queued_task` call `wakeup_preempt` on the
//! target's runqueue; for an idle target that is `resched_curr`, which
//! sends `smp_send_reschedule` to a remote CPU unless its idle task polls
//! (`set_nr_and_not_polling`). The guests show ~1 RES per fork; the model
//! before this had none.

use kernel::sched::core::{resched_curr, schedule};
use kernel::user::UserOp;
use kernel::world::StepKind;
use kernel::{Effects, World};
use machine::Scenario;
use std::sync::Arc;

fn world(idle_polls: bool) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = 4;
    let mut w = World::new(&s).unwrap();
    w.cfg.idle_polls = idle_polls;
    w
}

/// `resched_curr` of an idle remote CPU: one RES there and `need_resched`
/// set; a second request before it schedules finds the flag set
/// (`test_tsk_need_resched(curr)`) and sends nothing; a busy CPU (its fair
/// curr's EEVDF test is not modelled) and the caller's own CPU get no IPI.
#[test]
fn resched_curr_sends_one_ipi_to_an_idle_remote_cpu() {
    let mut w = world(false);
    let mm = w.mm_alloc().unwrap();
    w.spawn(mm, 2, vec![UserOp::Spin], false);
    schedule(&mut w, 2, &mut Effects::default());
    let mut fx = Effects::default();
    resched_curr(&mut w, 0, 1, &mut fx);
    assert_eq!(w.counters.irq_res, vec![0, 1, 0, 0]);
    assert!(w.cpus[1].need_resched);
    resched_curr(&mut w, 0, 1, &mut fx);
    resched_curr(&mut w, 0, 2, &mut fx); // busy
    resched_curr(&mut w, 3, 3, &mut fx); // its own CPU
    assert_eq!(w.counters.irq_res, vec![0, 1, 0, 0]);
    assert_eq!(w.counters.ipis_sent, 1);
    assert!(w.cpus[3].need_resched, "the local flag is still set");
    // The idle CPU schedules (nothing queued): the flag is consumed.
    schedule(&mut w, 1, &mut Effects::default());
    assert!(!w.cpus[1].need_resched);
}

/// A polling idle loop (x86 MWAIT) sees the flag: no interrupt,
/// `sched_wake_idle_without_ipi` instead.
#[test]
fn a_polling_idle_cpu_takes_no_reschedule_ipi() {
    let mut w = world(true);
    resched_curr(&mut w, 0, 1, &mut Effects::default());
    assert_eq!(w.counters.irq_res, vec![0; 4]);
    assert_eq!(w.counters.ipis_sent, 0);
    assert_eq!(w.counters.wake_idle_without_ipi, 1);
}

/// `fork()` on CPU0 with the child placed on idle CPU 2: `wake_up_new_task`
/// sends CPU 2 one RES; with the child on CPU0 itself, none.
#[test]
fn fork_onto_an_idle_cpu_sends_it_one_reschedule_ipi() {
    for (child_cpu, polls, res) in [
        (2, false, [0, 0, 1, 0]),
        (0, false, [0; 4]),
        (2, true, [0; 4]),
    ] {
        let mut w = world(polls);
        let mm = w.mm_alloc().unwrap();
        let child: Arc<[UserOp]> = vec![UserOp::Exit].into();
        w.spawn(
            mm,
            0,
            vec![UserOp::Fork { child_cpu, child }, UserOp::Spin],
            false,
        );
        let mut steps = 0;
        while w.tasks.len() < 2 {
            w.step(0, StepKind::Run, &mut Effects::default());
            steps += 1;
            assert!(steps < 10_000, "the fork never completed");
        }
        assert_eq!(
            w.counters.irq_res, res,
            "child on CPU {child_cpu}, polls {polls}"
        );
        assert_eq!(w.tasks[1].cpu, child_cpu);
    }
}
