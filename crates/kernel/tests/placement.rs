//! The fair class's task placement (`kernel::sched::fair`) on small
//! machines, each expected CPU derived from kernel/sched/fair.c's policy:
//!
//! ```text
//!   8 harts, SG2042 topology cut to 8:   domain [0 .. 7]   (groups: clusters)
//!                                        MC     [0-3][4-7] (groups: CPUs; the LLC)
//!   32 harts: MC [4] < NODE [16] < NUMA [32], imb_numa_nr = 4
//! ```
//!
//! Ties between equal candidates go to the first CPU in the kernel's
//! iteration order (groups from the local one; `for_each_cpu_wrap` from
//! the target in `select_idle_cpu`).

use kernel::sched::core::{hrtimer_wakeup, schedule};
use kernel::sched::fair::{
    available_idle_cpu, nr_running, sched_balance_trigger, select_task_rq_fair_fork,
    select_task_rq_fair_wake,
};
use kernel::user::UserOp;
use kernel::world::TaskState;
use kernel::{Effects, TaskId, World};
use machine::{CpuId, Scenario};

/// A RISC-V machine of `cpus` harts on the SG2042 topology (`extra`
/// overrides), nothing running.
fn machine(cpus: u32, extra: &[&str]) -> World {
    let mut s = Scenario::default();
    let n = format!("machine.cpus={cpus}");
    for kv in [
        "machine.arch=riscv",
        n.as_str(),
        "machine.memory=64MiB",
        "machine.topology=sg2042",
    ]
    .iter()
    .chain(extra)
    {
        s.set(kv).unwrap();
    }
    s.validate().unwrap();
    World::new(&s).unwrap()
}

/// A task of a new mm on `cpu`: running if the CPU was idle, else queued
/// behind what runs there. `all`: the fair class may move it.
fn task(w: &mut World, cpu: CpuId, all: bool) -> TaskId {
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, cpu, vec![UserOp::Spin], false);
    w.tasks[t as usize].cpus_allowed_all = all;
    if w.cpus[cpu as usize].curr.is_none() {
        schedule(w, cpu, &mut Effects::default());
    }
    t
}

fn idle_cpus(w: &World, cpus: std::ops::Range<u32>) -> Vec<u32> {
    cpus.filter(|&c| available_idle_cpu(w, c)).collect()
}

/// Fork: the parent runs on CPU 0 with CPUs 1, 2 and 4 busy. Cluster 0 has
/// one idle CPU (3), cluster 1 three (5, 6, 7): `find_idlest_group` takes
/// the group with more idle CPUs, and `find_idlest_group_cpu` the idle CPU
/// that went idle last (rq->idle_stamp). Its MC domain below then keeps it
/// (its own group is idle, no sibling has more idle CPUs than one).
#[test]
fn fork_goes_to_the_idlest_clusters_most_recently_idle_cpu() {
    let mut w = machine(8, &[]);
    let parent = task(&mut w, 0, true);
    for c in [1, 2, 4] {
        task(&mut w, c, false);
    }
    assert_eq!(idle_cpus(&w, 0..4), [3]);
    assert_eq!(idle_cpus(&w, 4..8), [5, 6, 7]);
    // No stamps yet: the first idle CPU of the group.
    assert_eq!(select_task_rq_fair_fork(&w, parent, 0), 5);
    // CPU 7 went idle after 5 and 6.
    w.cpus[5].fair.idle_stamp = Some(100);
    w.cpus[6].fair.idle_stamp = Some(200);
    w.cpus[7].fair.idle_stamp = Some(300);
    assert_eq!(select_task_rq_fair_fork(&w, parent, 0), 7);
}

/// Fork, the other way round: the parent's cluster has more idle CPUs
/// (1, 2, 3 against 7), so the child stays in it (`local_sgs.idle_cpus >=
/// idlest_sgs->idle_cpus` returns no group), and in the MC domain the
/// parent's own CPU is fully busy, so the first idle sibling after it (1)
/// is the idlest group.
#[test]
fn fork_stays_in_the_local_cluster_when_it_is_idler() {
    let mut w = machine(8, &[]);
    let parent = task(&mut w, 0, true);
    for c in [4, 5, 6] {
        task(&mut w, c, false);
    }
    assert_eq!(select_task_rq_fair_fork(&w, parent, 0), 1);
}

