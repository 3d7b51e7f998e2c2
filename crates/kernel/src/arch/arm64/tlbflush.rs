//! arch/arm64/include/asm/tlbflush.h, arch/arm64/include/asm/tlb.h and
//! arch/arm64/include/asm/mmu_context.h.
//!
//! A broadcast `TLBI ...IS` reaches every core of the inner-shareable
//! domain in hardware: no interrupt, nothing waits for IRQ-off windows. The
//! price is in the interconnect: the model applies the invalidation to every
//! CPU's TLB when the issuing step runs, and the driver prices the
//! `DSB ISH` that completes it ([`crate::effects::Charge::Dvm`]) on the
//! mesh's DVM node (`sim::dvm`): each op's fan-out to every core, several
//! ops in flight, the Syncs one at a time.

use crate::effects::{Effects, Label};
use crate::hw::memory_model::{self as mo, Loc, MemoryModel, Order, TLBI_WHOLE_ASID};
use crate::world::{Flow, Frame, World};
use crate::{MmId, TaskId, INIT_MM};
use machine::{Cost, CpuId, PAGE_SHIFT, PAGE_SIZE};

/// `MAX_DVM_OPS` (= `PTRS_PER_PTE`): without FEAT_TLBIRANGE a range of
/// this many strides or more is invalidated as the whole ASID instead.
pub const MAX_DVM_OPS: u64 = 512;

/// `MAX_TLBI_RANGE_PAGES` = `__TLBI_RANGE_PAGES(31, 3)`: the most one range
/// TLBI sequence covers; beyond it, the whole ASID.
pub const MAX_TLBI_RANGE_PAGES: u64 = 32 << (5 * 3 + 1);

/// The hardware ASID `mm` runs under now (0 if it has none yet).
fn asid_of(w: &World, mm: MmId) -> u16 {
    w.asids.idx(*w.mms[mm as usize].context_id)
}

/// Apply a broadcast invalidation to every core's TLB (what the hardware
/// does between the TLBIs and the completing `DSB ISH`). `TLBI VALE1IS`
/// (`last_level`) drops leaf entries only; `TLBI VAE1IS` the walk cache too.
fn tlbi_is_all_cpus(w: &mut World, asid: u16, range: Option<(u64, u64, u64)>, last_level: bool) {
    let Some(range) = range else {
        w.cpus.iter_mut().for_each(|c| c.tlb.flush_asid(asid));
        return;
    };
    if !last_level {
        w.cpus
            .iter_mut()
            .for_each(|c| c.tlb.flush_range(asid, range, false));
        return;
    }
    // `TLBI VALE1IS` changes nothing in a TLB that never held the ASID.
    for c in cpus_may_hold(w, asid) {
        w.cpus[c].tlb.flush_range(asid, range, true);
    }
}

/// The CPUs whose TLB may hold a leaf translation of `asid`
/// ([`machine::tlb::Tlb::may_hold`]), in ascending order: mostly a few of
/// many, read from the world's index where it keeps one.
#[inline(never)]
fn cpus_may_hold(w: &World, asid: u16) -> Vec<usize> {
    let scan = || {
        let cpus = w.cpus.iter().enumerate();
        cpus.filter(|(_, c)| c.tlb.may_hold(asid))
            .map(|(i, _)| i)
            .collect()
    };
    let Some(mask) = w.tlb_filled.0.cpus(asid) else {
        return scan();
    };
    let cpus: Vec<usize> = mask.iter().map(|c| c as usize).collect();
    debug_assert_eq!(
        cpus,
        machine::footprint::paused(scan),
        "the filled-TLB index is stale"
    );
    cpus
}

/// `flush_tlb_mm`: `dsb(ishst); TLBI ASIDE1IS; dsb(ish)`: one broadcast op.
pub fn flush_tlb_mm(w: &mut World, mm: MmId, fx: &mut Effects) {
    let asid = asid_of(w, mm);
    if *w.mms[mm as usize].context_id == 0 {
        return; // never ran: no TLB can hold its entries
    }
    tlbi_is_all_cpus(w, asid, None, false);
    fx.cost(Cost::TlbiIs, 1);
    fx.dvm(1);
    w.counters.tlbi_is += 1;
    w.counters.dsb_ish += 1;
    fx.label(Label::TlbiIs {
        asid,
        va: 0,
        pages: None,
        ops: 1,
    });
}

