//! What a step did, for the driver to price and to trace.
//!
//! A step appends *charges* (cost classes and cache-line accesses) in program
//! order; IPIs sent, wake-ups and timed statistics carry a *mark*, the number
//! of charges before them, so the driver knows at which offset inside the
//! step they happened.
//!
//! The simulator hands each step's `Effects` the prices of the cost
//! profile ([`Prices`]); plain charges (cost classes, user computation) are
//! then summed as they come instead of recorded, and only the charges whose
//! price depends on the machine's state at that moment (cache lines, arm64
//! DVM broadcasts) are kept for the driver, each with the sum before it.
//! Without prices (the checker, tests) every charge is recorded.

use crate::{MmId, TaskId};
use machine::{Cost, CpuId, Pfn};
use std::fmt;

/// One priced item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    Cost(Cost, u32),
    /// A cache-line access; `batch` = issued together with the previous line.
    Line {
        addr: u64,
        write: bool,
        batch: bool,
    },
    /// Plain user computation of the given length.
    Ns(u32),
    /// arm64: `ops` broadcast TLBIs go out over the interconnect and the
    /// following `DSB ISH` waits for every core of the inner-shareable
    /// domain to complete them. The driver queues them behind other CPUs'
    /// broadcasts (the DVM path is shared) and charges every other core the
    /// snoop work.
    Dvm(u32),
}

/// A statistic whose time the driver records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// Task starts measured operation `op`.
    OpBegin(TaskId, u16),
    /// Task ends measured operation `op`.
    OpEnd(TaskId, u16),
    /// A measured task finished its iterations.
    Done(TaskId),
}

