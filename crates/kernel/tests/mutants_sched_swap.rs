//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `sched/core.rs` (kernel/sched/core.c:
//! `scheduler_tick`, `resched_curr`, `sched_setaffinity`, `try_to_wake_up`
//! and `ttwu_queue`, `sched_ttwu_pending`, `__schedule` →
//! `context_switch` with `switch_mm_cid`; kernel/time/hrtimer.c
//! `hrtimer_wakeup`) and `mm/swap.rs` (mm/swap.c: the per-CPU `lru_add`
//! batch, `folio_add_lru`, `__lru_add_drain_all`). See docs/mutants.md.
//! Every expected value is derived in a comment from the kernel function
//! the model follows, not read off a run.

mod common;

use kernel::hw::memory_model::MemoryModel;
use kernel::mm::swap::{cpu_needs_drain, folio_add_lru, folio_add_lru_large};
use kernel::sched::core::{
    hrtimer_wakeup, sched_setaffinity, schedule, scheduler_tick, try_to_wake_up,
};
use kernel::user::UserOp;
use kernel::world::TaskState;
use kernel::{Effects, TaskId, World};
use machine::scenario::Arch;
use machine::{CpuId, Scenario};

/// A world of `arch` with 4 CPUs and `sets` applied, nothing running.
fn world(arch: Arch, sets: &[&str]) -> World {
    common::world(arch, 4, sets)
}

/// A task of a new mm on `cpu` (pinned: `cpus_allowed_all` false, so
/// `select_task_rq` keeps it where it was): running if the CPU was idle,
/// else queued behind what runs there.
fn task(w: &mut World, cpu: CpuId) -> TaskId {
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, cpu, vec![UserOp::Spin], false);
    if w.cpus[cpu as usize].curr.is_none() {
        schedule(w, cpu, &mut Effects::default());
    }
    t
}

/// A task asleep on `cpu` in `clock_nanosleep` until `deadline` (on no
/// runqueue); `in_wait`: asleep in `wait()` instead, not on a timer.
fn sleeper(w: &mut World, cpu: CpuId, deadline: u64, in_wait: bool) -> TaskId {
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, cpu, vec![UserOp::Spin], false);
    w.cpus[cpu as usize].rq.retain(|&x| x != t);
    let task = &mut w.tasks[t as usize];
    task.state = TaskState::Sleeping;
    task.us.deadline = deadline;
    task.us.in_wait = in_wait;
    t
}

/// 8 RISC-V harts on the SG2042 topology: LLCs (clusters) 0-3 and 4-7.
fn sg2042() -> World {
    let mut s = Scenario::default();
    for kv in [
        "machine.arch=riscv",
        "machine.cpus=8",
        "machine.memory=64MiB",
        "machine.topology=sg2042",
    ] {
        s.set(kv).unwrap();
    }
    s.validate().unwrap();
    World::new(&s).unwrap()
}

fn rq(w: &World, cpu: CpuId) -> Vec<TaskId> {
    w.cpus[cpu as usize].rq.iter().copied().collect()
}

// ---------------------------------------------------------------------------
// mm/swap.c: the lru_add batch.
// ---------------------------------------------------------------------------

