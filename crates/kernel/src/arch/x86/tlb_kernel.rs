//! arch/x86/mm/tlb.c, the flushes that carry no mm: `flush_tlb_kernel_range`
//! (vfree/vunmap) and `arch_tlbbatch_flush` (reclaim's batched unmap flush,
//! `try_to_unmap_flush`). Both fill a `struct flush_tlb_info` with
//! `mm = NULL` through `get_flush_tlb_info` (the per-CPU one upstream, the
//! caller's stack with seed (a) v7 patch 12/14), so `x86.flush_tlb_info`
//! moves their cache lines as it moves `flush_tlb_mm_range`'s.
//!
//! ```text
//!  flush_tlb_kernel_range(start, end)            arch_tlbbatch_flush(batch)
//!   guard(preempt); get_flush_tlb_info(NULL..)    get_cpu(); get_flush_tlb_info(NULL, 0, ALL)
//!   > ceiling? on_each_cpu(do_flush_tlb_all)      others in batch->cpumask? flush_tlb_multi
//!   else on_each_cpu(do_kernel_range_flush)       only this CPU? flush_tlb_func (local)
//!   put_flush_tlb_info                            cpumask_clear; put_flush_tlb_info; put_cpu
//! ```

use crate::arch::x86::tlb::{
    flush_tlb_func, flush_tlb_multi, get_flush_tlb_info, info_lines, InfoRef,
};
use crate::effects::{Effects, Label};
use crate::kernel_smp::{CallFunc, Cond, SmpCallFunctionManyCond};
use crate::world::{Flow, Frame, World};
use crate::{MmId, TaskId, TLB_FLUSH_ALL, TLB_GENERATION_INVALID};
use machine::{Cost, CpuId, CpuMask, PAGE_SHIFT, PAGE_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// Pin the CPU, `get_flush_tlb_info()`.
    Start,
    /// Send the IPIs (or flush locally).
    Dispatch,
    /// `put_flush_tlb_info()`, unpin.
    Done,
}

/// `flush_tlb_kernel_range(start, end)` (x86) in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlushTlbKernelRange {
    pub start: u64,
    pub end: u64,
    pub info: Option<InfoRef>,
    pub pc: Pc,
}

impl FlushTlbKernelRange {
    pub fn new(start: u64, end: u64) -> Self {
        FlushTlbKernelRange {
            start,
            end,
            info: None,
            pc: Pc::Start,
        }
    }

    /// arch/x86/mm/tlb.c: `flush_tlb_kernel_range` → `kernel_tlb_flush_all` /
    /// `kernel_tlb_flush_range`: `on_each_cpu` (every online CPU, lazy or
    /// idle ones included: kernel entries are global), or INVLPGB.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Start => {
                // guard(preempt)()
                w.preempt_disable(cpu);
                self.info = Some(get_flush_tlb_info(
                    w,
                    cpu,
                    task,
                    None,
                    self.start,
                    self.end,
                    PAGE_SHIFT as u8,
                    false,
                    TLB_GENERATION_INVALID,
                    fx,
                ));
                self.pc = Pc::Dispatch;
                Flow::Yield
            }
            Pc::Dispatch => {
                let info = self.info.expect("info set at Start");
                self.pc = Pc::Done;
                w.counters.kernel_range_flushes += 1;
                let all = w.flush_info(info).end == TLB_FLUSH_ALL;
                if w.cfg.invlpgb {
                    invlpgb_kernel_flush(w, info, fx);
                    return Flow::Yield;
                }
                let func = if all {
                    CallFunc::DoFlushTlbAll
                } else {
                    CallFunc::DoKernelRangeFlush(info)
                };
                Flow::Call(on_each_cpu(w, func))
            }
            Pc::Done => {
                put_flush_tlb_info(w, self.info);
                w.preempt_enable(cpu);
                Flow::Return
            }
        }
    }
}

