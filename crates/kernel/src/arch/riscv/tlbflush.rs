//! arch/riscv/mm/tlbflush.c.

/// One flush queued for a hart that was not running the ASID (seed d).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeferredFlush {
    pub asid: u16,
    pub start: u64,
    pub size: u64,
    pub stride: u64,
}

/// Per-hart state of seed (d): `loaded_asid` and the deferred-flush queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HartTlbState {
    /// `per_cpu(loaded_asid)`: the ASID this hart runs user code under.
    pub loaded_asid: u16,
    /// `per_cpu(tlb_flush_queue)`.
    pub queue: Vec<DeferredFlush>,
    /// ASIDs whose queue overflowed: flush them whole at the next switch.
    pub flush_all: Vec<u16>,
}