/// `flush_tlb_page`: `TLBI VALE1IS` of one page + `DSB ISH`.
pub fn flush_tlb_page(w: &mut World, mm: MmId, va: u64, fx: &mut Effects) {
    __flush_tlb_range(w, mm, va, va + PAGE_SIZE, PAGE_SIZE, true, fx);
}

/// `__flush_tlb_range_op`: how many TLBI instructions cover `pages` pages,
/// with range TLBIs (FEAT_TLBIRANGE: `(num + 1) << (5 * scale + 1)` pages
/// each, scale from 3 down to 0, a single-page op for an odd remainder) or
/// without (one per page).
pub fn tlbi_ops(pages: u64, range_tlbi: bool) -> u64 {
    if !range_tlbi {
        return pages;
    }
    let range_pages = |num: u64, scale: u32| (num + 1) << (5 * scale + 1);
    let (mut left, mut ops, mut scale) = (pages, 0u64, 3i32);
    while left > 0 {
        if left == 1 {
            ops += 1;
            left -= 1;
            continue;
        }
        if scale < 0 {
            // Unreachable by construction (scale 0 covers every even count);
            // guard so a wrong count can never loop forever.
            ops += left;
            break;
        }
        let s = scale as u32;
        let capped = left.min(range_pages(31, s));
        let num = (capped >> (5 * s + 1)) as i64 - 1;
        if num >= 0 {
            ops += 1;
            left -= range_pages(num as u64, s);
        }
        scale -= 1;
    }
    ops
}

/// `__flush_tlb_range(vma, start, end, stride, last_level, tlb_level)`
/// (v6.10+, `__flush_tlb_range_nosync`): `TLBI ASIDE1IS` for the whole ASID
/// when `end - start >= MAX_DVM_OPS * stride` without FEAT_TLBIRANGE, or
/// more than `MAX_TLBI_RANGE_PAGES` pages with it; else per-stride (or
/// range) `TLBI VALE1IS` (`VAE1IS` unless `last_level`); then `DSB ISH`.
pub fn __flush_tlb_range(
    w: &mut World,
    mm: MmId,
    start: u64,
    end: u64,
    stride: u64,
    last_level: bool,
    fx: &mut Effects,
) {
    let pages = (end - start) >> PAGE_SHIFT;
    let range = w.cfg.arm64.range_tlbi;
    if (!range && end - start >= MAX_DVM_OPS * stride) || (range && pages > MAX_TLBI_RANGE_PAGES) {
        flush_tlb_mm(w, mm, fx);
        return;
    }
    if *w.mms[mm as usize].context_id == 0 {
        return;
    }
    let pages = (end - start).div_ceil(stride);
    let ops = tlbi_ops(pages, range);
    let asid = asid_of(w, mm);
    tlbi_is_all_cpus(w, asid, Some((start, end, stride)), last_level);
    fx.cost(Cost::TlbiIs, ops as u32);
    fx.dvm(ops as u32);
    w.counters.tlbi_is += ops;
    w.counters.dsb_ish += 1;
    fx.label(Label::TlbiIs {
        asid,
        va: start,
        pages: Some(pages),
        ops: ops as u32,
    });
}

/// `local_flush_tlb_page` / `local_flush_tlb_page_nonotify` (the seed):
/// `TLBI VALE1` + `DSB NSH` on this CPU only; other CPUs may keep a stale
/// (more restrictive) entry.
pub fn local_flush_tlb_page(w: &mut World, cpu: CpuId, mm: MmId, va: u64, fx: &mut Effects) {
    let asid = asid_of(w, mm);
    w.cpus[cpu as usize].tlb.flush_one(asid, va);
    fx.cost(Cost::TlbiLocal, 1);
    w.counters.tlbi_local += 1;
    fx.label(Label::TlbiLocal { asid, va });
}

/// The checker's weak model is on: TLBIs stay in flight until a DSB
/// completes them (the simulator completes them as it issues them).
pub fn weak(w: &World) -> bool {
    w.cfg.memory_model != MemoryModel::Sc
}

/// An in-flight TLBI completes (at a DSB, or whenever the hardware gets to
/// it): apply it to the TLBs it reaches. A local one is the seed's
/// `TLBI VALE1`, applied as the simulator's `local_flush_tlb_page` does.
pub fn tlbi_complete(w: &mut World, loc: Loc) {
    let Loc::Tlbi {
        cpu,
        asid,
        va,
        broadcast,
        leaf,
    } = loc
    else {
        return;
    };
    let range = (va != TLBI_WHOLE_ASID).then_some((va, va + PAGE_SIZE, PAGE_SIZE));
    match (broadcast, range) {
        (true, _) => tlbi_is_all_cpus(w, asid, range, leaf),
        (false, Some(_)) => w.cpus[cpu as usize].tlb.flush_one(asid, va),
        (false, None) => w.cpus[cpu as usize].tlb.flush_asid(asid),
    }
}

