//! Generic memory management (`mm/`).
pub mod fork;
pub mod gup;
pub mod khugepaged;
pub mod madvise;
pub mod memory;
pub mod migrate;
pub mod mmap;
pub mod mmap_lock;
pub mod mmu_gather;
pub mod rmap;
pub mod swap;
pub mod vmalloc;
pub mod vmscan;
