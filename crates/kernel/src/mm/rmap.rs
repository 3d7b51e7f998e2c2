//! mm/rmap.c: reclaim's unmap of one mapping (`try_to_unmap_one`) and the
//! batched flush it defers (`CONFIG_ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH`).
//!
//! ```text
//!  try_to_unmap_one(TTU_BATCH_FLUSH)
//!   should_defer_flush? ── yes ─ ptep_get_and_clear; set_tlb_ubc_flush_pending
//!                       │          → arch_tlbbatch_add_pending (x86: mm_cpumask into
//!                       │            the batch; arm64: TLBI now; RISC-V: mm_cpumask)
//!                       └─ no ── ptep_clear_flush (flush_tlb_page: one flush per page)
//!  try_to_unmap_flush_dirty   before pageout() of a dirty folio, if a dirty PTE was batched
//!  try_to_unmap_flush         before the folios are freed → arch_tlbbatch_flush
//! ```
//!
//! Sources read: mm/rmap.c of v6.6-v6.18 (`try_to_unmap_flush`,
//! `set_tlb_ubc_flush_pending`, `should_defer_flush`; unchanged in the
//! parts modelled), arch/x86/include/asm/tlbflush.h,
//! arch/arm64/include/asm/tlbflush.h, arch/riscv/mm/tlbflush.c.

use crate::arch::{arch_tlbbatch_add_pending, arch_tlbbatch_should_defer, ArchTlbflushUnmapBatch};
use crate::effects::Effects;
use crate::world::{Flow, World};
use crate::MmId;
use machine::mem::pte;
use machine::{CpuId, Pfn};

/// `struct tlbflush_unmap_batch` (`current->tlb_ubc`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TlbflushUnmapBatch {
    pub arch: ArchTlbflushUnmapBatch,
    /// A flush is owed (`arch_tlbbatch_add_pending` ran since the last one).
    pub flush_required: bool,
    /// A batched PTE was dirty: a CPU may still write through it, so the
    /// flush must come before the folio's I/O starts.
    pub writable: bool,
}

impl TlbflushUnmapBatch {
    pub fn new(w: &World) -> Self {
        TlbflushUnmapBatch {
            arch: ArchTlbflushUnmapBatch::new(w),
            flush_required: false,
            writable: false,
        }
    }
}

/// mm/rmap.c: `should_defer_flush`: only with `TTU_BATCH_FLUSH` (reclaim
/// always passes it) and if the architecture batches at all
/// (`<arch>.batched_unmap`; without `ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH`
/// the stub returns false) and `arch_tlbbatch_should_defer` agrees.
pub fn should_defer_flush(w: &World, cpu: CpuId, mm: MmId) -> bool {
    w.cfg.batched_unmap && arch_tlbbatch_should_defer(w, cpu, mm)
}

/// mm/rmap.c: `set_tlb_ubc_flush_pending`: record the flush the cleared
/// PTE `pteval` owes (`pte_accessible`: it was present), and whether it
/// was dirty. (`mm->tlb_flush_batched`, read by `flush_tlb_batched_pending`
/// in mprotect/munmap/`MADV_DONTNEED`, is not modelled.)
pub fn set_tlb_ubc_flush_pending(
    w: &mut World,
    cpu: CpuId,
    ubc: &mut TlbflushUnmapBatch,
    mm: MmId,
    pteval: u64,
    va: u64,
    fx: &mut Effects,
) {
    if !pte::present(pteval) {
        return;
    }
    arch_tlbbatch_add_pending(w, cpu, &mut ubc.arch, mm, va, fx);
    ubc.flush_required = true;
    w.counters.tlb_ubc_pending += 1;
    if pteval & pte::DIRTY != 0 {
        ubc.writable = true;
    }
}

/// mm/rmap.c: `try_to_unmap_one` for the one PTE (`table[idx]`, at `va`)
/// that maps `pfn`: replace it with a swap entry, then either batch the
/// flush or `ptep_clear_flush` (the returned flow, to run before the
/// folio is used further). Returns the old PTE (0: `pfn` no longer mapped
/// there, nothing done) and that flow.
#[allow(clippy::too_many_arguments)]
pub fn try_to_unmap_one(
    w: &mut World,
    cpu: CpuId,
    ubc: &mut TlbflushUnmapBatch,
    mm: MmId,
    table: Pfn,
    idx: usize,
    va: u64,
    pfn: Pfn,
    fx: &mut Effects,
) -> (u64, Option<Flow>) {
    // The swap entry: `swp_entry_to_pte(make_..._entry)` (anonymous folios).
    let at = (mm, table, idx, va, pfn);
    nuke_pte(w, cpu, ubc, at, |_| pte::SWP_ENTRY, fx)
}

/// mm/rmap.c: `try_to_migrate_one` (`TTU_BATCH_FLUSH` from
/// `migrate_pages_batch`) for the one PTE (`table[idx]`, at `va`) that
/// maps `pfn`: replace it with a migration entry
/// (`make_{writable,readable}_migration_entry` of `pfn`, young and dirty
/// kept), then batch the flush or `ptep_clear_flush`, as
/// [`try_to_unmap_one`] (read in torvalds/linux `0003e2a4`, mm/rmap.c).
#[allow(clippy::too_many_arguments)]
pub fn try_to_migrate_one(
    w: &mut World,
    cpu: CpuId,
    ubc: &mut TlbflushUnmapBatch,
    mm: MmId,
    table: Pfn,
    idx: usize,
    va: u64,
    pfn: Pfn,
    fx: &mut Effects,
) -> (u64, Option<Flow>) {
    let at = (mm, table, idx, va, pfn);
    nuke_pte(w, cpu, ubc, at, pte::make_migration, fx)
}

