//! arm64 broadcast TLB maintenance on a CMN-class mesh: the DVM node.
//!
//! ```text
//!  core c: TLBI VALE1IS x ops ──> DN trackers (ops_in_flight slots, in parallel)
//!                                   each op: fan-out to every core, n x dvm_op_per_core
//!          DSB ISH ──> DVM Sync ──> one Sync at a time (serialised), dsb_ish each,
//!                                   after every op issued before it has completed
//!  core c waits until its Sync completes; every other core goes on
//!  (it only pays dvm_snoop per op it looks up, charged by the engine)
//! ```
//!
//! A CHI requester sends each `TLBI ...IS` to the DVM node (DN) as a DVMOp
//! and the `DSB ISH` after it as a DVMOp(Sync); the DN forwards both to
//! every core of the inner-shareable domain and collects their responses
//! (AMBA CHI, DVM transactions). The DN tracks several DVMOps at once but
//! completes Syncs one after another, and a Sync completes only when the
//! cores have finished every invalidation they received before it: the
//! latency of a broadcast grows with the number of cores flushing at the
//! same time (A. Arcangeli, "arm64: tlb: skip tlbi broadcast", measured on
//! a 32-CPU Ampere: "increases almost linearly with the number of CPUs
//! trying to send tlbi broadcasts at the same time").

/// The DVM prices the DN applies, in ps, and the shape of the domain.
#[derive(Clone, Copy, Debug)]
pub struct DvmPrices {
    /// Cores in the inner-shareable domain (every op fans out to each).
    pub ncpu: u64,
    /// One op's fan-out per core (`dvm_op_per_core`).
    pub op_per_core: u64,
    /// One Sync's service time at the DN (`dsb_ish`).
    pub sync: u64,
}

/// The DN's state: its op trackers and its Sync stage.
#[derive(Clone, Debug)]
pub struct Dvm {
    /// When each DVMOp tracker is free again (ps).
    slots: Vec<u64>,
    /// When the Sync stage is free again (ps).
    sync_free: u64,
    /// The latest completion of any op issued so far (ps).
    ops_done: u64,
}

impl Dvm {
    /// A DN with `ops_in_flight` trackers (at least one).
    pub fn new(ops_in_flight: u32) -> Dvm {
        Dvm {
            slots: vec![0; ops_in_flight.max(1) as usize],
            sync_free: 0,
            ops_done: 0,
        }
    }

    /// `__tlbi(...is)` x `ops` then `dsb(ish)` (arch/arm64/include/asm/tlbflush.h:
    /// `flush_tlb_page`, `__flush_tlb_range`) issued by one core at `start`
    /// ps: returns when its `DSB ISH` completes (ps).
    pub fn tlbi_is_dsb_ish(&mut self, start: u64, ops: u32, p: &DvmPrices) -> u64 {
        let fan_out = p.ncpu * p.op_per_core;
        for _ in 0..ops {
            let slot = self.earliest_slot();
            let done = self.slots[slot].max(start) + fan_out;
            self.slots[slot] = done;
            self.ops_done = self.ops_done.max(done);
        }
        self.dvm_sync(start, p)
    }

    /// The DVMOp(Sync) of a `DSB ISH` sent at `start`: it waits for every op
    /// issued before it and for the Sync ahead of it, then takes `sync`.
    fn dvm_sync(&mut self, start: u64, p: &DvmPrices) -> u64 {
        let begin = start.max(self.ops_done).max(self.sync_free);
        self.sync_free = begin + p.sync;
        self.sync_free
    }

    /// The tracker that frees first (the lowest index among equals).
    fn earliest_slot(&self) -> usize {
        let mut best = 0;
        for (i, &t) in self.slots.iter().enumerate() {
            if t < self.slots[best] {
                best = i;
            }
        }
        best
    }

    /// How many ops are still in flight at `t` (ps).
    pub fn in_flight(&self, t: u64) -> usize {
        self.slots.iter().filter(|&&d| d > t).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: DvmPrices = DvmPrices {
        ncpu: 100,
        op_per_core: 3,
        sync: 70,
    };

    /// A lone flusher waits for its op's fan-out and one Sync: the
    /// `n x dvm_op_per_core + dsb_ish` the N2 anchor was fitted with.
    #[test]
    fn lone_flush_is_fan_out_plus_sync() {
        let mut d = Dvm::new(4);
        assert_eq!(d.tlbi_is_dsb_ish(1000, 1, &P), 1000 + 100 * 3 + 70);
    }

    /// Ops from different cores overlap up to the tracker count; one more
    /// waits for the first tracker to free.
    #[test]
    fn ops_in_flight_never_exceed_the_trackers() {
        let k = 3;
        let fan_out = P.ncpu * P.op_per_core;
        let mut d = Dvm::new(k);
        for _ in 0..k {
            d.tlbi_is_dsb_ish(0, 1, &P);
        }
        assert_eq!(
            d.in_flight(0),
            k as usize,
            "k ops from k cores all start at once"
        );
        // A core with k + 1 ops: the last one starts when a tracker frees,
        // so its Sync begins after two fan-outs, not one.
        let mut e = Dvm::new(k);
        assert_eq!(e.tlbi_is_dsb_ish(0, k + 1, &P), 2 * fan_out + P.sync);
        let mut f = Dvm::new(k + 1);
        assert_eq!(f.tlbi_is_dsb_ish(0, k + 1, &P), fan_out + P.sync);
    }

    /// Syncs complete one at a time, in the order they were sent, each
    /// `dsb_ish` after the one before: the n-th of n cores flushing at once
    /// waits n Syncs.
    #[test]
    fn syncs_are_serialised_in_order() {
        let mut d = Dvm::new(8);
        let fan_out = P.ncpu * P.op_per_core;
        let done: Vec<u64> = (0..5).map(|_| d.tlbi_is_dsb_ish(0, 1, &P)).collect();
        for (i, t) in done.iter().enumerate() {
            assert_eq!(*t, fan_out + (i as u64 + 1) * P.sync);
        }
    }

    /// A Sync waits for ops other cores issued before it, not for later ones.
    #[test]
    fn sync_waits_for_earlier_ops_only() {
        let mut d = Dvm::new(8);
        let slow = DvmPrices {
            op_per_core: 10,
            ..P
        };
        let a = d.tlbi_is_dsb_ish(0, 1, &slow); // fan-out 1000
        let b = d.tlbi_is_dsb_ish(10, 0, &P); // a bare DSB ISH after it
        assert!(b >= 1000 + P.sync, "{b}");
        assert_eq!(a, 1000 + P.sync);
        // A fresh DN: a Sync alone is one service time.
        assert_eq!(Dvm::new(1).tlbi_is_dsb_ish(5, 0, &P), 5 + P.sync);
    }
}
