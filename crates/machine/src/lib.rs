//! The simulated hardware and its configuration.
//!
//! ```text
//!   +--------- CPU n ----------+     +------------- memory --------------+
//!   | TLB (PCID/ASID tagged,   |     | frames: generation + use           |
//!   |  set-associative, LRU)   |---->| page-table pages (512 PTEs each)   |
//!   | paging-structure cache   |     +------------------------------------+
//!   +--------------------------+
//! ```
//!
//! Nothing here knows about the kernel: the `kernel` crate builds `struct
//! mm_struct`, tasks and the flush paths on top of these parts. Costs live in
//! one [`cost::CostProfile`]; a run is described by one [`scenario::Scenario`].

pub mod cost;
pub mod cpumask;
pub mod error;
pub mod footprint;
pub mod mem;
pub mod scenario;
pub mod tlb;
pub mod topology;

pub use cost::{Cost, CostProfile};
pub use cpumask::CpuMask;
pub use error::Error;
pub use scenario::Scenario;
pub use topology::{Topology, TopologyKind};

/// Simulated time in nanoseconds.
pub type Time = u64;
/// A CPU number, as `smp_processor_id()` returns it.
pub type CpuId = u16;
/// A physical frame number.
pub type Pfn = u32;

/// Size of a base page (4 KiB).
pub const PAGE_SIZE: u64 = 4096;
pub const PAGE_SHIFT: u32 = 12;
/// Size of a PMD-mapped huge page (2 MiB).
pub const HPAGE_SIZE: u64 = 2 << 20;
pub const HPAGE_SHIFT: u32 = 21;
/// Entries per page-table page (`PTRS_PER_PTE`).
pub const PTRS_PER_TABLE: usize = 512;
/// Cache line size (`SMP_CACHE_BYTES` / `L1_CACHE_BYTES` on x86).
pub const CACHE_LINE: u64 = 64;
