//! The catalogue: small configurations, each expected safe or unsafe.
//!
//! The catalogue and the helpers that build and run a check are here;
//! each world builder sits with its protocol family: `x86_flush` (the
//! madvise and munmap races, also run on arm64 and RISC-V, the preempted
//! flush, switching back to the mm), `collapse` (page-table pages freed
//! under GUP-fast: collapse, PT_RECLAIM, munmap, pageout), `hugetlb`,
//! `vmalloc`, `arm64` (write-protect reuse, ASID rollover), `riscv`
//! (the deferred flush against a context switch), `reclaim` and `migrate`
//! (batched unmap flushes).

use kernel::hw::memory_model::MemoryModel;
use kernel::World;
use machine::{CpuId, Error, Scenario};

mod arm64;
mod collapse;
mod hugetlb;
mod migrate;
mod reclaim;
mod riscv;
pub mod sizes;
mod vmalloc;
mod x86_flush;

use arm64::{asid_fastpath_vs_rollover, asid_rollover, wp_reuse_race};
use collapse::{
    collapse_vs_gup, collapse_vs_gup_global_asid, collapse_vs_pin, collapse_vs_reader,
    munmap_vs_gup, pageout_race, pt_reclaim_lazy, pt_reclaim_vs_gup,
};
use hugetlb::{hugetlb_unshare, hugetlb_unshare_4cpu};
use migrate::migrate_vs_gup;
use reclaim::kswapd_vs_reader;
use riscv::{defer_vs_switch, switch_then_read};
use vmalloc::{vfree_lazy_vs_reader, vmalloc_vs_reader};
use x86_flush::{
    lazy_return, madvise_race, munmap_1w_1r, munmap_1w_2r, preempting_flush, race_1w_2r,
    race_1w_3r, race_1w_3r_2rounds, race_1w_3r_3rounds, race_2w_1r, switch_back,
};

/// The user address every world maps its pages at.
const P: u64 = 0x7f00_0000_0000;

/// One named check.
pub struct Config {
    pub name: &'static str,
    pub about: &'static str,
    /// Extra scenario settings (switches, injected bugs) on top of the base.
    pub sets: &'static [&'static str],
    pub expect_safe: bool,
    /// Groups of interchangeable CPUs for the symmetry reduction: CPUs
    /// that start in identical roles (the same programs, in the same
    /// order, and the same per-CPU state up to renaming). Any renaming is
    /// sound (the model never depends on an id's value); a group only pays
    /// when its CPUs' states can actually coincide up to renaming.
    pub sym: &'static [&'static [CpuId]],
    /// Which small world to build.
    pub world: fn(&Scenario) -> Result<World, Error>,
}