/// A DSB that runs in the next step of its CPU (checker only): the window
/// between the TLBIs and the DSB, in which other CPUs' walkers run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dsb {
    pub name: &'static str,
    pub order: Order,
    pub yielded: bool,
}

impl Dsb {
    pub fn step(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) -> Flow {
        if !self.yielded {
            self.yielded = true;
            return Flow::Yield;
        }
        mo::barrier(w, cpu, Some(self.name), self.order, fx);
        Flow::Return
    }
}

/// Does `cpu` still buffer a store (not a TLBI)? Only when the `dsb(*st)`
/// before the TLBIs was dropped.
fn store_buffered(w: &World, cpu: CpuId) -> bool {
    w.membufs[cpu as usize]
        .entries
        .iter()
        .any(|e| !matches!(e.loc, Loc::Tlbi { .. }))
}

/// `__flush_tlb_range` by `cpu` under the checker's weak model:
/// `dsb(ishst)`, the TLBIs (in flight), `dsb(ish)`. The DSB is returned
/// to run in this CPU's next step when a store is still buffered at it
/// (only without the `dsb(ishst)`): then walkers may run between the TLBIs
/// and the store. Ranges the simulator turns into a whole-ASID flush, and
/// ranges of more than `STORE_BUFFER_DEPTH` pages, complete at once.
#[allow(clippy::too_many_arguments)]
pub fn flush_tlb_range_weak(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    start: u64,
    end: u64,
    last_level: bool,
    fx: &mut Effects,
) -> Option<Dsb> {
    let pages = (end - start).div_ceil(PAGE_SIZE);
    if pages > mo::STORE_BUFFER_DEPTH as u64 || *w.mms[mm as usize].context_id == 0 {
        // The TLBIs complete as issued, but the leading dsb(ishst) still
        // orders this CPU's earlier page-table stores before them and
        // before its later loads (a DSB is at least a full barrier).
        mo::barrier(w, cpu, Some(mo::FLUSH_TLB_RANGE_DSB_ISHST), Order::Full, fx);
        __flush_tlb_range(w, mm, start, end, PAGE_SIZE, last_level, fx);
        return None;
    }
    let asid = asid_of(w, mm);
    mo::barrier(w, cpu, Some(mo::FLUSH_TLB_RANGE_DSB_ISHST), Order::Full, fx);
    for i in 0..pages {
        let va = start + i * PAGE_SIZE;
        let loc = Loc::Tlbi {
            cpu,
            asid,
            va,
            broadcast: true,
            leaf: last_level,
        };
        mo::store(w, cpu, loc, 1, fx);
    }
    fx.cost(Cost::TlbiIs, pages as u32);
    fx.dvm(pages as u32);
    w.counters.tlbi_is += pages;
    w.counters.dsb_ish += 1;
    let dsb = if w.cfg.inject.arm64_broadcast_dsb_nsh {
        Dsb {
            name: "__flush_tlb_range.dsb(nsh) (inject.arm64_broadcast_dsb_nsh)",
            order: Order::NonShareable,
            yielded: false,
        }
    } else {
        Dsb {
            name: mo::FLUSH_TLB_RANGE_DSB_ISH,
            order: Order::Full,
            yielded: false,
        }
    };
    if store_buffered(w, cpu) {
        return Some(dsb);
    }
    mo::barrier(w, cpu, Some(dsb.name), dsb.order, fx);
    None
}

/// The seed's `local_flush_tlb_page` by `cpu` under the checker's weak
/// model: `dsb(nshst)`, `TLBI VALE1` (in flight), `dsb(nsh)`; the DSB in
/// the next step when a store is still buffered at it.
pub fn local_flush_tlb_page_weak(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    va: u64,
    fx: &mut Effects,
) -> Option<Dsb> {
    let asid = asid_of(w, mm);
    mo::barrier(w, cpu, Some(mo::LOCAL_FLUSH_DSB_NSHST), Order::Full, fx);
    let loc = Loc::Tlbi {
        cpu,
        asid,
        va: va & !(PAGE_SIZE - 1),
        broadcast: false,
        leaf: true,
    };
    mo::store(w, cpu, loc, 1, fx);
    fx.cost(Cost::TlbiLocal, 1);
    w.counters.tlbi_local += 1;
    let dsb = Dsb {
        name: mo::LOCAL_FLUSH_DSB_NSH,
        order: Order::NonShareable,
        yielded: false,
    };
    if store_buffered(w, cpu) {
        return Some(dsb);
    }
    mo::barrier(w, cpu, Some(dsb.name), dsb.order, fx);
    None
}

