//! kernel/smp.c: `smp_call_function_many_cond` and the call-function IPI.
//!
//! The initiator queues a `call_single_data` on each target's
//! `call_single_queue` (an IPI only when that queue was empty), runs the
//! function locally, then spins in `csd_lock_wait` with IRQs on until every
//! target has run it and unlocked its csd. A target runs queued functions only
//! when it takes the interrupt, i.e. while its IRQs are on: a remote IRQ-off
//! window delays the initiator.

use crate::arch::x86::tlb::{flush_tlb_func, should_flush_tlb, InfoRef};
use crate::effects::{Effects, Label};
use crate::world::{layout, Flow, World};
use machine::{Cost, CpuId, CpuMask};

/// The function a csd carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallFunc {
    /// `flush_tlb_func(info)`.
    FlushTlbFunc(InfoRef),
    /// `tlb_remove_table_smp_sync`: does nothing; taking the IPI is the point.
    TlbRemoveTableSmpSync,
    /// RISC-V `__ipi_flush_tlb_range_asid(info)`.
    IpiFlushTlbRangeAsid(crate::arch::riscv::tlbflush::FlushTlbRangeData),
    /// x86 `do_kernel_range_flush(info)`.
    DoKernelRangeFlush(InfoRef),
    /// x86 `do_flush_tlb_all`.
    DoFlushTlbAll,
    /// kernel/sched/core.c: a task queued on this CPU's wake list
    /// (`p->wake_entry`, `CSD_TYPE_TTWU`) by `__ttwu_queue_wakelist`,
    /// activated by `sched_ttwu_pending`. Not a `cfd` csd: nobody waits
    /// for it, there is no `csd_unlock`.
    SchedTtwuPending(crate::TaskId),
    /// The wake-list entry of this CPU's kworker, woken by `queue_work_on`
    /// (mm/swap.c `lru_add_drain_all`: [`crate::mm::swap`]).
    KworkerTtwuPending,
}

impl CallFunc {
    /// A wake-list entry (`CSD_TYPE_TTWU`) rather than a `call_single_data`.
    pub fn is_ttwu(self) -> bool {
        matches!(
            self,
            CallFunc::SchedTtwuPending(_) | CallFunc::KworkerTtwuPending
        )
    }
}

/// The `cond_func` of `on_each_cpu_cond_mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    /// `on_each_cpu_mask`: every CPU in the mask.
    Always,
    /// `should_flush_tlb`.
    ShouldFlushTlb,
}

/// A queued `call_single_data_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Csd {
    pub initiator: CpuId,
    pub func: CallFunc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// Queue csds, send IPIs, run the function locally.
    Queue,
    /// `csd_lock()`: spinning (preemption off) until an earlier call from
    /// this CPU, preempted in its wait, has had these targets run its csds.
    CsdLock,
    /// `csd_lock_wait` on every target.
    Wait,
}

/// `smp_call_function_many_cond(mask, func, info, SCF_WAIT | SCF_RUN_LOCAL, cond)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SmpCallFunctionManyCond {
    pub mask: CpuMask,
    pub func: CallFunc,
    pub cond: Cond,
    /// Targets queued (whose csd this CPU waits on).
    pub queued: CpuMask,
    /// `SCF_RUN_LOCAL`: also run the function here.
    pub run_local: bool,
    pub pc: Pc,
    /// In `CsdLock`: the targets whose per-CPU csd is still locked.
    pub csd_busy: CpuMask,
    /// `smp_call_function`'s own `preempt_disable()` around the call (the
    /// other callers run it with preemption already off): taken at the
    /// first step, dropped when the call returns.
    pub own_preempt_off: bool,
    pub preempt_held: bool,
}

impl SmpCallFunctionManyCond {
    pub fn new(mask: CpuMask, func: CallFunc, cond: Cond) -> Self {
        let mut queued = mask.clone();
        queued.clear_all();
        SmpCallFunctionManyCond {
            mask,
            func,
            cond,
            csd_busy: queued.clone(),
            queued,
            run_local: true,
            pc: Pc::Queue,
            own_preempt_off: false,
            preempt_held: false,
        }
    }

