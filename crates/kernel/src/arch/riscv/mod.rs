//! arch/riscv: remote `sfence.vma` by IPI or SBI, ASIDs, and the deferred
//! flush queue of seed riscv-defer-flush-to-context-switch.
pub mod tlbflush;