/// Run `dsb` in the next step of `cpu`'s current task: pushed above the
/// fault being handled, which returns right after (the kernel holds the
/// PTE lock across TLBI and DSB; the model's fault path ends there).
pub fn defer_dsb(w: &mut World, cpu: CpuId, dsb: Option<Dsb>) {
    if let (Some(d), Some(t)) = (dsb, w.cpus[cpu as usize].curr) {
        w.tasks[t as usize].kstack.push(Frame::Arm64Dsb(d));
    }
}

/// `struct arch_tlbflush_unmap_batch` (arch/arm64/include/asm/tlbbatch.h):
/// empty upstream (the TLBIs are already out); the model counts the TLBIs
/// issued since the last `DSB ISH` to price the one that completes them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ArchTlbflushUnmapBatch {
    pub tlbis: u32,
}

/// arch/arm64/include/asm/tlbflush.h: `arch_tlbbatch_should_defer`: always
/// (false only with the ARM64_WORKAROUND_REPEAT_TLBI erratum, not
/// modelled; the `num_online_cpus() <= 4` test of the series' v4 was
/// dropped before it was merged in v6.5).
pub fn arch_tlbbatch_should_defer() -> bool {
    true
}

/// arch/arm64/include/asm/tlbflush.h: `arch_tlbbatch_add_pending` →
/// `__flush_tlb_range_nosync(mm, start, end, PAGE_SIZE, true, 3)`:
/// `dsb(ishst)`, `TLBI VALE1IS` of the page, and no `DSB ISH`: the
/// broadcast goes out now, `arch_tlbbatch_flush` waits for it.
/// Under the checker's weak model the TLBI stays in flight (in `cpu`'s
/// buffer) until a DSB, or the hardware, completes it.
pub fn arch_tlbbatch_add_pending(
    w: &mut World,
    cpu: CpuId,
    batch: &mut ArchTlbflushUnmapBatch,
    mm: MmId,
    va: u64,
    fx: &mut Effects,
) {
    batch.tlbis += 1;
    // __flush_tlb_range_nosync: dsb(ishst) first, so the PTE clears are
    // visible to the page walkers before the TLBI.
    mo::barrier(w, cpu, Some(mo::FLUSH_TLB_RANGE_DSB_ISHST), Order::Full, fx);
    if *w.mms[mm as usize].context_id == 0 {
        return; // never ran: no TLB holds its entries
    }
    let asid = asid_of(w, mm);
    if weak(w) {
        let loc = Loc::Tlbi {
            cpu,
            asid,
            va,
            broadcast: true,
            leaf: true,
        };
        mo::store(w, cpu, loc, 1, fx);
    } else {
        tlbi_is_all_cpus(w, asid, Some((va, va + PAGE_SIZE, PAGE_SIZE)), true);
    }
    fx.cost(Cost::TlbiIs, 1);
    w.counters.tlbi_is += 1;
    fx.label(Label::TlbiIs {
        asid,
        va,
        pages: Some(1),
        ops: 1,
    });
}

/// arch/arm64/include/asm/tlbflush.h: `arch_tlbbatch_flush`: `dsb(ish)`
/// (`__tlbi_sync_s1ish_batch`): one wait for every TLBI of the batch. The
/// driver prices it as the DVM broadcast of those TLBIs and one DSB.
pub fn arch_tlbbatch_flush(
    w: &mut World,
    cpu: CpuId,
    batch: ArchTlbflushUnmapBatch,
    fx: &mut Effects,
) {
    mo::barrier(w, cpu, None, Order::Full, fx);
    fx.dvm(batch.tlbis);
    w.counters.dsb_ish += 1;
    w.counters.tlbbatch_flushes += 1;
    fx.label(Label::TlbBatch {
        flush: true,
        cpus: w.cpus.len() as u32,
    });
}

