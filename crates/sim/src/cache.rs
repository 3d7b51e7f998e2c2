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

/// Every tracked line's holders, as bitmaps.
pub struct CacheModel {
    /// Up to 64 CPUs: line address → holders, bit `c` for CPU `c`.
    small: FxHashMap<u64, u64>,
    /// More CPUs: line address → its bitmap's index in `holders`.
    index: FxHashMap<u64, u32>,
    /// Bit `c % 64` of word `c / 64` of a line's bitmap: CPU `c` holds a copy.
    holders: Vec<u64>,
    /// Words per bitmap; 1: `small` is used instead.
    words: usize,
}

impl CacheModel {
    /// A model for `cpus` CPUs, every line untouched.
    pub fn new(cpus: usize) -> Self {
        CacheModel {
            small: FxHashMap::default(),
            index: FxHashMap::default(),
            holders: Vec::new(),
            words: cpus.div_ceil(64).max(1),
        }
    }

    /// Access `line` from `cpu`; true if it had to come from another core.
    /// A write is a miss if another CPU holds the line and leaves `cpu` the
    /// only holder; a read is a miss if others hold it and `cpu` does not.
    #[inline]
    pub fn access(&mut self, cpu: CpuId, line: u64, write: bool) -> bool {
        if self.words == 1 {
            let h = self.small.entry(line).or_insert(0);
            let bit = 1u64 << cpu;
            let others = *h & !bit != 0;
            let mine = *h & bit != 0;
            *h = if write { bit } else { *h | bit };
            return others && (write || !mine);
        }
        self.access_wide(cpu, line, write)
    }

    /// [`CacheModel::access`] with several words per bitmap.
    fn access_wide(&mut self, cpu: CpuId, line: u64, write: bool) -> bool {
        let next = self.index.len() as u32;
        let i = *self.index.entry(line).or_insert(next) as usize * self.words;
        if i == self.holders.len() {
            self.holders.resize(i + self.words, 0);
        }
        let h = &mut self.holders[i..i + self.words];
        let (w, bit) = (cpu as usize / 64, 1u64 << (cpu % 64));
        let mine = h[w] & bit != 0;
        let others = h
            .iter()
            .enumerate()
            .any(|(i, &x)| (if i == w { x & !bit } else { x }) != 0);
        if write {
            h.fill(0);
        }
        h[w] |= bit;
        others && (write || !mine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers() {
        let mut c = CacheModel::new(4);
        assert!(!c.access(0, 64, true), "cold line: no transfer");
        assert!(!c.access(0, 64, true), "owned: no transfer");
        assert!(c.access(1, 64, false), "read of a remote line");
        assert!(!c.access(1, 64, false), "now shared");
        assert!(c.access(0, 64, true), "write must invalidate CPU1's copy");
        assert!(c.access(2, 64, true), "write steals ownership");
    }

    /// The same rules beyond 64 CPUs (several words per line).
    #[test]
    fn transfers_beyond_64_cpus() {
        let mut c = CacheModel::new(200);
        assert!(!c.access(130, 64, true), "cold line: no transfer");
        assert!(!c.access(130, 64, false), "owned: no transfer");
        assert!(c.access(3, 64, false), "read of a line CPU130 owns");
        assert!(!c.access(3, 64, false), "now shared");
        assert!(c.access(199, 64, false), "another reader");
        assert!(c.access(130, 64, true), "write invalidates CPUs 3 and 199");
        assert!(!c.access(130, 64, true), "exclusive again");
        assert!(c.access(3, 64, true), "write steals ownership across words");
        assert!(!c.access(3, 128, false), "another line is independent");
    }
}