/// `folio_add_lru` → `folio_batch_add_and_move`: each small folio joins
/// this CPU's `lru_add` batch, and when `folio_batch_add` leaves no space
/// (`PAGEVEC_SIZE` folios, 31 in 6.12) `folio_batch_move_lru` empties it:
/// 3 folios, then 28 more (31: moved, 0 left), then 33 (31 moved, 2 left).
/// Adding no folio changes nothing. With the batches left out
/// (`lru_batches` false, the checker's worlds: the model before issue 32,
/// every folio straight to the LRU) no CPU ever holds a batched folio,
/// so `cpu_needs_drain` is false everywhere.
#[test]
fn folio_add_lru_fills_and_moves_the_batch_at_pagevec_size() {
    let mut w = world(Arch::X86, &["mm.pagevec_size=31"]);
    folio_add_lru(&mut w, 1, 3);
    assert_eq!(w.cpus[1].lru_add, 3);
    assert!(cpu_needs_drain(&w, 1));
    assert!(!cpu_needs_drain(&w, 0));
    folio_add_lru(&mut w, 1, 0);
    assert_eq!(w.cpus[1].lru_add, 3);
    folio_add_lru(&mut w, 1, 28);
    assert_eq!(w.cpus[1].lru_add, 0, "the 31st folio moves the batch");
    assert!(!cpu_needs_drain(&w, 1));
    folio_add_lru(&mut w, 1, 33);
    assert_eq!(w.cpus[1].lru_add, 2);

    let mut w = world(Arch::X86, &[]);
    w.cfg.lru_batches = false;
    for cpu in 0..4 {
        folio_add_lru(&mut w, cpu, 5);
        folio_add_lru(&mut w, cpu, 1);
    }
    assert!(w.cpus.iter().all(|c| c.lru_add == 0));
    assert!((0..4).all(|c| !cpu_needs_drain(&w, c)));
}

/// `folio_add_lru` of a large folio (a collapse's huge page):
/// `folio_batch_add_and_move` moves the batch at once when
/// `folio_test_large(folio)`, so whatever small folios it held go to the
/// LRU with it: the batch is empty after, on that CPU only.
#[test]
fn a_large_folio_moves_the_whole_batch() {
    let mut w = world(Arch::X86, &[]);
    folio_add_lru(&mut w, 0, 5);
    folio_add_lru(&mut w, 2, 7);
    folio_add_lru_large(&mut w, 0);
    assert_eq!(w.cpus[0].lru_add, 0);
    assert_eq!(w.cpus[2].lru_add, 7, "another CPU's batch is its own");
    assert!(!cpu_needs_drain(&w, 0));
}

// ---------------------------------------------------------------------------
// kernel/sched/core.c
// ---------------------------------------------------------------------------

/// `scheduler_tick` with the noise knob's move aimed at the CPU itself is
/// a plain tick: `set_task_cpu` counts a migration only when
/// `task_cpu(p) != new_cpu`, and with nothing else queued `__schedule`
/// would pick the same task: nothing happens (no switch, no barrier).
#[test]
fn a_tick_moving_the_task_to_its_own_cpu_is_no_migration() {
    let mut w = world(Arch::X86, &[]);
    let t = task(&mut w, 1);
    let mut fx = Effects::default();
    scheduler_tick(&mut w, 1, Some(1), &mut fx);
    assert_eq!(w.cpus[1].curr, Some(t));
    assert_eq!(w.tasks[t as usize].state, TaskState::Running);
    assert!(w.cpus[1].rq.is_empty());
    assert_eq!(w.counters.sched_migrations, 0);
    assert!(fx.charges.is_empty(), "no context switch: {:?}", fx.charges);
    // To another CPU: the task leaves for CPU 3's runqueue, one migration,
    // and CPU 1, with nothing queued, idles.
    scheduler_tick(&mut w, 1, Some(3), &mut fx);
    assert_eq!(w.counters.sched_migrations, 1);
    assert_eq!(w.cpus[1].curr, None);
    assert_eq!(rq(&w, 3), vec![t]);
    assert_eq!(w.tasks[t as usize].cpu, 3);
}