/// arch/arm64/include/asm/tlb.h: `tlb_flush`: `__flush_tlb_range` of what
/// the gather covered with `last_level = !(freed_tables || unshared_tables)`
/// (with c2ff4764e03e) and the stride of
/// `tlb_get_unmap_size` (2 MiB if only huge PMDs were cleared). No IPIs,
/// so nothing to wait for. `fullmm` (`exit_mmap`): only the walk cache
/// matters ("the ASID allocator won't reallocate our ASID without
/// invalidating the entire TLB"): `flush_tlb_mm` if tables were freed,
/// else nothing.
pub fn tlb_flush(w: &mut World, task: TaskId, fx: &mut Effects) -> Flow {
    let g = &w.tasks[task as usize].gather;
    if !g.needs_flush() {
        return Flow::Continue;
    }
    let (mm, start, end) = (g.mm, g.start, g.end);
    // c2ff4764e03e ("arm64: tlb: Flush walk cache when unsharing PMD
    // tables", 2026-05): an unshared hugetlb PMD table must leave the walk
    // cache too; before it only `freed_tables` did, and the unshare's
    // leaf-only `TLBI VALE1IS` left the PUD entry cached
    // (`arm64.unshare_flush_walk_cache = false`).
    let walk_cache = g.freed_tables || (g.unshared_tables && w.cfg.arm64.unshare_flush_walk_cache);
    if g.fullmm {
        if walk_cache {
            // flush_tlb_mm: dsb(ishst) (the clears reach the walkers),
            // TLBI ASIDE1IS, dsb(ish).
            let cpu = w.tasks[task as usize].cpu;
            mo::barrier(w, cpu, None, Order::Full, fx);
            flush_tlb_mm(w, mm, fx);
        }
        return Flow::Yield;
    }
    let last_level = !walk_cache;
    let stride = tlb_get_unmap_size(w, task);
    if weak(w) && stride == PAGE_SIZE {
        let cpu = w.tasks[task as usize].cpu;
        return match flush_tlb_range_weak(w, cpu, mm, start, end, last_level, fx) {
            Some(dsb) => Flow::CallYield(Frame::Arm64Dsb(dsb)),
            None => Flow::Yield,
        };
    }
    __flush_tlb_range(w, mm, start, end, stride, last_level, fx);
    Flow::Yield
}

/// include/asm-generic/tlb.h: `tlb_get_unmap_size`: the gather's smallest
/// cleared size; the model's gathers on arm64 clear PTEs only (4 KiB).
fn tlb_get_unmap_size(_w: &World, _task: TaskId) -> u64 {
    PAGE_SIZE
}

/// arch/arm64/include/asm/mmu_context.h: `switch_mm` → `__switch_mm` →
/// arch/arm64/mm/context.c: `check_and_switch_context` (ASID of the current
/// generation, `local_flush_tlb_all` if a rollover happened since this CPU
/// last switched) → `cpu_switch_mm` (TTBR0 with the ASID). `init_mm` (a
/// kernel thread or idle) loads the reserved TTBR0 and keeps no user ASID.
pub fn switch_mm(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) -> bool {
    let c = cpu as usize;
    if next == INIT_MM {
        // cpu_set_reserved_ttbr0(): no user translations reachable.
        w.cpus[c].tlbstate.loaded_mm = INIT_MM;
        w.cpus[c].tlbstate.loaded_mm_asid = 0;
        return false;
    }
    let prev = w.cpus[c].tlbstate.loaded_mm;
    if prev == next {
        return false; // switch_mm: `if (prev != next) __switch_mm(next)`
    }
    if w.cfg.split_steps {
        super::context::check_and_switch_context_begin(w, cpu, next, fx);
        return false;
    }
    let (asid, flush) = crate::arch::asid::asid_for_switch(w, cpu, next, fx);
    if flush {
        w.cpus[c].tlb.flush_all();
        w.counters.full_flushes += 1;
        fx.cost(Cost::FlushTlbLocal, 1);
    }
    fx.cost(Cost::Cr3Write, 1);
    w.counters.cr3_writes += 1;
    let ts = &mut w.cpus[c].tlbstate;
    ts.loaded_mm = next;
    ts.loaded_mm_asid = asid;
    fx.label(Label::SwitchMm {
        from: prev,
        to: next,
        flush,
    });
    flush
}

