//! The checker's memory model: per-CPU store buffers over the modelled
//! shared locations, and the kernel's barriers that drain or order them.
//!
//! The simulator is sequentially consistent (SC): a store goes straight to
//! memory. The checker can give the world a weaker model
//! ([`KernelCfg::memory_model`](crate::world::KernelCfg)):
//!
//! - **x86-TSO** (Owens, Sarkar, Sewell, "A better x86 memory model:
//!   x86-TSO", TPHOLs 2009): each CPU has a FIFO store buffer; a load reads
//!   the CPU's own newest buffered store to that location, else memory; the
//!   oldest buffered store drains to memory at any moment (a checker
//!   choice, [`StepKind::Drain`](crate::world::StepKind)); a locked
//!   instruction, `mfence`/`smp_mb()` and serializing instructions (a CR3
//!   write, `iret`) drain the whole buffer first.
//! - **weak** (arm64, RISC-V): the same buffers, but a buffered store may
//!   drain before older stores to *other* locations unless a store-store
//!   barrier (`smp_wmb()`, `dmb ishst`, `RISCV_FENCE(w,w)`) separates them;
//!   stores to one location stay in order (coherence). This gives
//!   store->load and store->store reordering over a multi-copy-atomic
//!   memory, the two relaxations of the flat model of Pulte et al.,
//!   "Simplifying ARM concurrency: multicopy-atomic axiomatic and
//!   operational models for ARMv8" (POPL 2018) and of RVWMO (RISC-V
//!   unprivileged ISA, chapter "RVWMO Memory Consistency Model") that a
//!   store buffer can express. On top of the buffers, a drained store
//!   becomes a message of the view machine and a plain load
//!   ([`read_once`]) may return an older message the CPU's views allow
//!   ([`crate::hw::weak_mem`]): load->load and store->load reordering.
//!   Load->store reordering (the LB shape) is not modelled (see
//!   docs/checker.md).
//!
//! Bound: a buffer holds at most [`STORE_BUFFER_DEPTH`] stores; a store
//! into a full buffer first drains the oldest (what a real CPU does when
//! its buffer is full: it stalls until one drains).

use machine::CpuId;

/// Stores a CPU can hold in its buffer before the oldest must drain.
pub const STORE_BUFFER_DEPTH: usize = 4;

/// The memory model the checker explores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemoryModel {
    /// Sequential consistency: every store is visible at once.
    #[default]
    Sc,
    /// x86-TSO: FIFO store buffers.
    Tso,
    /// arm64 / RISC-V: store buffers that drain out of order across locations.
    Weak,
}

impl MemoryModel {
    /// The model of an architecture's hardware.
    pub fn of_arch(arch: machine::scenario::Arch) -> MemoryModel {
        match arch {
            machine::scenario::Arch::X86 => MemoryModel::Tso,
            _ => MemoryModel::Weak,
        }
    }
    /// `sc`, `tso`, `weak`, or `arch` (the architecture's own: `None`).
    pub fn parse(s: &str) -> Result<Option<MemoryModel>, String> {
        match s {
            "sc" => Ok(Some(MemoryModel::Sc)),
            "tso" => Ok(Some(MemoryModel::Tso)),
            "weak" => Ok(Some(MemoryModel::Weak)),
            "arch" => Ok(None),
            _ => Err(format!(
                "unknown memory model '{s}' (known: sc, tso, weak, arch)"
            )),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MemoryModel::Sc => "sc",
            MemoryModel::Tso => "tso",
            MemoryModel::Weak => "weak",
        }
    }
}

/// A modelled shared location.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Loc {
    /// `cpu`'s bit of `mm_cpumask(mm)`.
    MmCpumask { mm: crate::MmId, cpu: CpuId },
    /// `mm->context.tlb_gen`.
    MmTlbGen(crate::MmId),
    /// `per_cpu(cpu_tlbstate.loaded_mm, cpu)`.
    LoadedMm(CpuId),
    /// `per_cpu(cpu_tlbstate_shared.is_lazy, cpu)`.
    IsLazy(CpuId),
    /// A plain variable of a litmus test (`x`, `y`, ...).
    Var(u8),
    /// RISC-V seed (d): `per_cpu(loaded_asid, cpu)`.
    LoadedAsid(CpuId),
    /// RISC-V seed (d): `per_cpu(need_tlb_flush, cpu)`, which publishes
    /// the entries queued for `cpu` (the queue itself is SC: the flag is
    /// what the drain tests before it looks at the queue).
    NeedTlbFlush(CpuId),
    /// arm64: the PTE at `idx` of page-table frame `table` (the store of
    /// `__ptep_set_access_flags`; page walkers read memory, never a store
    /// buffer).
    Pte { table: machine::Pfn, idx: u16 },
    /// arm64: a TLBI issued by `cpu`, in flight until a DSB completes it
    /// (or the hardware does, at any moment: a drain). `va ==
    /// TLBI_WHOLE_ASID`: `TLBI ASIDE1IS`. `broadcast`: the `...IS` form
    /// (every CPU's TLB), else this CPU's only. `leaf`: `VALE1`, leaf
    /// entries only; else `VAE1`, the walk cache too.
    Tlbi {
        cpu: CpuId,
        asid: u16,
        va: u64,
        broadcast: bool,
        leaf: bool,
    },
    /// Seed (b) step 2: `per_cpu(active_lockless_pt_walk_mm, cpu)` (0 =
    /// NULL, else mm id + 1).
    ActiveLocklessPtWalkMm(CpuId),
    /// Entry `index` of page-table page `table` (a PMD the collapser clears
    /// and GUP-fast reads, with `mm.targeted_table_sync`).
    PageTable { table: machine::Pfn, index: usize },
    /// arm64: `per_cpu(active_asids, cpu)` (RISC-V: `active_context`; 0
    /// while a rollover is under way).
    ActiveAsids(CpuId),
    /// arm64 / RISC-V: `asid_generation` (RISC-V: `current_version`).
    AsidGeneration,
    /// arm64 / RISC-V: `mm->context.id` (generation | ASID).
    MmContextId(crate::MmId),
    /// arm64: the PTE at `idx` of page-table frame `table` *as the page
    /// walkers see it*. A PTE store is visible to explicit loads once it
    /// leaves the store buffer (at the PTE lock's release at the latest),
    /// but to translation table walks, of any CPU, only after a DSB by the
    /// writer (Arm ARM D8.2.6 / VMSA: "a DSB is required to ensure that
    /// the write is visible to the translation table walks"; the barrier
    /// that `__flush_tlb_range`'s `dsb(ishst)` provides). The entry holds
    /// the *old* value, which walkers keep reading until it drains: at the
    /// writer's DSB, or whenever the hardware gets to it (a drain step).
    PteWalk { table: machine::Pfn, idx: u16 },
}

