//! `pmdp_collapse_flush` per architecture (`arch::pmdp_collapse_flush`).
//! The old model ran x86's `flush_tlb_mm_range` for every architecture: on
//! arm64 no TLBI was counted at all, on RISC-V the flush IPIs appeared in
//! the TLB row (x86's vector) instead of CAL, and no `sfence.vma` was run.
mod common;
use common::*;

const CPUS: u64 = 16;
const EXTENTS: u64 = 32; // 64 MiB / 2 MiB
const WALKERS: u64 = 3; // GUP-fast threads on CPUs 1..=3, in the mm

/// The report and how many collapse attempts cleared the PMD (and so
/// flushed and synced): the collapses, and those whose isolate failed on
/// a GUP pin after the sync (PMD restored). A scan that meets a pin
/// (`SCAN_PAGE_COUNT`) stops before the flush.
fn collapse(sets: &[&str]) -> (sim::Report, u64) {
    let mut all = vec![
        "machine.cpus=16",
        "workload.size=64MiB",
        "workload.threads=3",
    ];
    all.extend_from_slice(sets);
    let r = run(&scenario("skip-sync-collapse", &all));
    assert!(r.violations.is_empty());
    let a = &r.arch;
    assert!(a["collapses"] > 0 && a["collapses"] <= EXTENTS, "{a:?}");
    let flushed = a["collapses"] + a["collapse_pmd_restored"];
    (r, flushed)
}

/// arm64 uses the generic `pmdp_collapse_flush`: `flush_tlb_range` of the
/// 2 MiB, i.e. `__flush_tlb_range` with a 4 KiB stride and `last_level`
/// false. 512 strides reach `MAX_DVM_OPS`, so without FEAT_TLBIRANGE it is
/// one `TLBI ASIDE1IS`; with it, one range TLBI covers the 512 pages
/// (`tlbi_ops(512, true)` = 1: scale 1, num 7). Broadcast in hardware: no
/// IPI, so the only interrupts are the sync's, one to each of the 15 other
/// CPUs per flushed attempt.
#[test]
fn arm64_collapse_flush_is_one_broadcast_tlbi_and_no_ipi() {
    assert_eq!(kernel::arch::arm64::tlbflush::tlbi_ops(512, true), 1);
    for range in ["arm64.range_tlbi=false", "arm64.range_tlbi=true"] {
        let (r, flushed) = collapse(&["machine.arch=arm64", range]);
        assert_eq!(r.arch["tlbi_is"], flushed, "{range}");
        assert_eq!(total(&r, "TLB"), 0, "{range}");
        assert_eq!(total(&r, "CAL"), flushed * (CPUS - 1), "{range}");
        assert_eq!(r.arch["table_sync_ipi"], flushed, "{range}");
    }
}

/// RISC-V overrides `pmdp_collapse_flush` (arch/riscv/mm/pgtable.c) with
/// `flush_tlb_mm`: an address-specific `sfence.vma` would leave the old
/// non-leaf entry cached. `__flush_tlb_range` of the whole mm: one local
/// `sfence.vma` and an IPI (`on_each_cpu_mask`, the CAL row) to each other
/// hart of `mm_cpumask` (the 3 walkers'), each running one `sfence.vma`.
/// Then the sync IPIs the 15 other harts. Nothing in the TLB row.
#[test]
fn riscv_collapse_flush_is_flush_tlb_mm_by_ipi() {
    let (r, flushed) = collapse(&["machine.arch=riscv"]);
    assert_eq!(total(&r, "TLB"), 0);
    assert_eq!(r.arch["sfence_vma"], flushed * (1 + WALKERS));
    assert_eq!(total(&r, "CAL"), flushed * WALKERS + flushed * (CPUS - 1));
}