/// NUMA (32 harts: two nodes of 16): a fork stays in the parent's node
/// while the node would hold no more than `imb_numa_nr` (4) tasks and the
/// nodes' idle CPUs differ by at most NUMA_IMBALANCE_MIN (2), although the
/// other node is wholly idle; with three more busy CPUs in the parent's
/// node the difference is 4 and the child goes to the other node.
#[test]
fn fork_keeps_the_allowed_numa_imbalance() {
    let mut w = machine(32, &[]);
    assert_eq!(w.cfg.topology.levels.len(), 3);
    assert_eq!(w.cfg.topology.levels[2].imb_numa_nr, 4);
    let parent = task(&mut w, 0, true);
    // Node 0: 15 idle, node 1: 16 idle; dst_running 2 <= 4.
    let c = select_task_rq_fair_fork(&w, parent, 0);
    assert!(c < 16, "stays in node 0, got {c}");
    // In node 0: cluster 1 (4 idle) beats the parent's cluster (3 idle).
    assert_eq!(c, 4);
    for c in [1, 2, 3] {
        task(&mut w, c, false);
    }
    // Node 0: 12 idle against 16: imbalance 4 > 2.
    assert_eq!(select_task_rq_fair_fork(&w, parent, 0), 16);
}

/// NUMA, at the bound: the allowance counts the child (`dst_running` is
/// the node's running tasks + 1). Four tasks on two CPUs of node 0 (the
/// parent and one more on CPU 0, two on CPU 1) leave 14 idle against 16:
/// an imbalance of 2, within NUMA_IMBALANCE_MIN, but with the child the
/// node would run 5 > `imb_numa_nr` (4), so no allowance: the child goes
/// to the idler node 1.
#[test]
fn fork_leaves_the_node_once_the_child_would_exceed_imb_numa_nr() {
    let mut w = machine(32, &[]);
    let parent = task(&mut w, 0, true);
    for c in [0, 1, 1] {
        task(&mut w, c, false);
    }
    assert_eq!(idle_cpus(&w, 0..16).len(), 14);
    let c = select_task_rq_fair_fork(&w, parent, 0);
    assert!(c >= 16, "goes to node 1, got {c}");
}

/// Wake-up: a task slept on CPU 4, which its timer wakes while another
/// task runs there. `wake_affine` has nothing to choose (waker and prev are
/// the same CPU); `select_idle_sibling` finds CPU 4 busy and scans the LLC
/// (cluster 4-7) from CPU 5 with wrap-around: 5 is busy, so 6. Cluster 0
/// is wholly idle but outside the LLC, so it is not considered.
#[test]
fn wake_up_goes_to_an_idle_sibling_in_the_llc() {
    let mut w = machine(8, &[]);
    let p = task(&mut w, 4, true);
    // p sleeps; another task runs on 4, and one on 5.
    let mut fx = Effects::default();
    w.tasks[p as usize].state = TaskState::Sleeping;
    w.set_curr(4, None);
    schedule(&mut w, 4, &mut fx);
    task(&mut w, 4, false);
    task(&mut w, 5, false);
    assert_eq!(select_task_rq_fair_wake(&w, p, 4, 4, false), 6);
    // Through the timer interrupt: the task is queued on 6 and 6 is woken.
    let mut fx = Effects::default();
    hrtimer_wakeup(&mut w, 4, &mut fx);
    assert_eq!(w.tasks[p as usize].cpu, 6);
    // CPU 6 idles (HLT/WFI, not polling): ttwu_queue puts the task on its
    // wake list and sends it a call-function IPI; the interrupt's
    // sched_ttwu_pending queues it and wakes the CPU.
    assert!(w.cpus[6].rq.is_empty());
    assert!(fx.ipis.iter().any(|&(c, _)| c == 6));
    kernel::kernel_smp::sysvec_call_function(&mut w, 6, &mut fx);
    assert_eq!(w.cpus[6].rq.front(), Some(&p));
    assert!(fx.wakes.iter().any(|&(c, _)| c == 6));
    // With every CPU of the LLC busy, it stays on 4 (cluster 0 is idle).
    let mut w = machine(8, &[]);
    let p = task(&mut w, 4, true);
    w.tasks[p as usize].state = TaskState::Sleeping;
    w.set_curr(4, None);
    schedule(&mut w, 4, &mut fx);
    for c in 4..8 {
        task(&mut w, c, false);
    }
    assert_eq!(idle_cpus(&w, 4..8), Vec::<u32>::new());
    assert_eq!(select_task_rq_fair_wake(&w, p, 4, 4, false), 4);
}

