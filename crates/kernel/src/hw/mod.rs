//! The hardware that the kernel drives: the MMU's page walker and TLB fills.
pub mod mmu;