/// [`Loc::Tlbi`]'s `va` for a whole-ASID invalidation.
pub const TLBI_WHOLE_ASID: u64 = u64::MAX;

impl Loc {
    /// Is this an in-flight TLBI that, once complete, drops `cpu`'s
    /// translation of `va` under `asid`?
    pub fn tlbi_covers(self, cpu: CpuId, asid: u16, va: u64) -> bool {
        match self {
            Loc::Tlbi {
                cpu: by,
                asid: a,
                va: v,
                broadcast,
                ..
            } => {
                (broadcast || by == cpu)
                    && a == asid
                    && (v == TLBI_WHOLE_ASID || v == va & !(machine::PAGE_SIZE - 1))
            }
            _ => false,
        }
    }
}

impl Loc {
    /// May a plain load of this location return an older value than memory
    /// holds (weak model)? Not a PTE that `__ptep_set_access_flags` reads
    /// in its `cmpxchg` loop under the PTE lock (an exclusive read sees the
    /// newest value), a TLBI, or the walkers' lagging view ([`Loc::PteWalk`]).
    /// Nor an `mm_cpumask` bit: the RISC-V flushers read the mask after
    /// their PTE clear, a fully ordered `xchg`, so from memory (a bit
    /// still in its hart's store buffer is what they can miss).
    pub fn read_may_be_stale(self) -> bool {
        !matches!(
            self,
            Loc::Pte { .. } | Loc::Tlbi { .. } | Loc::PteWalk { .. } | Loc::MmCpumask { .. }
        )
    }

    /// May `cpu` load this location from now on? `task_ctx`: some task
    /// that can still run is on `cpu` (an exited CPU runs only interrupt
    /// handlers, which read only that CPU's own state). Conservative: true
    /// unless the modelled code shows otherwise.
    /// - RISC-V seed (d)'s `need_tlb_flush` is tested by its own hart
    ///   only (`set_mm_asid`, the flush IPI, `local_tlb_flush_queue_drain`);
    ///   flushers only store to it.
    /// - another hart's `loaded_asid` is read by `should_ipi_flush`, in a
    ///   task's flush; a hart's own by its flush IPI;
    /// - a CPU's `active_asids` is loaded by that CPU's
    ///   `check_and_switch_context` alone (another CPU's rollover
    ///   exchanges it: an atomic, which reads the newest message);
    /// - another CPU's `active_lockless_pt_walk_mm` by
    ///   `tlb_remove_table_sync_mm`, and page-table entries by GUP-fast
    ///   and the paths that take the locks, all in task context.
    pub fn may_load(self, cpu: CpuId, task_ctx: bool) -> bool {
        match self {
            Loc::NeedTlbFlush(c) => c == cpu,
            // Loaded by its CPU's fast path alone; a rollover on another
            // CPU takes it by flush_context's xchg, an RMW, which reads
            // the newest message whatever its views.
            Loc::ActiveAsids(c) => c == cpu,
            Loc::LoadedAsid(c) => c == cpu || task_ctx,
            Loc::AsidGeneration | Loc::MmContextId(_) => task_ctx,
            Loc::ActiveLocklessPtWalkMm(_) | Loc::PageTable { .. } => task_ctx,
            _ => true,
        }
    }

    /// This location with its CPU ids renamed by `f`.
    pub fn renamed(self, f: impl Fn(CpuId) -> CpuId) -> Loc {
        match self {
            Loc::MmCpumask { mm, cpu } => Loc::MmCpumask { mm, cpu: f(cpu) },
            Loc::LoadedMm(c) => Loc::LoadedMm(f(c)),
            Loc::IsLazy(c) => Loc::IsLazy(f(c)),
            Loc::LoadedAsid(c) => Loc::LoadedAsid(f(c)),
            Loc::NeedTlbFlush(c) => Loc::NeedTlbFlush(f(c)),
            Loc::Tlbi {
                cpu,
                asid,
                va,
                broadcast,
                leaf,
            } => Loc::Tlbi {
                cpu: f(cpu),
                asid,
                va,
                broadcast,
                leaf,
            },
            Loc::ActiveLocklessPtWalkMm(c) => Loc::ActiveLocklessPtWalkMm(f(c)),
            Loc::ActiveAsids(c) => Loc::ActiveAsids(f(c)),
            other => other,
        }
    }
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Loc::MmCpumask { mm, cpu } => write!(f, "mm{mm}'s mm_cpumask bit {cpu}"),
            Loc::MmTlbGen(mm) => write!(f, "mm{mm}'s context.tlb_gen"),
            Loc::LoadedMm(c) => write!(f, "CPU{c}'s cpu_tlbstate.loaded_mm"),
            Loc::IsLazy(c) => write!(f, "CPU{c}'s cpu_tlbstate_shared.is_lazy"),
            Loc::Var(v) => write!(f, "{}", (b'x' + v) as char),
            Loc::LoadedAsid(c) => write!(f, "CPU{c}'s loaded_asid"),
            Loc::NeedTlbFlush(c) => write!(f, "CPU{c}'s need_tlb_flush"),
            Loc::Pte { table, idx } => write!(f, "the PTE at index {idx} of table frame {table}"),
            Loc::Tlbi {
                asid,
                va,
                broadcast,
                leaf,
                ..
            } => {
                let is = if *broadcast { "IS" } else { "" };
                if *va == TLBI_WHOLE_ASID {
                    write!(f, "TLBI ASIDE1{is} asid {asid}")
                } else {
                    let op = if *leaf { "VALE1" } else { "VAE1" };
                    write!(f, "TLBI {op}{is} asid {asid} {va:#x}")
                }
            }
            Loc::ActiveLocklessPtWalkMm(c) => write!(f, "CPU{c}'s active_lockless_pt_walk_mm"),
            Loc::PageTable { table, index } => {
                write!(f, "entry {index} of page-table frame {table}")
            }
            Loc::PteWalk { table, idx } => write!(
                f,
                "the page walkers' view of the entry at index {idx} of table frame {table}"
            ),
            Loc::ActiveAsids(c) => write!(f, "CPU{c}'s active_asids"),
            Loc::AsidGeneration => write!(f, "asid_generation"),
            Loc::MmContextId(mm) => write!(f, "mm{mm}'s context.id"),
        }
    }
}