/// Every check, upstream first, then the variants that must be caught.
pub const CATALOGUE: &[Config] = &[
    Config {
        name: "x86_madvise_race",
        about:
            "madvise(MADV_DONTNEED) of a page that another thread of the mm keeps reading (2 CPUs)",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "x86_madvise_race_pcid_off",
        about: "the same without PCID",
        sets: &["machine.pcid=false"],
        expect_safe: true,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "bug_free_before_flush",
        about: "mmu_gather frees the page before the TLB flush",
        sets: &["inject.free_before_flush=true"],
        expect_safe: false,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "bug_no_ipi_wait",
        about: "native_flush_tlb_multi does not wait for the IPIs (csd_lock_wait removed)",
        sets: &["inject.no_ipi_wait=true"],
        expect_safe: false,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "bug_flush_tlb_func_skips_flush",
        about: "flush_tlb_func catches up tlb_gen without flushing",
        sets: &["inject.skip_flush_in_flush_tlb_func=true"],
        expect_safe: false,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "x86_collapse_vs_gup",
        about:
            "khugepaged collapse of 2 MiB against a GUP-fast walker of the same range (upstream)",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_collapse_skip",
        about: "the same with the seed's skip (native flush: the flush IPI is the sync)",
        sets: &["mm.skip_redundant_table_sync=true"],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_collapse_skip_kvm",
        about: "the seed's skip under KVM with vCPU preemption: the static key stays off",
        sets: &[
            "mm.skip_redundant_table_sync=true",
            "x86.paravirt=kvm",
            "x86.vcpu_run_us=100",
        ],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_collapse_skip_invlpgb",
        about: "the seed's skip with INVLPGB: the static key stays off",
        sets: &["mm.skip_redundant_table_sync=true", "x86.invlpgb=true"],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "unsafe_skip_with_invlpgb",
        about: "skipping the sync although INVLPGB flushes a global-ASID mm (active on 4 CPUs) without IPIs",
        sets: &[
            "mm.force_skip_table_sync=true",
            "x86.invlpgb=true",
            "machine.cpus=4",
        ],
        expect_safe: false,
        sym: &[],
        world: collapse_vs_gup_global_asid,
    },
    Config {
        name: "unsafe_skip_with_pv_flush",
        about: "skipping the sync although kvm_flush_tlb_multi does not IPI preempted vCPUs",
        sets: &[
            "mm.force_skip_table_sync=true",
            "x86.paravirt=kvm",
            "x86.vcpu_run_us=100",
        ],
        expect_safe: false,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_collapse_vs_gup_3cpu",
        about: "khugepaged collapse against two GUP-fast walkers (3 CPUs, upstream)",
        sets: &["machine.cpus=3"],
        expect_safe: true,
        sym: &[&[1, 2]],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_collapse_skip_3cpu",
        about: "the same with the seed's skip",
        sets: &["machine.cpus=3", "mm.skip_redundant_table_sync=true"],
        expect_safe: true,
        sym: &[&[1, 2]],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_hugetlb_unshare_seed",
        about: "hugetlb PMD unshare while a lazy CPU caches the shared table, with the seed (unshare flush IPIs lazy CPUs; sync skipped)",
        sets: &["mm.skip_redundant_table_sync=true"],
        expect_safe: true,
        sym: &[],
        world: hugetlb_unshare,
    },
    Config {
        name: "unsafe_unshare_without_lazy_ipi",
        about: "the seed's skip, but the unshare flush leaves lazy CPUs out (freed_tables only)",
        sets: &[
            "mm.skip_redundant_table_sync=true",
            "mm.unshare_without_lazy_ipi=true",
        ],
        expect_safe: false,
        sym: &[],
        world: hugetlb_unshare,
    },
    Config {
        name: "exposed_hugetlb_unshare_pre_seed",
        about: "upstream before seed (b): the sync IPI reaches the lazy CPU but does not drop its PUD-entry cache (the arm64 counterpart was fixed in c2ff4764e03e)",
        sets: &[],
        expect_safe: false,
        sym: &[],
        world: hugetlb_unshare,
    },
    Config {
        name: "arm64_hugetlb_unshare",
        about: "arm64 with FEAT_TLBIRANGE: hugetlb PMD unshare while walk caches hold the PUD entry of the shared table (Arm's model; tlb_flush flushes the walk cache, c2ff4764e03e)",
        sets: &["machine.arch=arm64", "arm64.range_tlbi=true"],
        expect_safe: true,
        sym: &[],
        world: hugetlb_unshare,
    },
    Config {
        name: "exposed_arm64_hugetlb_unshare_pre_fix",
        about: "arm64 before c2ff4764e03e, with FEAT_TLBIRANGE: the unshare's range TLBI is last-level only and the unsharing CPU's walk cache keeps the PUD entry of the table B reuses (I3); without range TLBIs the 1 GiB unshare range falls back to flush_tlb_mm, which hides it",
        sets: &[
            "machine.arch=arm64",
            "arm64.range_tlbi=true",
            "arm64.unshare_flush_walk_cache=false",
        ],
        expect_safe: false,
        sym: &[],
        world: hugetlb_unshare,
    },
    Config {
        name: "x86_madvise_race_3cpu",
        about: "madvise race with two reader threads (3 CPUs)",
        sets: &["machine.cpus=3"],
        expect_safe: true,
        sym: &[&[1, 2]],
        world: race_1w_2r,
    },
    Config {
        name: "x86_madvise_race_4cpu",
        about: "madvise race with three reader threads (4 CPUs)",
        sets: &["machine.cpus=4"],
        expect_safe: true,
        sym: &[&[1, 2, 3]],
        world: race_1w_3r,
    },
    Config {
        name: "x86_madvise_2writers",
        about: "two threads each touching and madvising the same page, one reader (3 CPUs)",
        sets: &["machine.cpus=3"],
        expect_safe: true,
        sym: &[&[0, 1]],
        world: race_2w_1r,
    },
    Config {
        name: "x86_munmap_race",
        about: "munmap + mmap of a page another thread keeps reading (2 CPUs)",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: munmap_1w_1r,
    },
    Config {
        name: "x86_munmap_race_3cpu",
        about: "the same with two readers (3 CPUs)",
        sets: &["machine.cpus=3"],
        expect_safe: true,
        sym: &[&[1, 2]],
        world: munmap_1w_2r,
    },
    Config {
        name: "arm64_wp_reuse_broadcast",
        about: "arm64 upstream: two threads read then write a write-protected exclusive page (after fork+exec); wp_page_reuse broadcasts",
        sets: &["machine.arch=arm64"],
        expect_safe: true,
        sym: &[&[0, 1]],
        world: wp_reuse_race,
    },
    Config {
        name: "arm64_wp_reuse_local_seed",
        about: "arm64 seed: local reuse flush + local spurious-fault flush",
        sets: &[
            "machine.arch=arm64",
            "arm64.wp_reuse_flush=local",
            "arm64.spurious_fault_flush=local",
        ],
        expect_safe: true,
        sym: &[&[0, 1]],
        world: wp_reuse_race,
    },
    Config {
        name: "unsafe_arm64_no_spurious_flush",
        about: "arm64: local reuse flush without the spurious-fault flush: the other CPU's stale read-only entry faults forever",
        sets: &["machine.arch=arm64", "arm64.wp_reuse_flush=local"],
        expect_safe: false,
        sym: &[&[0, 1]],
        world: wp_reuse_race,
    },
    Config {
        name: "arm64_wp_reuse_3cpu",
        about: "arm64 seed with three threads reading then writing the write-protected page (3 CPUs)",
        sets: &[
            "machine.arch=arm64",
            "machine.cpus=3",
            "arm64.wp_reuse_flush=local",
            "arm64.spurious_fault_flush=local",
        ],
        expect_safe: true,
        sym: &[&[0, 1, 2]],
        world: wp_reuse_race,
    },
    Config {
        name: "riscv_madvise_race",
        about: "RISC-V upstream: the madvise race, IPI remote fences",
        sets: &["machine.arch=riscv"],
        expect_safe: true,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "riscv_madvise_race_sbi",
        about: "RISC-V upstream: the madvise race, SBI remote fences",
        sets: &["machine.arch=riscv", "riscv.rfence=sbi"],
        expect_safe: true,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "riscv_defer_vs_switch",
        about: "RISC-V seed: a flush for a hart that is switching from another process into the mm (enqueue, smp_mb, read loaded_asid)",
        sets: &["machine.arch=riscv", "machine.cpus=2", "riscv.defer_flush_to_context_switch=true"],
        expect_safe: true,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "unsafe_riscv_unordered_enqueue",
        about: "RISC-V: loaded_asid read before the enqueue is published: the switching hart applies an empty queue",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "riscv.defer_flush_to_context_switch=true",
            "riscv.unordered_enqueue=true",
        ],
        expect_safe: false,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "riscv_kernel_flush",
        about: "RISC-V seed: vfree of a VM_FLUSH_RESET_PERMS area (purge and flush at once) against a hart reading the vmalloc'd object (kernel flushes always IPI)",
        sets: &["machine.arch=riscv", "riscv.defer_flush_to_context_switch=true"],
        expect_safe: true,
        sym: &[],
        world: vmalloc_vs_reader,
    },
    Config {
        name: "unsafe_riscv_defer_kernel_flush",
        about: "RISC-V v1 bug: the kernel-range flush is deferred like a user one",
        sets: &[
            "machine.arch=riscv",
            "riscv.defer_flush_to_context_switch=true",
            "riscv.defer_kernel_flush=true",
        ],
        expect_safe: false,
        sym: &[],
        world: vmalloc_vs_reader,
    },
    Config {
        name: "riscv_vfree_lazy",
        about: "a plain vfree below lazy_max_pages(): no flush, the address is not handed out again, so even the deferred kernel flush (v1 bug) is unreachable",
        sets: &[
            "machine.arch=riscv",
            "riscv.defer_flush_to_context_switch=true",
            "riscv.defer_kernel_flush=true",
        ],
        expect_safe: true,
        sym: &[],
        world: vfree_lazy_vs_reader,
    },
    Config {
        name: "x86_preempt_full_upstream",
        about: "PREEMPT kernel, upstream flush (per-CPU flush_tlb_info, preemption off while waiting): the RT thread runs only after the flush",
        sets: &["machine.preemption=full"],
        expect_safe: true,
        sym: &[],
        world: preempting_flush,
    },
    Config {
        name: "x86_preemptible_flush_stack",
        about: "seed (a) v7: a flush waiting with preemption on is preempted by an RT thread of the mm that flushes too (stack flush_tlb_info)",
        sets: &[
            "machine.preemption=full",
            "x86.flush_tlb_info=stack_aligned",
            "x86.preemptible_flush=true",
        ],
        expect_safe: true,
        sym: &[],
        world: preempting_flush,
    },
    Config {
        name: "x86_preemptible_flush_stack_3cpu",
        about: "the same with two reader CPUs to IPI",
        sets: &[
            "machine.cpus=3",
            "machine.preemption=full",
            "x86.flush_tlb_info=stack_aligned",
            "x86.preemptible_flush=true",
        ],
        expect_safe: true,
        sym: &[&[1, 2]],
        world: preempting_flush,
    },
    Config {
        name: "unsafe_preemptible_percpu_info",
        about: "the same with the per-CPU flush_tlb_info: the preempting flush overwrites it",
        sets: &[
            "machine.preemption=full",
            "x86.preemptible_flush=true",
            "inject.preemptible_percpu_flush=true",
        ],
        expect_safe: false,
        sym: &[],
        world: preempting_flush,
    },
    Config {
        name: "bug_munmap_no_ipi_wait",
        about: "munmap whose flush does not wait for the IPIs",
        sets: &["inject.no_ipi_wait=true"],
        expect_safe: false,
        sym: &[],
        world: munmap_1w_1r,
    },
    Config {
        name: "x86_switch_back_race",
        about: "madvise on CPU0 while CPU1 switches back to the mm (its mm_cpumask bit still set, so switch_mm_irqs_off takes the smp_mb() path), x86-TSO",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: switch_back,
    },
    Config {
        name: "drop_switch_mm_smp_mb",
        about: "the same without switch_mm_irqs_off's smp_mb() (before 83b0177a6c48, CVE-2025-40174): LOADED_MM_SWITCHING still buffered when the flusher reads loaded_mm",
        sets: &["inject.drop_barrier=switch_mm_irqs_off.smp_mb"],
        expect_safe: false,
        sym: &[],
        world: switch_back,
    },
    Config {
        name: "drop_should_flush_tlb_smp_rmb",
        about: "FINDING, safe within the bounds (2 CPUs, store buffers of 4, depth 400): without should_flush_tlb's smp_rmb(); x86-TSO keeps loads in order, the barrier is only a compiler barrier there",
        sets: &["inject.drop_barrier=should_flush_tlb.smp_rmb"],
        expect_safe: true,
        sym: &[],
        world: switch_back,
    },
    Config {
        name: "x86_lazy_return_race",
        about: "madvise on CPU0 while CPU1 returns from lazy TLB mode to the same mm (is_lazy = false, smp_mb(), read tlb_gen), x86-TSO",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: lazy_return,
    },
    Config {
        name: "drop_switch_mm_lazy_smp_mb",
        about: "the same without the lazy-return smp_mb(): is_lazy = false still buffered when should_flush_tlb reads it, and tlb_gen read stale",
        sets: &["inject.drop_barrier=switch_mm_irqs_off.lazy_smp_mb"],
        expect_safe: false,
        sym: &[],
        world: lazy_return,
    },
    Config {
        name: "drop_inc_mm_tlb_gen_barrier",
        about: "inc_mm_tlb_gen as a plain increment (no lock prefix): the new tlb_gen still buffered when the lazy CPU's switch reads it",
        sets: &["inject.drop_barrier=inc_mm_tlb_gen.atomic64_inc_return"],
        expect_safe: false,
        sym: &[],
        world: lazy_return,
    },
    Config {
        name: "drop_switch_mm_cpumask_set_cpu",
        about: "FINDING, safe within the bounds (2 CPUs, store buffers of 4, depth 400): cpumask_set_cpu as a plain store; a CPU whose bit is clear has no current ASID slot for the mm, so its switch flushes anyway",
        sets: &["inject.drop_barrier=switch_mm_irqs_off.cpumask_set_cpu"],
        expect_safe: true,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "riscv_defer_vs_switch_mask_clearing",
        about: "RISC-V: the mask-clearing patch (leave mm_cpumask after a whole-ASID flush) with the seed's deferral, against a hart switching into the mm",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "riscv.defer_flush_to_context_switch=true",
            "riscv.cpumask_clear_on_flush_all=true",
            "riscv.tlb_flush_all_threshold=0",
        ],
        expect_safe: true,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "drop_set_mm_asid_fence",
        about: "RISC-V seed without set_mm_asid's RISCV_FENCE(w,r): the switching hart's loaded_asid still buffered when the flusher re-reads it, and its need_tlb_flush test ran before the enqueue (store buffering)",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "riscv.defer_flush_to_context_switch=true",
            "inject.drop_barrier=set_mm_asid.RISCV_FENCE(w,r)",
        ],
        expect_safe: false,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "drop_should_ipi_flush_smp_mb",
        about: "RISC-V seed without should_ipi_flush's smp_mb: need_tlb_flush = true still buffered when the switching hart tests it, and the re-read of loaded_asid saw the old ASID (store buffering)",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "riscv.defer_flush_to_context_switch=true",
            "inject.drop_barrier=should_ipi_flush.smp_mb",
        ],
        expect_safe: false,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "riscv_switch_vs_flush",
        about: "RISC-V upstream (6.12): a hart switching into the mm for the first time against a madvise flush; set_mm's cpumask_set_cpu is a relaxed AMO, ordered before the hart's walks only by switch_mm_cid's smp_mb",
        sets: &["machine.arch=riscv", "machine.cpus=2"],
        expect_safe: true,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "drop_switch_mm_cid_smp_mb",
        about: "RISC-V upstream without switch_mm_cid's smp_mb__after_switch_mm (the rseq barrier the TLB code never asked for): the switching hart's mm_cpumask bit is still buffered when the flusher reads the mask, its walk caches the PTE, no IPI, and it reads the page after it is freed",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "inject.drop_barrier=switch_mm_cid.smp_mb__after_switch_mm",
        ],
        expect_safe: false,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "drop_switch_mm_cid_smp_mb_late_reader",
        about: "RISC-V upstream without switch_mm_cid's smp_mb, hart 1 reading P only after switching away and back: no access falls in the window where its mm_cpumask bit is still buffered, so without speculative walks nothing is cached there",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "inject.drop_barrier=switch_mm_cid.smp_mb__after_switch_mm",
        ],
        expect_safe: true,
        sym: &[],
        world: switch_then_read,
    },
    Config {
        name: "drop_switch_mm_cid_smp_mb_speculative",
        about: "the same with speculative walks: hart 1's walker caches P right after the switch, while the bit is still buffered; the madvise flush misses hart 1, and its ASID-tagged entry is used after the page is freed",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "machine.speculative_walks=true",
            "inject.drop_barrier=switch_mm_cid.smp_mb__after_switch_mm",
        ],
        expect_safe: false,
        sym: &[],
        world: switch_then_read,
    },
    Config {
        name: "riscv_switch_vs_flush_speculative",
        about: "RISC-V upstream (6.12) with speculative walks: switch_mm_cid's smp_mb publishes the mm_cpumask bit before the walker can use the new satp",
        sets: &["machine.arch=riscv", "machine.cpus=2", "machine.speculative_walks=true"],
        expect_safe: true,
        sym: &[],
        world: switch_then_read,
    },
    Config {
        name: "drop_local_flush_dsb_nshst_speculative",
        about: "FINDING, safe within the bounds: arm64 seed without local_flush_tlb_page's dsb(nshst), with speculative walks: this CPU's walker may re-cache the old read-only PTE after the local TLBI (the re-caching the seed thread warns of), which costs a spurious fault whose fix-up flushes it again; no use-after-free, no livelock",
        sets: &[
            "machine.arch=arm64",
            "arm64.wp_reuse_flush=local",
            "arm64.spurious_fault_flush=local",
            "machine.speculative_walks=true",
            "inject.drop_barrier=local_flush_tlb_page.dsb(nshst)",
        ],
        expect_safe: true,
        sym: &[&[0, 1]],
        world: wp_reuse_race,
    },
    Config {
        name: "riscv_defer_without_switch_mm_cid_smp_mb",
        about: "RISC-V seed without switch_mm_cid's smp_mb: set_mm_asid's RISCV_FENCE(w,r) also publishes the mm_cpumask bit before the hart's walks, so the seed does not depend on the rseq barrier",
        sets: &[
            "machine.arch=riscv",
            "machine.cpus=2",
            "riscv.defer_flush_to_context_switch=true",
            "inject.drop_barrier=switch_mm_cid.smp_mb__after_switch_mm",
        ],
        expect_safe: true,
        sym: &[],
        world: defer_vs_switch,
    },
    Config {
        name: "arm64_madvise_race",
        about: "arm64 upstream: the madvise race; tlb_flush's broadcast TLBIs are in flight until dsb(ish) (weak model)",
        sets: &["machine.arch=arm64"],
        expect_safe: true,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "drop_flush_tlb_range_dsb_ish",
        about: "arm64 without __flush_tlb_range's dsb(ish): the broadcast TLBI still in flight when the page is freed; a CPU it has not reached yet (the shortest: the flusher's own) hits its stale entry",
        sets: &["machine.arch=arm64", "inject.drop_barrier=__flush_tlb_range.dsb(ish)"],
        expect_safe: false,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "arm64_asid_rollover",
        about: "arm64: four processes time-share CPU0 with 2-bit ASIDs; the fourth switch rolls the generation over and reuses the first process's ASID number, and check_and_switch_context's local_flush_tlb_all keeps its stale entries away",
        sets: &["machine.arch=arm64", "arm64.asid_bits=2"],
        expect_safe: true,
        sym: &[],
        world: asid_rollover,
    },
    Config {
        name: "arm64_asid_fastpath_vs_rollover",
        about: "arm64: check_and_switch_context's fast path (relaxed reads, then cmpxchg of active_asids) on CPU1 against an ASID rollover on CPU0 (2-bit ASIDs): the cmpxchg either precedes flush_context's xchg (the ASID is reserved) or finds 0 and takes the slow path",
        sets: &["machine.arch=arm64", "arm64.asid_bits=2"],
        expect_safe: true,
        sym: &[],
        world: asid_fastpath_vs_rollover,
    },
    Config {
        name: "unsafe_arm64_asid_fastpath_blind_store",
        about: "arm64: the fast path stores active_asids without the cmpxchg: a concurrent rollover's zeroing is lost, the old ASID number is handed to another mm, and CPU1 runs it over the first mm's entries (I5)",
        sets: &[
            "machine.arch=arm64",
            "arm64.asid_bits=2",
            "inject.asid_fastpath_blind_store=true",
        ],
        expect_safe: false,
        sym: &[],
        world: asid_fastpath_vs_rollover,
    },
    Config {
        name: "unsafe_arm64_skip_rollover_flush",
        about: "arm64 without the TLB flush on the first switch after an ASID rollover: the fourth process reuses the first one's ASID number and reads through its stale translation (I5)",
        sets: &[
            "machine.arch=arm64",
            "arm64.asid_bits=2",
            "inject.skip_rollover_flush=true",
        ],
        expect_safe: false,
        sym: &[],
        world: asid_rollover,
    },
    Config {
        name: "drop_flush_tlb_range_dsb_ishst_unmap",
        about: "arm64 MADV_DONTNEED without __flush_tlb_range's dsb(ishst): the PTE clear is not yet visible to the page walkers when the TLBI completes, so another CPU's walk re-caches the old PTE and keeps using the page after it is freed",
        sets: &["machine.arch=arm64", "inject.drop_barrier=__flush_tlb_range.dsb(ishst)"],
        expect_safe: false,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "drop_flush_tlb_range_dsb_ishst",
        about: "arm64 upstream WP reuse without the dsb(ishst) before the TLBI: the TLBI completes while the new PTE is still buffered, the other CPU's walker re-caches the read-only entry, and the no-op spurious-fault handler never drops it",
        sets: &["machine.arch=arm64", "inject.drop_barrier=__flush_tlb_range.dsb(ishst)"],
        expect_safe: false,
        sym: &[&[0, 1]],
        world: wp_reuse_race,
    },
    Config {
        name: "drop_local_flush_dsb_nshst",
        about: "FINDING, safe within the bounds (2 CPUs, store buffers of 4, depth 400): arm64 seed without local_flush_tlb_page's dsb(nshst); the only walker that could re-cache the old PTE between the local TLBI and the store is this CPU's own, busy in the fault handler (no speculative walks in the model)",
        sets: &[
            "machine.arch=arm64",
            "arm64.wp_reuse_flush=local",
            "arm64.spurious_fault_flush=local",
            "inject.drop_barrier=local_flush_tlb_page.dsb(nshst)",
        ],
        expect_safe: true,
        sym: &[&[0, 1]],
        world: wp_reuse_race,
    },
    Config {
        name: "drop_local_flush_dsb_nsh",
        about: "FINDING, safe within the bounds (2 CPUs, store buffers of 4, depth 400): arm64 seed without local_flush_tlb_page's dsb(nsh); a local TLBI still in flight costs a spurious fault whose fix-up flushes again: a permission upgrade, no use-after-free",
        sets: &[
            "machine.arch=arm64",
            "arm64.wp_reuse_flush=local",
            "arm64.spurious_fault_flush=local",
            "inject.drop_barrier=local_flush_tlb_page.dsb(nsh)",
        ],
        expect_safe: true,
        sym: &[&[0, 1]],
        world: wp_reuse_race,
    },
    Config {
        name: "riscv_munmap_race",
        about: "RISC-V upstream: munmap frees the PTE table; tlb_flush flushes the whole ASID (flush_tlb_mm), walk caches included",
        sets: &["machine.arch=riscv"],
        expect_safe: true,
        sym: &[],
        world: munmap_1w_1r,
    },
    Config {
        name: "unsafe_riscv_leaf_only_table_flush",
        about: "RISC-V: tlb_flush flushes a gather that freed the PTE table per address (sfence.vma va, asid: leaf only): the reader's walk cache keeps the freed table",
        sets: &["machine.arch=riscv", "inject.riscv_leaf_only_table_flush=true"],
        expect_safe: false,
        sym: &[],
        world: munmap_1w_1r,
    },
    Config {
        name: "unsafe_arm64_broadcast_dsb_nsh",
        about: "arm64: the madvise race with the broadcast TLBI completed by dsb(nsh) instead of dsb(ish): it stays in flight and a CPU it has not reached (the shortest: the flusher's own) keeps its entry to the freed page (the local flush's dsb(nsh) is enough only because its TLBI is local)",
        sets: &["machine.arch=arm64", "inject.arm64_broadcast_dsb_nsh=true"],
        expect_safe: false,
        sym: &[],
        world: madvise_race,
    },
    Config {
        name: "x86_forced_skip_invlpgb_2cpu",
        about: "forcing the skip with INVLPGB on 2 CPUs: the mm never gets a global ASID (not active on more than 3 CPUs), so the collapse flush still IPIs the walker",
        sets: &["mm.force_skip_table_sync=true", "x86.invlpgb=true"],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_collapse_targeted_invlpgb",
        about: "seed (b) step 2 with INVLPGB on a global-ASID mm (active on 4 CPUs: broadcast, no flush IPI): GUP-fast publishes active_lockless_pt_walk_mm + smp_mb(), the collapse's sync IPIs only CPUs that published, x86-TSO",
        sets: &[
            "machine.cpus=4",
            "x86.invlpgb=true",
            "mm.targeted_table_sync=true",
        ],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup_global_asid,
    },
    Config {
        name: "drop_gup_fast_publish_smp_mb",
        about: "the same without GUP-fast's smp_mb() after publishing: the publication still buffered when the collapser reads it, the walker reads the PMD before the clear (store buffering)",
        sets: &[
            "machine.cpus=4",
            "x86.invlpgb=true",
            "mm.targeted_table_sync=true",
            "inject.drop_barrier=gup_fast.publish_smp_mb",
        ],
        expect_safe: false,
        sym: &[],
        world: collapse_vs_gup_global_asid,
    },
    Config {
        name: "drop_tlb_remove_table_sync_mm_smp_mb",
        about: "FINDING, safe within the bounds (4 CPUs, store buffers of 4): without the sync's own smp_mb(); on x86 flush_tlb_mm_range's locked inc_mm_tlb_gen already drained the PMD clear",
        sets: &[
            "machine.cpus=4",
            "x86.invlpgb=true",
            "mm.targeted_table_sync=true",
            "inject.drop_barrier=tlb_remove_table_sync_mm.smp_mb",
        ],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup_global_asid,
    },
    Config {
        name: "unsafe_gup_fast_publish_late",
        about: "seed (b) step 2 with the walker publishing after its first PMD read: a walker that has not published yet is missed by the sync",
        sets: &[
            "machine.cpus=4",
            "x86.invlpgb=true",
            "mm.targeted_table_sync=true",
            "inject.gup_fast_publish_late=true",
        ],
        expect_safe: false,
        sym: &[],
        world: collapse_vs_gup_global_asid,
    },
    Config {
        name: "arm64_collapse_vs_reader",
        about: "arm64 upstream: MADV_COLLAPSE against a thread reading the range through the MMU; pmdp_collapse_flush's PMD clear reaches the walkers at its dsb(ishst)",
        sets: &["machine.arch=arm64"],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_reader,
    },
    Config {
        name: "drop_flush_tlb_range_dsb_ishst_collapse",
        about: "arm64 MADV_COLLAPSE without the dsb(ishst) of pmdp_collapse_flush's flush_tlb_range: the TLBIs complete while the PMD clear is not yet visible to the walkers; the reader's walk goes through the old PMD, caches a small page, and uses it after the collapse copied and freed it",
        sets: &["machine.arch=arm64", "inject.drop_barrier=__flush_tlb_range.dsb(ishst)"],
        expect_safe: false,
        sym: &[],
        world: collapse_vs_reader,
    },
    Config {
        name: "arm64_collapse_targeted",
        about: "seed (b) step 2 on arm64 (broadcast TLBI, no flush IPI), weak memory model",
        sets: &["machine.arch=arm64", "mm.targeted_table_sync=true"],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "arm64_collapse_targeted_3cpu",
        about: "the same with two GUP-fast walkers (3 CPUs): a zap, the free and a refault of the same frame fit in one walk (the broadcast TLBI does not wait for it), and the pin of the page mapped again is no violation",
        sets: &["machine.arch=arm64", "machine.cpus=3", "mm.targeted_table_sync=true"],
        expect_safe: true,
        sym: &[&[1, 2]],
        world: collapse_vs_gup,
    },
    Config {
        name: "arm64_drop_gup_fast_publish_smp_mb",
        about: "the same without GUP-fast's smp_mb() after publishing",
        sets: &[
            "machine.arch=arm64",
            "mm.targeted_table_sync=true",
            "inject.drop_barrier=gup_fast.publish_smp_mb",
        ],
        expect_safe: false,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "arm64_drop_tlb_remove_table_sync_mm_smp_mb",
        about: "FINDING, safe within the bounds (2 CPUs, store buffers of 4): without the sync's smp_mb() on arm64; the collapse's flush (modelled as x86's flush_tlb_mm_range on every architecture) already ran a full barrier after the PMD clear, as arm64's DSB ISH completing the TLBI does",
        sets: &[
            "machine.arch=arm64",
            "mm.targeted_table_sync=true",
            "inject.drop_barrier=tlb_remove_table_sync_mm.smp_mb",
        ],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_gup,
    },
    Config {
        name: "x86_pt_reclaim_lazy",
        about: "MADV_DONTNEED of a whole 2 MiB frees its PTE table (PT_RECLAIM) while a lazy CPU's walk cache points at it",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: pt_reclaim_lazy,
    },
    Config {
        name: "unsafe_pt_reclaim_without_freed_tables",
        about: "PT_RECLAIM frees the emptied PTE table without freed_tables: the flush skips the lazy CPU",
        sets: &["inject.pt_reclaim_without_freed_tables=true"],
        expect_safe: false,
        sym: &[],
        world: pt_reclaim_lazy,
    },
    Config {
        name: "x86_pt_reclaim_vs_gup",
        about: "PT_RECLAIM frees a PTE table a GUP-fast walker of the same mm may be reading (RCU table free)",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: pt_reclaim_vs_gup,
    },
    Config {
        name: "x86_pageout_race",
        about: "madvise(MADV_PAGEOUT) of a page another thread keeps reading: batched unmap, arch_tlbbatch_flush, then free (2 CPUs)",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: pageout_race,
    },
    Config {
        name: "bug_pageout_no_ipi_wait",
        about: "the same, arch_tlbbatch_flush not waiting for its IPIs (csd_lock_wait removed)",
        sets: &["inject.no_ipi_wait=true"],
        expect_safe: false,
        sym: &[],
        world: pageout_race,
    },
    // Reclaim against a concurrent access (configs/reclaim.rs).
    Config {
        name: "x86_kswapd_reclaim_race",
        about: "kswapd reclaims a page a thread keeps using on another CPU: batched unmap, try_to_unmap_flush (arch_tlbbatch_flush), then free (2 CPUs)",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: kswapd_vs_reader,
    },
    Config {
        name: "x86_kswapd_reclaim_race_unbatched",
        about: "the same before x86's batched-unmap series: ptep_clear_flush per page",
        sets: &["x86.batched_unmap=false"],
        expect_safe: true,
        sym: &[],
        world: kswapd_vs_reader,
    },
    Config {
        name: "arm64_kswapd_reclaim_race",
        about: "arm64: TLBI VALE1IS at each unmap, one DSB ISH at arch_tlbbatch_flush (TLBIs in flight until it under the weak model)",
        sets: &["machine.arch=arm64"],
        expect_safe: true,
        sym: &[],
        world: kswapd_vs_reader,
    },
    Config {
        name: "drop_flush_tlb_range_dsb_ishst_reclaim",
        about: "arm64 kswapd without arch_tlbbatch_add_pending's dsb(ishst) (__flush_tlb_range_nosync): the batched TLBI completes before try_to_unmap_one's PTE clear reaches the page walkers, so the reader's walk re-caches the old PTE and uses the page after kswapd frees it",
        sets: &["machine.arch=arm64", "inject.drop_barrier=__flush_tlb_range.dsb(ishst)"],
        expect_safe: false,
        sym: &[],
        world: kswapd_vs_reader,
    },
    Config {
        name: "riscv_kswapd_reclaim_race",
        about: "RISC-V: mm_cpumask batch, FLUSH_TLB_NO_ASID flush by IPI",
        sets: &["machine.arch=riscv"],
        expect_safe: true,
        sym: &[],
        world: kswapd_vs_reader,
    },
    Config {
        name: "bug_reclaim_skip_unmap_flush",
        about: "x86: try_to_unmap_flush drops the batch: the page is freed while the reader's TLB still maps it",
        sets: &["inject.skip_try_to_unmap_flush=true"],
        expect_safe: false,
        sym: &[],
        world: kswapd_vs_reader,
    },
    Config {
        name: "bug_arm64_reclaim_skip_unmap_flush",
        about: "arm64: no DSB ISH before the free: a TLBI still in flight when the page is freed",
        sets: &["machine.arch=arm64", "inject.skip_try_to_unmap_flush=true"],
        expect_safe: false,
        sym: &[],
        world: kswapd_vs_reader,
    },
    Config {
        name: "bug_riscv_reclaim_skip_unmap_flush",
        about: "RISC-V: try_to_unmap_flush drops the batch",
        sets: &["machine.arch=riscv", "inject.skip_try_to_unmap_flush=true"],
        expect_safe: false,
        sym: &[],
        world: kswapd_vs_reader,
    },
    // Page migration against GUP-fast and an access (configs/migrate.rs).
    Config {
        name: "x86_migrate_vs_gup",
        about: "migrate_pages moves a page a thread has cached and pins with GUP-fast: migration entry, batched flush (try_to_unmap_flush), refcount check, copy, PTE to the new frame (2 CPUs, 2 nodes)",
        sets: &["machine.topology=two_nodes"],
        expect_safe: true,
        sym: &[],
        world: migrate_vs_gup,
    },
    Config {
        name: "x86_migrate_vs_gup_unbatched",
        about: "the same before x86's batched-unmap series: ptep_clear_flush per page",
        sets: &["machine.topology=two_nodes", "x86.batched_unmap=false"],
        expect_safe: true,
        sym: &[],
        world: migrate_vs_gup,
    },
    Config {
        name: "arm64_migrate_vs_gup",
        about: "arm64: TLBI VALE1IS at the unmap, one DSB ISH at try_to_unmap_flush, before the move",
        sets: &["machine.arch=arm64", "machine.topology=two_nodes"],
        expect_safe: true,
        sym: &[],
        world: migrate_vs_gup,
    },
    Config {
        name: "riscv_migrate_vs_gup",
        about: "RISC-V: mm_cpumask batch, FLUSH_TLB_NO_ASID flush by IPI before the move",
        sets: &["machine.arch=riscv", "machine.topology=two_nodes"],
        expect_safe: true,
        sym: &[],
        world: migrate_vs_gup,
    },
    Config {
        name: "bug_migrate_move_before_flush",
        about: "migrate_pages_batch moves (copies, frees the old frame) before try_to_unmap_flush: the writer's TLB still maps the freed frame",
        sets: &["machine.topology=two_nodes", "inject.migrate_move_before_flush=true"],
        expect_safe: false,
        sym: &[],
        world: migrate_vs_gup,
    },
    Config {
        name: "bug_arm64_migrate_move_before_flush",
        about: "arm64: the move before the DSB ISH: the TLBI still in flight when the old frame is freed",
        sets: &[
            "machine.arch=arm64",
            "machine.topology=two_nodes",
            "inject.migrate_move_before_flush=true",
        ],
        expect_safe: false,
        sym: &[],
        world: migrate_vs_gup,
    },
    Config {
        name: "bug_migrate_skip_refcount_check",
        about: "__folio_migrate_mapping without folio_ref_freeze: a page GUP-fast pinned is copied and freed (I9)",
        sets: &["machine.topology=two_nodes", "inject.migrate_skip_refcount_check=true"],
        expect_safe: false,
        sym: &[],
        world: migrate_vs_gup,
    },
    Config {
        name: "x86_table_sync_rcu_vs_gup",
        about: "munmap frees a PTE table a GUP-fast walker may be reading; the batch page is not allocated and PT_RECLAIM is off: tlb_remove_table_sync_rcu, then free (KVM guest, vCPUs preemptible)",
        sets: &[
            "mm.table_batch_alloc_fail=true",
            "mm.pt_reclaim=off",
            "x86.paravirt=kvm",
            "x86.vcpu_run_us=100",
        ],
        expect_safe: true,
        sym: &[],
        world: munmap_vs_gup,
    },
    Config {
        name: "unsafe_table_sync_rcu_skip_with_pv_flush",
        about: "the same, skipping tlb_remove_table_sync_rcu although kvm_flush_tlb_multi does not IPI a preempted vCPU",
        sets: &[
            "mm.table_batch_alloc_fail=true",
            "mm.pt_reclaim=off",
            "x86.paravirt=kvm",
            "x86.vcpu_run_us=100",
            "mm.force_skip_table_sync=true",
        ],
        expect_safe: false,
        sym: &[],
        world: munmap_vs_gup,
    },
    Config {
        name: "x86_collapse_vs_pin",
        about: "MADV_COLLAPSE of 2 MiB against a GUP-fast FOLL_PIN of two of its pages held for an I/O: collapsed, or SCAN_PAGE_COUNT at the scan or after the flush (PMD restored), never a lost pin",
        sets: &[],
        expect_safe: true,
        sym: &[],
        world: collapse_vs_pin,
    },
    Config {
        name: "unsafe_collapse_skip_refcount_check",
        about: "__collapse_huge_page_isolate without is_refcount_suitable: the collapse copies and releases a page the pinner still writes (I9)",
        sets: &["inject.collapse_skip_refcount_check=true"],
        expect_safe: false,
        sym: &[],
        world: collapse_vs_pin,
    },
];

