//! arch/riscv/mm/tlbflush.c, with seed (d) (RFC v1, patches 1-4): a hart in
//! `mm_cpumask` that is not running the ASID being flushed gets the flush
//! queued instead of an IPI, and applies it in `switch_mm` before it runs
//! that ASID again (or in the next flush IPI it takes).
//!
//! ```text
//!  flusher (should_ipi_flush)                target hart (set_mm_asid)
//!  ─────────────────────────────────         ─────────────────────────────
//!  loaded_asid(target) == asid ? IPI         loaded_asid = next_asid
//!  queue full ? IPI : enqueue(range)         fence w,r
//!  need_tlb_flush = true; fence w,r          need_tlb_flush ? drain queue
//!  loaded_asid(target) == asid ? IPI : skip
//! ```
//! Each side writes, fences, then reads the other's variable: either the
//! flusher sees the new `loaded_asid` (and IPIs), or the switcher sees the
//! queued entry (and applies it). Reading `loaded_asid` only before the
//! enqueue (`riscv.unordered_enqueue`) loses that: the target can switch in
//! between, apply an empty queue, and run on stale entries.

use crate::effects::{Effects, Label};
use crate::hw::memory_model::{self as mo, Loc, Order};
use crate::kernel_smp::{CallFunc, Cond, SmpCallFunctionManyCond};
use crate::world::{Flow, Frame, World};
use crate::{MmId, TaskId, TLB_FLUSH_ALL};
use machine::scenario::Rfence;
use machine::{Cost, CpuId, CpuMask, PAGE_SIZE};

/// `FLUSH_TLB_NO_ASID` (`(unsigned long)-1`): a kernel-address-space flush.
/// Wider than any `satp.ASID` (at most 16 bits), so it never names a user
/// ASID (65535 is a valid one with 16-bit ASIDs).
pub const FLUSH_TLB_NO_ASID: u32 = u32::MAX;

/// The hardware ASID a flush names, for TLB operations and labels
/// (`None` for `FLUSH_TLB_NO_ASID`).
fn user_asid(asid: u32) -> Option<u16> {
    u16::try_from(asid).ok()
}

/// Per-hart state of seed (d): `loaded_asid`, the deferred-flush queue,
/// and (for `riscv.cpumask_clear_threshold`) the mms this hart ran lately.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HartTlbState {
    /// `per_cpu(loaded_asid)`: the ASID this hart runs user code under.
    pub loaded_asid: u16,
    /// `per_cpu(tlb_flush_queue)`: flushes queued for this hart while it
    /// was not running their ASID (at most `riscv.flush_queue_depth`,
    /// the patch's `TLB_FLUSH_QUEUE_SIZE` = 16).
    pub queue: Vec<FlushTlbRangeData>,
    /// `per_cpu(need_tlb_flush)`: set after an enqueue, cleared by the drain.
    pub need_flush: bool,
    /// mms this hart left, with the switches it made since.
    pub recent: Vec<(MmId, u32)>,
}

/// `struct flush_tlb_range_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushTlbRangeData {
    /// The mm (the mask-clearing patch passes it instead of the ASID).
    pub mm: Option<MmId>,
    /// A user ASID, or `FLUSH_TLB_NO_ASID`.
    pub asid: u32,
    pub start: u64,
    pub size: u64,
    pub stride: u64,
}

