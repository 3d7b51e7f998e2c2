//! mm/swap.c: the per-CPU LRU batches (`cpu_fbatches.lru_add`) and
//! `lru_add_drain_all`, whose per-CPU drain work runs in a kworker woken on
//! each CPU that holds folios (issues 32 and 35).
//!
//! ```text
//!  fault / COW / swap-in / collapse: folio_add_lru → folio_batch_add_and_move:
//!      the folio joins this CPU's lru_add batch; a full batch (PAGEVEC_SIZE)
//!      or a large folio drains it here (folio_batch_move_lru)
//!  madvise_collapse → lru_add_drain_all:
//!      for each online CPU whose batches hold folios (cpu_needs_drain):
//!          queue_work_on(cpu, mm_percpu_wq, lru_add_drain_per_cpu)
//!              → wake_up_worker → try_to_wake_up(kworker/cpu): a remote idle
//!                CPU through its wake list (a call-function IPI unless its
//!                idle task polls)
//!      for each of them: flush_work (sleep until the kworker has run it;
//!          its barrier's complete() wakes this task, again through the
//!          wake list when this CPU idles meanwhile)
//! ```
//!
//! Modelled: the `lru_add` batch as a count per CPU (which folios it holds
//! is not tracked: the scan does not see their batch reference), the drain
//! work of the remote CPUs with its kworker as a per-CPU flag that the
//! target runs as soon as it is idle or may be preempted (no task of its
//! own: the kworker's wakeup preemption of a busy CPU is taken at once,
//! without its reschedule IPI), and the caller's sleep in `flush_work`. The
//! local CPU's work is done inline (the kernel queues it on the local
//! kworker too: no IPI either way). The other batches (`lru_deactivate`,
//! `lru_lazyfree`, `activate`, `lru_move_tail`, mlock, buffer heads) are
//! never filled by a modelled path.

use crate::effects::Effects;
use crate::kernel_smp::CallFunc;
use crate::world::{TaskState, World};
use crate::TaskId;
use machine::{Cost, CpuId};

/// mm/swap.c: `folio_add_lru` of `n` small folios on `cpu`
/// (`folio_batch_add_and_move` → `folio_batch_move_lru` whenever the
/// batch fills: `PAGEVEC_SIZE`, `mm.pagevec_size`).
pub fn folio_add_lru(w: &mut World, cpu: CpuId, n: u32) {
    if !w.cfg.lru_batches || n == 0 {
        return;
    }
    let size = w.cfg.mm.pagevec_size.max(1);
    let c = &mut w.cpus[cpu as usize];
    c.lru_add = ((c.lru_add as u32 + n) % size) as u8;
}

/// mm/swap.c: `folio_add_lru` of a large folio (a collapse's huge page):
/// `folio_batch_add_and_move` moves the whole batch to the LRU at once.
pub fn folio_add_lru_large(w: &mut World, cpu: CpuId) {
    if w.cfg.lru_batches {
        w.cpus[cpu as usize].lru_add = 0;
    }
}

/// mm/swap.c: `cpu_needs_drain`: does `cpu`'s `lru_add` batch hold folios
/// (the only batch a modelled path fills)?
pub fn cpu_needs_drain(w: &World, cpu: CpuId) -> bool {
    w.cpus[cpu as usize].lru_add != 0
}

/// mm/swap.c: `lru_add_drain_cpu`: move `cpu`'s batches to the LRU lists.
fn lru_add_drain_cpu(w: &mut World, cpu: CpuId) {
    w.cpus[cpu as usize].lru_add = 0;
}

/// mm/swap.c: `__lru_add_drain_all` from `this_cpu` (the generation
/// short-cut and the mutex have no second caller here): queue the drain
/// work on every CPU that needs it and wake its kworker. Returns the
/// remote CPUs queued (`has_work`), which the caller then `flush_work`s in
/// order ([`flush_work_wait`]); this CPU's own drain is done inline.
pub fn lru_add_drain_all(w: &mut World, this_cpu: CpuId, fx: &mut Effects) -> Vec<CpuId> {
    let mut has_work = Vec::new();
    if !w.cfg.lru_batches {
        return has_work;
    }
    w.counters.lru_add_drain_all += 1;
    for cpu in 0..w.cpus.len() as CpuId {
        if !cpu_needs_drain(w, cpu) {
            continue;
        }
        if cpu == this_cpu {
            // queue_work_on(this cpu) + flush_work: the local kworker runs
            // it while this task sleeps; two switches, no IPI.
            fx.cost(Cost::ContextSwitch, 2);
            lru_add_drain_cpu(w, cpu);
            w.counters.lru_drain_works += 1;
            continue;
        }
        w.cpus[cpu as usize].lru_drain_work = true;
        has_work.push(cpu);
        wake_up_worker(w, cpu, this_cpu, fx);
    }
    has_work
}

/// kernel/workqueue.c: `queue_work_on` → `insert_work` → `wake_up_worker`
/// → `try_to_wake_up(kworker/cpu)` from `this_cpu`: the worker is bound to
/// `cpu`, so `ttwu_queue(cpu)` (kernel/sched/core.c): through the wake list
/// when `ttwu_queue_cond` says so, else activated on its runqueue.
fn wake_up_worker(w: &mut World, cpu: CpuId, this_cpu: CpuId, fx: &mut Effects) {
    if crate::sched::core::ttwu_queue_cond(w, cpu, this_cpu) {
        let func = CallFunc::KworkerTtwuPending;
        crate::sched::core::__ttwu_queue_wakelist(w, this_cpu, cpu, func, fx);
    } else {
        w.cpus[cpu as usize].kworker_runnable = true;
        fx.wake(cpu);
    }
}

/// `sched_ttwu_pending` of `cpu`'s kworker (its wake-list entry): runnable.
pub fn kworker_ttwu_pending(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    w.cpus[cpu as usize].kworker_runnable = true;
    fx.wake(cpu);
}

/// `cpu`'s kworker runs (`worker_thread` → `process_one_work`):
/// `lru_add_drain_per_cpu`, then the `flush_work` barrier's `complete()`
/// wakes the task waiting for it (`try_to_wake_up` from this CPU), and the
/// worker sleeps again. Two context switches.
pub fn kworker_run(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    fx.cost(Cost::ContextSwitch, 2);
    let c = &mut w.cpus[cpu as usize];
    c.kworker_runnable = false;
    if !c.lru_drain_work {
        return;
    }
    c.lru_drain_work = false;
    lru_add_drain_cpu(w, cpu);
    w.counters.lru_drain_works += 1;
    if let Some(t) = w.cpus[cpu as usize].lru_drain_waiter.take() {
        crate::sched::core::try_to_wake_up(w, t, cpu, fx);
    }
}

/// kernel/workqueue.c: `flush_work` of the drain work queued on `cpu`, by
/// `task` on `this_cpu`: true when it has run; else the task sleeps
/// (`wait_for_completion`) until the kworker's barrier wakes it, and the
/// CPU schedules. The caller yields and calls again when the task runs.
pub fn flush_work_wait(
    w: &mut World,
    this_cpu: CpuId,
    task: TaskId,
    cpu: CpuId,
    fx: &mut Effects,
) -> bool {
    if !w.cpus[cpu as usize].lru_drain_work {
        return true;
    }
    w.cpus[cpu as usize].lru_drain_waiter = Some(task);
    w.tasks[task as usize].state = TaskState::Sleeping;
    w.set_curr(this_cpu, None);
    crate::sched::core::schedule(w, this_cpu, fx);
    false
}