/// A pinned task wakes where it slept.
#[test]
fn a_pinned_task_wakes_on_its_cpu() {
    let mut w = machine(8, &[]);
    let p = task(&mut w, 4, false);
    w.tasks[p as usize].state = TaskState::Sleeping;
    w.set_curr(4, None);
    task(&mut w, 4, false);
    hrtimer_wakeup(&mut w, 4, &mut Effects::default());
    assert_eq!(w.tasks[p as usize].cpu, 4);
    assert!(w.cpus[4].rq.contains(&p));
}

/// New-idle balance: CPU 1 runs one task with two queued, CPU 5 one with
/// one queued. CPU 2 finds nothing to run: its MC domain (cluster 0) is
/// balanced first and holds the overloaded CPU 1, so it pulls CPU 1's
/// longest-waiting task and leaves CPU 5 alone (nearest domain first).
#[test]
fn newidle_balance_pulls_from_the_busiest_cpu_of_the_nearest_domain() {
    let mut w = machine(8, &[]);
    task(&mut w, 1, true);
    let a = task(&mut w, 1, true);
    let _b = task(&mut w, 1, true);
    task(&mut w, 5, true);
    let c = task(&mut w, 5, true);
    let mut fx = Effects::default();
    schedule(&mut w, 2, &mut fx);
    assert_eq!(w.cpus[2].curr, Some(a));
    assert_eq!(w.tasks[a as usize].cpu, 2);
    assert_eq!(nr_running(&w, 1), 2);
    assert_eq!(w.cpus[5].rq.iter().copied().collect::<Vec<_>>(), [c]);
    assert_eq!(w.counters.sched_newidle_pulls, 1);
    // CPU 3 pulls CPU 1's other queued task (nr_running 2 against 0).
    schedule(&mut w, 3, &mut fx);
    assert_eq!(w.cpus[3].curr.map(|t| w.tasks[t as usize].cpu), Some(3));
    assert_eq!(nr_running(&w, 1), 1);
    // CPU 0: cluster 0 is balanced, and at the top level cluster 1 (two
    // tasks, three idle CPUs) is no busier than cluster 0 (three tasks, one
    // idle): sibling_imbalance 0, idle CPUs 1 <= 3 + 1. CPU 0 idles; CPU
    // 5's queued task is for cluster 1's idle CPUs: CPU 4 pulls it.
    schedule(&mut w, 0, &mut fx);
    assert_eq!(w.cpus[0].curr, None);
    schedule(&mut w, 4, &mut fx);
    assert_eq!(w.cpus[4].curr, Some(c));
    assert!(w.cpus[4].fair.idle_stamp.is_none(), "pulled: not idle");
}

/// An empty cluster pulls across clusters: CPU 0 runs three tasks and is
/// the only busy CPU of cluster 0; CPU 4 goes idle with cluster 1 empty.
/// Its MC domain has nothing; at the top level `SD_PREFER_SIBLING`'s
/// `sibling_imbalance` is 2 (an empty group against a group with more than
/// one task), so it pulls one task.
#[test]
fn newidle_balance_pulls_across_clusters_into_an_empty_one() {
    let mut w = machine(8, &[]);
    for _ in 0..3 {
        task(&mut w, 0, true);
    }
    let first = w.cpus[0].rq[0];
    schedule(&mut w, 4, &mut Effects::default());
    assert_eq!(w.cpus[4].curr, Some(first));
    assert_eq!(nr_running(&w, 0), 2);
}

/// Pinned tasks are never pulled (`can_migrate_task`: not allowed on the
/// destination): CPU 2 goes idle and records when.
#[test]
fn newidle_balance_leaves_pinned_tasks() {
    let mut w = machine(8, &[]);
    task(&mut w, 1, false);
    task(&mut w, 1, false);
    task(&mut w, 6, true); // one task the fair class may move, running
    w.now = 5_000;
    schedule(&mut w, 2, &mut Effects::default());
    assert_eq!(w.cpus[2].curr, None);
    assert_eq!(w.cpus[2].fair.idle_stamp, Some(5_000));
    assert_eq!(nr_running(&w, 1), 2);
}

/// Periodic balance at the tick: CPU 0 runs three tasks, the others are
/// idle. Its tick (two or more tasks: nohz_balancer_kick) makes the idle
/// CPUs balance in for_each_cpu_wrap order from CPU 1; each pulls from
/// CPU 0 while it is overloaded, so the two queued tasks go to CPUs 1 and 2
/// (cluster 0, the nearest domain) and CPU 3 onwards find nothing.
#[test]
fn tick_balance_spreads_an_overloaded_cpu_over_the_nearest_idle_cpus() {
    let mut w = machine(8, &[]);
    for _ in 0..3 {
        task(&mut w, 0, true);
    }
    let queued: Vec<TaskId> = w.cpus[0].rq.iter().copied().collect();
    w.now = 1_000_000_000;
    let mut fx = Effects::default();
    sched_balance_trigger(&mut w, 0, &mut fx);
    assert_eq!(w.tasks[queued[0] as usize].cpu, 1);
    assert_eq!(w.tasks[queued[1] as usize].cpu, 2);
    assert_eq!(nr_running(&w, 0), 1);
    assert_eq!(w.counters.sched_balance_pulls, 2);
    assert!(fx.wakes.iter().any(|&(c, _)| c == 1));
}

