//! arch/riscv: remote `sfence.vma` by IPI or SBI, ASIDs, `mm_cpumask`
//! that only grows, and the deferred flush queue of seed
//! riscv-defer-flush-to-context-switch.
pub mod context;
pub mod tlbflush;