/// `local_flush_tlb_range_asid`: one `sfence.vma` per page up to
/// `tlb_flush_all_threshold` pages, else the whole ASID (all, for the kernel).
pub fn local_flush_tlb_range_asid(
    w: &mut World,
    cpu: CpuId,
    d: FlushTlbRangeData,
    fx: &mut Effects,
) {
    let c = cpu as usize;
    let pages = if d.size == TLB_FLUSH_ALL {
        u64::MAX
    } else {
        d.size.div_ceil(d.stride)
    };
    if pages <= w.cfg.riscv.tlb_flush_all_threshold as u64 {
        match user_asid(d.asid) {
            // sfence.vma va, asid: leaf entries only.
            Some(asid) => {
                let end = d.start + pages * d.stride;
                w.cpus[c]
                    .tlb
                    .flush_range(asid, (d.start, end, d.stride), true);
            }
            // local_flush_tlb_page: sfence.vma va (every ASID, globals too).
            None => {
                let mut a = d.start;
                for _ in 0..pages {
                    w.cpus[c].tlb.flush_va(a);
                    a += d.stride;
                }
            }
        }
        w.counters.sfence_vma += pages;
        fx.cost(Cost::SfenceVma, pages as u32);
        fx.label(Label::SfenceVma {
            asid: user_asid(d.asid).unwrap_or(u16::MAX),
            va: d.start,
            all: false,
        });
    } else {
        match user_asid(d.asid) {
            Some(asid) => w.cpus[c].tlb.flush_asid(asid),
            None => w.cpus[c].tlb.flush_all(),
        }
        w.counters.sfence_vma += 1;
        w.counters.full_flushes += 1;
        fx.cost(Cost::SfenceVmaAsid, 1);
        fx.label(Label::SfenceVma {
            asid: user_asid(d.asid).unwrap_or(u16::MAX),
            va: 0,
            all: true,
        });
        clear_cpu_after_flush_all(w, cpu, d.mm, fx);
    }
}

/// arch/riscv/include/asm/tlb.h: `tlb_flush`: `flush_tlb_mm` when the
/// gather tore down the whole mm (`fullmm`, exit) or freed page tables (a
/// per-address `sfence.vma` leaves non-leaf walk-cache entries), else
/// `flush_tlb_mm_range` of what the gather covered.
pub fn tlb_flush(w: &World, task: TaskId) -> Flow {
    let g = &w.tasks[task as usize].gather;
    if !g.needs_flush() {
        return Flow::Continue;
    }
    // inject.riscv_leaf_only_table_flush: the variant that forgets the
    // walk cache (per-address sfence.vma although tables were freed).
    let (mm, start, end) = if g.freed_tables && !w.cfg.inject.riscv_leaf_only_table_flush {
        (g.mm, 0, TLB_FLUSH_ALL)
    } else {
        (g.mm, g.start, g.end)
    };
    Flow::Call(Frame::RiscvFlushTlbRange(FlushTlbRange::new(
        w,
        Some(mm),
        start,
        end,
    )))
}

/// kernel/exit.c → mm/mmap.c: `exit_mmap` → `tlb_finish_mmu` (`fullmm`) →
/// `tlb_flush` → `flush_tlb_mm`: the last task of an mm flushes its ASID on
/// every hart of `mm_cpumask` once, as it exits: for an mm with a hugetlb
/// VMA, which `mm::mmap::exit_mm` does not tear down (the model keeps its
/// pages and tables; only the flush is modelled). `None`: exit at once.
pub fn exit_mmap(w: &mut World, task: TaskId) -> Option<Flow> {
    let t = &w.tasks[task as usize];
    let mm = t.mm;
    if w.cfg.arch != machine::scenario::Arch::Riscv || t.us.sub != 0 || mm == crate::INIT_MM {
        return None;
    }
    if !crate::mm::mmap::last_user(w, task) {
        return None;
    }
    w.tasks[task as usize].us.sub = 1;
    Some(Flow::Call(Frame::RiscvFlushTlbRange(FlushTlbRange::new(
        w,
        Some(mm),
        0,
        TLB_FLUSH_ALL,
    ))))
}

/// The mask-clearing patch (`riscv.cpumask_clear_on_flush_all`): after
/// `local_flush_tlb_all_asid`, `if (mm && mm != current->active_mm)
/// cpumask_clear_cpu(cpu, mm_cpumask(mm))`: this hart holds nothing of the
/// mm any more, and `switch_mm` sets the bit again before it runs the mm.
/// A hart idle after the mm still has it as `active_mm` and stays.
fn clear_cpu_after_flush_all(w: &mut World, cpu: CpuId, mm: Option<MmId>, fx: &mut Effects) {
    let Some(mm) = mm else { return };
    if !w.cfg.riscv.cpumask_clear_on_flush_all || w.cpus[cpu as usize].tlbstate.loaded_mm == mm {
        return;
    }
    if crate::arch::riscv::context::mm_cpumask_test_own(w, cpu, mm, fx) {
        crate::arch::riscv::context::mm_cpumask_store(w, cpu, mm, false, fx);
        w.counters.cpumask_cleared += 1;
    }
}

