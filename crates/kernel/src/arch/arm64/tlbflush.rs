//! arch/arm64/include/asm/tlbflush.h, arch/arm64/include/asm/tlb.h and
//! arch/arm64/include/asm/mmu_context.h.
//!
//! A broadcast `TLBI ...IS` reaches every core of the inner-shareable
//! domain in hardware: no interrupt, nothing waits for IRQ-off windows. The
//! price is in the interconnect: the model applies the invalidation to every
//! CPU's TLB when the issuing step runs, and the driver prices the
//! `DSB ISH` that completes it ([`crate::effects::Charge::Dvm`]): queueing
//! behind other cores' broadcasts, a fan-out to every core, the sync.

use crate::effects::{Effects, Label};
use crate::world::{Flow, World};
use crate::{MmId, TaskId, INIT_MM};
use machine::{Cost, CpuId, PAGE_SHIFT, PAGE_SIZE};

/// `MAX_DVM_OPS` (= `PTRS_PER_PTE`): more page invalidations than this and
/// `__flush_tlb_range` invalidates the whole ASID instead.
pub const MAX_DVM_OPS: u64 = 512;

/// The hardware ASID `mm` runs under now (0 if it has none yet).
fn asid_of(w: &World, mm: MmId) -> u16 {
    w.asids.idx(w.mms[mm as usize].context_id)
}

/// Apply a broadcast invalidation to every core's TLB (what the hardware
/// does between the TLBIs and the completing `DSB ISH`).
fn tlbi_is_all_cpus(w: &mut World, asid: u16, range: Option<(u64, u64, u64)>) {
    for c in w.cpus.iter_mut() {
        match range {
            None => c.tlb.flush_asid(asid),
            Some((start, end, stride)) => {
                let mut a = start;
                while a < end {
                    c.tlb.flush_one(asid, a);
                    a += stride;
                }
            }
        }
    }
}

/// `flush_tlb_mm`: `dsb(ishst); TLBI ASIDE1IS; dsb(ish)`: one broadcast op.
pub fn flush_tlb_mm(w: &mut World, mm: MmId, fx: &mut Effects) {
    let asid = asid_of(w, mm);
    if w.mms[mm as usize].context_id == 0 {
        return; // never ran: no TLB can hold its entries
    }
    tlbi_is_all_cpus(w, asid, None);
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
    __flush_tlb_range(w, mm, va, va + PAGE_SIZE, PAGE_SIZE, fx);
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

/// `__flush_tlb_range(vma, start, end, stride, last_level, tlb_level)`:
/// per-page (or range) `TLBI VALE1IS`, or `TLBI ASIDE1IS` for the whole ASID
/// when that would take more than `MAX_DVM_OPS` operations; then `DSB ISH`.
pub fn __flush_tlb_range(
    w: &mut World,
    mm: MmId,
    start: u64,
    end: u64,
    stride: u64,
    fx: &mut Effects,
) {
    let pages = (end - start).div_ceil(stride);
    let range = w.cfg.arm64.range_tlbi;
    let ops = tlbi_ops(pages, range);
    if (!range && pages > MAX_DVM_OPS) || (range && ops > MAX_DVM_OPS) {
        flush_tlb_mm(w, mm, fx);
        return;
    }
    if w.mms[mm as usize].context_id == 0 {
        return;
    }
    let asid = asid_of(w, mm);
    tlbi_is_all_cpus(w, asid, Some((start, end, stride)));
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

/// arch/arm64/include/asm/tlb.h: `tlb_flush`: tearing down a whole mm only
/// needs the walk cache invalidated (the ASID allocator flushes before any
/// reuse); otherwise `__flush_tlb_range` of what the gather covered,
/// leaf-only unless tables were freed. No IPIs, so nothing to wait for.
pub fn tlb_flush(w: &mut World, task: TaskId, fx: &mut Effects) -> Flow {
    let g = &w.tasks[task as usize].gather;
    if !g.needs_flush() {
        return Flow::Continue;
    }
    let (mm, start, end) = (g.mm, g.start, g.end);
    __flush_tlb_range(w, mm, start, end, 1 << PAGE_SHIFT, fx);
    Flow::Yield
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

#[cfg(test)]
mod tests {
    use super::tlbi_ops;

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