/// arch/arm64/include/asm/mmu_context.h: `enter_lazy_tlb`: only
/// `update_saved_ttbr0(tsk, &init_mm)` (software PAN's copy); TTBR0 keeps
/// the previous mm's ASID, so a return to that mm switches nothing.
pub fn enter_lazy_tlb(_w: &mut World, _cpu: CpuId, _fx: &mut Effects) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm64_world() -> (World, MmId) {
        let s = machine::Scenario::from_toml("[machine]\narch = \"arm64\"\ncpus = 2\n", "test")
            .unwrap();
        let mut w = World::new(&s).unwrap();
        let mm = w.mm_alloc().unwrap();
        *w.mms[mm as usize].context_id = (1 << 16) | 5;
        (w, mm)
    }

    /// Without FEAT_TLBIRANGE a range of `MAX_DVM_OPS` strides (2 MiB) or
    /// more is one `TLBI ASIDE1IS`; with it, only past
    /// `MAX_TLBI_RANGE_PAGES`. (Before: 512 `TLBI VALE1IS` for 2 MiB, and
    /// range TLBIs fell back on the op count.)
    #[test]
    fn two_mib_is_one_aside1is() {
        let (mut w, mm) = arm64_world();
        let mut fx = Effects::default();
        __flush_tlb_range(&mut w, mm, 0, 2 << 20, PAGE_SIZE, true, &mut fx);
        assert_eq!(w.counters.tlbi_is, 1);
        __flush_tlb_range(
            &mut w,
            mm,
            0,
            (2 << 20) - PAGE_SIZE,
            PAGE_SIZE,
            true,
            &mut fx,
        );
        assert_eq!(w.counters.tlbi_is, 1 + 511);
        w.cfg.arm64.range_tlbi = true;
        let before = w.counters.tlbi_is;
        __flush_tlb_range(&mut w, mm, 0, 1 << 30, PAGE_SIZE, true, &mut fx);
        assert_eq!(w.counters.tlbi_is - before, 1, "1 GiB: one range op");
        const { assert!(MAX_TLBI_RANGE_PAGES == 1 << 21) };
    }

    /// `enter_lazy_tlb` leaves TTBR0 alone: idle and back to the same mm
    /// is no switch at all. (Before: a switch to `init_mm` and back, two
    /// TTBR0 writes.)
    #[test]
    fn lazy_and_back_to_the_same_mm_is_a_no_op() {
        let (mut w, mm) = arm64_world();
        *w.mms[mm as usize].context_id = 0;
        let mut fx = Effects::default();
        crate::arch::switch_mm(&mut w, 0, mm, &mut fx);
        assert_eq!(w.counters.cr3_writes, 1);
        crate::arch::enter_lazy_tlb(&mut w, 0, &mut fx);
        assert_eq!(w.cpus[0].tlbstate.loaded_mm, mm);
        crate::arch::switch_mm(&mut w, 0, mm, &mut fx);
        assert_eq!(w.counters.cr3_writes, 1);
    }

    /// `tlb_flush`: `last_level = !freed_tables`: a zap that freed no table
    /// (`TLBI VALE1IS`) leaves other CPUs' walk caches; one that freed a
    /// table (`TLBI VAE1IS`) drops them. (Before: every range TLBI dropped
    /// the walk cache, so a missing non-leaf invalidation was invisible.)
    #[test]
    fn last_level_unless_tables_were_freed() {
        let (mut w, mm) = arm64_world();
        let t = w.spawn(mm, 0, vec![], false);
        let va = 0x4000_0000;
        let mut fx = Effects::default();
        for freed in [false, true] {
            w.cpus[1].tlb.psc_fill(5, va, 9, 0);
            let g = &mut w.tasks[t as usize].gather;
            g.tlb_gather_mmu(mm);
            g.remove_page(11, va);
            if freed {
                g.remove_table(9, va);
            }
            tlb_flush(&mut w, t, &mut fx);
            assert_eq!(
                w.cpus[1].tlb.psc_lookup(5, va).is_some(),
                !freed,
                "freed {freed}"
            );
        }
    }

    /// `__flush_tlb_range_op`'s encoding: (num + 1) << (5 * scale + 1) pages
    /// per range op, a single-page op for an odd page.
    #[test]
    fn range_tlbi_op_counts() {
        assert_eq!(tlbi_ops(1, true), 1);
        assert_eq!(tlbi_ops(2, true), 1);
        assert_eq!(tlbi_ops(3, true), 2);
        assert_eq!(tlbi_ops(64, true), 1);
        assert_eq!(tlbi_ops(512, true), 1);
        assert_eq!(tlbi_ops(513, true), 2);
        // 2 + 64 pages: one scale-1 op and one scale-0 op.
        assert_eq!(tlbi_ops(66, true), 2);
        for p in [1u64, 7, 100, 512, 100_000] {
            assert_eq!(tlbi_ops(p, false), p);
            assert!(tlbi_ops(p, true) <= 8, "{p}");
        }
    }
}