/// `__ipi_flush_tlb_range_asid`: the IPI handler's work; with seed (d) it
/// also drains this hart's whole queue when `need_tlb_flush` is set (a
/// target whose queue was full, or that loaded the ASID while the flusher
/// enqueued, is IPI'd and applies everything queued for it).
pub fn __ipi_flush_tlb_range_asid(
    w: &mut World,
    cpu: CpuId,
    d: FlushTlbRangeData,
    fx: &mut Effects,
) {
    fx.cost(Cost::FlushTlbFuncFixed, 1);
    local_flush_tlb_range_asid(w, cpu, d, fx);
    if mo::read_once(w, cpu, Loc::NeedTlbFlush(cpu), fx) != 0 {
        let asid = mo::read_once(w, cpu, Loc::LoadedAsid(cpu), fx) as u16;
        local_tlb_flush_queue_drain(w, cpu, asid, fx);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `get_cpu()`, the mask, the local-only case.
    Start,
    /// Seed (d), `should_ipi_flush` up to its fence: a target running the
    /// ASID is IPI'd at once; one with a full queue too; the others get an
    /// entry and `need_tlb_flush`.
    Enqueue,
    /// Seed (d), after `smp_mb()`: targets now running the ASID keep their IPI.
    CheckLoaded,
    /// `riscv.unordered_enqueue`: read `loaded_asid` first ...
    ReadLoadedFirst,
    /// ... and enqueue afterwards.
    EnqueueLate,
    /// SBI remote fence or `on_each_cpu_mask`.
    Send,
    /// `put_cpu()`.
    Done,
}

/// `__flush_tlb_range(mm, cmask, start, size, stride)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlushTlbRange {
    /// `None`: `flush_tlb_kernel_range` (all online harts, no ASID).
    pub mm: Option<MmId>,
    pub d: FlushTlbRangeData,
    pub cmask: CpuMask,
    /// Targets this flush queued an entry for.
    pub deferred: CpuMask,
    pub pc: Pc,
}

impl FlushTlbRange {
    pub fn new(w: &World, mm: Option<MmId>, start: u64, end: u64) -> Self {
        let n = w.cpus.len();
        let cmask = match mm {
            // mm_cpumask(mm) is read in the first step (`Pc::Start`,
            // through this hart's store buffer: `read_mm_cpumask`).
            Some(_) => CpuMask::new(n),
            None => {
                let mut all = CpuMask::new(n);
                (0..n).for_each(|c| all.set(c as CpuId));
                all
            }
        };
        let asid = match mm {
            Some(m) if w.cfg.riscv.asid_bits > 0 => {
                u32::from(w.asids.idx(*w.mms[m as usize].context_id))
            }
            Some(_) => 0,
            None => FLUSH_TLB_NO_ASID,
        };
        let size = if end == TLB_FLUSH_ALL {
            TLB_FLUSH_ALL
        } else {
            end - start
        };
        FlushTlbRange {
            mm,
            d: FlushTlbRangeData {
                mm,
                asid,
                start,
                size,
                stride: PAGE_SIZE,
            },
            cmask,
            deferred: CpuMask::new(n),
            pc: Pc::Start,
        }
    }

    /// arch/riscv/mm/tlbflush.c: `arch_tlbbatch_flush`:
    /// `__flush_tlb_range(&batch->cpumask, FLUSH_TLB_NO_ASID, 0,
    /// FLUSH_TLB_MAX_SIZE, PAGE_SIZE)`: every translation of every ASID on
    /// the batch's harts (the batch does not know the mms or addresses).
    pub fn tlbbatch(w: &mut World, batch: ArchTlbflushUnmapBatch) -> Self {
        w.counters.tlbbatch_flushes += 1;
        FlushTlbRange {
            mm: None,
            d: FlushTlbRangeData {
                mm: None,
                asid: FLUSH_TLB_NO_ASID,
                start: 0,
                size: TLB_FLUSH_ALL,
                stride: PAGE_SIZE,
            },
            deferred: CpuMask::new(w.cpus.len()),
            cmask: batch.cpumask,
            pc: Pc::Start,
        }
    }

