//! The `[riscv]` section of a scenario: the RISC-V flush paths' switches
//! (`crates/kernel/src/arch/riscv`), their defaults and their checks.

use super::{Arch, Scenario};
use crate::Error;
use serde::{Deserialize, Serialize};

/// How RISC-V reaches other harts' TLBs (`riscv_use_sbi_for_rfence()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rfence {
    /// Kernel IPIs (`on_each_cpu_mask`), each target runs `sfence.vma` itself.
    Ipi,
    /// `sbi_remote_sfence_vma_asid`: an ecall; the firmware IPIs the harts.
    Sbi,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RiscvCfg {
    /// Remote flush mechanism: `ipi` | `sbi`.
    pub rfence: Rfence,
    /// `tlb_flush_all_threshold`: ranges over this many pages flush the whole ASID.
    pub tlb_flush_all_threshold: u32,
    /// ASID bits the hart implements (`satp.ASID` width, up to 16); 0 = no ASIDs.
    pub asid_bits: u32,
    /// Seed (d): queue flushes for harts not running the mm; apply at `switch_mm`.
    pub defer_flush_to_context_switch: bool,
    /// Seed (d): entries in each hart's deferred-flush queue before it
    /// degrades to "flush the whole ASID".
    pub flush_queue_depth: u32,
    /// Seed (d) follow-up: clear a hart from `mm_cpumask` after it switched away
    /// from the mm this many times while deferring (0 = never, as upstream).
    pub cpumask_clear_threshold: u32,
    /// UNSAFE (the v1 bug found in review): defer kernel-ASID flushes too.
    pub defer_kernel_flush: bool,
    /// UNSAFE: read `loaded_asid` before publishing the queued flush (no
    /// ordering against `switch_mm`'s store of `loaded_asid`).
    pub unordered_enqueue: bool,
    /// Xu Lu's mask-clearing patch (Aug 2025, "riscv: mm: Clear cpu in
    /// mm_cpumask after local_flush_tlb_all_asid"): a hart that flushes an
    /// mm's whole ASID while not running it leaves the mm's `mm_cpumask`.
    pub cpumask_clear_on_flush_all: bool,
    /// `ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH` on RISC-V (Alexandre Ghiti, v6.8,
    /// commit 54d7431af73e "riscv: Add support for BATCHED_UNMAP_TLB_FLUSH"):
    /// the unmaps OR `mm_cpumask` into a batch mask, one `FLUSH_TLB_NO_ASID`
    /// flush of it at `arch_tlbbatch_flush`. `false` = RISC-V before it:
    /// `ptep_clear_flush` (an IPI round) per unmapped page.
    pub batched_unmap: bool,
}

impl Default for RiscvCfg {
    fn default() -> Self {
        RiscvCfg {
            rfence: Rfence::Ipi,
            tlb_flush_all_threshold: 64,
            asid_bits: 16,
            defer_flush_to_context_switch: false,
            flush_queue_depth: 16,
            cpumask_clear_threshold: 0,
            defer_kernel_flush: false,
            unordered_enqueue: false,
            cpumask_clear_on_flush_all: false,
            batched_unmap: true,
        }
    }
}

impl RiscvCfg {
    /// Every `riscv.*` switch and its allowed values, for `tlblab list`.
    pub(super) const SWITCHES: &'static [(&'static str, &'static str, &'static str)] = &[
        (
            "riscv.rfence",
            "ipi | sbi",
            "remote sfence.vma by kernel IPI or SBI firmware call",
        ),
        (
            "riscv.defer_flush_to_context_switch",
            "true | false",
            "seed riscv-defer-flush: queue flushes for harts not running the mm",
        ),
        (
            "riscv.flush_queue_depth",
            "entries (16)",
            "deferred queue depth (TLB_FLUSH_QUEUE_SIZE); full: IPI now",
        ),
        (
            "riscv.cpumask_clear_threshold",
            "switches (0 = never)",
            "clear a hart from mm_cpumask after N switches away",
        ),
        (
            "riscv.tlb_flush_all_threshold",
            "pages (64)",
            "ranges longer than this flush the ASID",
        ),
        (
            "riscv.asid_bits",
            "0 | 2..16 (16)",
            "ASID width; 0 = no ASIDs",
        ),
        (
            "riscv.defer_kernel_flush",
            "true | false",
            "UNSAFE (v1 bug): defer kernel-ASID flushes",
        ),
        (
            "riscv.unordered_enqueue",
            "true | false",
            "UNSAFE: loaded_asid read not ordered against the queued flush",
        ),
        (
            "riscv.cpumask_clear_on_flush_all",
            "true | false",
            "mask-clearing patch: leave mm_cpumask after a whole-ASID flush",
        ),
        (
            "riscv.batched_unmap",
            "true | false",
            "reclaim's batched unmap flush (v6.8); false: ptep_clear_flush per unmapped page",
        ),
    ];

    /// Check what the types cannot: ranges, and combinations with the
    /// machine and the other sections (`s` is the whole scenario).
    pub(super) fn validate(&self, s: &Scenario) -> Result<(), Error> {
        let m = &s.machine;
        if !self.batched_unmap && m.arch != Arch::Riscv {
            return Err(Error::Config(format!(
                "riscv.batched_unmap = false needs machine.arch = \"riscv\", not \"{}\"",
                m.arch.name()
            )));
        }
        if self.asid_bits > 16 || self.asid_bits == 1 {
            return Err(Error::Range(format!(
                "riscv.asid_bits = {} (allowed 0 or 2..=16)",
                self.asid_bits
            )));
        }
        if !(1..=4096).contains(&self.flush_queue_depth) || self.tlb_flush_all_threshold > 1 << 20 {
            return Err(Error::Range(format!(
                "riscv.flush_queue_depth = {} (allowed 1..=4096), riscv.tlb_flush_all_threshold = {}",
                self.flush_queue_depth, self.tlb_flush_all_threshold
            )));
        }
        if self.cpumask_clear_threshold > 0 && !self.defer_flush_to_context_switch {
            return Err(Error::Config(
                "riscv.cpumask_clear_threshold needs riscv.defer_flush_to_context_switch = true"
                    .into(),
            ));
        }
        if m.arch == Arch::Riscv
            && (self.defer_flush_to_context_switch || self.defer_kernel_flush)
            && !s.riscv_use_asid()
        {
            return Err(Error::Config(format!(
                "riscv.defer_flush_to_context_switch needs the ASID allocator, which the kernel enables only with more than 2 x machine.cpus = {} ASIDs (riscv.asid_bits = {})",
                2 * m.cpus,
                self.asid_bits
            )));
        }
        Ok(())
    }
}

impl Scenario {
    /// arch/riscv/mm/context.c: `asids_init`: the ASID allocator is used only
    /// when there are more than twice as many ASIDs as CPUs; otherwise
    /// every switch flushes the TLB (`set_mm_noasid`).
    pub fn riscv_use_asid(&self) -> bool {
        self.riscv.asid_bits > 0 && (1u64 << self.riscv.asid_bits) > 2 * self.machine.cpus as u64
    }
}
