//! A MESI-like cache-line model, only for pricing.
//!
//! Each tracked line remembers which CPUs hold a copy. A read by a CPU without
//! a copy, or a write by a CPU that is not the only holder, moves the line
//! from another core (a core-to-core transfer, `cache_line_transfer`). Lines
//! nobody has touched are treated as L2/LLC hits (free). This is where the
//! cost of the `flush_tlb_info` placement comes from: a struct that straddles
//! two lines costs the initiator two ownership requests and every target two
//! reads.

use machine::CpuId;
use rustc_hash::FxHashMap;

/// The CPUs holding a copy of one line: CPUs 0..63 as bits, others listed.
#[derive(Default)]
struct Holders {
    low: u64,
    high: Vec<CpuId>,
}

impl Holders {
    #[inline]
    fn contains(&self, cpu: CpuId) -> bool {
        if cpu < 64 {
            self.low & (1 << cpu) != 0
        } else {
            self.high.contains(&cpu)
        }
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.low == 0 && self.high.is_empty()
    }
    #[inline]
    fn only(&self, cpu: CpuId) -> bool {
        if cpu < 64 {
            self.low == 1 << cpu && self.high.is_empty()
        } else {
            self.low == 0 && self.high.len() == 1 && self.high[0] == cpu
        }
    }
    #[inline]
    fn push(&mut self, cpu: CpuId) {
        if cpu < 64 {
            self.low |= 1 << cpu;
        } else {
            self.high.push(cpu);
        }
    }
    #[inline]
    fn set_only(&mut self, cpu: CpuId) {
        self.low = 0;
        self.high.clear();
        self.push(cpu);
    }
}

#[derive(Default)]
pub struct CacheModel {
    lines: FxHashMap<u64, Holders>,
}

impl CacheModel {
    /// Access `line` from `cpu`; true if it had to come from another core.
    #[inline]
    pub fn access(&mut self, cpu: CpuId, line: u64, write: bool) -> bool {
        let h = self.lines.entry(line).or_default();
        if write {
            let miss = !h.is_empty() && !h.only(cpu);
            h.set_only(cpu);
            miss
        } else if h.is_empty() {
            h.push(cpu);
            false
        } else if h.contains(cpu) {
            false
        } else {
            h.push(cpu);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers() {
        let mut c = CacheModel::default();
        assert!(!c.access(0, 64, true), "cold line: no transfer");
        assert!(!c.access(0, 64, true), "owned: no transfer");
        assert!(c.access(1, 64, false), "read of a remote line");
        assert!(!c.access(1, 64, false), "now shared");
        assert!(c.access(0, 64, true), "write must invalidate CPU1's copy");
        assert!(c.access(2, 64, true), "write steals ownership");
    }
}