/// A short description of a visible action, for traces and counterexamples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Label {
    UserAccess {
        va: u64,
        write: bool,
        hit: bool,
    },
    PageFault {
        va: u64,
        write: bool,
    },
    DoAnonymousPage {
        va: u64,
        pfn: Pfn,
    },
    SpuriousFault {
        va: u64,
    },
    ZapPtes {
        mm: MmId,
        start: u64,
        end: u64,
        pages: u32,
    },
    FreePages {
        n: u32,
        first: Pfn,
    },
    /// `migrate_folio_move`: `old`'s contents copied to `new`, the PTE at
    /// `va` restored to `new`, `old` freed.
    MigrateFolioMove {
        va: u64,
        old: Pfn,
        new: Pfn,
    },
    FreeTable {
        pfn: Pfn,
    },
    IncMmTlbGen {
        mm: MmId,
        gen: u64,
    },
    SendIpis {
        n: u32,
        first: CpuId,
    },
    FlushTlbFunc {
        mm: MmId,
        local: bool,
        pages: u64,
    },
    FlushTlbFuncSkip {
        mm: MmId,
        why: &'static str,
    },
    IrqEntry,
    CsdUnlock {
        initiator: CpuId,
    },
    WaitDone,
    SwitchMm {
        from: MmId,
        to: MmId,
        flush: bool,
    },
    EnterLazy {
        mm: MmId,
    },
    Syscall {
        nr: &'static str,
    },
    /// `vunmap_range_noflush` of `pages` pages at `va`, then
    /// `free_vmap_area_noflush`: `vmap_lazy_nr` is now `nr_lazy`.
    Vunmap {
        va: u64,
        pages: u32,
        nr_lazy: u64,
    },
    /// `__purge_vmap_area_lazy` took the lazy areas `[start, end)`.
    VmapPurge {
        start: u64,
        end: u64,
    },
    /// `purge_vmap_node`: `pages` lazily freed pages are free address space again.
    VmapPurged {
        pages: u64,
    },
    Exit,
    VcpuPreempt,
    VcpuResume {
        flushed: bool,
    },
    GupFastPmd {
        va: u64,
        table: Pfn,
    },
    GupFastPte {
        va: u64,
        table: Pfn,
        backoff: bool,
    },
    PmdpCollapseFlush {
        va: u64,
        table: Pfn,
    },
    TableSync {
        ipis: bool,
    },
    CollapseInstall {
        va: u64,
        hpage: Pfn,
        deposited: Pfn,
    },
    /// `collapse_huge_page` failed with `status` (the tracepoint's name);
    /// `restored`: the PMD was put back (`pmd_populate`) after the flush.
    CollapseFailed {
        va: u64,
        status: &'static str,
        restored: bool,
    },
    Invlpgb {
        mm: MmId,
        pages: u64,
    },
    /// `csd_lock()` spinning on `n` of this CPU's csds still locked by an
    /// earlier (preempted) call.
    CsdLockWait {
        n: u32,
    },
    /// x86 `use_global_asid`: the mm gets global ASID `asid` (INVLPGB).
    UseGlobalAsid {
        mm: MmId,
        asid: u16,
    },
    KvmDeferFlush {
        cpu: CpuId,
    },
    PmdUnshare {
        mm: MmId,
        table: Pfn,
    },
    PmdShare {
        mm: MmId,
        table: Pfn,
    },
    /// arm64 broadcast TLBI (`asid` = whole ASID when `pages` is `None`).
    TlbiIs {
        asid: u16,
        va: u64,
        pages: Option<u64>,
        ops: u32,
    },
    TlbiLocal {
        asid: u16,
        va: u64,
    },
    /// arm64/RISC-V ASID allocation (`new_context`), maybe with a rollover.
    NewContext {
        mm: MmId,
        asid: u16,
        rollover: bool,
    },
    WpPageReuse {
        va: u64,
        pfn: Pfn,
    },
    WpPageCopy {
        va: u64,
        old: Pfn,
        new: Pfn,
    },
    Fork {
        parent: MmId,
        child: MmId,
    },
    /// RISC-V: a remote flush for `cpu` queued instead of sent.
    DeferFlush {
        cpu: CpuId,
        asid: u16,
        overflow: bool,
    },
    /// RISC-V: queued flushes applied at `switch_mm`.
    ApplyDeferred {
        asid: u16,
        n: u32,
        all: bool,
    },
    SfenceVma {
        asid: u16,
        va: u64,
        all: bool,
    },
    /// x86 `do_kernel_range_flush` (pages) / `do_flush_tlb_all` (`TLB_FLUSH_ALL`).
    KernelRangeFlush {
        pages: u64,
    },
    /// PT_RECLAIM: `zap_pte_range` found the PTE table empty and cleared its PMD.
    PtReclaim {
        mm: MmId,
        va: u64,
        table: Pfn,
    },
    /// `tlb_remove_table_sync_rcu`: a grace period waited for, or skipped (seed b).
    TableSyncRcu {
        skipped: bool,
    },
    /// x86 `arch_tlbbatch_add_pending` (one unmapped PTE) / `arch_tlbbatch_flush`.
    TlbBatch {
        flush: bool,
        cpus: u32,
    },
    SbiRfence {
        harts: u32,
    },
    /// A sleeping task woken by its hrtimer.
    Wakeup {
        task: TaskId,
        rt: bool,
    },
    /// Checker: the hardware walker cached `va` speculatively (no access).
    SpeculativeWalk {
        va: u64,
    },
    /// A kernel load/store at a vmalloc address (global translation).
    KernelAccess {
        va: u64,
        hit: bool,
    },
    /// RISC-V seed (d): the flusher read the targets' `loaded_asid`.
    ReadLoadedAsid {
        deferring: u32,
        ordered: bool,
    },
    /// A store went into this CPU's store buffer (checker memory model).
    StoreBuffered {
        loc: crate::hw::memory_model::Loc,
        val: u64,
    },
    /// A buffered store of this CPU reached memory.
    Drained {
        loc: crate::hw::memory_model::Loc,
        val: u64,
    },
    /// A named barrier drained this CPU's buffered stores.
    Barrier {
        name: &'static str,
        drained: u8,
    },
    /// A named barrier removed by `inject.drop_barrier`.
    BarrierDropped {
        name: &'static str,
    },
    /// This CPU read `loc` from memory while `owner` still buffers a store to it.
    ReadPastBuffer {
        owner: CpuId,
        loc: crate::hw::memory_model::Loc,
    },
    /// This CPU read an older value of `loc` than memory holds: no barrier
    /// or access of its own orders the read after the newer store
    /// ([`crate::hw::weak_mem`]).
    ReadStale {
        loc: crate::hw::memory_model::Loc,
        val: u64,
        newest: u64,
    },
    /// `switch_mm_irqs_off` starts (checker: in separate steps).
    SwitchMmBegin {
        from: MmId,
        to: MmId,
    },
    /// `switch_mm_irqs_off` read `next->context.tlb_gen`.
    SwitchMmReadTlbGen {
        mm: MmId,
        gen: u64,
    },
    /// `tlb_finish_mmu` found another gather on the mm (`mm_tlb_flush_nested`).
    TlbFlushNested {
        mm: MmId,
    },
    /// Seed (b) step 2: `tlb_remove_table_sync_mm` found `walkers` CPUs
    /// whose `active_lockless_pt_walk_mm` names the mm.
    TableSyncMm {
        walkers: u32,
    },
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Label::UserAccess { va, write, hit } => write!(
                f,
                "user {} {va:#x} ({})",
                if write { "write" } else { "read" },
                if hit { "TLB hit" } else { "TLB miss, walk" }
            ),
            Label::PageFault { va, write } => {
                write!(
                    f,
                    "page fault at {va:#x} ({})",
                    if write { "write" } else { "read" }
                )
            }
            Label::DoAnonymousPage { va, pfn } => {
                write!(f, "do_anonymous_page {va:#x} -> frame {pfn}")
            }
            Label::SpuriousFault { va } => {
                write!(f, "spurious fault at {va:#x}, flush_tlb_fix_spurious_fault")
            }
            Label::ZapPtes {
                mm,
                start,
                end,
                pages,
            } => {
                write!(
                    f,
                    "zap_pte_range mm{mm} [{start:#x}, {end:#x}): {pages} PTEs cleared"
                )
            }
            Label::FreePages { n, first } => write!(
                f,
                "tlb_flush_mmu_free: {n} pages freed (first frame {first})"
            ),
            Label::MigrateFolioMove { va, old, new } => write!(
                f,
                "migrate_folio_move {va:#x}: frame {old} copied to {new}, remove_migration_ptes, frame {old} freed"
            ),
            Label::FreeTable { pfn } => write!(f, "free page-table page frame {pfn}"),
            Label::IncMmTlbGen { mm, gen } => {
                write!(f, "flush_tlb_mm_range: inc_mm_tlb_gen(mm{mm}) = {gen}")
            }
            Label::SendIpis { n, first } => write!(
                f,
                "smp_call_function_many_cond: IPI to {n} CPUs (first CPU{first})"
            ),
            Label::FlushTlbFunc { mm, local, pages } => {
                let what = if pages == crate::TLB_FLUSH_ALL {
                    "full flush".to_string()
                } else {
                    format!("{pages} pages")
                };
                write!(
                    f,
                    "flush_tlb_func mm{mm} {} : {what}",
                    if local { "local" } else { "remote" }
                )
            }
            Label::FlushTlbFuncSkip { mm, why } => write!(f, "flush_tlb_func mm{mm}: {why}"),
            Label::IrqEntry => write!(f, "call-function IPI taken"),
            Label::CsdUnlock { initiator } => write!(f, "csd_unlock, acks CPU{initiator}"),
            Label::WaitDone => write!(f, "csd_lock_wait: all targets acked"),
            Label::SwitchMm { from, to, flush } => {
                write!(
                    f,
                    "switch_mm_irqs_off mm{from} -> mm{to}{}",
                    if flush { " (flush)" } else { "" }
                )
            }
            Label::EnterLazy { mm } => write!(f, "enter_lazy_tlb (mm{mm} stays loaded)"),
            Label::Syscall { nr } => write!(f, "syscall {nr}"),
            Label::Vunmap { va, pages, nr_lazy } => write!(
                f,
                "vunmap_range_noflush {va:#x} ({pages} pages, no flush); vmap_lazy_nr = {nr_lazy}"
            ),
            Label::VmapPurge { start, end } => {
                write!(f, "__purge_vmap_area_lazy {start:#x}..{end:#x}")
            }
            Label::VmapPurged { pages } => write!(f, "purge_vmap_node: {pages} pages free again"),
            Label::Exit => write!(f, "task exits"),
            Label::VcpuPreempt => write!(f, "host preempts this vCPU (steal_time.preempted = 1)"),
            Label::VcpuResume { flushed } => {
                write!(
                    f,
                    "host resumes this vCPU{}",
                    if flushed {
                        ", flushing its TLB (KVM_VCPU_FLUSH_TLB)"
                    } else {
                        ""
                    }
                )
            }
            Label::GupFastPmd { va, table } => {
                write!(
                    f,
                    "gup_fast (IRQs off) reads PMD of {va:#x} -> page-table frame {table}"
                )
            }
            Label::GupFastPte { va, table, backoff } => write!(
                f,
                "gup_fast reads PTE of {va:#x} in frame {table}{}",
                if backoff {
                    ": PMD/PTE changed, backs off and enables IRQs"
                } else {
                    ", grabs the folio"
                }
            ),
            Label::PmdpCollapseFlush { va, table } => {
                write!(
                    f,
                    "pmdp_collapse_flush {va:#x}: PMD cleared (PTE table frame {table} unhooked)"
                )
            }
            Label::TableSync { ipis } => write!(
                f,
                "tlb_remove_table_sync_one: {}",
                if ipis {
                    "IPI every other online CPU and wait"
                } else {
                    "skipped (flush implied the IPI broadcast)"
                }
            ),
            Label::CollapseInstall {
                va,
                hpage,
                deposited,
            } => {
                write!(f, "collapse {va:#x}: huge PMD -> frame {hpage}, old PTE table frame {deposited} deposited")
            }
            Label::CollapseFailed {
                va,
                status,
                restored,
            } => {
                write!(
                    f,
                    "collapse {va:#x} failed: {status}{}",
                    if restored {
                        ", PMD restored (pmd_populate of the old PTE table)"
                    } else {
                        ""
                    }
                )
            }
            Label::Invlpgb { mm, pages } => {
                let what = if pages == crate::TLB_FLUSH_ALL {
                    "ASID".to_string()
                } else {
                    format!("{pages} pages")
                };
                write!(
                    f,
                    "INVLPGB+TLBSYNC mm{mm} (its global ASID): {what} invalidated on every CPU"
                )
            }
            Label::CsdLockWait { n } => write!(
                f,
                "csd_lock: {n} of this CPU's csds still locked by a preempted flush; spin until their targets run them"
            ),
            Label::UseGlobalAsid { mm, asid } => write!(
                f,
                "consider_global_asid: mm{mm} active on more than 3 CPUs gets global ASID {asid} (asid_transition set)"
            ),
            Label::PmdUnshare { mm, table } => {
                write!(f, "huge_pmd_unshare mm{mm}: PUD no longer points at shared PMD table frame {table}")
            }
            Label::PmdShare { mm, table } => write!(
                f,
                "huge_pmd_share mm{mm}: PUD -> shared PMD table frame {table}"
            ),
            Label::TlbiIs {
                asid,
                va,
                pages,
                ops,
            } => match pages {
                Some(p) => write!(
                    f,
                    "TLBI VALE1IS asid {asid} [{va:#x}, +{p} pages) ({ops} ops) + DSB ISH: broadcast to every core"
                ),
                None => write!(f, "TLBI ASIDE1IS asid {asid} + DSB ISH: broadcast to every core"),
            },
            Label::TlbiLocal { asid, va } => {
                write!(f, "TLBI VALE1 asid {asid} {va:#x} + DSB NSH: this CPU only")
            }
            Label::NewContext { mm, asid, rollover } => write!(
                f,
                "new_context mm{mm} -> asid {asid}{}",
                if rollover {
                    " (ASID rollover: flush_context, every CPU flushes at its next switch)"
                } else {
                    ""
                }
            ),
            Label::WpPageReuse { va, pfn } => {
                write!(f, "do_wp_page {va:#x}: frame {pfn} exclusive, wp_page_reuse (PTE made writable in place)")
            }
            Label::WpPageCopy { va, old, new } => {
                write!(f, "do_wp_page {va:#x}: frame {old} shared, wp_page_copy -> frame {new}")
            }
            Label::Fork { parent, child } => {
                write!(f, "fork: dup_mmap mm{parent} -> mm{child} (parent PTEs write-protected)")
            }
            Label::DeferFlush { cpu, asid, overflow } => write!(
                f,
                "flush for hart {cpu} (asid {asid} not loaded there) queued{}",
                if overflow { ", queue full: whole ASID" } else { "" }
            ),
            Label::ApplyDeferred { asid, n, all } => write!(
                f,
                "switch_mm to asid {asid}: drain {n} deferred flush(es){}",
                if all { " + whole-ASID flushes for overflowed queues" } else { "" }
            ),
            Label::KernelRangeFlush { pages } => {
                if pages == crate::TLB_FLUSH_ALL {
                    write!(f, "do_flush_tlb_all: every entry, globals too")
                } else {
                    write!(f, "do_kernel_range_flush: INVLPG x{pages}")
                }
            }
            Label::PtReclaim { mm, va, table } => write!(
                f,
                "PT_RECLAIM: mm{mm} PTE table {table} at {va:#x} empty: pmd_clear, pte_free_tlb"
            ),
            Label::TlbBatch { flush: false, cpus } => write!(
                f,
                "arch_tlbbatch_add_pending: inc_mm_tlb_gen, batch cpumask now {cpus} CPU(s)"
            ),
            Label::TlbBatch { flush: true, cpus } => write!(
                f,
                "arch_tlbbatch_flush: full flush (mm NULL) on {cpus} CPU(s) of the batch"
            ),
            Label::TableSyncRcu { skipped } => write!(
                f,
                "tlb_remove_table_sync_rcu: {}",
                if skipped {
                    "skipped (the flush IPI'd every CPU)"
                } else {
                    "synchronize_rcu()"
                }
            ),
            Label::SfenceVma { asid, va, all } => {
                if all {
                    write!(f, "sfence.vma x0, asid {asid}")
                } else {
                    write!(f, "sfence.vma {va:#x}, asid {asid}")
                }
            }
            Label::Wakeup { task, rt } => write!(
                f,
                "hrtimer wakes task {task}{}",
                if rt { " (SCHED_FIFO: need_resched)" } else { "" }
            ),
            Label::SpeculativeWalk { va } => write!(
                f,
                "the hardware walker speculatively walks {va:#x} (no access)"
            ),
            Label::KernelAccess { va, hit } => write!(
                f,
                "kernel access {va:#x} ({})",
                if hit { "global TLB entry" } else { "TLB miss, walk init_mm" }
            ),
            Label::StoreBuffered {
                loc: loc @ crate::hw::memory_model::Loc::Tlbi { .. },
                ..
            } => write!(f, "issues {loc} into its store buffer (in flight until a DSB)"),
            Label::StoreBuffered {
                loc: crate::hw::memory_model::Loc::PteWalk { table, idx },
                val,
            } => write!(
                f,
                "puts the page walkers' view of the entry at index {idx} of table frame {table} into its store buffer (walkers see the old entry {val:#x} until a DSB)"
            ),
            Label::StoreBuffered { loc, val } => write!(
                f,
                "stores {loc} = {} into its store buffer",
                crate::hw::memory_model::show_val(loc, val)
            ),
            Label::Drained {
                loc: loc @ crate::hw::memory_model::Loc::Tlbi { .. },
                ..
            } => write!(f, "the hardware completes {loc} (before any DSB)"),
            Label::Drained {
                loc: crate::hw::memory_model::Loc::PteWalk { table, idx },
                ..
            } => write!(
                f,
                "the page walkers now see the new PTE at index {idx} of table frame {table} (before any DSB)"
            ),
            Label::Drained { loc, val } => write!(
                f,
                "store buffer drains: {loc} = {} reaches memory",
                crate::hw::memory_model::show_val(loc, val)
            ),
            Label::Barrier { name, drained } => write!(
                f,
                "{name}: drains {drained} buffered store(s) to memory"
            ),
            Label::BarrierDropped { name } => {
                write!(f, "{name} DROPPED (inject.drop_barrier): nothing drains")
            }
            Label::SwitchMmBegin { from, to } => write!(
                f,
                "context_switch: switch_mm_irqs_off mm{from} -> mm{to} begins (IRQs off)"
            ),
            Label::SwitchMmReadTlbGen { mm, gen } => write!(
                f,
                "switch_mm_irqs_off: reads mm{mm}'s context.tlb_gen = {gen}"
            ),
            Label::ReadPastBuffer {
                owner,
                loc: loc @ crate::hw::memory_model::Loc::Tlbi { .. },
            } => write!(
                f,
                "uses its TLB entry while CPU{owner}'s {loc} is still in its store buffer (no DSB has completed it)"
            ),
            Label::ReadPastBuffer {
                owner,
                loc: crate::hw::memory_model::Loc::PteWalk { table, idx },
            } => write!(
                f,
                "walks through the old entry at index {idx} of table frame {table} while CPU{owner}'s clear of it is still in its store buffer for the page walkers (no DSB yet)"
            ),
            Label::ReadPastBuffer { owner, loc } => write!(
                f,
                "reads {loc} from memory while CPU{owner}'s store to it is still in its store buffer"
            ),
            Label::ReadStale { loc, val, newest } => write!(
                f,
                "reads {loc} = {} although {} is already in memory (nothing orders this read after that store)",
                crate::hw::memory_model::show_val(loc, val),
                crate::hw::memory_model::show_val(loc, newest)
            ),
            Label::ReadLoadedAsid { deferring, ordered } => write!(
                f,
                "read targets' loaded_asid: {deferring} hart(s) not running the ASID{}",
                if ordered {
                    " (after the enqueue and smp_mb)"
                } else {
                    " (BEFORE enqueueing: unordered)"
                }
            ),
            Label::SbiRfence { harts } => {
                write!(f, "sbi_remote_sfence_vma_asid to {harts} hart(s)")
            }
            Label::KvmDeferFlush { cpu } => {
                write!(f, "kvm_flush_tlb_multi: CPU{cpu} preempted, sets KVM_VCPU_FLUSH_TLB instead of an IPI")
            }
            Label::TlbFlushNested { mm } => write!(
                f,
                "tlb_finish_mmu: mm_tlb_flush_nested(mm{mm}): flush the whole mm, freed_tables"
            ),
            Label::TableSyncMm { walkers } => write!(
                f,
                "tlb_remove_table_sync_mm: {walkers} CPU(s) in a lockless walk of the mm{}",
                if walkers > 0 { ": IPI them and wait" } else { ", no IPI" }
            ),
        }
    }
}

