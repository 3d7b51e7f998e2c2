//! The cost profile: every price the simulator charges, in one place.
//!
//! Kernel paths never carry a latency constant. They record *what* they did
//! (an INVLPG, an IPI sent, a cache line read) as a [`Cost`] class with a
//! count; the driver prices those records with a [`CostProfile`]. The bundled
//! default (`profiles/x86-icelake.toml`) names the published source of every
//! entry; `run --profile FILE` swaps in another (for example one written by
//! `tlblab calibrate`).

use crate::Error;
use serde::Deserialize;
use std::collections::BTreeMap;

macro_rules! costs {
    ($($(#[doc = $doc:literal])* $v:ident = $name:literal,)*) => {
        /// A cost class. Each names one hardware or kernel action.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Cost { $($(#[doc = $doc])* $v,)* }

        impl Cost {
            /// Every class, in declaration order.
            pub const ALL: &'static [Cost] = &[$(Cost::$v,)*];
            /// Is this TLB-maintenance work (what the `flush_share` report counts)?
            pub fn is_tlb_maintenance(self) -> bool {
                matches!(
                    self,
                    Cost::Invlpg
                        | Cost::FlushTlbLocal
                        | Cost::FlushTlbGlobal
                        | Cost::Invlpgb
                        | Cost::Tlbsync
                        | Cost::TlbiLocal
                        | Cost::TlbiIs
                        | Cost::DvmOpPerCore
                        | Cost::DsbIsh
                        | Cost::DvmSnoop
                        | Cost::SfenceVma
                        | Cost::SfenceVmaAsid
                        | Cost::SbiRfenceHart
                )
            }
            /// The profile key of this class.
            pub fn name(self) -> &'static str {
                match self { $(Cost::$v => $name,)* }
            }
            /// What the class stands for (its doc comment).
            pub fn doc(self) -> &'static str {
                match self { $(Cost::$v => concat!($($doc),*).trim_ascii(),)* }
            }
        }
    };
}