/// The imbalance rule: three tasks on two CPUs cannot be balanced better
/// (moving one leaves 2 + 1 the other way), so the busy CPU's periodic
/// balance moves nothing; four against one (loads 3 and 1, average 2)
/// moves exactly one.
#[test]
fn periodic_balance_moves_only_what_evens_the_load() {
    let mut w = machine(2, &["machine.topology=flat"]);
    task(&mut w, 0, true);
    task(&mut w, 0, true);
    task(&mut w, 1, true);
    w.now = 1_000_000_000;
    let mut fx = Effects::default();
    sched_balance_trigger(&mut w, 1, &mut fx);
    assert_eq!((nr_running(&w, 0), nr_running(&w, 1)), (2, 1));
    task(&mut w, 0, true);
    w.now = 2_000_000_000;
    sched_balance_trigger(&mut w, 1, &mut fx);
    assert_eq!((nr_running(&w, 0), nr_running(&w, 1)), (2, 2));
}

/// The busy CPU's periodic balance waits `span` ms x busy_factor (16)
/// between runs of a domain: a second tick soon after does nothing.
#[test]
fn periodic_balance_respects_the_busy_interval() {
    let mut w = machine(2, &["machine.topology=flat"]);
    for _ in 0..4 {
        task(&mut w, 0, true);
    }
    task(&mut w, 1, true);
    w.now = 1_000_000_000;
    let mut fx = Effects::default();
    sched_balance_trigger(&mut w, 1, &mut fx);
    assert_eq!((nr_running(&w, 0), nr_running(&w, 1)), (3, 2));
    // 2 CPUs x 16 ms later minus one ns: not yet.
    w.now += 2 * 16 * 1_000_000 - 1;
    task(&mut w, 0, true);
    sched_balance_trigger(&mut w, 1, &mut fx);
    assert_eq!((nr_running(&w, 0), nr_running(&w, 1)), (4, 2));
    w.now += 1;
    sched_balance_trigger(&mut w, 1, &mut fx);
    assert_eq!((nr_running(&w, 0), nr_running(&w, 1)), (3, 3));
}

/// Lazy TLB: a hart whose task leaves runs the idle task, which keeps the
/// last mm as `active_mm` (`enter_lazy_tlb` is a no-op on RISC-V): the mm
/// stays loaded (its ASID in `satp`) and the hart stays in its
/// `mm_cpumask`. On x86 the CPU keeps `loaded_mm` and marks itself lazy.
#[test]
fn the_idle_task_keeps_the_last_mm() {
    for arch in ["riscv", "x86"] {
        let a = format!("machine.arch={arch}");
        let mut w = machine(8, &[a.as_str()]);
        let p = task(&mut w, 4, true);
        let mm = w.tasks[p as usize].mm;
        w.tasks[p as usize].state = TaskState::Sleeping;
        w.set_curr(4, None);
        schedule(&mut w, 4, &mut Effects::default());
        assert!(available_idle_cpu(&w, 4));
        assert_eq!(w.cpus[4].tlbstate.loaded_mm, mm, "{arch}");
        assert!(w.mms[mm as usize].cpumask.test(4), "{arch}");
        assert_eq!(w.cpus[4].tlbstate.is_lazy, arch == "x86");
    }
}