/// `sched_setaffinity(0, {cpu})`: the task is pinned either way. To its
/// own CPU, `__set_cpus_allowed_ptr` finds it already allowed where it
/// runs (`affine_move_task` returns at once): it keeps running, no
/// migration. To another CPU, `migration_cpu_stop` → `move_queued_task`:
/// one migration, queued on the target, whose idle task
/// `wakeup_preempt` → `resched_curr` asks with one RES IPI (HLT idle,
/// not polling); the old CPU, with nothing queued, idles. A CPU past the
/// last one (no valid CPU in the mask: -EINVAL) moves nothing.
#[test]
fn sched_setaffinity_moves_only_to_another_valid_cpu() {
    let mut w = world(Arch::X86, &[]);
    let t = task(&mut w, 1);
    w.tasks[t as usize].cpus_allowed_all = true;
    let mut fx = Effects::default();
    sched_setaffinity(&mut w, 1, t, 1, &mut fx);
    assert!(!w.tasks[t as usize].cpus_allowed_all);
    assert_eq!(w.cpus[1].curr, Some(t));
    assert_eq!(w.counters.sched_migrations, 0);
    assert_eq!(w.counters.irq_res, vec![0; 4]);
    sched_setaffinity(&mut w, 1, t, 9, &mut fx);
    assert_eq!(w.cpus[1].curr, Some(t));
    assert_eq!(w.tasks[t as usize].cpu, 1);
    assert_eq!(w.counters.sched_migrations, 0);
    sched_setaffinity(&mut w, 1, t, 3, &mut fx);
    assert_eq!(w.counters.sched_migrations, 1);
    assert_eq!(w.cpus[1].curr, None);
    assert_eq!(rq(&w, 3), vec![t]);
    assert_eq!(w.tasks[t as usize].cpu, 3);
    assert_eq!(w.counters.irq_res, vec![0, 0, 0, 1]);
    assert!(w.cpus[3].need_resched);
}

/// `hrtimer_interrupt` on CPU 1 → `hrtimer_wakeup` of the task whose
/// timer expired: the earliest deadline among the tasks asleep in
/// `clock_nanosleep` on CPU 1. Not a task asleep on another CPU (its
/// timer is on that CPU's hrtimer base), not one asleep in `wait()` (on
/// `wait_chldexit`, no timer), not one running or queued. The woken
/// fair task goes to the tail of CPU 1's runqueue (`ttwu_do_activate`,
/// `enqueue_task_fair`); the running task is not preempted
/// (`check_preempt_wakeup_fair` is not modelled: only an RT task
/// preempts), and being pinned it wakes where it slept: no migration.
#[test]
fn hrtimer_wakeup_wakes_the_earliest_timer_sleeper_of_its_cpu() {
    let mut w = world(Arch::X86, &[]);
    let running = task(&mut w, 1);
    let queued = task(&mut w, 1);
    let late = sleeper(&mut w, 1, 300, false);
    let early = sleeper(&mut w, 1, 200, false);
    let waiting = sleeper(&mut w, 1, 100, true);
    let elsewhere = sleeper(&mut w, 2, 10, false);
    let mut fx = Effects::default();
    hrtimer_wakeup(&mut w, 1, &mut fx);
    assert_eq!(w.tasks[early as usize].state, TaskState::Runnable);
    assert_eq!(rq(&w, 1), vec![queued, early]);
    for t in [late, waiting, elsewhere] {
        assert_eq!(w.tasks[t as usize].state, TaskState::Sleeping, "task {t}");
    }
    assert_eq!(
        w.cpus[1].curr,
        Some(running),
        "a fair wake-up preempts nothing"
    );
    assert!(!w.cpus[1].need_resched);
    assert_eq!(w.tasks[early as usize].cpu, 1);
    assert_eq!(w.counters.sched_migrations, 0);
    assert_eq!(w.counters.sched_wake_migrations, 0);
    // The next interrupt: the later one.
    hrtimer_wakeup(&mut w, 1, &mut fx);
    assert_eq!(rq(&w, 1), vec![queued, early, late]);
    assert_eq!(w.tasks[waiting as usize].state, TaskState::Sleeping);
}

