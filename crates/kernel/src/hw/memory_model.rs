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
//!   store buffer can express. Load->load reordering is modelled only in
//!   the litmus explorer ([`crate::hw::litmus`]); load->store reordering
//!   (the LB shape) is not modelled at all (see docs/checker.md).
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
}

impl Loc {
    /// This location with its CPU ids renamed by `f`.
    pub fn renamed(self, f: impl Fn(CpuId) -> CpuId) -> Loc {
        match self {
            Loc::MmCpumask { mm, cpu } => Loc::MmCpumask { mm, cpu: f(cpu) },
            Loc::LoadedMm(c) => Loc::LoadedMm(f(c)),
            Loc::IsLazy(c) => Loc::IsLazy(f(c)),
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
        self.entries.iter().rev().find(|e| e.loc == loc).map(|e| e.val)
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