/// include/linux/smp.h: `on_each_cpu(func, info, 1)` =
/// `on_each_cpu_cond_mask(NULL, func, info, true, cpu_online_mask)`: every
/// other online CPU by IPI, this one with IRQs off, and wait.
fn on_each_cpu(w: &World, func: CallFunc) -> Frame {
    let mut mask = CpuMask::new(w.cpus.len());
    (0..w.cpus.len()).for_each(|c| mask.set(c as CpuId));
    Frame::SmpCallFunctionManyCond(SmpCallFunctionManyCond::new(mask, func, Cond::Always))
}

/// arch/x86/mm/tlb.c: `put_flush_tlb_info`: the per-CPU struct is free again.
fn put_flush_tlb_info(w: &mut World, info: Option<InfoRef>) {
    if let Some(InfoRef::PerCpu(c)) = info {
        w.cpus[c as usize].flush_info_busy = false;
    }
}

/// arch/x86/mm/tlb.c: `kernel_tlb_flush_all` / `invlpgb_kernel_range_flush`
/// with X86_FEATURE_INVLPGB: `invlpgb_flush_all()`, or one INVLPGB per
/// `invlpgb_count_max` pages, then `__tlbsync()`. No IPI.
fn invlpgb_kernel_flush(w: &mut World, r: InfoRef, fx: &mut Effects) {
    let f = *w.flush_info(r);
    let n = if f.end == TLB_FLUSH_ALL {
        w.cpus.iter_mut().for_each(|c| c.tlb.flush_all());
        1
    } else {
        let pages = (f.end - f.start).div_ceil(PAGE_SIZE);
        for c in w.cpus.iter_mut() {
            (0..pages).for_each(|i| c.tlb.flush_va(f.start + i * PAGE_SIZE));
        }
        pages
            .div_ceil(crate::arch::x86::tlb::INVLPGB_COUNT_MAX)
            .max(1)
    };
    fx.cost(Cost::Invlpgb, n as u32);
    fx.cost(Cost::Tlbsync, 1);
    w.counters.invlpgb += n;
    w.counters.tlbsync += 1;
}

/// arch/x86/mm/tlb.c: `do_kernel_range_flush`: one `flush_tlb_one_kernel`
/// (INVLPG, which drops global entries too) per page of `info`. No
/// `irq_tlb_count`: a kernel-range flush counts in the CAL row only.
pub fn do_kernel_range_flush(w: &mut World, cpu: CpuId, r: InfoRef, fx: &mut Effects) {
    let (addr, len) = info_lines(w, r);
    fx.lines(addr, len, false);
    let f = *w.flush_info(r);
    let mut n = 0u32;
    let mut a = f.start;
    while a < f.end {
        w.cpus[cpu as usize].tlb.flush_va(a);
        a += PAGE_SIZE;
        n += 1;
    }
    w.counters.invlpg += n as u64;
    fx.cost(Cost::Invlpg, n);
    fx.label(Label::KernelRangeFlush { pages: n as u64 });
}

/// arch/x86/mm/tlb.c: `do_flush_tlb_all` → `__flush_tlb_all` →
/// `__flush_tlb_global`: every entry of every PCID, global ones included.
pub fn do_flush_tlb_all(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    w.cpus[cpu as usize].tlb.flush_all();
    w.counters.full_flushes += 1;
    fx.cost(Cost::FlushTlbGlobal, 1);
    fx.label(Label::KernelRangeFlush {
        pages: TLB_FLUSH_ALL,
    });
}

/// `struct arch_tlbflush_unmap_batch` (arch/x86/include/asm/tlbbatch.h):
/// the CPUs that may cache a translation reclaim unmapped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArchTlbflushUnmapBatch {
    pub cpumask: CpuMask,
    /// `unmapped_pages`: something was unmapped since the last flush (the
    /// INVLPGB branch of `arch_tlbbatch_flush` reads it).
    pub unmapped_pages: bool,
}

/// arch/x86/include/asm/tlbflush.h: `arch_tlbbatch_should_defer`: defer
/// only if another CPU is in `mm_cpumask(mm)` (a flush of this CPU alone
/// is cheaper done at once).
pub fn arch_tlbbatch_should_defer(w: &World, cpu: CpuId, mm: MmId) -> bool {
    w.mms[mm as usize].cpumask.any_but(cpu)
}