    /// Seed (d) only replaces `on_each_cpu_mask`: the
    /// `riscv_use_sbi_for_rfence()` branch comes first and is unchanged, so
    /// with SBI remote fences nothing is deferred.
    fn may_defer(&self, w: &World) -> bool {
        let r = &w.cfg.riscv;
        r.rfence == Rfence::Ipi
            && r.defer_flush_to_context_switch
            && (self.mm.is_some() || r.defer_kernel_flush)
    }

    /// arch/riscv/mm/tlbflush.c: `__flush_tlb_range`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, _task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Start => {
                w.preempt_disable(cpu);
                fx.cost(Cost::FlushInfoInit, 1);
                if let Some(mm) = self.mm {
                    self.cmask = crate::arch::riscv::context::read_mm_cpumask(w, cpu, mm, fx);
                }
                if self.cmask.is_empty() {
                    self.pc = Pc::Done;
                    return Flow::Continue;
                }
                if !self.cmask.any_but(cpu) {
                    local_flush_tlb_range_asid(w, cpu, self.d, fx);
                    self.pc = Pc::Done;
                    return Flow::Yield;
                }
                self.pc = if !self.may_defer(w) {
                    Pc::Send
                } else if w.cfg.riscv.unordered_enqueue {
                    Pc::ReadLoadedFirst
                } else {
                    Pc::Enqueue
                };
                Flow::Continue
            }
            Pc::Enqueue => {
                for t in self.cmask.iter().filter(|&t| t != cpu) {
                    fx.read(crate::world::layout::cpu_tlbstate(t));
                    if mo::read_once(w, cpu, Loc::LoadedAsid(t), fx) as u32 == self.d.asid {
                        count_kept(w, t, self.mm);
                    } else if enqueue(w, cpu, t, self.d, fx) {
                        self.deferred.set(t);
                    }
                }
                self.pc = Pc::CheckLoaded;
                // The need_tlb_flush stores are visible before the loads
                // below: pairs with set_mm_asid's RISCV_FENCE(w,r).
                mo::barrier(w, cpu, Some(mo::SHOULD_IPI_FLUSH_SMP_MB), Order::Full, fx);
                Flow::Yield
            }
            Pc::CheckLoaded => {
                for t in self.deferred.iter() {
                    fx.read(crate::world::layout::cpu_tlbstate(t));
                    if mo::read_once(w, cpu, Loc::LoadedAsid(t), fx) as u32 != self.d.asid {
                        self.cmask.clear(t);
                        w.counters.deferred_flushes += 1;
                    } else {
                        count_kept(w, t, self.mm);
                    }
                }
                fx.label(Label::ReadLoadedAsid {
                    deferring: self
                        .deferred
                        .iter()
                        .filter(|&t| !self.cmask.test(t))
                        .count() as u32,
                    ordered: true,
                });
                self.pc = Pc::Send;
                Flow::Continue
            }
            Pc::ReadLoadedFirst => {
                for t in self.cmask.iter().filter(|&t| t != cpu) {
                    fx.read(crate::world::layout::cpu_tlbstate(t));
                    if mo::read_once(w, cpu, Loc::LoadedAsid(t), fx) as u32 != self.d.asid {
                        self.deferred.set(t);
                    }
                }
                fx.label(Label::ReadLoadedAsid {
                    deferring: self.deferred.weight(),
                    ordered: false,
                });
                self.pc = Pc::EnqueueLate;
                Flow::Yield
            }
            Pc::EnqueueLate => {
                for t in self.deferred.iter() {
                    if enqueue(w, cpu, t, self.d, fx) {
                        self.cmask.clear(t);
                        w.counters.deferred_flushes += 1;
                    }
                }
                self.pc = Pc::Send;
                Flow::Continue
            }
            Pc::Send => {
                self.pc = Pc::Done;
                if !self.cmask.any_but(cpu) {
                    if self.cmask.test(cpu) {
                        local_flush_tlb_range_asid(w, cpu, self.d, fx);
                    }
                    return Flow::Yield;
                }
                match w.cfg.riscv.rfence {
                    Rfence::Sbi => {
                        sbi_remote_sfence_vma_asid(w, cpu, &self.cmask, self.d, fx);
                        Flow::Yield
                    }
                    Rfence::Ipi => Flow::Call(Frame::SmpCallFunctionManyCond(
                        SmpCallFunctionManyCond::new(
                            self.cmask.clone(),
                            CallFunc::IpiFlushTlbRangeAsid(self.d),
                            Cond::Always,
                        ),
                    )),
                }
            }
            Pc::Done => {
                w.preempt_enable(cpu);
                Flow::Return
            }
        }
    }
}