    /// kernel/smp.c: `smp_call_function(func, info, wait=1)`:
    /// `preempt_disable()`, every other online CPU (not this one), and
    /// `preempt_enable()` once they have all run it.
    pub fn smp_call_function(nr_cpus: usize, func: CallFunc) -> Self {
        let mut mask = CpuMask::new(nr_cpus);
        for c in 0..nr_cpus {
            mask.set(c as CpuId);
        }
        let mut f = Self::new(mask, func, Cond::Always);
        f.run_local = false;
        f.own_preempt_off = true;
        f
    }

    pub fn can_run(&self, w: &World, cpu: CpuId) -> bool {
        match self.pc {
            Pc::Queue => true,
            Pc::CsdLock => {
                let locked = &w.cpus[cpu as usize].cfd_locked;
                !self.csd_busy.iter().any(|t| locked.test(t))
            }
            Pc::Wait => w.cpus[cpu as usize].cfd_locked.is_empty(),
        }
    }

    /// kernel/smp.c: `smp_call_function_many_cond` (and, for
    /// `smp_call_function`, its `preempt_disable`/`preempt_enable`).
    pub fn step(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) -> Flow {
        if self.own_preempt_off && !self.preempt_held {
            w.preempt_disable(cpu);
            self.preempt_held = true;
        }
        let flow = self.call_many_cond(w, cpu, fx);
        if self.preempt_held && matches!(flow, Flow::Return) {
            w.preempt_enable(cpu);
            self.preempt_held = false;
        }
        flow
    }

    fn call_many_cond(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Queue if csd_lock_busy(w, cpu, &self.mask, &mut self.csd_busy) => {
                // The csds are per CPU (cfd_data), not per call: a flush
                // that preempted another one's wait (seed (a)) finds them
                // locked. Spin with preemption off, as csd_lock() does.
                w.preempt_disable(cpu);
                fx.label(Label::CsdLockWait {
                    n: self.csd_busy.iter().count() as u32,
                });
                self.pc = Pc::CsdLock;
                Flow::Block
            }
            Pc::CsdLock => {
                w.preempt_enable(cpu);
                self.csd_busy.clear_all();
                self.pc = Pc::Queue;
                Flow::Continue
            }
            Pc::Queue => {
                fx.cost(Cost::SmpCallFixed, 1);
                // cfd->cpumask_ipi: the targets whose queue was empty.
                let mut ipi = CpuMask::new(w.cpus.len());
                for t in self.mask.iter().filter(|&t| t != cpu) {
                    if !cond(w, self.cond, self.func, t, fx) {
                        continue;
                    }
                    // llist_add below is a locked cmpxchg: the store buffer drains.
                    crate::hw::memory_model::barrier(
                        w,
                        cpu,
                        None,
                        crate::hw::memory_model::Order::Full,
                        fx,
                    );
                    // csd_lock(csd); csd->func = func; csd->info = info;
                    self.queued.set(t);
                    w.cpus[cpu as usize].cfd_locked.set(t);
                    fx.write(layout::csd(cpu, t));
                    // __smp_call_single_queue: llist_add; IPI only if the list was empty.
                    let q = &mut w.cpus[t as usize].call_single_queue;
                    let was_empty = q.is_empty();
                    w.counters.csd_queued += 1;
                    q.push(Csd {
                        initiator: cpu,
                        func: self.func,
                    });
                    fx.write(layout::call_single_queue(t));
                    if was_empty {
                        ipi.set(t);
                    }
                }
                native_send_call_func_ipi(w, cpu, &ipi, fx);
                // SCF_RUN_LOCAL: local_irq_save(); func(info); local_irq_restore();
                if self.run_local && self.mask.test(cpu) && cond(w, self.cond, self.func, cpu, fx) {
                    run_func(w, cpu, self.func, fx);
                }
                self.pc = Pc::Wait;
                if self.queued.is_empty() || w.cfg.inject.no_ipi_wait {
                    Flow::Return
                } else {
                    Flow::Block
                }
            }
            Pc::Wait => {
                // The last polls of each csd line see the targets' unlock stores.
                let mut batch = false;
                for t in self.queued.iter() {
                    fx.line(layout::csd(cpu, t), false, batch);
                    batch = true;
                }
                fx.label(Label::WaitDone);
                Flow::Return
            }
        }
    }
}