/// A remote waker (the rule LTP mmapstress01's parent meets when a child's
/// exit wakes it from `wait()`): the parent slept on hart 1, the waker runs
/// on hart 6 in the other cluster. An exiting waker's wake-up is not sync
/// (`select_task_rq_fair`: `WF_SYNC && !(current->flags & PF_EXITING)`):
/// `wake_affine_idle` returns the idle previous hart, so the parent stays
/// on 1. If something else runs on hart 1, `wake_affine_weight` still
/// prefers prev (waker's CPU: 2 tasks' load x 100, prev: 1 x 108), and
/// `select_idle_sibling` moves it to the first idle hart of prev's LLC
/// after prev (2). A sync wake-up from a waker alone on its hart (a pipe,
/// not an exit) would instead take the waker's hart as target and land on
/// an idle hart of the waker's LLC (7, after the busy 6).
#[test]
fn a_remote_wake_up_moves_a_task_only_if_its_hart_is_busy() {
    let mut w = machine(8, &[]);
    let p = task(&mut w, 1, true);
    w.tasks[p as usize].state = TaskState::Sleeping;
    w.set_curr(1, None);
    schedule(&mut w, 1, &mut Effects::default());
    task(&mut w, 6, false); // the waker
    assert_eq!(select_task_rq_fair_wake(&w, p, 1, 6, false), 1);
    assert_eq!(select_task_rq_fair_wake(&w, p, 1, 6, true), 7);
    task(&mut w, 1, false); // hart 1 is now busy
    assert_eq!(select_task_rq_fair_wake(&w, p, 1, 6, false), 2);
}

/// A parent asleep in `wait()` on hart `cpu` and a child of it running on
/// `child_cpu` (its exit is the next thing it does).
fn parent_in_wait(w: &mut World, cpu: CpuId, child_cpu: CpuId) -> (TaskId, TaskId) {
    let parent = task(w, cpu, true);
    w.tasks[parent as usize].prog = vec![UserOp::Wait, UserOp::Spin].into();
    let fx = &mut Effects::default();
    kernel::user::step_user(w, cpu, parent, fx);
    let child = task(w, child_cpu, true);
    w.tasks[child as usize].prog = vec![UserOp::Exit].into();
    w.tasks[child as usize].us.parent = Some(parent);
    // Its exit_mmap flush is done: the exit goes on to exit_notify.
    w.tasks[child as usize].us.sub = 1;
    (parent, child)
}

/// LTP's parent in `wait()` with no exited child sleeps and frees its
/// hart; `do_notify_parent` from the exiting child wakes it where
/// `select_task_rq_fair` puts it: its own hart while that is idle
/// (`wake_affine_idle` keeps an idle previous CPU), and the exited child
/// is reaped by the `wait()` it re-runs, which then returns.
#[test]
fn a_childs_exit_wakes_the_waiting_parent_on_its_idle_hart() {
    let mut w = machine(8, &[]);
    let (parent, child) = parent_in_wait(&mut w, 1, 6);
    assert_eq!(w.tasks[parent as usize].state, TaskState::Sleeping);
    assert!(available_idle_cpu(&w, 1));
    kernel::user::step_user(&mut w, 6, child, &mut Effects::default());
    assert_eq!(w.tasks[child as usize].state, TaskState::Exited);
    assert_eq!(w.tasks[parent as usize].cpu, 1);
    assert_eq!(w.tasks[parent as usize].state, TaskState::Runnable);
    assert_eq!(w.counters.sched_wake_migrations, 0);
    // Hart 1 runs it; wait() reaps the zombie and returns.
    schedule(&mut w, 1, &mut Effects::default());
    kernel::user::step_user(&mut w, 1, parent, &mut Effects::default());
    assert_eq!(w.tasks[parent as usize].us.pc, 1);
    assert_eq!(w.tasks[parent as usize].us.zombies, 0);
}

/// `wait()` with a zombie already there returns at once: the parent
/// does not sleep, so its hart never idles and nothing can move it.
#[test]
fn wait_with_an_exited_child_does_not_sleep() {
    let mut w = machine(4, &[]);
    let parent = task(&mut w, 0, true);
    w.tasks[parent as usize].prog = vec![UserOp::Wait, UserOp::Spin].into();
    w.tasks[parent as usize].us.zombies = 1;
    kernel::user::step_user(&mut w, 0, parent, &mut Effects::default());
    assert_eq!(w.tasks[parent as usize].state, TaskState::Running);
    assert_eq!(w.tasks[parent as usize].us.pc, 1);
}

/// The exiting child is `PF_EXITING`, so its wake-up is not `WF_SYNC`:
/// with the parent's hart busy (another task took it while the parent
/// slept) neither hart is idle, and `select_idle_sibling` moves the parent
/// to the first idle hart of its own LLC after its hart, never to the
/// child's cluster.
#[test]
fn a_childs_exit_moves_the_parent_within_its_llc_when_its_hart_is_busy() {
    let mut w = machine(8, &[]);
    let (parent, child) = parent_in_wait(&mut w, 1, 6);
    task(&mut w, 1, false); // something else runs on hart 1 now
    kernel::user::step_user(&mut w, 6, child, &mut Effects::default());
    assert_eq!(w.tasks[parent as usize].cpu, 2);
    assert_eq!(w.counters.sched_wake_migrations, 1);
}
