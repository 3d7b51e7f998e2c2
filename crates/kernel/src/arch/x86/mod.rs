//! `arch/x86/mm`.
pub mod tlb;
pub mod tlb_kernel;