/// The timer of a task the fair class places (`cpus_allowed_all`) fires
/// on its busy CPU: `try_to_wake_up` → `select_task_rq_fair` →
/// `select_idle_sibling` finds the sleeper's CPU 4 busy and scans its LLC
/// (SG2042 cluster 4-7) from 5 with wrap-around: 5 busy, so 6 (the
/// derivation of `placement.rs`'s `wake_up_goes_to_an_idle_sibling_in_the_llc`).
/// `set_task_cpu` to another CPU counts one migration
/// (`p->se.nr_migrations++`) and `ttwu_stat` one wake-up migration
/// (`nr_wakeups_migrate`); the task is queued on 6's wake list
/// (`ttwu_queue_cond`: 6 is idle), not on 4's runqueue.
#[test]
fn a_timer_wakeup_placed_on_another_cpu_counts_one_migration() {
    let mut w = sg2042();
    let p = sleeper(&mut w, 4, 100, false);
    w.tasks[p as usize].cpus_allowed_all = true;
    let busy4 = task(&mut w, 4);
    task(&mut w, 5);
    let mut fx = Effects::default();
    hrtimer_wakeup(&mut w, 4, &mut fx);
    assert_eq!(w.tasks[p as usize].cpu, 6);
    assert_eq!(w.tasks[p as usize].state, TaskState::Runnable);
    assert_eq!(w.counters.sched_migrations, 1);
    assert_eq!(w.counters.sched_wake_migrations, 1);
    assert_eq!(w.counters.ttwu_wakelist, 1);
    assert!(w.cpus[4].rq.is_empty());
    assert_eq!(w.cpus[4].curr, Some(busy4));
}

/// `try_to_wake_up` from CPU 4 (an exiting child's, not `WF_SYNC`) of
/// two tasks asleep on 4 while 4 and 5 run tasks. A pinned one:
/// `select_task_rq` keeps it on 4 (`is_cpu_allowed` of its one CPU): no
/// migration, and `ttwu_queue` on this very CPU activates it on 4's
/// runqueue directly (`ttwu_queue_cond`: never for this CPU). One the
/// fair class places: `select_idle_sibling` → 6, as above; `set_task_cpu`
/// counts one migration and `ttwu_stat` one wake-up migration, and 6, idle,
/// gets it through its wake list. Waking it again does nothing
/// (`ttwu_state_match`: it is no longer asleep).
#[test]
fn a_wakeup_placed_on_another_cpu_counts_one_migration() {
    let mut w = sg2042();
    let pinned = sleeper(&mut w, 4, 0, false);
    let p = sleeper(&mut w, 4, 0, false);
    w.tasks[p as usize].cpus_allowed_all = true;
    task(&mut w, 4);
    task(&mut w, 5);
    let mut fx = Effects::default();
    try_to_wake_up(&mut w, pinned, 4, &mut fx);
    assert_eq!(rq(&w, 4), vec![pinned]);
    assert_eq!(w.counters.sched_migrations, 0);
    assert_eq!(w.counters.sched_wake_migrations, 0);
    assert_eq!(w.counters.ttwu_wakelist, 0);
    try_to_wake_up(&mut w, p, 4, &mut fx);
    assert_eq!(w.tasks[p as usize].cpu, 6);
    assert_eq!(w.tasks[p as usize].state, TaskState::Runnable);
    assert_eq!(w.counters.sched_migrations, 1);
    assert_eq!(w.counters.sched_wake_migrations, 1);
    assert_eq!(w.counters.ttwu_wakelist, 1);
    try_to_wake_up(&mut w, p, 4, &mut fx);
    assert_eq!(w.counters.sched_migrations, 1);
    assert_eq!(w.counters.ttwu_wakelist, 1);
}

/// `switch_mm_cid` (6.12) on a switch to a user task: `smp_mb()` on
/// arm64 and RISC-V (`smp_mb__after_switch_mm`). On RISC-V `set_mm`'s
/// `cpumask_set_cpu` is a relaxed AMO, buffered under RVWMO; this barrier
/// is what makes the hart's `mm_cpumask` bit visible to the other harts
/// (the flusher's read of the mask) before the new task runs. So after
/// `schedule` the bit is in memory, not only in the hart's buffer.
#[test]
fn switch_mm_cid_publishes_the_riscv_mm_cpumask_bit() {
    let mut w = world(Arch::Riscv, &[]);
    w.cfg.memory_model = MemoryModel::Weak;
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, 1, vec![UserOp::Spin], false);
    schedule(&mut w, 1, &mut Effects::default());
    assert_eq!(w.cpus[1].curr, Some(t));
    assert!(w.mms[mm as usize].cpumask.test(1), "the bit is in memory");
}
