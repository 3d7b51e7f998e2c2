//! The `[arm64]` section of a scenario: the arm64 flush paths' switches
//! (`crates/kernel/src/arch/arm64`), their defaults and their checks.

use super::{Arch, Scenario};
use crate::Error;
use serde::{Deserialize, Serialize};

/// How `__ptep_set_access_flags` invalidates the stale read-only entry
/// after `wp_page_reuse` upgraded a PTE (seed arm64-local-tlbi-wp-fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WpReuseFlush {
    /// Upstream: `flush_tlb_page`, a broadcast `TLBI VALE1IS` + `DSB ISH`.
    Broadcast,
    /// The seed: `local_flush_tlb_page`, `TLBI VALE1` + `DSB NSH`.
    Local,
}

/// What `flush_tlb_fix_spurious_fault` does on arm64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpuriousFaultFlush {
    /// Upstream: nothing (every upgrade was broadcast, so a spurious fault
    /// only raced with a flush that already completed).
    None,
    /// The seed: `local_flush_tlb_page_nonotify`.
    Local,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Arm64Cfg {
    /// Seed (c): `broadcast` (upstream) | `local`.
    pub wp_reuse_flush: WpReuseFlush,
    /// Seed (c): `none` (upstream) | `local`. `local` reuse with `none` here is
    /// the unsafe combination: a stale read-only entry faults forever.
    pub spurious_fault_flush: SpuriousFaultFlush,
    /// FEAT_TLBIRANGE: `__flush_tlb_range` uses range TLBIs (`TLBI RVALE1IS`).
    pub range_tlbi: bool,
    /// `ID_AA64MMFR0_EL1.ASIDBits`: 8 or 16 (smaller values only to exercise rollover).
    pub asid_bits: u32,
    /// `ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH` on arm64 (Barry Song / Yicong
    /// Yang, v6.5, commit 43b3dfdd0455 "arm64: support batched/deferred tlb
    /// shootdown during page reclamation/migration"): `TLBI VALE1IS` at each
    /// unmap, one `DSB ISH` at `arch_tlbbatch_flush`. `false` = arm64 before
    /// it: `ptep_clear_flush` (TLBI + DSB ISH) per unmapped page.
    pub batched_unmap: bool,
    /// c2ff4764e03e ("arm64: tlb: Flush walk cache when unsharing PMD
    /// tables", 2026-05): `tlb_flush` invalidates the walk cache too when
    /// the gather unshared a hugetlb PMD table (`last_level = !(freed_tables
    /// || unshared_tables)`). `false` = arm64 before it: the unshare's
    /// `TLBI VALE1IS` is last-level only and a walk cache keeps the PUD
    /// entry that points at the table the other mm still uses (unsafe).
    pub unshare_flush_walk_cache: bool,
}

impl Default for Arm64Cfg {
    fn default() -> Self {
        Arm64Cfg {
            wp_reuse_flush: WpReuseFlush::Broadcast,
            spurious_fault_flush: SpuriousFaultFlush::None,
            range_tlbi: false,
            asid_bits: 16,
            batched_unmap: true,
            unshare_flush_walk_cache: true,
        }
    }
}

impl Arm64Cfg {
    /// Every `arm64.*` switch and its allowed values, for `tlblab list`.
    pub(super) const SWITCHES: &'static [(&'static str, &'static str, &'static str)] = &[
        (
            "arm64.wp_reuse_flush",
            "broadcast | local",
            "seed arm64-local-tlbi-wp-fault: TLBI after wp_page_reuse upgrades a PTE",
        ),
        (
            "arm64.spurious_fault_flush",
            "none | local",
            "seed arm64-local-tlbi-wp-fault: flush_tlb_fix_spurious_fault (none + local reuse = UNSAFE livelock)",
        ),
        ("arm64.range_tlbi", "true | false", "FEAT_TLBIRANGE range invalidation"),
        ("arm64.asid_bits", "8 | 16 (2..16)", "ASID width; small values exercise rollover"),
        (
            "arm64.batched_unmap",
            "true | false",
            "reclaim's batched unmap flush (v6.5): one DSB per batch; false: TLBI + DSB per page",
        ),
        (
            "arm64.unshare_flush_walk_cache",
            "true | false",
            "c2ff4764e03e: a hugetlb PMD unshare flushes the walk cache; false = before it (UNSAFE)",
        ),
    ];

    /// Check what the types cannot: ranges, and combinations with the
    /// machine and the other sections (`s` is the whole scenario).
    pub(super) fn validate(&self, s: &Scenario) -> Result<(), Error> {
        let m = &s.machine;
        // The switches whose `false` is an arm64 kernel's older code.
        let arm64_only = [
            ("batched_unmap", self.batched_unmap),
            ("unshare_flush_walk_cache", self.unshare_flush_walk_cache),
        ];
        for (key, on) in arm64_only {
            if !on && m.arch != Arch::Arm64 {
                return Err(Error::Config(format!(
                    "arm64.{key} = false needs machine.arch = \"arm64\", not \"{}\"",
                    m.arch.name()
                )));
            }
        }
        if !(2..=16).contains(&self.asid_bits) {
            return Err(Error::Range(format!(
                "arm64.asid_bits = {} (allowed 2..=16; hardware has 8 or 16)",
                self.asid_bits
            )));
        }
        if m.arch == Arch::Arm64 && (1u64 << self.asid_bits) <= m.cpus as u64 + 1 {
            return Err(Error::Range(format!(
                "arm64.asid_bits = {} gives {} ASIDs, not more than machine.cpus + 1 = {} (asids_init refuses: every CPU may hold one across a rollover)",
                self.asid_bits,
                1u64 << self.asid_bits,
                m.cpus + 1
            )));
        }
        Ok(())
    }
}
