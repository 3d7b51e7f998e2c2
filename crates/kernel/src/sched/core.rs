//! kernel/sched/core.c: picking the next task and `context_switch`.

use crate::arch::{enter_lazy_tlb, switch_mm};
use crate::effects::Effects;
use crate::sched::fair;
use crate::world::{TaskState, World};
use crate::{TaskId, INIT_MM};
use machine::{Cost, CpuId};

/// kernel/sched/core.c: `sched_tick` → `sched_balance_trigger` (the fair
/// class's periodic and nohz idle balance, [`fair::sched_balance_trigger`])
/// and `resched_curr`, then `__schedule` at the return to user mode: put
/// the running task at the tail of its runqueue and run the next one.
/// Nothing happens if it would pick the same task again. `migrate_to` is
/// the `machine.migrate_pct` noise knob's move (no kernel mechanism; off by
/// default): the running task goes to that CPU's runqueue.
pub fn scheduler_tick(w: &mut World, cpu: CpuId, migrate_to: Option<CpuId>, fx: &mut Effects) {
    let c = cpu as usize;
    let Some(t) = w.cpus[c].curr else { return };
    if migrate_to.is_none() {
        fair::sched_balance_trigger(w, cpu, fx);
    }
    match migrate_to {
        Some(to) if to != cpu => move_running_task(w, cpu, t, to, fx),
        _ => {
            if w.cpus[c].rq.is_empty() {
                return;
            }
            w.set_curr(cpu, None);
            w.tasks[t as usize].state = TaskState::Runnable;
            w.cpus[c].rq.push_back(t);
        }
    }
    schedule(w, cpu, fx);
}

/// The running task `t` leaves `cpu` for the tail of `to`'s runqueue
/// (the caller then schedules `cpu`).
fn move_running_task(w: &mut World, cpu: CpuId, t: TaskId, to: CpuId, fx: &mut Effects) {
    w.counters.sched_migrations += 1;
    w.set_curr(cpu, None);
    let task = &mut w.tasks[t as usize];
    task.state = TaskState::Runnable;
    task.cpu = to;
    w.cpus[to as usize].rq.push_back(t);
    // move_queued_task → wakeup_preempt on the destination's runqueue.
    resched_curr(w, cpu, to, fx);
    fx.wake(to);
}

/// kernel/sched/core.c: `resched_curr(cpu_rq(cpu))` from `this_cpu`, after
/// `wakeup_preempt` found a fair task joining `cpu`'s runqueue: only for an
/// idle `cpu` (the idle class's curr is always preempted; a fair curr's
/// EEVDF test, `check_preempt_wakeup_fair`, is not modelled, so a busy
/// CPU is never asked). Nothing if `need_resched` is set already or `cpu`
/// is this one; else `set_nr_and_not_polling`: a polling idle loop (the
/// profile's `[idle] polls`) sees the flag with no interrupt
/// (`trace_sched_wake_idle_without_ipi`), otherwise `smp_send_reschedule`
/// sends a reschedule IPI, counted in the target's RES row. The target's
/// `scheduler_ipi` is not priced: it is the interrupt that ends its idle
/// wait, which the wake-up pays for already.
pub fn resched_curr(w: &mut World, this_cpu: CpuId, cpu: CpuId, fx: &mut Effects) {
    let c = &mut w.cpus[cpu as usize];
    if c.curr.is_some() || c.need_resched {
        return;
    }
    c.need_resched = true;
    if cpu == this_cpu {
        return;
    }
    if w.cfg.idle_polls {
        w.counters.wake_idle_without_ipi += 1;
        return;
    }
    fx.cost(Cost::IpiSend, 1);
    w.counters.irq_res[cpu as usize] += 1;
    w.counters.ipis_sent += 1;
}

/// kernel/sched/core.c: `sched_setaffinity` → `__set_cpus_allowed_ptr`
/// with a one-CPU mask, for the calling task `t` on `cpu`: it is no longer
/// allowed everywhere (the fair class stops placing it), and if `to` is
/// another CPU, `affine_move_task` moves it there at once (the stopper's
/// `migration_cpu_stop` → `move_queued_task`), leaving `cpu` to schedule.
/// Its mm stays loaded where it ran, as after any migration.
pub fn sched_setaffinity(w: &mut World, cpu: CpuId, t: TaskId, to: CpuId, fx: &mut Effects) {
    w.tasks[t as usize].cpus_allowed_all = false;
    if to == cpu || to as usize >= w.cpus.len() {
        return;
    }
    move_running_task(w, cpu, t, to, fx);
    w.cpus[to as usize].fair.idle_stamp = None;
    schedule(w, cpu, fx);
}