costs! {
    /// `syscall` entry plus `sysret` exit, no mitigations.
    SyscallEntryExit = "syscall_entry_exit",
    /// Page-fault exception entry, `do_user_addr_fault` up to `handle_mm_fault`, and `iret`.
    PageFaultEntryExit = "page_fault_entry_exit",
    /// `do_anonymous_page`: allocate, zero and charge a 4 KiB page, set the PTE.
    DoAnonymousPage = "do_anonymous_page",
    /// Fixed part of a zap: `tlb_gather_mmu`, walking to the PTE table, `tlb_finish_mmu`.
    ZapFixed = "zap_fixed",
    /// Clearing one PTE and adding its page to the gather batch.
    ZapPte = "zap_pte",
    /// Freeing one page from the gather batch back to the allocator.
    FreePage = "free_page",
    /// Freeing one page-table page.
    FreeTable = "free_table",
    /// A locked read-modify-write on a line already owned (`atomic64_inc_return`).
    AtomicOp = "atomic_op",
    /// Filling `struct flush_tlb_info` (compute, excluding cache misses).
    FlushInfoInit = "flush_info_init",
    /// Fixed part of `smp_call_function_many_cond`: cpumask copies and loops.
    SmpCallFixed = "smp_call_fixed",
    /// Sending one IPI: x2APIC ICR write with its fence, per target.
    IpiSend = "ipi_send",
    /// From the ICR write until the target starts its interrupt entry.
    IpiDelivery = "ipi_delivery",
    /// Interrupt entry up to the vector's handler.
    IrqEntry = "irq_entry",
    /// Interrupt exit back to the interrupted context.
    IrqExit = "irq_exit",
    /// Dispatching one queued call-function entry (`__flush_smp_call_function_queue`).
    CsdRun = "csd_run",
    /// Fixed part of `flush_tlb_func` (generation checks, tracing).
    FlushTlbFuncFixed = "flush_tlb_func_fixed",
    /// One `INVLPG` (`flush_tlb_one_user`).
    Invlpg = "invlpg",
    /// A full flush of the current ASID (`flush_tlb_local`: CR3 write or INVPCID).
    FlushTlbLocal = "flush_tlb_local",
    /// A CR3 write that keeps the ASID's entries (`build_cr3_noflush`).
    Cr3Write = "cr3_write",
    /// `__schedule` and `context_switch` excluding `switch_mm_irqs_off`.
    ContextSwitch = "context_switch",
    /// A hardware page walk after a TLB miss (page-table lines in cache).
    TlbMissWalk = "tlb_miss_walk",
    /// A user load or store that hits the TLB.
    UserAccess = "user_access",
    /// One iteration of a benchmark's own loop (branch, counter).
    UserLoop = "user_loop",
    /// Moving a cache line from another core's cache (core-to-core latency).
    CacheLineTransfer = "cache_line_transfer",
    /// Each further line missed together with the first (overlapping misses).
    CacheLineConcurrent = "cache_line_concurrent",
    /// Fixed part of `mmap` (VMA setup).
    MmapFixed = "mmap_fixed",
    /// Fixed part of `munmap` (VMA teardown, `free_pgtables` walk).
    MunmapFixed = "munmap_fixed",
    /// `pthread_create`/`fork` up to the new task's first instruction: staggers a benchmark's tasks.
    TaskCreate = "task_create",
    /// `collapse_huge_page` set-up: allocate and charge a 2 MiB folio, locks, revalidation.
    CollapseSetup = "collapse_setup",
    /// `__collapse_huge_page_copy`: copy one 4 KiB page into the huge page and release it.
    CollapseCopyPage = "collapse_copy_page",
    /// One GUP-fast walk step (`gup_fast_pgd_range` level reads, folio reference, re-checks).
    GupFastWalk = "gup_fast_walk",
    /// One INVLPGB of a page (AMD broadcast invalidation, no IPI).
    Invlpgb = "invlpgb",
    /// TLBSYNC: wait for this CPU's outstanding INVLPGBs to complete everywhere.
    Tlbsync = "tlbsync",
    /// `kvm_flush_tlb_multi`: reading one vCPU's steal-time `preempted` byte.
    KvmSteal = "kvm_steal_check",
    /// One NMI (perf sampling): taken even with IRQs off.
    Nmi = "nmi",
    /// arm64: `TLBI VALE1` (or `ASIDE1`) plus `DSB NSH`: this CPU only.
    TlbiLocal = "tlbi_local",
    /// arm64: issuing one broadcast `TLBI ...IS` (the instruction, before the DSB).
    TlbiIs = "tlbi_is",
    /// arm64: one broadcast TLBI's fan-out per core of the inner-shareable
    /// domain; it holds one of the DVM node's `[dvm] ops_in_flight` trackers.
    DvmOpPerCore = "dvm_op_per_core",
    /// arm64: one DVM Sync (`DSB ISH`) at the DVM node, which completes Syncs one at a time.
    DsbIsh = "dsb_ish",
    /// arm64: a core's MMU handling one incoming broadcast TLBI (stolen from what it runs).
    DvmSnoop = "dvm_snoop",
    /// arm64: `flush_context` on ASID rollover (bitmap reset under `cpu_asid_lock`).
    AsidRollover = "asid_rollover",
    /// `do_wp_page` fixed part: PTE lock, folio lookup, exclusivity checks.
    DoWpPage = "do_wp_page",
    /// `wp_page_copy`: allocate a page and copy 4 KiB into it.
    CopyPage = "copy_page",
    /// `copy_present_pte` at fork: one PTE copied, both write-protected, folio ref taken.
    CopyPte = "copy_pte",
    /// `fork` fixed part: `copy_process`, `dup_mm` without the page-table copy.
    ForkFixed = "fork_fixed",
    /// `execve` of a small program, apart from tearing down the old mm.
    ExecFixed = "exec_fixed",
    /// A user `memset` of one 4 KiB page (usemem's inner loop), TLB hit.
    UserPageWrite = "user_page_write",
    /// `do_shared_fault` of a page-cache page: `filemap_fault` lookup, map it, take a reference.
    FilemapFault = "filemap_fault",
    /// `filemap_map_pages`: mapping one more cached page during fault-around (set_pte, rmap, refcount).
    FaultAroundPte = "fault_around_pte",
    /// Mean of a typical IRQ-off window on a CPU (`spin_lock_irqsave` sections).
    IrqOffShort = "irqoff_short",
    /// Mean of a long IRQ-off window (the tail: console, large lists, firmware-ish drivers).
    IrqOffLong = "irqoff_long",
    /// RISC-V: local `sfence.vma addr, asid`.
    SfenceVma = "sfence_vma",
    /// RISC-V: local `sfence.vma x0, asid` (whole ASID) or `sfence.vma` (all).
    SfenceVmaAsid = "sfence_vma_asid",
    /// RISC-V: SBI ecall into M-mode firmware and back.
    SbiEcall = "sbi_ecall",
    /// RISC-V: firmware work per target hart of a remote fence (M-mode IPI, remote trap, sfence, ack).
    SbiRfenceHart = "sbi_rfence_hart",
    /// Seed (b) step 2: one `this_cpu_write` of `active_lockless_pt_walk_mm` (publish or clear), an L1 hit.
    LocklessWalkStore = "lockless_walk_store",
    /// Seed (b) step 2: the full barrier (`smp_mb()`) ordering the publication before the walk's PMD read.
    LocklessWalkMb = "lockless_walk_mb",
    /// Seed (b) step 2: a walker's store to its per-CPU line after a syncing CPU read it (ownership upgrade).
    LocklessWalkLineReown = "lockless_walk_line_reown",
    /// `synchronize_rcu()`: the caller sleeps for one normal (non-expedited) RCU grace period.
    SynchronizeRcu = "synchronize_rcu",
    /// x86 `__flush_tlb_all` (`do_flush_tlb_all`): INVPCID all-context flush, global (kernel) entries included.
    FlushTlbGlobal = "flush_tlb_global",
    /// The I/O a GUP pin is held for (an `O_DIRECT` read into the pinned
    /// buffer, `pin_user_pages_fast` to `unpin_user_pages_dirty_lock`).
    DirectIo = "direct_io",
    /// `hpage_collapse_scan_pmd` that stops at a pinned page
    /// (`SCAN_PAGE_COUNT`): the PTE walk and folio checks, no allocation.
    CollapseScan = "collapse_scan",
    /// Reclaim's `pageout()` of one dirty 4 KiB anonymous folio to a
    /// synchronous (zram-like) swap device: `add_to_swap`, compress, store.
    SwapOutPage = "swap_out_page",
    /// `do_swap_page` of a folio in a synchronous swap device: allocate,
    /// decompress 4 KiB, add to the swap cache, map it.
    SwapInPage = "swap_in_page",
    /// One folio through `migrate_pages_batch` besides its copy and its TLB
    /// flushes: isolate, lock, allocate the target folio on the target
    /// node, the rmap walks of the unmap and of `remove_migration_ptes`,
    /// the mapping move, the old folio freed.
    MigrateFolio = "migrate_folio",
    /// `folio_copy` of one 4 KiB folio to another NUMA node.
    MigrateCopyPage = "migrate_copy_page",
}