/// The cost classes.
pub const COSTS: usize = Cost::ALL.len();

/// Picoseconds per nanosecond (the driver prices in integer picoseconds
/// so that sums are exact).
pub const PS_PER_NS: u64 = 1000;

/// A cost profile's prices as the driver adds them up.
#[derive(Clone, Debug)]
pub struct Prices {
    /// Picoseconds of one unit of each cost class.
    pub ps: [u64; COSTS],
    /// All ones for the TLB-maintenance classes ([`Cost::is_tlb_maintenance`]), else zero.
    pub maint: [u64; COSTS],
}

impl Prices {
    /// From nanoseconds per class, rounded to picoseconds.
    pub fn new(ns: impl Fn(Cost) -> f64) -> Prices {
        Prices {
            ps: std::array::from_fn(|i| (ns(Cost::ALL[i]) * PS_PER_NS as f64).round() as u64),
            maint: std::array::from_fn(|i| {
                if Cost::ALL[i].is_tlb_maintenance() {
                    u64::MAX
                } else {
                    0
                }
            }),
        }
    }
}

/// Where in its step an IPI, wake-up or statistic happened: after the
/// first `idx` recorded charges, and (priced) `plain` ps of plain charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub idx: u16,
    pub plain: u64,
}

/// Everything one step did. Owned by the driver and reused between steps.
#[derive(Default, Debug)]
pub struct Effects {
    /// Every charge; with `prices`, only cache lines and DVM broadcasts.
    pub charges: Vec<Charge>,
    /// With `prices`: the plain sum (ps) before each of `charges`.
    pub charge_plain: Vec<u64>,
    /// Set by the simulator: plain charges are summed into `plain` (and
    /// TLB maintenance among them into `plain_maint`), not recorded.
    pub prices: Option<std::sync::Arc<Prices>>,
    pub plain: u64,
    pub plain_maint: u64,
    /// IPIs sent: target and mark.
    pub ipis: Vec<(CpuId, Mark)>,
    /// CPUs whose wait may now complete, with mark.
    pub wakes: Vec<(CpuId, Mark)>,
    pub stats: Vec<(Stat, Mark)>,
    /// hrtimers armed: (CPU, task, op started at expiry, expiry time in ns).
    pub timers: Vec<(CpuId, TaskId, u16, u64)>,
    /// Tasks put to sleep until an event priced by the driver: (CPU, task,
    /// cost class, count); the CPU's timer fires `count` × the class's
    /// price from now and starts no measured op.
    pub sleeps: Vec<(CpuId, TaskId, Cost, u32)>,
    /// Filled only while `tracing` (the driver sets it when it keeps a trace).
    pub labels: Vec<Label>,
    pub tracing: bool,
    /// The checker's choice of message for each load that has more than
    /// one ([`crate::hw::weak_mem`]), and what this step's loads offered.
    pub picks: Picks,
}

