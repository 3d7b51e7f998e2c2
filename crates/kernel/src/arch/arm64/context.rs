//! arch/arm64/mm/context.c: `check_and_switch_context` as the checker runs
//! it (`split_steps`): the lockless fast path's reads, its `cmpxchg` and
//! the slow path under `cpu_asid_lock` are steps of their own, so a
//! rollover on another CPU can run between them. The simulator runs the
//! whole switch in one step ([`crate::arch::asid::asid_for_switch`]).
//!
//! The race it exposes is the one the kernel's comment in
//! `check_and_switch_context` argues about: the fast path reads
//! `active_asids` and the generation with relaxed loads (they may be
//! older than memory), then `atomic64_cmpxchg_relaxed`es `active_asids`.
//! A concurrent `flush_context` `xchg`es every CPU's `active_asids` to 0;
//! atomics on one location are totally ordered, so either the `cmpxchg`
//! came first (and the rollover reserves that ASID) or it finds 0 and the
//! slow path runs, where taking the lock shows the new generation.

use crate::arch::asid::{fast_path_cmpxchg, fast_path_reads, slow_path};
use crate::effects::{Effects, Label};
use crate::world::{Flow, Frame, World};
use crate::MmId;
use machine::{Cost, CpuId};

/// Where [`CheckAndSwitchContext`] resumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContextPc {
    /// `atomic64_cmpxchg_relaxed(this_cpu_ptr(&active_asids), old, asid)`.
    Cmpxchg,
    /// `raw_spin_lock_irqsave(&cpu_asid_lock)` and what follows.
    SlowPath,
}

/// `check_and_switch_context(next)` in progress (IRQs off, as in
/// `context_switch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CheckAndSwitchContext {
    pub next: MmId,
    pub prev: MmId,
    pub pc: ContextPc,
    /// The `active_asids` value the fast path read.
    pub old_active: u64,
    /// The mm's `context.id` the fast path read.
    pub asid: u64,
}

/// `context_switch` → `switch_mm` → `check_and_switch_context(next)`, split:
/// the fast path's reads run in the context-switch step, the rest is
/// pushed on the incoming task's stack and runs before anything it does.
pub fn check_and_switch_context_begin(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) {
    let t = w.cpus[cpu as usize]
        .curr
        .expect("context_switch picked a task");
    let prev = w.cpus[cpu as usize].tlbstate.loaded_mm;
    w.local_irq_disable(cpu);
    let (asid, old_active, fast) = fast_path_reads(w, cpu, next, fx);
    let f = CheckAndSwitchContext {
        next,
        prev,
        pc: if fast {
            ContextPc::Cmpxchg
        } else {
            ContextPc::SlowPath
        },
        old_active,
        asid,
    };
    w.tasks[t as usize]
        .kstack
        .push(Frame::Arm64CheckAndSwitchContext(f));
}

impl CheckAndSwitchContext {
    /// arch/arm64/mm/context.c: `check_and_switch_context`, one window per step.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) -> Flow {
        match self.pc {
            ContextPc::Cmpxchg => {
                if !fast_path_cmpxchg(w, cpu, self.old_active, self.asid) {
                    // A rollover zeroed active_asids: take the lock.
                    self.pc = ContextPc::SlowPath;
                    return Flow::Yield;
                }
                // switch_mm_fastpath:
                let asid = w.asids.idx(self.asid);
                self.cpu_switch_mm(w, cpu, asid, false, fx)
            }
            ContextPc::SlowPath => {
                let (asid, flush) = slow_path(w, cpu, self.next, fx);
                if flush {
                    // local_flush_tlb_all()
                    w.cpus[cpu as usize].tlb.flush_all();
                    w.counters.full_flushes += 1;
                    fx.cost(Cost::FlushTlbLocal, 1);
                }
                self.cpu_switch_mm(w, cpu, asid, flush, fx)
            }
        }
    }

    /// `cpu_switch_mm`: TTBR0 with the ASID; then `local_irq_enable()`
    /// after `context_switch`.
    fn cpu_switch_mm(
        &self,
        w: &mut World,
        cpu: CpuId,
        asid: u16,
        flush: bool,
        fx: &mut Effects,
    ) -> Flow {
        fx.cost(Cost::Cr3Write, 1);
        w.counters.cr3_writes += 1;
        let ts = &mut w.cpus[cpu as usize].tlbstate;
        ts.loaded_mm = self.next;
        ts.loaded_mm_asid = asid;
        fx.label(Label::SwitchMm {
            from: self.prev,
            to: self.next,
            flush,
        });
        w.local_irq_enable(cpu);
        Flow::Return
    }
}