/// kernel/time/hrtimer.c: `hrtimer_interrupt` → `hrtimer_wakeup` →
/// `wake_up_process`: the sleeping task whose deadline passed becomes
/// runnable; a real-time task goes to the head of the runqueue and sets
/// `need_resched`, and preempts at once if the current task allows it.
pub fn hrtimer_wakeup(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    fx.cost(Cost::IrqEntry, 1);
    fx.cost(Cost::IrqExit, 1);
    // The driver raises this interrupt when the earliest timer of this CPU
    // expires (the checker: at any moment it chooses).
    let Some(t) = w
        .tasks
        .iter()
        // (Not a task asleep in the kernel: flush_work's waiter.)
        .filter(|t| {
            t.cpu == cpu && t.state == TaskState::Sleeping && !t.us.in_wait && t.kstack.is_empty()
        })
        .min_by_key(|t| t.us.deadline)
        .map(|t| t.id)
    else {
        return;
    };
    // try_to_wake_up → select_task_rq: a task the fair class places may
    // wake on another CPU (select_task_rq_fair); this one's timer woke it.
    let to = fair::select_task_rq(w, t, cpu);
    if to != cpu {
        w.counters.sched_migrations += 1;
        w.counters.sched_wake_migrations += 1;
        fx.label(crate::Label::Wakeup { task: t, rt: false });
        ttwu_queue(w, t, to, cpu, fx);
        return;
    }
    w.tasks[t as usize].state = TaskState::Runnable;
    let rt = w.tasks[t as usize].rt;
    ttwu_do_activate(w, cpu, t);
    fx.label(crate::Label::Wakeup { task: t, rt });
    if w.cpus[cpu as usize].curr.is_none() {
        w.cpus[cpu as usize].need_resched = false;
        schedule(w, cpu, fx);
    } else if rt && w.can_preempt(cpu) {
        preempt(w, cpu, fx);
    }
}

/// kernel/sched/core.c: `try_to_wake_up` of sleeping task `p` by a task
/// running on `this_cpu`, not `WF_SYNC` (an exiting child waking its
/// parent: `select_task_rq_fair` drops the hint for a `PF_EXITING` waker).
/// `select_task_rq` picks the CPU; the task is queued there
/// ([`ttwu_queue`]) and that CPU, if idle, wakes to run it.
pub fn try_to_wake_up(w: &mut World, p: TaskId, this_cpu: CpuId, fx: &mut Effects) {
    if w.tasks[p as usize].state != TaskState::Sleeping {
        return;
    }
    let prev = w.tasks[p as usize].cpu;
    let to = fair::select_task_rq(w, p, this_cpu);
    if to != prev {
        w.counters.sched_migrations += 1;
        w.counters.sched_wake_migrations += 1;
    }
    fx.label(crate::Label::Wakeup { task: p, rt: false });
    ttwu_queue(w, p, to, this_cpu, fx);
}

/// kernel/sched/core.c: `ttwu_queue(p, cpu)` from `this_cpu`: through
/// the wake list when [`ttwu_queue_cond`] says so (6.1 and 6.12 alike:
/// another CPU that does not share this one's last-level cache, or an
/// idle one), else `ttwu_do_activate` under the target's runqueue lock.
/// The task is `TASK_WAKING` meanwhile: runnable, on no runqueue.
pub fn ttwu_queue(w: &mut World, p: TaskId, cpu: CpuId, this_cpu: CpuId, fx: &mut Effects) {
    let task = &mut w.tasks[p as usize];
    task.state = TaskState::Runnable;
    task.cpu = cpu;
    if cpu != this_cpu && ttwu_queue_cond(w, cpu, this_cpu) {
        let func = crate::kernel_smp::CallFunc::SchedTtwuPending(p);
        __ttwu_queue_wakelist(w, this_cpu, cpu, func, fx);
        return;
    }
    ttwu_do_activate(w, cpu, p);
    fx.wake(cpu);
}

/// kernel/sched/core.c: `__ttwu_queue_wakelist`: `WRITE_ONCE(rq->ttwu_pending,
/// 1)`; `__smp_call_single_queue(cpu, &p->wake_entry.llist)`: the wake-up
/// (`func`: a task's `sched_ttwu_pending`, or a per-CPU kworker's) joins
/// `cpu`'s `call_single_queue`, with an IPI if the queue was empty.
pub fn __ttwu_queue_wakelist(
    w: &mut World,
    this_cpu: CpuId,
    cpu: CpuId,
    func: crate::kernel_smp::CallFunc,
    fx: &mut Effects,
) {
    w.counters.ttwu_wakelist += 1;
    let csd = crate::kernel_smp::Csd {
        initiator: this_cpu,
        func,
    };
    crate::kernel_smp::__smp_call_single_queue(w, this_cpu, cpu, csd, fx);
}