/// `struct arch_tlbflush_unmap_batch` (arch/riscv/include/asm/tlbbatch.h).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArchTlbflushUnmapBatch {
    pub cpumask: CpuMask,
}

/// arch/riscv/mm/tlbflush.c: `arch_tlbbatch_add_pending`:
/// `cpumask_or(&batch->cpumask, &batch->cpumask, mm_cpumask(mm))`.
pub fn arch_tlbbatch_add_pending(w: &World, batch: &mut ArchTlbflushUnmapBatch, mm: MmId) {
    for c in w.mms[mm as usize].cpumask.iter() {
        batch.cpumask.set(c);
    }
}

/// Seed (d): a target kept in the IPI mask because it has the ASID loaded:
/// it runs the mm now, or idles (or runs a kernel thread) after it.
///
/// Counters only ([`crate::world::Counters`], never part of a state): what
/// it reads of the target is not in a footprint.
fn count_kept(w: &mut World, t: CpuId, mm: Option<MmId>) {
    let running = machine::footprint::paused(|| {
        w.cpus[t as usize]
            .curr
            .is_some_and(|c| Some(w.tasks[c as usize].mm) == mm)
    });
    if running {
        w.counters.defer_ipi_running += 1;
    } else {
        w.counters.defer_ipi_loaded += 1;
    }
}

/// Seed (d), `should_ipi_flush`'s locked part: append the flush to
/// `target`'s queue and set its `need_tlb_flush`; a full queue
/// (`TLB_FLUSH_QUEUE_SIZE`) enqueues nothing and the target is IPI'd now.
/// Returns whether the entry was queued. The queue is SC; the flusher's
/// `need_tlb_flush = true` goes through the checker's memory model (it is
/// what `set_mm_asid` tests before it drains).
fn enqueue(
    w: &mut World,
    cpu: CpuId,
    target: CpuId,
    d: FlushTlbRangeData,
    fx: &mut Effects,
) -> bool {
    let depth = w.cfg.riscv.flush_queue_depth as usize;
    let h = &mut w.cpus[target as usize].riscv;
    fx.write(crate::world::layout::call_single_queue(target) + 0x40);
    let overflow = h.queue.len() >= depth;
    if overflow {
        w.counters.deferred_overflows += 1;
    } else {
        h.queue.push(d);
        w.counters.defer_enqueues += 1;
        mo::store(w, cpu, Loc::NeedTlbFlush(target), 1, fx);
    }
    fx.label(Label::DeferFlush {
        cpu: target,
        asid: user_asid(d.asid).unwrap_or(u16::MAX),
        overflow,
    });
    !overflow
}

/// arch/riscv/kernel/sbi.c: `sbi_remote_sfence_vma_asid`: one ecall; the
/// firmware interrupts every target hart in M-mode (invisible to Linux's
/// IRQ-off windows and `/proc/interrupts`), has it run `sfence.vma`, and
/// returns when all are done.
fn sbi_remote_sfence_vma_asid(
    w: &mut World,
    cpu: CpuId,
    cmask: &CpuMask,
    d: FlushTlbRangeData,
    fx: &mut Effects,
) {
    let mut harts = 0u32;
    for t in cmask.iter() {
        if t != cpu {
            harts += 1;
        }
        local_flush_tlb_range_asid(w, t, d, fx);
    }
    fx.cost(Cost::SbiEcall, 1);
    fx.cost(Cost::SbiRfenceHart, harts);
    w.counters.sbi_rfence += 1;
    fx.label(Label::SbiRfence { harts });
}