/// The messages a step's loads return, when the memory model lets a load
/// return an older one: position `i` is the `i`-th load of the step with
/// more than one choice; 4 bits each, 0 = the newest value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Picks {
    /// The choices to make (set by the driver before the step).
    pub given: u64,
    /// Loads with a choice so far in this step.
    pub pos: u8,
    /// How many messages each of them could read (4 bits each, capped
    /// at [`Picks::MAX_ARITY`]).
    pub arities: u64,
}

impl Picks {
    /// Choices per position (and loads with a choice per step, beyond
    /// which a load reads the newest value: [`Picks::MAX_POS`]).
    pub const MAX_ARITY: usize = 15;
    pub const MAX_POS: u8 = 16;
    /// The choice for a load with `arity` > 1 messages.
    pub fn pick(&mut self, arity: usize) -> usize {
        if self.pos >= Self::MAX_POS {
            return 0;
        }
        let sh = 4 * self.pos as u32;
        let a = arity.min(Self::MAX_ARITY) as u64;
        self.arities |= a << sh;
        self.pos += 1;
        (((self.given >> sh) & 0xf) as usize).min(a as usize - 1)
    }
    /// The arity recorded at position `i` (0: none).
    pub fn arity(&self, i: u8) -> usize {
        ((self.arities >> (4 * i as u32)) & 0xf) as usize
    }
}