/// Checks too large for `check --all` and the demo, run by name to
/// measure the checker's speed and memory on millions of states.
pub const LARGE: &[Config] = &[
    Config {
        name: "riscv_defer_vs_switch_3cpu",
        about: "RISC-V seed: two harts each switching between a reader of the mm and another process (3 harts); under RVWMO 1.09 million states (27,463 under SC; about 31 s on 2 threads): run by name until the partial-order reduction brings it into check --all's time",
        sets: &["machine.arch=riscv", "machine.cpus=3", "riscv.defer_flush_to_context_switch=true"],
        expect_safe: true,
        // Harts 1 and 2 look alike but each runs its own "other" mm (own
        // pgd frame, ctx_id): exchanging them would need renaming mms and
        // physical frames too, which the reduction does not do.
        sym: &[],
        world: defer_vs_switch,
    },
Config {
    name: "x86_collapse_vs_gup_4cpu",
    about: "scale (issue 33): khugepaged collapse against three GUP-fast walkers (4 CPUs, upstream)",
    sets: &["machine.cpus=4"],
    expect_safe: true,
    sym: &[&[1, 2, 3]],
    world: collapse_vs_gup,
}, Config {
    name: "arm64_collapse_targeted_4cpu",
    about: "scale: arm64 collapse with the targeted table sync against three GUP-fast walkers (4 CPUs, Arm's model)",
    sets: &["machine.arch=arm64", "machine.cpus=4", "mm.targeted_table_sync=true"],
    expect_safe: true,
    sym: &[&[1, 2, 3]],
    world: collapse_vs_gup,
}, Config {
    name: "x86_hugetlb_unshare_seed_4cpu",
    about: "scale: hugetlb PMD unshare with the seed's skip, a second thread of the sharing process on CPU 3 (4 CPUs)",
    sets: &["mm.skip_redundant_table_sync=true", "machine.cpus=4"],
    expect_safe: true,
    sym: &[],
    world: hugetlb_unshare_4cpu,
}, Config {
    name: "arm64_wp_reuse_4cpu",
    about: "scale: arm64 seed (c) with four threads reading then writing the write-protected page (4 CPUs, Arm's model)",
    sets: &[
        "machine.arch=arm64",
        "machine.cpus=4",
        "arm64.wp_reuse_flush=local",
        "arm64.spurious_fault_flush=local",
    ],
    expect_safe: true,
    sym: &[&[0, 1, 2, 3]],
    world: wp_reuse_race,
}, Config {
    name: "arm64_madvise_race_4cpu",
    about: "scale: arm64 unmap (MADV_DONTNEED) against three reader threads (4 CPUs, Arm's model)",
    sets: &["machine.arch=arm64", "machine.cpus=4"],
    expect_safe: true,
    sym: &[&[1, 2, 3]],
    world: race_1w_3r,
}, Config {
    name: "riscv_madvise_race_4cpu",
    about: "scale: RISC-V MADV_DONTNEED against three reader threads (4 harts, RVWMO)",
    sets: &["machine.arch=riscv", "machine.cpus=4"],
    expect_safe: true,
    sym: &[&[1, 2, 3]],
    world: race_1w_3r,
}, Config {
    name: "riscv_defer_vs_switch_4cpu",
    about: "scale: RISC-V seed (d) with three harts each switching between a reader of the mm and another process (4 harts, RVWMO)",
    sets: &["machine.arch=riscv", "machine.cpus=4", "riscv.defer_flush_to_context_switch=true"],
    expect_safe: true,
    sym: &[],
    world: defer_vs_switch,
}, Config {
    name: "x86_madvise_race_4cpu_2rounds",
    about: "x86_madvise_race_4cpu with two rounds of touch + madvise (millions of states; `tlblab speed --check`)",
    sets: &["machine.cpus=4"],
    expect_safe: true,
    sym: &[&[1, 2, 3]],
    world: race_1w_3r_2rounds,
}, Config {
    name: "x86_madvise_race_4cpu_3rounds",
    about: "x86_madvise_race_4cpu with three rounds (tens of millions of states: run it with --max-states)",
    sets: &["machine.cpus=4"],
    expect_safe: true,
    sym: &[&[1, 2, 3]],
    world: race_1w_3r_3rounds,
}];

