//! Generic memory management (`mm/`).
pub mod madvise;
pub mod memory;
pub mod mmap;
pub mod mmu_gather;
