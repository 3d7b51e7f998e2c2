//! arch/arm64/mm/fault.c and arch/arm64/include/asm/pgtable.h: the
//! access-flag / write-permission upgrade and the spurious-fault fix-up
//! (seed arm64-local-tlbi-wp-fault).

use crate::arch::arm64::tlbflush::{
    defer_dsb, flush_tlb_page, flush_tlb_range_weak, local_flush_tlb_page,
    local_flush_tlb_page_weak, weak,
};
use crate::effects::Effects;
use crate::hw::memory_model::{self as mo, Loc};
use crate::world::World;
use crate::MmId;
use machine::scenario::{SpuriousFaultFlush, WpReuseFlush};
use machine::{CpuId, Pfn};

/// arch/arm64/mm/fault.c: `__ptep_set_access_flags`: install the more
/// permissive `entry`; if it changed the PTE, invalidate the stale read-only
/// entry (only when `dirty`, a write: a young-only update needs no flush):
/// upstream by broadcast (`flush_tlb_page`), with the seed only on this CPU
/// (`local_flush_tlb_page`): other CPUs that cached the read-only entry
/// take a spurious fault. Returns whether the PTE changed.
#[allow(clippy::too_many_arguments)]
pub fn __ptep_set_access_flags(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    table: Pfn,
    idx: usize,
    va: u64,
    entry: u64,
    dirty: bool,
    fx: &mut Effects,
) -> bool {
    if dirty && weak(w) {
        return ptep_set_access_flags_weak(w, cpu, mm, table, idx, va, entry, fx);
    }
    let old = w.mem.read(table, idx).unwrap_or(0);
    if old == entry {
        return false;
    }
    w.mem.write(table, idx, entry);
    if !dirty {
        return true;
    }
    match w.cfg.arm64.wp_reuse_flush {
        WpReuseFlush::Broadcast => flush_tlb_page(w, mm, va, fx),
        WpReuseFlush::Local => local_flush_tlb_page(w, cpu, mm, va, fx),
    }
    true
}

/// `__ptep_set_access_flags` of a write under the checker's weak model: the
/// PTE store goes into this CPU's store buffer, then the flush as
/// [`flush_tlb_range_weak`] / [`local_flush_tlb_page_weak`] model it
/// (`dsb(ishst)` or `dsb(nshst)` makes the store visible to the walkers
/// before the TLBI). A young-only update (no flush) stays sequentially
/// consistent.
#[allow(clippy::too_many_arguments)]
fn ptep_set_access_flags_weak(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    table: Pfn,
    idx: usize,
    va: u64,
    entry: u64,
    fx: &mut Effects,
) -> bool {
    let loc = Loc::Pte {
        table,
        idx: idx as u16,
    };
    if mo::load(w, cpu, loc, fx) == entry {
        return false;
    }
    mo::store(w, cpu, loc, entry, fx);
    let page = va & !(machine::PAGE_SIZE - 1);
    let dsb = match w.cfg.arm64.wp_reuse_flush {
        WpReuseFlush::Broadcast => {
            flush_tlb_range_weak(w, cpu, mm, page, page + machine::PAGE_SIZE, true, fx)
        }
        WpReuseFlush::Local => local_flush_tlb_page_weak(w, cpu, mm, va, fx),
    };
    defer_dsb(w, cpu, dsb);
    true
}

/// arch/arm64/include/asm/pgtable.h: `flush_tlb_fix_spurious_fault`: a no-op
/// upstream; the seed makes it `local_flush_tlb_page_nonotify`, so a CPU that
/// faulted on a stale read-only entry drops it and the retry succeeds.
pub fn flush_tlb_fix_spurious_fault(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    va: u64,
    fx: &mut Effects,
) {
    match w.cfg.arm64.spurious_fault_flush {
        SpuriousFaultFlush::None => {}
        SpuriousFaultFlush::Local if weak(w) => {
            let dsb = local_flush_tlb_page_weak(w, cpu, mm, va, fx);
            defer_dsb(w, cpu, dsb);
        }
        SpuriousFaultFlush::Local => local_flush_tlb_page(w, cpu, mm, va, fx),
    }
}