/// Look a check up by name (the catalogue, then [`LARGE`]).
pub fn find(name: &str) -> Result<&'static Config, Error> {
    let mut all = CATALOGUE.iter().chain(LARGE);
    all.find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = CATALOGUE.iter().map(|c| c.name).collect();
        Error::Config(format!(
            "unknown check '{name}' (known: {})",
            names.join(", ")
        ))
    })
}

/// The base scenario of the x86 checks: 2 CPUs, a tiny TLB, no jitter.
pub fn base() -> Scenario {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    s.machine.tlb_entries = 8;
    s.machine.tlb_ways = 2;
    s.machine.psc_entries = 2;
    s.machine.memory = machine::scenario::Size(64 << 20);
    s.machine.jitter_pct = 0;
    s
}

/// Build the world of `c` with `extra` settings (`--set`) applied, under
/// its architecture's memory model.
pub fn build(c: &Config, extra: &[String]) -> Result<World, Error> {
    build_with(c, extra, None)
}

/// Build the world of `c` for the checker: `switch_mm_irqs_off` in its
/// separate steps, and `model` (`None`: the architecture's own, x86-TSO
/// or the weak model) deciding where stores wait.
pub fn build_with(
    c: &Config,
    extra: &[String],
    model: Option<MemoryModel>,
) -> Result<World, Error> {
    let mut w = build_sc(c, extra)?;
    w.cfg.split_steps = true;
    // The per-CPU LRU batches hold no translation: left out (crate
    // kernel::mm::swap), as their drains' IPIs are counted by the simulator.
    w.cfg.lru_batches = false;
    w.cfg.memory_model = model.unwrap_or(MemoryModel::of_arch(w.cfg.arch));
    Ok(w)
}