/// The part `try_to_unmap_one` and `try_to_migrate_one` share: "Nuke the
/// page table entry" (`ptep_get_and_clear` + `set_tlb_ubc_flush_pending`
/// when `should_defer_flush`, else `ptep_clear_flush`), then
/// `set_pte_at(.., entry(old))`. `at` = (mm, table, idx, va, pfn).
fn nuke_pte(
    w: &mut World,
    cpu: CpuId,
    ubc: &mut TlbflushUnmapBatch,
    (mm, table, idx, va, pfn): (MmId, Pfn, usize, u64, Pfn),
    entry: impl Fn(u64) -> u64,
    fx: &mut Effects,
) -> (u64, Option<Flow>) {
    let e = w.mem.read(table, idx).unwrap_or(0);
    if !pte::present(e) || pte::pfn(e) != pfn {
        return (0, None);
    }
    w.mem.write(table, idx, entry(e));
    // arm64: the clear reaches the page walkers at the flush's dsb(ishst)
    // (flush_tlb_page's, or arch_tlbbatch_add_pending's).
    crate::hw::memory_model::pte_store_for_walkers(w, cpu, table, idx, e, fx);
    if should_defer_flush(w, cpu, mm) {
        // ptep_get_and_clear + set_tlb_ubc_flush_pending.
        set_tlb_ubc_flush_pending(w, cpu, ubc, mm, e, va, fx);
        return (e, None);
    }
    // ptep_clear_flush → flush_tlb_page.
    w.counters.ptep_clear_flush += 1;
    (e, Some(crate::arch::flush_tlb_page(w, mm, va, fx)))
}

/// mm/rmap.c: `try_to_unmap_flush`: if a flush is owed, `arch_tlbbatch_flush`
/// and start a new batch (`flush_required = writable = false`). `None`:
/// nothing owed (or `inject.skip_try_to_unmap_flush`: the batch dropped).
pub fn try_to_unmap_flush(
    w: &mut World,
    cpu: CpuId,
    ubc: &mut TlbflushUnmapBatch,
    fx: &mut Effects,
) -> Option<Flow> {
    if !ubc.flush_required {
        return None;
    }
    let batch = std::mem::replace(&mut ubc.arch, ArchTlbflushUnmapBatch::new(w));
    ubc.flush_required = false;
    ubc.writable = false;
    if w.cfg.inject.skip_try_to_unmap_flush {
        return None;
    }
    Some(crate::arch::arch_tlbbatch_flush(w, cpu, batch, fx))
}

/// mm/rmap.c: `try_to_unmap_flush_dirty`: flush only if a batched PTE was
/// dirty ("potentially writable TLB entries that can race with IO").
pub fn try_to_unmap_flush_dirty(
    w: &mut World,
    cpu: CpuId,
    ubc: &mut TlbflushUnmapBatch,
    fx: &mut Effects,
) -> Option<Flow> {
    if !ubc.writable {
        return None;
    }
    try_to_unmap_flush(w, cpu, ubc, fx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(arch: &str, batched: bool) -> (World, MmId) {
        let mut s = machine::Scenario::default();
        s.machine.cpus = 2;
        s.set(&format!("machine.arch={arch}")).unwrap();
        s.set(&format!("{arch}.batched_unmap={batched}")).unwrap();
        let mut w = World::new(&s).unwrap();
        let mm = w.mm_alloc().unwrap();
        w.mms[mm as usize].cpumask.set(0);
        (w, mm)
    }

    /// `should_defer_flush`: with the switch off it is the kernel's stub
    /// (false); x86 defers only when another CPU is in `mm_cpumask`,
    /// arm64 and RISC-V always.
    #[test]
    fn should_defer_flush_per_arch_and_switch() {
        for arch in ["x86", "arm64", "riscv"] {
            let (mut w, mm) = world(arch, true);
            assert_eq!(should_defer_flush(&w, 0, mm), arch != "x86", "{arch}");
            w.mms[mm as usize].cpumask.set(1);
            assert!(should_defer_flush(&w, 0, mm), "{arch}");
            let (w, mm) = world(arch, false);
            assert!(!should_defer_flush(&w, 1, mm), "{arch} before its series");
        }
    }

    /// `try_to_unmap_flush_dirty` flushes only once a dirty PTE joined the
    /// batch; `try_to_unmap_flush` then finds nothing owed.
    #[test]
    fn flush_dirty_only_after_a_dirty_pte() {
        let (mut w, mm) = world("x86", true);
        let mut fx = Effects::default();
        let mut ubc = TlbflushUnmapBatch::new(&w);
        let clean = pte::make(7, pte::WRITE | pte::USER | pte::ACCESSED);
        set_tlb_ubc_flush_pending(&mut w, 0, &mut ubc, mm, clean, 0x1000, &mut fx);
        assert!(ubc.flush_required && !ubc.writable);
        assert!(try_to_unmap_flush_dirty(&mut w, 0, &mut ubc, &mut fx).is_none());
        let dirty = clean | pte::DIRTY;
        set_tlb_ubc_flush_pending(&mut w, 0, &mut ubc, mm, dirty, 0x2000, &mut fx);
        let flow = try_to_unmap_flush_dirty(&mut w, 0, &mut ubc, &mut fx);
        assert!(matches!(
            flow,
            Some(Flow::Call(crate::world::Frame::ArchTlbbatchFlush(_)))
        ));
        assert!(!ubc.flush_required && !ubc.writable);
        assert!(try_to_unmap_flush(&mut w, 0, &mut ubc, &mut fx).is_none());
        assert_eq!(w.counters.tlb_ubc_pending, 2);
    }
}