/// One priced entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Nanoseconds per occurrence.
    pub ns: f64,
    /// Where the figure comes from.
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: String,
    description: String,
    costs: BTreeMap<String, Entry>,
    #[serde(default)]
    dvm: Option<DvmLimits>,
    #[serde(default)]
    idle: Option<IdleLoop>,
}

/// How the machine's CPUs idle: whether the idle task polls (keeps
/// `TIF_POLLING_NRFLAG` set while it waits), which decides whether a
/// remote wake-up of an idle CPU needs an IPI.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdleLoop {
    /// kernel/sched/core.c `send_call_function_single_ipi`:
    /// `set_nr_if_polling(rq->idle)` succeeds, no IPI is sent.
    polls: bool,
    /// Where the fact comes from.
    source: String,
}

/// arm64: the interconnect's DVM node, what is a count rather than a price.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DvmLimits {
    /// Broadcast TLBIs (DVMOps) the DVM node keeps in flight at once.
    ops_in_flight: u32,
    /// Where the figure comes from.
    source: String,
}

/// Prices for every [`Cost`] class.
#[derive(Clone, Debug)]
pub struct CostProfile {
    pub name: String,
    pub description: String,
    ns: Vec<f64>,
    sources: Vec<String>,
    /// arm64: DVMOps the DVM node keeps in flight (`[dvm] ops_in_flight`;
    /// 1 when the profile has no `[dvm]` table), and its source.
    pub dvm_ops_in_flight: u32,
    pub dvm_source: String,
    /// The idle loop polls (`[idle] polls`; false when the profile has no
    /// `[idle]` table): a remote wake-up of an idle CPU through the wake
    /// list sends no IPI (kernel/sched/core.c `send_call_function_single_ipi`).
    pub idle_polls: bool,
    pub idle_source: String,
}