/// arch/x86/kernel/apic/ipi.c: `native_send_call_func_ipi` (and
/// `send_call_function_single_ipi` for one target), as
/// `smp_call_function_many_cond` sends them once every csd is queued. With
/// `apic_use_ipi_shorthand` (every present CPU online, as here) a mask of
/// all online CPUs but this one is one ICR write with the all-but-self
/// shorthand; any other mask is one x2APIC ICR write per target (x2APIC
/// `__x2apic_send_IPI_mask` loops over the mask). arm64 and RISC-V send per
/// target here.
pub fn native_send_call_func_ipi(w: &mut World, cpu: CpuId, ipi: &CpuMask, fx: &mut Effects) {
    let n = ipi.weight();
    if n == 0 {
        return;
    }
    let shorthand = w.cfg.arch == machine::scenario::Arch::X86
        && n > 1
        && n as usize == w.cpus.len() - 1
        && !ipi.test(cpu);
    if shorthand {
        fx.cost(Cost::IpiSend, 1);
    }
    for t in ipi.iter() {
        if !shorthand {
            fx.cost(Cost::IpiSend, 1);
        }
        w.cpus[t as usize].ipi_pending = true;
        w.counters.ipis_sent += 1;
        fx.ipi(t);
    }
    let first = ipi.first().unwrap_or(cpu);
    fx.label(Label::SendIpis { n, first });
}

/// arch/x86/kernel/smp.c: `sysvec_call_function` (and
/// `sysvec_call_function_single`; arm64/RISC-V `IPI_CALL_FUNC`) → kernel/smp.c:
/// `generic_smp_call_function_interrupt` → `__flush_smp_call_function_queue`:
/// count the interrupt in the CAL row (x86 counts both vectors in
/// `irq_call_count`), take the whole queue, run each function and unlock
/// its csd.
pub fn sysvec_call_function(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    let c = cpu as usize;
    w.cpus[c].ipi_pending = false;
    w.counters.irq_cal[c] += 1;
    fx.cost(Cost::IrqEntry, 1);
    fx.label(Label::IrqEntry);
    flush_smp_call_function_queue(w, cpu, fx);
    fx.cost(Cost::IrqExit, 1);
}

/// kernel/smp.c: `__flush_smp_call_function_queue`, from the interrupt or
/// from the idle loop (`do_idle` → `flush_smp_call_function_queue`: a
/// polling idle CPU woken without an IPI, [`send_call_function_single_ipi`]).
pub fn flush_smp_call_function_queue(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    let c = cpu as usize;
    // llist_del_all(), then run in queueing order (llist_reverse_order).
    // llist_del_all is an xchg, fully ordered: the handler's loads see
    // what the initiator stored before its llist_add.
    crate::hw::memory_model::barrier(w, cpu, None, crate::hw::memory_model::Order::Full, fx);
    fx.write(layout::call_single_queue(cpu));
    let mut entries = std::mem::take(&mut w.cpus[c].call_single_queue);
    for csd in entries.drain(..) {
        fx.cost(Cost::CsdRun, 1);
        if csd.func.is_ttwu() {
            // The wake-list entries: sched_ttwu_pending.
            run_func(w, cpu, csd.func, fx);
            continue;
        }
        fx.read(layout::csd(csd.initiator, cpu));
        run_func(w, cpu, csd.func, fx);
        // csd_unlock(): release store the initiator's csd_lock_wait sees.
        fx.write(layout::csd(csd.initiator, cpu));
        let locked = &mut w.cpus[csd.initiator as usize].cfd_locked;
        locked.clear(cpu);
        fx.label(Label::CsdUnlock {
            initiator: csd.initiator,
        });
        if locked.is_empty() || csd_lock_waits_for(w, csd.initiator, cpu) {
            fx.wake(csd.initiator);
        }
    }
    w.cpus[c].call_single_queue = entries;
}

/// kernel/smp.c: `__smp_call_single_queue(cpu, node)` from `this_cpu`:
/// `llist_add` to `cpu`'s `call_single_queue`, and
/// [`send_call_function_single_ipi`] only if the list was empty (an
/// interrupt on its way runs every entry queued by then).
pub fn __smp_call_single_queue(
    w: &mut World,
    this_cpu: CpuId,
    cpu: CpuId,
    csd: Csd,
    fx: &mut Effects,
) {
    let ttwu = csd.func.is_ttwu();
    // llist_add is a locked cmpxchg: the store buffer drains.
    crate::hw::memory_model::barrier(w, this_cpu, None, crate::hw::memory_model::Order::Full, fx);
    let q = &mut w.cpus[cpu as usize].call_single_queue;
    let was_empty = q.is_empty();
    q.push(csd);
    fx.write(layout::call_single_queue(cpu));
    if was_empty {
        let sent = w.counters.ipis_sent;
        send_call_function_single_ipi(w, this_cpu, cpu, fx);
        if ttwu {
            w.counters.ttwu_ipis += w.counters.ipis_sent - sent;
        }
    }
}

