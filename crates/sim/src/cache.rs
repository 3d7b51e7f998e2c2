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

/// The CPUs holding a copy of one line: a few inline, more spill to the heap.
#[derive(Default)]
struct Holders {
    n: u8,
    inline: [CpuId; 6],
    spill: Vec<CpuId>,
}

impl Holders {
    #[inline]
    fn contains(&self, cpu: CpuId) -> bool {
        self.inline[..self.n as usize].contains(&cpu) || self.spill.contains(&cpu)
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.n == 0
    }
    #[inline]
    fn only(&self, cpu: CpuId) -> bool {
        self.n == 1 && self.inline[0] == cpu
    }
    #[inline]
    fn push(&mut self, cpu: CpuId) {
        if (self.n as usize) < self.inline.len() {
            self.inline[self.n as usize] = cpu;
            self.n += 1;
        } else {
            self.spill.push(cpu);
        }
    }
    #[inline]
    fn set_only(&mut self, cpu: CpuId) {
        self.n = 1;
        self.inline[0] = cpu;
        self.spill.clear();
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