/// kernel/sched/core.c: `ttwu_queue_cond(p, cpu)` for a `cpu` other than
/// this one that `p` may run on (`select_task_rq` chose it): queue on its
/// wake list if it does not share this CPU's cache (`cpus_share_cache`),
/// or if it is idle (`!cpu_rq(cpu)->nr_running`: the woken task is not
/// counted yet). 6.1 and 6.12 read the same here (6.12's `sched_ext` and
/// stop-class tests do not apply).
pub fn ttwu_queue_cond(w: &World, cpu: CpuId, this_cpu: CpuId) -> bool {
    if !w.cfg.topology.cpus_share_cache(this_cpu as u32, cpu as u32) {
        return true;
    }
    fair::nr_running(w, cpu as u32) == 0
}

/// kernel/sched/core.c: `ttwu_do_activate`: `p` joins `cpu`'s runqueue
/// (a real-time task at its head, asking for a reschedule).
fn ttwu_do_activate(w: &mut World, cpu: CpuId, p: TaskId) {
    let rt = w.tasks[p as usize].rt;
    let c = &mut w.cpus[cpu as usize];
    if rt {
        c.rq.push_front(p);
        c.need_resched = true;
    } else {
        c.rq.push_back(p);
    }
    c.fair.idle_stamp = None;
}

/// kernel/sched/core.c: `sched_ttwu_pending` for one wake-list entry, on
/// `cpu` (from its call-function interrupt or its idle loop):
/// `ttwu_do_activate`; an idle CPU then schedules it (`resched_curr` of
/// the idle task: the step after this one).
pub fn sched_ttwu_pending(w: &mut World, cpu: CpuId, p: TaskId, fx: &mut Effects) {
    if w.tasks[p as usize].state != TaskState::Runnable || w.tasks[p as usize].cpu != cpu {
        return;
    }
    ttwu_do_activate(w, cpu, p);
    fx.wake(cpu);
}

/// kernel/sched/core.c: `preempt_schedule` / `__schedule(SM_PREEMPT)`: put
/// the running task back behind the woken one and switch to it. The
/// preempted task keeps its kernel stack (a kernel path in progress resumes
/// where it stopped).
pub fn preempt(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    w.cpus[cpu as usize].need_resched = false;
    if let Some(t) = w.cpus[cpu as usize].curr {
        w.set_curr(cpu, None);
        let rq = &mut w.cpus[cpu as usize].rq;
        rq.insert(rq.len().min(1), t);
        w.tasks[t as usize].state = TaskState::Runnable;
    }
    schedule(w, cpu, fx);
}

/// kernel/sched/core.c: `switch_mm_cid`'s barrier on a switch to a user
/// task (6.12: `smp_mb()` from a kernel thread, `smp_mb__after_switch_mm()`
/// from a user task). Only its barrier is modelled, on arm64 and RISC-V:
/// x86 overrides `smp_mb__after_switch_mm()` with nothing (the CR3 write
/// serializes) and its `switch_mm_irqs_off` runs as split steps.
fn switch_mm_cid(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    use crate::hw::memory_model as mo;
    if w.cfg.arch != machine::scenario::Arch::X86 {
        mo::barrier(w, cpu, Some(mo::SWITCH_MM_CID_SMP_MB), mo::Order::Full, fx);
    }
}

/// kernel/sched/core.c: `__schedule` → `context_switch`: run the next task on
/// this CPU's runqueue, or go idle. A task without an mm (kernel thread, idle)
/// gets `enter_lazy_tlb`; a user task gets `switch_mm` (x86: `switch_mm_irqs_off`).
pub fn schedule(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    // __schedule: rq_lock(); smp_mb__after_spinlock(), a full barrier
    // on every architecture (a locked op on x86, smp_mb() on arm64,
    // fence rw,rw on RISC-V).
    crate::hw::memory_model::barrier(w, cpu, None, crate::hw::memory_model::Order::Full, fx);
    // clear_tsk_need_resched(prev); the head of the runqueue (a woken
    // real-time task is put there) runs next.
    w.cpus[cpu as usize].need_resched = false;
    if fair::placement_active(w) {
        if w.cpus[cpu as usize].rq.is_empty() {
            // pick_next_task_fair found nothing: sched_balance_newidle may
            // pull a task here before the CPU idles.
            fair::sched_balance_newidle(w, cpu, fx);
        } else {
            w.cpus[cpu as usize].fair.idle_stamp = None;
        }
    }
    let next = w.cpus[cpu as usize].rq.pop_front();
    fx.cost(Cost::ContextSwitch, 1);
    match next {
        Some(t) => {
            w.set_curr(cpu, Some(t));
            let task = &mut w.tasks[t as usize];
            task.state = TaskState::Running;
            let mm = task.mm;
            if mm == INIT_MM {
                enter_lazy_tlb(w, cpu, fx);
            } else {
                switch_mm(w, cpu, mm, fx);
                switch_mm_cid(w, cpu, fx);
            }
        }
        None => enter_lazy_tlb(w, cpu, fx),
    }
}
