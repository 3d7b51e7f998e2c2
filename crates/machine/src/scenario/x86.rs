//! The `[x86]` section of a scenario: the x86 flush paths' switches
//! (`crates/kernel/src/arch/x86`), their defaults and their checks.

use super::{Arch, Scenario};
use crate::Error;
use serde::{Deserialize, Serialize};

/// Where `struct flush_tlb_info` lives (seed x86-flush-tlb-info-on-stack).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlushTlbInfoPlacement {
    /// Upstream today: `DEFINE_PER_CPU_SHARED_ALIGNED(struct flush_tlb_info, ...)`.
    Percpu,
    /// The seed: on the caller's stack, `__aligned(64)`.
    StackAligned,
    /// On the stack with only natural (8-byte) alignment.
    StackUnaligned,
}

/// The paravirtual TLB-flush backend (`pv_ops.mmu.flush_tlb_multi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Paravirt {
    /// Bare metal: `native_flush_tlb_multi`.
    None,
    /// KVM guest: `kvm_flush_tlb_multi` skips preempted vCPUs.
    Kvm,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct X86Cfg {
    /// Seed (a): `percpu | stack_aligned | stack_unaligned`.
    pub flush_tlb_info: FlushTlbInfoPlacement,
    /// Byte offset within its cache line of an unaligned on-stack
    /// `flush_tlb_info` (8-byte aligned; 32 puts the 40-byte struct across two lines).
    pub flush_tlb_info_stack_offset: u32,
    /// `tlb_single_page_flush_ceiling` (debugfs), in pages.
    pub tlb_single_page_flush_ceiling: u32,
    /// X86_FEATURE_INVLPGB: multi-CPU flushes use broadcast INVLPGB + TLBSYNC, no IPIs.
    pub invlpgb: bool,
    /// `pv_ops.mmu.flush_tlb_multi`: `none` (native) or `kvm`.
    pub paravirt: Paravirt,
    /// In a guest: mean time a vCPU runs between host preemptions (µs,
    /// exponential); 0 = never preempted (bare metal). A preempted vCPU takes
    /// IPIs when it runs again; `paravirt = kvm` skips it instead.
    pub vcpu_run_us: u32,
    /// Mean length of a host preemption of a vCPU (µs, exponential).
    pub vcpu_preempt_us: u32,
    /// Seed (a) v7: `flush_tlb_mm_range` keeps only migration disabled while
    /// it waits for the IPIs, so it can be preempted. Needs a stack
    /// `flush_tlb_info` (the per-CPU one would be overwritten by a
    /// preempting flush on the same CPU).
    pub preemptible_flush: bool,
    /// `ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH` on x86 (Mel Gorman, v4.3, commit
    /// 72b252aed506 "mm: send one IPI per CPU to TLB flush all entries after
    /// unmapping pages"): reclaim's `try_to_unmap` defers its flushes to one
    /// `arch_tlbbatch_flush`. `false` = x86 before that series: every
    /// unmapped page is flushed on the spot (`ptep_clear_flush`).
    pub batched_unmap: bool,
}

impl Default for X86Cfg {
    fn default() -> Self {
        X86Cfg {
            flush_tlb_info: FlushTlbInfoPlacement::Percpu,
            flush_tlb_info_stack_offset: 32,
            tlb_single_page_flush_ceiling: 33,
            invlpgb: false,
            paravirt: Paravirt::None,
            vcpu_run_us: 0,
            vcpu_preempt_us: 50,
            preemptible_flush: false,
            batched_unmap: true,
        }
    }
}

impl X86Cfg {
    /// Every `x86.*` switch and its allowed values, for `tlblab list`.
    pub(super) const SWITCHES: &'static [(&'static str, &'static str, &'static str)] = &[
        (
            "x86.flush_tlb_info",
            "percpu | stack_aligned | stack_unaligned",
            "where struct flush_tlb_info lives (seed x86-flush-tlb-info-on-stack)",
        ),
        (
            "x86.flush_tlb_info_stack_offset",
            "0..56, step 8",
            "offset in its line of an unaligned stack struct",
        ),
        ("x86.invlpgb", "true | false", "AMD INVLPGB broadcast flush instead of IPIs"),
        (
            "x86.preemptible_flush",
            "true | false",
            "seed x86-flush-tlb-info-on-stack v7: wait for flush IPIs with preemption on (needs a stack flush_tlb_info)",
        ),
        ("x86.paravirt", "none | kvm", "flush_tlb_multi backend; kvm skips preempted vCPUs"),
        ("x86.vcpu_run_us", "us (0 = never)", "a guest: mean vCPU run time between host preemptions (IPIs to a preempted vCPU wait; kvm skips it)"),
        ("x86.vcpu_preempt_us", "us (50)", "a guest: mean host preemption length"),
        (
            "x86.batched_unmap",
            "true | false",
            "reclaim's batched unmap flush (v4.3); false: ptep_clear_flush per unmapped page",
        ),
        (
            "x86.tlb_single_page_flush_ceiling",
            "pages (33)",
            "ranges longer than this become full flushes",
        ),
    ];

    /// Check what the types cannot: ranges, and combinations with the
    /// machine and the other sections (`s` is the whole scenario).
    pub(super) fn validate(&self, s: &Scenario) -> Result<(), Error> {
        let m = &s.machine;
        if self.flush_tlb_info_stack_offset >= 64
            || !self.flush_tlb_info_stack_offset.is_multiple_of(8)
        {
            return Err(Error::Range(format!(
                "x86.flush_tlb_info_stack_offset = {} (a multiple of 8 below 64)",
                self.flush_tlb_info_stack_offset
            )));
        }
        if self.tlb_single_page_flush_ceiling > 1 << 20 {
            return Err(Error::Range(format!(
                "x86.tlb_single_page_flush_ceiling = {}",
                self.tlb_single_page_flush_ceiling
            )));
        }
        if self.vcpu_run_us > 10_000_000 || self.vcpu_preempt_us > 10_000_000 {
            return Err(Error::Range(
                "x86.vcpu_run_us / x86.vcpu_preempt_us (allowed 0..=10000000)".into(),
            ));
        }
        if self.preemptible_flush
            && self.flush_tlb_info == FlushTlbInfoPlacement::Percpu
            && !s.inject.preemptible_percpu_flush
        {
            return Err(Error::Config(
                "x86.preemptible_flush needs x86.flush_tlb_info = stack_aligned or stack_unaligned: a preempting flush on the same CPU would overwrite the per-CPU struct (unsafe)".into(),
            ));
        }
        if !self.batched_unmap && m.arch != Arch::X86 {
            return Err(Error::Config(format!(
                "x86.batched_unmap = false needs machine.arch = \"x86\", not \"{}\"",
                m.arch.name()
            )));
        }
        if m.arch != Arch::X86
            && (self.invlpgb
                || self.paravirt != Paravirt::None
                || self.flush_tlb_info != FlushTlbInfoPlacement::Percpu)
        {
            return Err(Error::Config(format!(
                "x86.* switches (invlpgb, paravirt, flush_tlb_info) need machine.arch = \"x86\", not \"{}\"",
                m.arch.name()
            )));
        }
        Ok(())
    }
}