/// The bundled default profile. Its machine's scheduling domains are
/// [`crate::topology::TopologyKind::Icelake2s`] (what `machine.topology =
/// auto` takes on x86).
pub const DEFAULT_PROFILE: &str = include_str!("../profiles/x86-icelake.toml");
/// The bundled arm64 profile (the seed's class of machine); topology
/// [`crate::topology::TopologyKind::NeoverseN2`].
pub const ARM64_PROFILE: &str = include_str!("../profiles/arm64-neoverse-n2.toml");
/// The bundled RISC-V profile; topology
/// [`crate::topology::TopologyKind::Sg2042`].
pub const RISCV_PROFILE: &str = include_str!("../profiles/riscv-sg2042.toml");
/// arm64 with the DVM Sync price fitted to the arm64 seed's baseline alone
/// (flush functions 50.5% of cycles in usemem, 4 threads, 128 cores, over a
/// steady-state window); chosen by name: `run --profile arm64-n2-seed-baseline-fit`.
pub const ARM64_BASELINE_FIT_PROFILE: &str =
    include_str!("../profiles/arm64-n2-seed-baseline-fit.toml");
/// Bundled profiles that no architecture uses by default, by name.
pub const EXTRA_PROFILES: &[(&str, &str)] =
    &[("arm64-n2-seed-baseline-fit", ARM64_BASELINE_FIT_PROFILE)];

impl CostProfile {
    /// Parse a profile; every class must be priced exactly once.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, Error> {
        let f: ProfileFile = toml::from_str(text)
            .map_err(|e| Error::Config(format!("{origin}: {}", one_line(&e.to_string()))))?;
        let mut ns = Vec::with_capacity(Cost::ALL.len());
        let mut sources = Vec::with_capacity(Cost::ALL.len());
        for c in Cost::ALL {
            let e = f.costs.get(c.name()).ok_or_else(|| {
                Error::Config(format!(
                    "{origin}: cost profile has no entry '{}'",
                    c.name()
                ))
            })?;
            if !(e.ns.is_finite() && e.ns >= 0.0 && e.ns < 1e9) {
                return Err(Error::Range(format!(
                    "{origin}: cost '{}' = {} ns",
                    c.name(),
                    e.ns
                )));
            }
            ns.push(e.ns);
            sources.push(e.source.clone());
        }
        if let Some(k) = f
            .costs
            .keys()
            .find(|k| !Cost::ALL.iter().any(|c| c.name() == *k))
        {
            return Err(Error::Config(format!("{origin}: unknown cost entry '{k}'")));
        }
        let dvm = f.dvm.unwrap_or(DvmLimits {
            ops_in_flight: 1,
            source: "no [dvm] table: one DVMOp at a time".into(),
        });
        if !(1..=1024).contains(&dvm.ops_in_flight) {
            return Err(Error::Range(format!(
                "{origin}: dvm.ops_in_flight = {} (allowed 1..=1024)",
                dvm.ops_in_flight
            )));
        }
        let idle = f.idle.unwrap_or(IdleLoop {
            polls: false,
            source: "no [idle] table: the idle task does not poll (HLT/WFI), a wake-up of an idle CPU is an IPI".into(),
        });
        Ok(CostProfile {
            name: f.name,
            description: f.description,
            ns,
            sources,
            dvm_ops_in_flight: dvm.ops_in_flight,
            dvm_source: dvm.source,
            idle_polls: idle.polls,
            idle_source: idle.source,
        })
    }

    /// The bundled default.
    pub fn default_x86() -> Self {
        Self::from_toml(DEFAULT_PROFILE, "bundled profile").expect("bundled profile parses")
    }

    /// The bundled profile for `arch`.
    pub fn default_for(arch: crate::scenario::Arch) -> Self {
        let (text, origin) = match arch {
            crate::scenario::Arch::X86 => (DEFAULT_PROFILE, "bundled x86 profile"),
            crate::scenario::Arch::Arm64 => (ARM64_PROFILE, "bundled arm64 profile"),
            crate::scenario::Arch::Riscv => (RISCV_PROFILE, "bundled riscv profile"),
        };
        Self::from_toml(text, origin).expect("bundled profile parses")
    }

    /// A bundled profile that is no architecture's default, by its name.
    pub fn bundled(name: &str) -> Option<Self> {
        EXTRA_PROFILES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, text)| Self::from_toml(text, n).expect("bundled profile parses"))
    }

    /// Nanoseconds for one occurrence of `c`.
    #[inline]
    pub fn ns(&self, c: Cost) -> f64 {
        self.ns[c as usize]
    }

    /// The documented source of `c`'s price.
    pub fn source(&self, c: Cost) -> &str {
        &self.sources[c as usize]
    }

    /// The profile as TOML (what `from_toml` reads back).
    pub fn to_toml(&self) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out = format!(
            "name = \"{}\"\ndescription = \"{}\"\n\n[costs]\n",
            esc(&self.name),
            esc(&self.description)
        );
        for c in Cost::ALL {
            out.push_str(&format!(
                "{} = {{ ns = {:.3}, source = \"{}\" }}\n",
                c.name(),
                self.ns(*c),
                esc(self.source(*c))
            ));
        }
        out.push_str(&format!(
            "\n[dvm]\nops_in_flight = {}\nsource = \"{}\"\n",
            self.dvm_ops_in_flight,
            esc(&self.dvm_source)
        ));
        out.push_str(&format!(
            "\n[idle]\npolls = {}\nsource = \"{}\"\n",
            self.idle_polls,
            esc(&self.idle_source)
        ));
        out
    }

    /// Replace one entry's documented source.
    pub fn set_source(&mut self, c: Cost, source: String) {
        self.sources[c as usize] = source;
    }

    /// Override one price (calibration, sweeps).
    pub fn set(&mut self, c: Cost, ns: f64) {
        self.ns[c as usize] = ns;
    }
}