/// arch/x86/include/asm/tlbflush.h: `arch_tlbbatch_add_pending`:
/// `inc_mm_tlb_gen(mm)`, `cpumask_or(&batch->cpumask, mm_cpumask(mm))`,
/// `batch->unmapped_pages = true`.
pub fn arch_tlbbatch_add_pending(
    w: &mut World,
    batch: &mut ArchTlbflushUnmapBatch,
    mm: MmId,
    fx: &mut Effects,
) {
    fx.cost(Cost::AtomicOp, 1);
    fx.write(crate::world::layout::mm_tlb_gen(mm));
    *w.mms[mm as usize].tlb_gen += 1;
    for c in w.mms[mm as usize].cpumask.iter() {
        batch.cpumask.set(c);
    }
    batch.unmapped_pages = true;
    fx.label(Label::TlbBatch {
        flush: false,
        cpus: batch.cpumask.weight(),
    });
}

/// `arch_tlbbatch_flush(batch)` (x86) in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArchTlbbatchFlush {
    pub batch: ArchTlbflushUnmapBatch,
    pub info: Option<InfoRef>,
    pub pc: Pc,
}

impl ArchTlbbatchFlush {
    pub fn new(batch: ArchTlbflushUnmapBatch) -> Self {
        ArchTlbbatchFlush {
            batch,
            info: None,
            pc: Pc::Start,
        }
    }

    /// arch/x86/mm/tlb.c: `arch_tlbbatch_flush`: with INVLPGB, one
    /// `invlpgb_flush_all_nonglobals()` and no IPI; else a full flush
    /// (`TLB_FLUSH_ALL`, `TLB_GENERATION_INVALID`) on every CPU of the
    /// batch: `flush_tlb_multi` when another CPU is in it (lazy ones are
    /// filtered: `freed_tables` is false), else a local `flush_tlb_func`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Start => {
                fx.label(Label::TlbBatch {
                    flush: true,
                    cpus: self.batch.cpumask.weight(),
                });
                // get_cpu()
                w.preempt_disable(cpu);
                self.info = Some(get_flush_tlb_info(
                    w,
                    cpu,
                    task,
                    None,
                    0,
                    TLB_FLUSH_ALL,
                    0,
                    false,
                    TLB_GENERATION_INVALID,
                    fx,
                ));
                self.pc = Pc::Dispatch;
                Flow::Yield
            }
            Pc::Dispatch => {
                let info = self.info.expect("info set at Start");
                self.pc = Pc::Done;
                w.counters.tlbbatch_flushes += 1;
                let mask = std::mem::replace(&mut self.batch.cpumask, CpuMask::new(w.cpus.len()));
                if w.cfg.invlpgb && std::mem::take(&mut self.batch.unmapped_pages) {
                    invlpgb_flush_all_nonglobals(w, fx);
                    return Flow::Yield;
                }
                if mask.any_but(cpu) {
                    return flush_tlb_multi(w, mask, info, fx);
                }
                if mask.test(cpu) {
                    // local_irq_disable(); flush_tlb_func(info); local_irq_enable();
                    flush_tlb_func(w, cpu, info, fx);
                }
                Flow::Yield
            }
            Pc::Done => {
                put_flush_tlb_info(w, self.info);
                w.preempt_enable(cpu);
                Flow::Return
            }
        }
    }
}

/// arch/x86/include/asm/tlb.h: `invlpgb_flush_all_nonglobals`: one INVLPGB
/// of every non-global translation on every CPU, then TLBSYNC. The model
/// drops the global (kernel) entries too: an over-flush, safe, that costs
/// only kernel TLB misses.
pub(crate) fn invlpgb_flush_all_nonglobals(w: &mut World, fx: &mut Effects) {
    w.cpus.iter_mut().for_each(|c| c.tlb.flush_all());
    fx.cost(Cost::Invlpgb, 1);
    fx.cost(Cost::Tlbsync, 1);
    w.counters.invlpgb += 1;
    w.counters.tlbsync += 1;
}