fn build_sc(c: &Config, extra: &[String]) -> Result<World, Error> {
    let mut s = base();
    for kv in c.sets {
        s.set(kv)?;
    }
    for kv in extra {
        s.set(kv)?;
    }
    s.validate()?;
    (c.world)(&s)
}

/// `c`'s symmetry groups that fit `w` (`--set machine.cpus=...` may have
/// removed CPUs): ids beyond the machine are dropped, and groups left with
/// fewer than two CPUs.
pub fn groups(c: &Config, w: &World) -> Vec<Vec<CpuId>> {
    c.sym
        .iter()
        .map(|g| {
            g.iter()
                .copied()
                .filter(|&x| (x as usize) < w.cpus.len())
                .collect::<Vec<_>>()
        })
        .filter(|g| g.len() > 1)
        .collect()
}

/// Build `c` with `extra` settings and explore it, with the symmetry
/// reduction over its declared groups when `symmetry` is on.
pub fn run(
    c: &Config,
    extra: &[String],
    bounds: crate::Bounds,
    symmetry: bool,
) -> Result<crate::Outcome, Error> {
    run_with(c, extra, bounds, symmetry, None)
}

/// [`run`] under memory model `model` (`None`: the architecture's).
pub fn run_with(
    c: &Config,
    extra: &[String],
    bounds: crate::Bounds,
    symmetry: bool,
    model: Option<MemoryModel>,
) -> Result<crate::Outcome, Error> {
    let w = build_with(c, extra, model)?;
    let groups = if symmetry { groups(c, &w) } else { Vec::new() };
    Ok(crate::explore_with(&w, bounds, &groups))
}