impl Effects {
    pub fn clear(&mut self) {
        self.picks = Picks::default();
        self.charges.clear();
        self.charge_plain.clear();
        self.plain = 0;
        self.plain_maint = 0;
        self.ipis.clear();
        self.wakes.clear();
        self.stats.clear();
        self.timers.clear();
        self.sleeps.clear();
        self.labels.clear();
    }
    #[inline]
    fn mark(&self) -> Mark {
        Mark {
            idx: self.charges.len().min(u16::MAX as usize) as u16,
            plain: self.plain,
        }
    }
    /// Record a charge the driver prices (priced: with the plain sum so far).
    #[inline]
    fn record(&mut self, ch: Charge) {
        if self.prices.is_some() {
            self.charge_plain.push(self.plain);
        }
        self.charges.push(ch);
    }
    #[inline(always)]
    pub fn cost(&mut self, c: Cost, n: u32) {
        if n == 0 {
            return;
        }
        match &self.prices {
            Some(p) => {
                let v = p.ps[c as usize] * n as u64;
                self.plain += v;
                self.plain_maint += v & p.maint[c as usize];
            }
            None => self.charges.push(Charge::Cost(c, n)),
        }
    }
    #[inline]
    pub fn ns(&mut self, ns: u32) {
        match self.prices {
            Some(_) => self.plain += ns as u64 * PS_PER_NS,
            None => self.charges.push(Charge::Ns(ns)),
        }
    }
    /// Broadcast TLB maintenance over the inner-shareable domain (arm64).
    #[inline]
    pub fn dvm(&mut self, ops: u32) {
        if ops > 0 {
            self.record(Charge::Dvm(ops));
        }
    }
    /// One cache-line access (`batch`: issued together with the previous line).
    #[inline]
    pub fn line(&mut self, addr: u64, write: bool, batch: bool) {
        self.record(Charge::Line {
            addr: addr & !(machine::CACHE_LINE - 1),
            write,
            batch,
        });
    }
    /// Read (or write) the cache lines covering `[addr, addr + len)`, issued together.
    pub fn lines(&mut self, addr: u64, len: u64, write: bool) {
        let first = addr & !(machine::CACHE_LINE - 1);
        let last = (addr + len.max(1) - 1) & !(machine::CACHE_LINE - 1);
        let mut a = first;
        while a <= last {
            self.line(a, write, a != first);
            a += machine::CACHE_LINE;
        }
    }
    #[inline]
    pub fn read(&mut self, addr: u64) {
        self.line(addr, false, false);
    }
    #[inline]
    pub fn write(&mut self, addr: u64) {
        self.line(addr, true, false);
    }
    pub fn ipi(&mut self, target: CpuId) {
        let m = self.mark();
        self.ipis.push((target, m));
    }
    pub fn wake(&mut self, cpu: CpuId) {
        let m = self.mark();
        self.wakes.push((cpu, m));
    }
    /// Arm `cpu`'s hrtimer for `task` at `at` (ns); the driver starts op `op` then.
    pub fn timer(&mut self, cpu: CpuId, task: TaskId, op: u16, at: u64) {
        self.timers.push((cpu, task, op, at));
    }
    /// `task` sleeps on `cpu` for `n` × the price of `cost` (an I/O).
    pub fn sleep(&mut self, cpu: CpuId, task: TaskId, cost: Cost, n: u32) {
        self.sleeps.push((cpu, task, cost, n));
    }
    pub fn stat(&mut self, s: Stat) {
        let m = self.mark();
        self.stats.push((s, m));
    }
    #[inline]
    pub fn label(&mut self, l: Label) {
        if self.tracing {
            self.labels.push(l);
        }
    }
}