/// Fold a multi-line parser message into one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_profile_prices_every_class_with_a_source() {
        let p = CostProfile::default_x86();
        for c in Cost::ALL {
            assert!(p.ns(*c) >= 0.0);
            assert!(p.source(*c).len() > 10, "{} needs a source", c.name());
            assert!(!c.doc().is_empty());
        }
    }

    #[test]
    fn every_bundled_profile_is_complete() {
        use crate::scenario::Arch;
        for a in [Arch::X86, Arch::Arm64, Arch::Riscv] {
            let p = CostProfile::default_for(a);
            assert!(p.name.contains(a.name()), "{} for {}", p.name, a.name());
            for c in Cost::ALL {
                assert!(
                    p.source(*c).len() > 10,
                    "{}: {} needs a source",
                    p.name,
                    c.name()
                );
            }
        }
    }

    /// The extra bundled profiles load by name, price every class with a
    /// source, and the arm64 baseline fit differs from the N2 profile only
    /// in the DVM Sync price it fits.
    #[test]
    fn extra_bundled_profiles_load_by_name() {
        assert!(CostProfile::bundled("no-such-profile").is_none());
        let fit = CostProfile::bundled("arm64-n2-seed-baseline-fit").unwrap();
        let n2 = CostProfile::default_for(crate::scenario::Arch::Arm64);
        for c in Cost::ALL {
            assert!(fit.source(*c).len() > 10, "{}", c.name());
            let fitted = matches!(c, Cost::DsbIsh);
            assert_eq!(fit.ns(*c) != n2.ns(*c), fitted, "{}", c.name());
        }
    }

    #[test]
    fn toml_round_trip() {
        let mut p = CostProfile::default_x86();
        p.set(Cost::Invlpg, 123.5);
        p.set_source(Cost::Invlpg, "measured \"here\"".into());
        let q = CostProfile::from_toml(&p.to_toml(), "round trip").unwrap();
        assert_eq!(q.ns(Cost::Invlpg), 123.5);
        assert_eq!(q.source(Cost::Invlpg), "measured \"here\"");
        let mut a = CostProfile::default_for(crate::scenario::Arch::Arm64);
        a.dvm_ops_in_flight = 7;
        let b = CostProfile::from_toml(&a.to_toml(), "round trip").unwrap();
        assert_eq!(b.dvm_ops_in_flight, 7);
        assert_eq!(b.dvm_source, a.dvm_source);
    }

    #[test]
    fn dvm_ops_in_flight_out_of_range_is_an_error() {
        let bad = ARM64_PROFILE.replace("ops_in_flight = 4", "ops_in_flight = 0");
        assert_ne!(bad, ARM64_PROFILE);
        let e = CostProfile::from_toml(&bad, "t").unwrap_err().to_string();
        assert!(e.contains("dvm.ops_in_flight = 0"), "{e}");
    }

    #[test]
    fn missing_and_unknown_entries_are_errors() {
        let bad = DEFAULT_PROFILE.replace("\ninvlpg ", "\ninvlpgx ");
        let e = CostProfile::from_toml(&bad, "t").unwrap_err().to_string();
        assert!(e.contains("'invlpg'"), "{e}");
        let e = CostProfile::from_toml("name = 1", "t").unwrap_err();
        assert!(matches!(e, Error::Config(_)));
    }
}