/// Seed (d): `local_tlb_flush_queue_drain`, called from `set_mm_asid`
/// (after publishing `loaded_asid` and a fence) and from the flush IPI when
/// `need_tlb_flush` is set: clear the flag, then apply every queued flush,
/// whatever its ASID (the flush is deferred "to the next context switch").
pub fn local_tlb_flush_queue_drain(w: &mut World, cpu: CpuId, asid: u16, fx: &mut Effects) {
    let c = cpu as usize;
    if mo::read_once(w, cpu, Loc::NeedTlbFlush(cpu), fx) == 0 {
        return;
    }
    // Cleared under the queue lock with the entries taken (not buffered):
    // a flusher's later need_tlb_flush = true reaching memory afterwards
    // only costs an extra drain of an empty queue.
    mo::write_direct(w, cpu, Loc::NeedTlbFlush(cpu), 0);
    let h = &mut w.cpus[c].riscv;
    let entries = std::mem::take(&mut h.queue);
    w.counters.defer_drains += 1;
    w.counters.deferred_applied += entries.len() as u64;
    fx.label(Label::ApplyDeferred {
        asid,
        n: entries.len() as u32,
        all: false,
    });
    for e in entries {
        local_flush_tlb_range_asid(w, cpu, e, fx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine::tlb::TlbHit;

    fn hit(pfn: machine::Pfn) -> TlbHit {
        TlbHit {
            pfn,
            frame_gen: 0,
            writable: true,
            huge: false,
            owner: 0,
        }
    }

    /// A flush of user ASID 65535 (valid with 16-bit ASIDs) is a flush of
    /// that ASID, not a kernel (`FLUSH_TLB_NO_ASID`) flush of every ASID.
    #[test]
    fn asid_65535_is_a_user_asid() {
        let s = machine::Scenario::from_toml("[machine]\narch = \"riscv\"\ncpus = 2\n", "test")
            .unwrap();
        let mut w = World::new(&s).unwrap();
        let va = 0x4000_0000;
        w.cpus[0].tlb.fill(65535, va, hit(10));
        w.cpus[0].tlb.fill(7, va, hit(11));
        let d = FlushTlbRangeData {
            mm: None,
            asid: 65535,
            start: va,
            size: PAGE_SIZE,
            stride: PAGE_SIZE,
        };
        local_flush_tlb_range_asid(&mut w, 0, d, &mut Effects::default());
        assert!(w.cpus[0].tlb.lookup(65535, va).is_none());
        assert!(w.cpus[0].tlb.lookup(7, va).is_some(), "ASID 7 kept");
    }

    /// A gather that freed a page table flushes the whole ASID (asm/tlb.h:
    /// `freed_tables` gives `flush_tlb_mm`), because a per-address
    /// `sfence.vma` drops leaf entries only and keeps the walk cache.
    /// (Before: a one-page range flush, and `sfence.vma va` dropped the
    /// walk-cache entries too, so a missing non-leaf flush was invisible.)
    #[test]
    fn freed_tables_flush_the_whole_asid() {
        let s = machine::Scenario::from_toml("[machine]\narch = \"riscv\"\ncpus = 2\n", "test")
            .unwrap();
        let mut w = World::new(&s).unwrap();
        let mm = w.mm_alloc().unwrap();
        let t = w.spawn(mm, 0, vec![], false);
        let va = 0x4000_0000;
        let g = &mut w.tasks[t as usize].gather;
        g.tlb_gather_mmu(mm);
        g.remove_table(7, va);
        let mut fx = Effects::default();
        match crate::arch::tlb_flush(&mut w, t, &mut fx) {
            Flow::Call(Frame::RiscvFlushTlbRange(f)) => assert_eq!(f.d.size, TLB_FLUSH_ALL),
            _ => panic!("tlb_flush did not call __flush_tlb_range"),
        }
        w.cpus[0].tlb.psc_fill(3, va, 7, 0);
        let d = FlushTlbRangeData {
            mm: None,
            asid: 3,
            start: va,
            size: PAGE_SIZE,
            stride: PAGE_SIZE,
        };
        local_flush_tlb_range_asid(&mut w, 0, d, &mut fx);
        assert!(
            w.cpus[0].tlb.psc_lookup(3, va).is_some(),
            "sfence.vma va keeps non-leaf"
        );
    }
}