/// kernel/sched/core.c: `send_call_function_single_ipi(cpu)`: no IPI when
/// `set_nr_if_polling(rq->idle)` succeeds, i.e. `cpu` runs its idle task
/// and that task polls (the profile's `[idle] polls`: x86 MWAIT idle); the
/// idle loop then sees `need_resched`, leaves, and runs the queue itself
/// (`flush_smp_call_function_queue` in `do_idle`), with no interrupt
/// counted. Else `arch_send_call_function_single_ipi`.
pub fn send_call_function_single_ipi(w: &mut World, this_cpu: CpuId, cpu: CpuId, fx: &mut Effects) {
    if w.cfg.idle_polls && w.cpus[cpu as usize].curr.is_none() {
        // trace_sched_wake_idle_without_ipi(cpu)
        w.counters.wake_idle_without_ipi += 1;
        fx.wake(cpu);
        return;
    }
    let mut m = CpuMask::new(w.cpus.len());
    m.set(cpu);
    native_send_call_func_ipi(w, this_cpu, &m, fx);
}

fn cond(w: &World, c: Cond, func: CallFunc, cpu: CpuId, fx: &mut Effects) -> bool {
    match (c, func) {
        (Cond::Always, _) => true,
        (Cond::ShouldFlushTlb, CallFunc::FlushTlbFunc(info)) => should_flush_tlb(w, cpu, info, fx),
        (Cond::ShouldFlushTlb, _) => true,
    }
}

fn run_func(w: &mut World, cpu: CpuId, func: CallFunc, fx: &mut Effects) {
    match func {
        CallFunc::FlushTlbFunc(info) => flush_tlb_func(w, cpu, info, fx),
        CallFunc::TlbRemoveTableSmpSync => {}
        CallFunc::IpiFlushTlbRangeAsid(d) => {
            crate::arch::riscv::tlbflush::__ipi_flush_tlb_range_asid(w, cpu, d, fx)
        }
        CallFunc::DoKernelRangeFlush(info) => {
            crate::arch::x86::tlb_kernel::do_kernel_range_flush(w, cpu, info, fx)
        }
        CallFunc::DoFlushTlbAll => crate::arch::x86::tlb_kernel::do_flush_tlb_all(w, cpu, fx),
        CallFunc::SchedTtwuPending(p) => crate::sched::core::sched_ttwu_pending(w, cpu, p, fx),
        CallFunc::KworkerTtwuPending => crate::mm::swap::kworker_ttwu_pending(w, cpu, fx),
    }
}

/// kernel/smp.c: `csd_lock()` → `csd_lock_wait()` on this CPU's csd for
/// each target of `mask`: true (and `busy` set) when some is still locked
/// by an earlier call. The kernel tests each target after its `cond_func`;
/// the model waits for every target of the mask (a superset).
fn csd_lock_busy(w: &World, cpu: CpuId, mask: &CpuMask, busy: &mut CpuMask) -> bool {
    let locked = &w.cpus[cpu as usize].cfd_locked;
    if locked.is_empty() {
        // No csd of this CPU is locked (the common case): nothing to scan.
        return !busy.is_empty();
    }
    for t in mask.iter().filter(|&t| t != cpu && locked.test(t)) {
        busy.set(t);
    }
    !busy.is_empty()
}

/// Is the task running on `initiator` spinning in `csd_lock()` for its csd
/// to `target`?
fn csd_lock_waits_for(w: &World, initiator: CpuId, target: CpuId) -> bool {
    let Some(t) = w.cpus[initiator as usize].curr else {
        return false;
    };
    matches!(
        w.tasks[t as usize].kstack.last(),
        Some(crate::world::Frame::SmpCallFunctionManyCond(f)) if f.pc == Pc::CsdLock && f.csd_busy.test(target)
    )
}
