//! The hardware that the kernel drives: the MMU's page walker and TLB fills,
//! and the memory model the checker explores (store buffers, barriers).
pub mod filled_index;
pub mod litmus;
pub mod memory_model;
pub mod mmu;
pub mod psc_index;
pub mod vmsa;
pub mod weak_mem;
pub mod wmm;
