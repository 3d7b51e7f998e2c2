//! The modelled Linux kernel: TLB-flush paths as explicit step machines.
//!
//! Laid out like `linux/`: `mm/` (faults, madvise, munmap, mmu_gather),
//! `arch/x86/` (`tlb.c`), `kernel/smp.rs` (`smp_call_function_many_cond`
//! and the call-function IPI), `sched/` (context switch, lazy TLB). `hw/`
//! is the hardware: the page walker and TLB fills.
//!
//! Every kernel path that can wait is an enum of program points carrying its
//! locals ([`world::Frame`]); [`World::step`] runs one CPU up to its next
//! globally visible action and records what it cost in [`Effects`]. The
//! simulator (`sim`) prices those effects in time; the checker explores every
//! order of the same steps. Nothing here knows about time except the
//! `jiffies`-like clock the driver writes into [`World::now`].

pub mod arch;
pub mod cow;
pub mod effects;
pub mod exit;
pub mod hw;
pub mod kernel_smp;
pub mod locking;
pub mod mm;
pub mod sched;
pub mod symmetry;
pub mod user;
pub mod world;

pub use effects::{Effects, Label, Stat};
pub use world::{Counters, FlushReason, Violation, World};

/// A task id (index into [`World::tasks`]).
pub type TaskId = u32;
/// An mm id (index into [`World::mms`]); 0 is `init_mm`.
pub type MmId = u32;
/// `init_mm`: the kernel's own address space, loaded by idle CPUs.
pub const INIT_MM: MmId = 0;
/// `TLB_FLUSH_ALL`.
pub const TLB_FLUSH_ALL: u64 = u64::MAX;
/// `TLB_GENERATION_INVALID`.
pub const TLB_GENERATION_INVALID: u64 = 0;
