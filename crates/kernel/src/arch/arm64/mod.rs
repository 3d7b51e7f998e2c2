//! arch/arm64: TLB maintenance by broadcast TLBI (no IPIs), ASIDs, and the
//! write-protect fault path of seed arm64-local-tlbi-wp-fault.
pub mod context;
pub mod fault;
pub mod tlbflush;