/// Barrier kinds, by what they order (the kernel names map onto these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    /// Everything before against everything after: `smp_mb()`, a locked
    /// instruction, `mfence`, a CR3 write, `dmb ish`, `dsb ish`,
    /// `fence rw,rw`; also `RISCV_FENCE(w,r)` for a store buffer (earlier
    /// stores drain before later loads).
    Full,
    /// Earlier stores before later stores: `smp_wmb()`, `dmb ishst`,
    /// `fence w,w`.
    StoreStore,
    /// Earlier loads before later loads: `smp_rmb()`, `dmb ishld`,
    /// `fence r,r`. No effect on a store buffer.
    LoadLoad,
    /// arm64 `dsb(nsh)`: completes this CPU's local TLBIs and drains its
    /// stores; a broadcast TLBI stays in flight (its completion on the
    /// other CPUs needs a `dsb(ish)`).
    NonShareable,
}

/// One buffered store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buffered {
    pub loc: Loc,
    pub val: u64,
    /// Store-store barriers executed by this CPU before the store.
    pub epoch: u16,
}

/// A CPU's store buffer, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct StoreBuffer {
    pub entries: Vec<Buffered>,
    /// Store-store barriers executed so far (weak model).
    pub epoch: u16,
}

impl StoreBuffer {
    /// The newest buffered store to `loc` (store-to-load forwarding).
    pub fn forward(&self, loc: Loc) -> Option<u64> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.loc == loc)
            .map(|e| e.val)
    }

    /// Buffer a store. Returns the oldest store, which must drain first,
    /// when the buffer was full.
    pub fn push(&mut self, loc: Loc, val: u64) -> Option<Buffered> {
        let spill = (self.entries.len() >= STORE_BUFFER_DEPTH).then(|| self.entries.remove(0));
        self.entries.push(Buffered {
            loc,
            val,
            epoch: self.epoch,
        });
        spill
    }

    /// Slots whose store may drain now: under TSO only the oldest; under
    /// the weak model every store with no older store to the same
    /// location and no older store before a store-store barrier.
    pub fn drainable(&self, model: MemoryModel) -> impl Iterator<Item = usize> + '_ {
        let n = match model {
            MemoryModel::Sc => 0,
            MemoryModel::Tso => self.entries.len().min(1),
            MemoryModel::Weak => self.entries.len(),
        };
        (0..n).filter(move |&i| {
            let e = self.entries[i];
            self.entries[..i]
                .iter()
                .all(|o| o.loc != e.loc && o.epoch == e.epoch)
        })
    }

    /// Remove slot `i` (one of [`StoreBuffer::drainable`]).
    pub fn take(&mut self, i: usize) -> Buffered {
        self.entries.remove(i)
    }

    /// Execute a barrier: a full barrier returns every buffered store, in
    /// order, to drain now; a store-store barrier starts a new epoch.
    pub fn barrier(&mut self, order: Order) -> Vec<Buffered> {
        match order {
            Order::Full => std::mem::take(&mut self.entries),
            Order::StoreStore => {
                if !self.entries.is_empty() {
                    self.epoch = self.epoch.wrapping_add(1);
                }
                Vec::new()
            }
            Order::LoadLoad => Vec::new(),
            Order::NonShareable => {
                let all = std::mem::take(&mut self.entries);
                let (keep, go) = all.into_iter().partition(|e| {
                    matches!(
                        e.loc,
                        Loc::Tlbi {
                            broadcast: true,
                            ..
                        }
                    )
                });
                self.entries = keep;
                go
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tso_drains_fifo_weak_drains_across_locations() {
        let mut b = StoreBuffer::default();
        b.push(Loc::Var(0), 1);
        b.push(Loc::Var(1), 1);
        b.push(Loc::Var(0), 2);
        assert_eq!(b.drainable(MemoryModel::Tso).collect::<Vec<_>>(), [0]);
        // The second store to x waits behind the first: coherence.
        assert_eq!(b.drainable(MemoryModel::Weak).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(b.forward(Loc::Var(0)), Some(2));
        assert_eq!(b.drainable(MemoryModel::Sc).count(), 0);
    }

    #[test]
    fn store_store_barrier_orders_weak_drains() {
        let mut b = StoreBuffer::default();
        b.push(Loc::Var(0), 1);
        assert!(b.barrier(Order::StoreStore).is_empty());
        b.push(Loc::Var(1), 1);
        assert_eq!(b.drainable(MemoryModel::Weak).collect::<Vec<_>>(), [0]);
        assert_eq!(b.barrier(Order::Full).len(), 2);
        assert!(b.is_empty());
    }

    /// `dsb(nsh)` completes this CPU's local TLBIs (and drains its stores)
    /// but leaves a broadcast TLBI in flight; `dsb(ish)` completes both.
    #[test]
    fn dsb_nsh_completes_local_tlbis_only() {
        let tlbi = |broadcast| Loc::Tlbi {
            cpu: 0,
            asid: 1,
            va: 0x1000,
            broadcast,
            leaf: true,
        };
        let mut b = StoreBuffer::default();
        b.push(tlbi(true), 1);
        b.push(Loc::Var(0), 1);
        b.push(tlbi(false), 1);
        let done = b.barrier(Order::NonShareable);
        assert_eq!(done.len(), 2);
        assert_eq!(b.entries.len(), 1);
        assert!(
            b.entries[0].loc.tlbi_covers(1, 1, 0x1234),
            "broadcast: every CPU"
        );
        assert!(
            !tlbi(false).tlbi_covers(1, 1, 0x1000),
            "local: the issuer only"
        );
        assert_eq!(b.barrier(Order::Full).len(), 1);
    }

    #[test]
    fn a_full_buffer_spills_its_oldest_store() {
        let mut b = StoreBuffer::default();
        for v in 0..STORE_BUFFER_DEPTH as u64 {
            assert_eq!(b.push(Loc::Var(0), v), None);
        }
        let spilled = b.push(Loc::Var(0), 9).expect("full");
        assert_eq!(spilled.val, 0);
        assert_eq!(b.entries.len(), STORE_BUFFER_DEPTH);
    }
}

/// A barrier in the modelled kernel code that `inject.drop_barrier=NAME`
/// can remove.
#[derive(Clone, Copy, Debug)]
pub struct NamedBarrier {
    pub name: &'static str,
    /// The kernel file and function it models.
    pub kernel: &'static str,
    pub order: Order,
    /// What it pairs with, and where the kernel says so.
    pub pairs_with: &'static str,
}

/// `switch_mm_irqs_off`: the full barrier of `cpumask_set_cpu` (a `lock bts`).
pub const SWITCH_MM_CPUMASK_SET_CPU: &str = "switch_mm_irqs_off.cpumask_set_cpu";
/// `switch_mm_irqs_off`: the `smp_mb()` when the bit is already set.
pub const SWITCH_MM_SMP_MB: &str = "switch_mm_irqs_off.smp_mb";
/// `switch_mm_irqs_off`: the `smp_mb()` on the return from lazy mode.
pub const SWITCH_MM_LAZY_SMP_MB: &str = "switch_mm_irqs_off.lazy_smp_mb";
/// `flush_tlb_mm_range` → `inc_mm_tlb_gen`: the full barrier of `atomic64_inc_return`.
pub const INC_MM_TLB_GEN: &str = "inc_mm_tlb_gen.atomic64_inc_return";
/// `should_flush_tlb`: the `smp_rmb()` between the `loaded_mm` and `is_lazy` reads.
pub const SHOULD_FLUSH_TLB_SMP_RMB: &str = "should_flush_tlb.smp_rmb";

/// RISC-V seed (d), `set_mm_asid`: the fence between publishing
/// `loaded_asid` and testing `need_tlb_flush`.
pub const SET_MM_ASID_FENCE: &str = "set_mm_asid.RISCV_FENCE(w,r)";
/// RISC-V seed (d), `should_ipi_flush`: the fence between the enqueue
/// (`need_tlb_flush = true`) and the re-read of `loaded_asid`.
pub const SHOULD_IPI_FLUSH_SMP_MB: &str = "should_ipi_flush.smp_mb";

/// kernel/sched/core.c `switch_mm_cid` (6.12): the full barrier after
/// `switch_mm` on a switch to a user task (`smp_mb()` from a kernel
/// thread, `smp_mb__after_switch_mm()` from a user task: `smp_mb()` on
/// arm64 and RISC-V, nothing on x86, whose CR3 write serializes).
pub const SWITCH_MM_CID_SMP_MB: &str = "switch_mm_cid.smp_mb__after_switch_mm";

/// arm64 `__flush_tlb_range` / `flush_tlb_page`: the `dsb(ishst)` before the TLBIs.
pub const FLUSH_TLB_RANGE_DSB_ISHST: &str = "__flush_tlb_range.dsb(ishst)";
/// arm64 `__flush_tlb_range` / `flush_tlb_page`: the `dsb(ish)` after the TLBIs.
pub const FLUSH_TLB_RANGE_DSB_ISH: &str = "__flush_tlb_range.dsb(ish)";
/// arm64 seed: `local_flush_tlb_page`'s `dsb(nshst)` before the TLBI.
pub const LOCAL_FLUSH_DSB_NSHST: &str = "local_flush_tlb_page.dsb(nshst)";
/// arm64 seed: `local_flush_tlb_page`'s `dsb(nsh)` after the TLBI.
pub const LOCAL_FLUSH_DSB_NSH: &str = "local_flush_tlb_page.dsb(nsh)";

/// Every named barrier of the modelled paths (`tlblab list` prints them).
pub const BARRIERS: &[NamedBarrier] = &[
    NamedBarrier {
        name: SWITCH_MM_CPUMASK_SET_CPU,
        kernel: "arch/x86/mm/tlb.c: switch_mm_irqs_off (cpumask_set_cpu, a locked RMW)",
        order: Order::Full,
        pairs_with: "the full barrier of atomic64_inc_return in flush_tlb_mm_range's inc_mm_tlb_gen: \
                     this CPU's mm_cpumask bit (and LOADED_MM_SWITCHING) are visible before it reads \
                     tlb_gen (comment \"Rely on the smp_mb() implied by cpumask_set_cpu()\", 83b0177a6c48)",
    },
    NamedBarrier {
        name: SWITCH_MM_SMP_MB,
        kernel: "arch/x86/mm/tlb.c: switch_mm_irqs_off (else smp_mb(), 83b0177a6c48, CVE-2025-40174)",
        order: Order::Full,
        pairs_with: "inc_mm_tlb_gen's atomic64_inc_return: when the mm_cpumask bit is already set no \
                     locked op runs, so the LOADED_MM_SWITCHING store needs it before the tlb_gen read \
                     (\"switch_mm() must see the new tlb_gen or flush_tlb_mm_range() must see the new loaded_mm\")",
    },
    NamedBarrier {
        name: SWITCH_MM_LAZY_SMP_MB,
        kernel: "arch/x86/mm/tlb.c: switch_mm_irqs_off (prev == next, was_lazy: smp_mb())",
        order: Order::Full,
        pairs_with: "inc_mm_tlb_gen's atomic64_inc_return: is_lazy = false is visible before the tlb_gen \
                     read (\"The barrier synchronizes with the tlb_gen increment in the TLB shootdown code\")",
    },
    NamedBarrier {
        name: INC_MM_TLB_GEN,
        kernel: "arch/x86/include/asm/mmu_context.h: inc_mm_tlb_gen (atomic64_inc_return, lock xadd)",
        order: Order::Full,
        pairs_with: "switch_mm_irqs_off's cpumask_set_cpu / smp_mb(): the new tlb_gen is visible before \
                     should_flush_tlb reads loaded_mm and is_lazy (\"// smp_mb() implied\", 83b0177a6c48)",
    },
    NamedBarrier {
        name: SHOULD_FLUSH_TLB_SMP_RMB,
        kernel: "arch/x86/mm/tlb.c: should_flush_tlb (smp_rmb() after reading loaded_mm)",
        order: Order::LoadLoad,
        pairs_with: "switch_mm_irqs_off's store order is_lazy = false before loaded_mm = \
                     LOADED_MM_SWITCHING (\"Ensure 'is_lazy' is at least as new as 'loaded_mm'\"); \
                     on x86 smp_rmb() is only a compiler barrier",
    },
    NamedBarrier {
        name: SET_MM_ASID_FENCE,
        kernel: "arch/riscv/mm/context.c: set_mm_asid (seed (d) RFC v1 patch 4: loaded_asid = asid; \
                 RISCV_FENCE(w,r); drain the flush queue if need_tlb_flush)",
        order: Order::Full,
        pairs_with: "should_ipi_flush's smp_mb (store-buffering shape): either the flusher re-reads the \
                     new loaded_asid and IPIs this hart, or this hart sees need_tlb_flush and drains the queue",
    },
    NamedBarrier {
        name: SHOULD_IPI_FLUSH_SMP_MB,
        kernel: "arch/riscv/mm/tlbflush.c: should_ipi_flush (seed (d) RFC v1 patch 3: enqueue, \
                 need_tlb_flush = true; smp_mb(); re-read loaded_asid)",
        order: Order::Full,
        pairs_with: "set_mm_asid's RISCV_FENCE(w,r): the queued entry is visible before loaded_asid is \
                     re-read, so a hart that switched into the ASID in between drains it",
    },
    NamedBarrier {
        name: SWITCH_MM_CID_SMP_MB,
        kernel: "kernel/sched/core.c (6.12): context_switch -> switch_mm_cid (to user: smp_mb() from a \
                 kernel thread, else smp_mb__after_switch_mm(), smp_mb() where the arch does not \
                 override it: arm64, RISC-V; fe90f3967bdb)",
        order: Order::Full,
        pairs_with: "on RISC-V, nothing that was written for it: set_mm's cpumask_set_cpu is a relaxed \
                     amoor.w, so this fence is what makes the hart's mm_cpumask bit visible before its \
                     first walk of the new mm; the flusher's ptep_get_and_clear (amoswap.aqrl) then \
                     reads mm_cpumask (store-buffering shape: the flusher sees the bit and IPIs, or \
                     the walk sees the cleared PTE). It was added for rseq's mm_cid, not for the TLB",
    },
    NamedBarrier {
        name: FLUSH_TLB_RANGE_DSB_ISHST,
        kernel: "arch/arm64/include/asm/tlbflush.h: __flush_tlb_range_nosync / __flush_tlb_page_nosync \
                 (dsb(ishst) before __tlbi(vale1is)); the model's flush_tlb_page is a one-page __flush_tlb_range",
        order: Order::Full,
        pairs_with: "the hardware page walkers: the new PTE is visible to every walker before the TLBI, \
                     else a walker re-caches the old entry after the TLBI completes (Ryan Roberts in the \
                     seed thread: \"Without it, you could end up with the old value immediately re-cached\")",
    },
    NamedBarrier {
        name: FLUSH_TLB_RANGE_DSB_ISH,
        kernel: "arch/arm64/include/asm/tlbflush.h: __flush_tlb_range / flush_tlb_page (dsb(ish) after the TLBIs)",
        order: Order::Full,
        pairs_with: "the broadcast TLBIs before it: they are complete on every CPU of the inner-shareable \
                     domain only at this DSB, and the caller frees the pages after it returns",
    },
    NamedBarrier {
        name: LOCAL_FLUSH_DSB_NSHST,
        kernel: "arch/arm64/include/asm/tlbflush.h: __local_flush_tlb_page_nonotify_nosync \
                 (seed: dsb(nshst) before __tlbi(vale1))",
        order: Order::Full,
        pairs_with: "this CPU's page walker: the new PTE is visible to it before the local TLBI \
                     (\"If you're doing local invalidation, then nsh is sufficient\")",
    },
    NamedBarrier {
        name: LOCAL_FLUSH_DSB_NSH,
        kernel: "arch/arm64/include/asm/tlbflush.h: local_flush_tlb_page / local_flush_tlb_page_nonotify \
                 (seed: dsb(nsh) after __tlbi(vale1))",
        order: Order::NonShareable,
        pairs_with: "the local TLBI before it: complete on this CPU at this DSB (a broadcast TLBI would \
                     stay in flight past a dsb(nsh))",
    },
    NamedBarrier {
        name: GUP_FAST_PUBLISH_SMP_MB,
        kernel: "mm/gup.c: gup_fast (seed b step 2, v4 design: smp_mb() after publishing \
                 active_lockless_pt_walk_mm, before gup_fast_pgd_range)",
        order: Order::Full,
        pairs_with: "tlb_remove_table_sync_mm's smp_mb(): the store-buffering pattern; either the \
                     syncing CPU sees this CPU's publication (and IPIs it), or this walk reads the \
                     cleared PMD",
    },
    NamedBarrier {
        name: TLB_REMOVE_TABLE_SYNC_MM_SMP_MB,
        kernel: "mm/mmu_gather.c: tlb_remove_table_sync_mm (seed b step 2: smp_mb() before reading \
                 every CPU's active_lockless_pt_walk_mm)",
        order: Order::Full,
        pairs_with: "gup_fast's smp_mb() after publishing: the cleared PMD is visible before the \
                     walkers' variables are read (x86's flush already ran a locked op, \
                     inc_mm_tlb_gen's atomic64_inc_return, after the clear)",
    },
];

/// Seed (b) step 2: `gup_fast`'s `smp_mb()` after publishing `active_lockless_pt_walk_mm`.
pub const GUP_FAST_PUBLISH_SMP_MB: &str = "gup_fast.publish_smp_mb";
/// Seed (b) step 2: `tlb_remove_table_sync_mm`'s `smp_mb()` before reading the walkers.
pub const TLB_REMOVE_TABLE_SYNC_MM_SMP_MB: &str = "tlb_remove_table_sync_mm.smp_mb";

/// Look a named barrier up.
pub fn find_barrier(name: &str) -> Option<&'static NamedBarrier> {
    BARRIERS.iter().find(|b| b.name == name)
}

use crate::effects::{Effects, Label};
use crate::world::World;

/// The value of `loc` in memory (what another CPU reads).
#[inline]
pub fn read_mem(w: &World, loc: Loc) -> u64 {
    match loc {
        Loc::MmCpumask { mm, cpu } => w.mms[mm as usize].cpumask.test(cpu) as u64,
        Loc::MmTlbGen(mm) => *w.mms[mm as usize].tlb_gen,
        Loc::LoadedMm(c) => w.cpus[c as usize].tlbstate.loaded_mm as u64,
        Loc::IsLazy(c) => w.cpus[c as usize].tlbstate.is_lazy as u64,
        Loc::LoadedAsid(c) => w.cpus[c as usize].riscv.loaded_asid as u64,
        Loc::NeedTlbFlush(c) => w.cpus[c as usize].riscv.need_flush as u64,
        Loc::Pte { table, idx } => w.mem.read(table, idx as usize).unwrap_or(0),
        Loc::Tlbi { .. } => unreachable!("a TLBI is never loaded"),
        Loc::PteWalk { .. } => unreachable!("only the walkers read their view (walker_pte)"),
        Loc::Var(_) => unreachable!("litmus variables live in hw::litmus"),
        Loc::ActiveLocklessPtWalkMm(c) => w.cpus[c as usize]
            .active_lockless_pt_walk_mm
            .map_or(0, |mm| mm as u64 + 1),
        Loc::PageTable { table, index } => w.mem.read(table, index).unwrap_or(0),
        Loc::ActiveAsids(c) => w.cpus[c as usize].asid.active,
        Loc::AsidGeneration => w.asids.generation,
        Loc::MmContextId(mm) => *w.mms[mm as usize].context_id,
    }
}

/// Write `val` to `loc` in memory.
pub fn write_mem(w: &mut World, loc: Loc, val: u64) {
    match loc {
        Loc::MmCpumask { mm, cpu } => {
            let m = &mut w.mms[mm as usize].cpumask;
            if val != 0 {
                m.set(cpu)
            } else {
                m.clear(cpu)
            }
        }
        Loc::MmTlbGen(mm) => *w.mms[mm as usize].tlb_gen = val,
        Loc::LoadedMm(c) => w.cpus[c as usize].tlbstate.loaded_mm = val as crate::MmId,
        Loc::IsLazy(c) => w.cpus[c as usize].tlbstate.is_lazy = val != 0,
        Loc::LoadedAsid(c) => w.cpus[c as usize].riscv.loaded_asid = val as u16,
        Loc::NeedTlbFlush(c) => w.cpus[c as usize].riscv.need_flush = val != 0,
        Loc::Pte { table, idx } => w.mem.write(table, idx as usize, val),
        Loc::Tlbi { .. } => crate::arch::arm64::tlbflush::tlbi_complete(w, loc),
        // Memory already holds the new value; the walkers now see it.
        Loc::PteWalk { .. } => {}
        Loc::Var(_) => unreachable!("litmus variables live in hw::litmus"),
        Loc::ActiveLocklessPtWalkMm(c) => {
            w.cpus[c as usize].active_lockless_pt_walk_mm =
                val.checked_sub(1).map(|mm| mm as crate::MmId)
        }
        Loc::PageTable { table, index } => w.mem.write(table, index, val),
        Loc::ActiveAsids(c) => w.cpus[c as usize].asid.active = val,
        Loc::AsidGeneration => w.asids.generation = val,
        Loc::MmContextId(mm) => *w.mms[mm as usize].context_id = val,
    }
}

/// `cpu` stores `val` to `loc`: into its store buffer unless the model is SC.
pub fn store(w: &mut World, cpu: CpuId, loc: Loc, val: u64, fx: &mut Effects) {
    if w.cfg.memory_model == MemoryModel::Sc {
        write_mem(w, loc, val);
        return;
    }
    fx.label(Label::StoreBuffered { loc, val });
    if let Some(old) = w.membufs[cpu as usize].push(loc, val) {
        publish(w, cpu, old.loc, old.val);
    }
}

/// `cpu` loads `loc`: its own newest buffered store, else memory. Labels
/// the read when another CPU still holds a store to `loc` in its buffer.
/// For the x86 paths (TSO: a load never returns an older value than
/// memory holds); the arm64, RISC-V and generic paths use [`read_once`].
#[inline]
pub fn load(w: &World, cpu: CpuId, loc: Loc, fx: &mut Effects) -> u64 {
    if !fx.tracing && w.membufs[cpu as usize].is_empty() {
        // Nothing to forward, no label to write (the simulator, SC).
        return read_mem(w, loc);
    }
    load_buffered(w, cpu, loc, fx)
}

/// [`load`] when this CPU buffers stores or reads are labelled.
#[inline(never)]
fn load_buffered(w: &World, cpu: CpuId, loc: Loc, fx: &mut Effects) -> u64 {
    if let Some(v) = w.membufs[cpu as usize].forward(loc) {
        return v;
    }
    if fx.tracing {
        for (owner, b) in w.membufs.iter().enumerate() {
            if owner != cpu as usize && b.forward(loc).is_some() {
                fx.label(Label::ReadPastBuffer {
                    owner: owner as CpuId,
                    loc,
                });
            }
        }
    }
    read_mem(w, loc)
}

/// include/asm-generic/rwonce.h: `READ_ONCE`: a plain load of `loc` by
/// `cpu`: [`load`], but under the weak model (arm64, RISC-V) it may return
/// an older message that `cpu`'s views still allow ([`crate::hw::weak_mem`]:
/// the driver picks which, [`Effects::picks`]).
#[inline]
pub fn read_once(w: &mut World, cpu: CpuId, loc: Loc, fx: &mut Effects) -> u64 {
    if w.weak.is_empty() || w.membufs[cpu as usize].forward(loc).is_some() {
        return load(w, cpu, loc, fx);
    }
    read_weak(w, cpu, loc, fx)
}

/// [`read_once`] when some location has old messages.
#[inline(never)]
fn read_weak(w: &mut World, cpu: CpuId, loc: Loc, fx: &mut Effects) -> u64 {
    let choices = w.weak.choices(cpu, loc);
    if choices.is_empty() {
        w.weak.read_quiet(cpu);
        return load(w, cpu, loc, fx);
    }
    let k = if choices.len() > 1 {
        fx.picks.pick(choices.len())
    } else {
        0
    };
    let (t, val) = choices[k];
    w.weak.read(cpu, loc, t);
    let newest = load(w, cpu, loc, fx);
    if k == 0 {
        // The newest message: memory (the fields hold the newest value).
        return newest;
    }
    fx.label(Label::ReadStale { loc, val, newest });
    val
}

/// `cpu` stores `val` to `loc` straight to memory: an atomic, or a store
/// the same step's lock release publishes (no other CPU can see memory
/// between them); under the weak model a new message as a drain makes.
pub fn store_now(w: &mut World, cpu: CpuId, loc: Loc, val: u64) {
    publish(w, cpu, loc, val);
}

/// An atomic read-modify-write of `loc` by `cpu` (`xchg`, `cmpxchg`,
/// `add_return`, relaxed): it reads the newest value (atomics are totally
/// ordered per location) and, when `f` returns one, writes the new value
/// right after it. Returns the value read.
pub fn atomic_rmw(w: &mut World, cpu: CpuId, loc: Loc, f: impl FnOnce(u64) -> Option<u64>) -> u64 {
    let old = read_mem(w, loc);
    if !w.weak.is_empty() {
        w.weak.read_newest(cpu, loc);
    }
    if let Some(new) = f(old) {
        publish(w, cpu, loc, new);
    }
    old
}

/// A store the model makes straight to memory by `cpu`, seen by every CPU
/// at once: under the lock its readers take, or on a path whose ordering
/// the checker does not explore (`pmd_populate` and the PMD clears of
/// zap, `free_pgtables` and pt_reclaim; RISC-V's clear of its own
/// `need_tlb_flush`). Unlike [`store_now`] it leaves no older value for
/// another CPU to load. For a location the weak memory does not hold that
/// is a write of memory; for one it holds (older values some CPU may
/// still load) it is a new message every CPU's view reaches. Written to
/// memory alone it would leave the newest message stale: loads would
/// return that older value, even to `cpu`, until the clean-up forgot the
/// location, and whether they did would depend on when the clean-up ran
/// (two steps of different CPUs then reached different states in the two
/// orders: tests/weak_direct_writes.rs).
pub fn write_direct(w: &mut World, cpu: CpuId, loc: Loc, val: u64) {
    if w.weak.holds(loc) {
        let (arch, n) = (w.cfg.arch, w.cpus.len());
        w.weak.write_seen_by_all(cpu, loc, val, arch, n);
    }
    write_mem(w, loc, val);
}

/// `cpu`'s store of `val` to `loc` reaches memory (a drain, a barrier, a
/// full buffer's spill, or an SC store): under the weak model it is also a
/// new message of the view machine, which older values stay readable
/// behind ([`crate::hw::weak_mem`]).
fn publish(w: &mut World, cpu: CpuId, loc: Loc, val: u64) {
    if w.cfg.memory_model == MemoryModel::Weak && loc.read_may_be_stale() {
        let old = read_mem(w, loc);
        let (arch, n) = (w.cfg.arch, w.cpus.len());
        w.weak.write(cpu, loc, old, val, arch, n);
    }
    write_mem(w, loc, val);
}

/// `cpu` executes barrier `name` (or an unnamed one when `None`: a locked
/// instruction or a serializing one that no patch would remove). A
/// dropped barrier does nothing.
pub fn barrier(
    w: &mut World,
    cpu: CpuId,
    name: Option<&'static str>,
    order: Order,
    fx: &mut Effects,
) {
    if let Some(n) = name {
        if w.cfg.inject.drop_barrier == n {
            fx.label(Label::BarrierDropped { name: n });
            return;
        }
    }
    drain_for_barrier(w, cpu, name, order, fx);
    if !w.weak.is_empty() {
        // Later loads wait for the accesses before the barrier (the
        // drained stores among them).
        w.weak.barrier(cpu, crate::hw::weak_mem::barrier_of(order));
    }
}

/// The store-buffer half of [`barrier`]: drain (or order) `cpu`'s buffer.
fn drain_for_barrier(
    w: &mut World,
    cpu: CpuId,
    name: Option<&'static str>,
    order: Order,
    fx: &mut Effects,
) {
    if w.membufs[cpu as usize].is_empty() {
        // Nothing to drain or order (the simulator, SC): a dsb(nsh) is
        // still shown, as below.
        if let (Some(n), Order::NonShareable) = (name, order) {
            fx.label(Label::Barrier {
                name: n,
                drained: 0,
            });
        }
        return;
    }
    let drained = w.membufs[cpu as usize].barrier(order);
    // A dsb(nsh) is shown even when it completes nothing: a broadcast
    // TLBI it leaves in flight is the point.
    let shown = !drained.is_empty() || order == Order::NonShareable;
    if let (Some(n), true) = (name, shown) {
        fx.label(Label::Barrier {
            name: n,
            drained: drained.len() as u8,
        });
    }
    for e in drained {
        publish(w, cpu, e.loc, e.val);
    }
}

/// Is barrier `name` removed by `inject.drop_barrier`?
pub fn dropped(w: &World, name: &str) -> bool {
    w.cfg.inject.drop_barrier == name
}

/// The `StepKind::Drain { slot }` choices of `cpu`.
pub fn drain_choices(w: &World, cpu: CpuId) -> impl Iterator<Item = usize> + '_ {
    w.membufs[cpu as usize].drainable(w.cfg.memory_model)
}

/// Drain slot `slot` of `cpu`'s store buffer to memory.
pub fn drain(w: &mut World, cpu: CpuId, slot: usize, fx: &mut Effects) {
    let e = w.membufs[cpu as usize].take(slot);
    fx.label(Label::Drained {
        loc: e.loc,
        val: e.val,
    });
    publish(w, cpu, e.loc, e.val);
}

/// A buffered value as the kernel would name it.
pub fn show_val(loc: Loc, val: u64) -> String {
    match loc {
        Loc::LoadedMm(_) if val == crate::arch::x86::tlb::LOADED_MM_SWITCHING as u64 => {
            "LOADED_MM_SWITCHING".into()
        }
        Loc::LoadedMm(_) => format!("mm{val}"),
        Loc::IsLazy(_) | Loc::NeedTlbFlush(_) => (val != 0).to_string(),
        Loc::LoadedAsid(_) => format!("asid {val}"),
        Loc::Pte { .. } | Loc::PteWalk { .. } => format!("{val:#x}"),
        _ => val.to_string(),
    }
}

/// The in-flight TLBI (and its issuer) that would drop `cpu`'s translation
/// of `va` under `asid`, if any (for the counterexample: a TLB hit that a
/// completed TLBI would have prevented).
pub fn pending_tlbi(w: &World, cpu: CpuId, asid: u16, va: u64) -> Option<(CpuId, Loc)> {
    w.membufs.iter().enumerate().find_map(|(owner, b)| {
        b.entries
            .iter()
            .find(|e| e.loc.tlbi_covers(cpu, asid, va))
            .map(|e| (owner as CpuId, e.loc))
    })
}

/// arm64, checker: `cpu` stored `new` over `old` in the PTE at `idx` of
/// `table` (memory now holds `new`); the page walkers keep seeing `old`
/// until a DSB by `cpu` or a drain ([`Loc::PteWalk`]). Under SC, and on
/// the other architectures (their PTE clears are fully ordered `xchg`s:
/// `lock xchg` on x86, `amoswap.d.aqrl` on RISC-V), the walkers see `new`
/// at once.
pub fn pte_store_for_walkers(
    w: &mut World,
    cpu: CpuId,
    table: machine::Pfn,
    idx: usize,
    old: u64,
    fx: &mut Effects,
) {
    if w.cfg.memory_model == MemoryModel::Sc || w.cfg.arch != machine::scenario::Arch::Arm64 {
        return;
    }
    let loc = Loc::PteWalk {
        table,
        idx: idx as u16,
    };
    fx.label(Label::StoreBuffered { loc, val: old });
    if let Some(spill) = w.membufs[cpu as usize].push(loc, old) {
        publish(w, cpu, spill.loc, spill.val);
    }
}

/// The value a page walk reads from the PTE at `idx` of `table`: an older
/// value some CPU's DSB has not yet made visible to the walkers
/// ([`Loc::PteWalk`]), else memory.
#[inline]
pub fn walker_pte(w: &World, table: machine::Pfn, idx: usize) -> u64 {
    let loc = Loc::PteWalk {
        table,
        idx: idx as u16,
    };
    if w.cfg.memory_model != MemoryModel::Sc {
        for b in w.membufs.iter() {
            if let Some(e) = b.entries.iter().find(|e| e.loc == loc) {
                return e.val;
            }
        }
    }
    w.mem.read(table, idx).unwrap_or(0)
}

/// A page walk by `cpu` read `loc` from memory: label it when another
/// CPU still holds a store to it (walkers never read a store buffer).
pub fn walker_read(w: &World, cpu: CpuId, loc: Loc, fx: &mut Effects) {
    if !fx.tracing || w.cfg.memory_model == MemoryModel::Sc {
        return;
    }
    let lagging = match loc {
        Loc::Pte { table, idx } => Some(Loc::PteWalk { table, idx }),
        Loc::PageTable { table, index } => Some(Loc::PteWalk {
            table,
            idx: index as u16,
        }),
        _ => None,
    };
    for (owner, b) in w.membufs.iter().enumerate() {
        if owner != cpu as usize && b.forward(loc).is_some() {
            fx.label(Label::ReadPastBuffer {
                owner: owner as CpuId,
                loc,
            });
        }
        if let Some(l) = lagging.filter(|&l| b.forward(l).is_some()) {
            fx.label(Label::ReadPastBuffer {
                owner: owner as CpuId,
                loc: l,
            });
        }
    }
}

/// Checker only: is a TLBI in flight that will drop `cpu`'s translation
/// of `va` in its loaded ASID? (A spurious fault on that entry is then no
/// livelock: the hardware completes every TLBI eventually.)
pub fn tlbi_in_flight(w: &World, cpu: CpuId, va: u64) -> bool {
    w.cfg.memory_model != MemoryModel::Sc
        && pending_tlbi(w, cpu, w.cpus[cpu as usize].tlbstate.loaded_mm_asid, va).is_some()
}
