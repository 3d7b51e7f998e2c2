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

/// Every tracked line's holders, as bitmaps.
pub struct CacheModel {
    /// Up to 64 CPUs: line address → holders, bit `c` for CPU `c`.
    small: LineMap,
    /// More CPUs: line address → its record's index in `holders`.
    index: LineMap,
    /// Per line, `words + 1` words: the number of holders, then the bitmap
    /// (bit `c % 64` of word `c / 64`: CPU `c` holds a copy).
    holders: Vec<u64>,
    /// Words per bitmap; 1: `small` is used instead.
    words: usize,
}

impl CacheModel {
    /// A model for `cpus` CPUs, every line untouched.
    pub fn new(cpus: usize) -> Self {
        CacheModel {
            small: LineMap::new(),
            index: LineMap::new(),
            holders: Vec::new(),
            words: cpus.div_ceil(64).max(1),
        }
    }

    /// Access `line` from `cpu`; true if it had to come from another core.
    /// A write is a miss if another CPU holds the line and leaves `cpu` the
    /// only holder; a read is a miss if others hold it and `cpu` does not.
    #[inline(always)]
    pub fn access(&mut self, cpu: CpuId, line: u64, write: bool) -> bool {
        if self.words == 1 {
            let h = self.small.get_or_insert(line, 0);
            let bit = 1u64 << cpu;
            let others = *h & !bit != 0;
            let mine = *h & bit != 0;
            *h = if write { bit } else { *h | bit };
            return others && (write || !mine);
        }
        self.access_wide(cpu, line, write)
    }

    /// [`CacheModel::access`] with several words per bitmap. A line's
    /// record is its holder count, then its bitmap: with one or two holders
    /// (most lines) an access reads two words, not the whole bitmap.
    fn access_wide(&mut self, cpu: CpuId, line: u64, write: bool) -> bool {
        let stride = self.words + 1;
        let next = self.index.len as u64;
        let i = *self.index.get_or_insert(line, next) as usize * stride;
        if i == self.holders.len() {
            self.holders.resize(i + stride, 0);
        }
        let h = &mut self.holders[i..i + stride];
        let (w, bit) = (1 + cpu as usize / 64, 1u64 << (cpu % 64));
        let mine = h[w] & bit != 0;
        let others = h[0] > u64::from(mine);
        if write && others {
            h[1..].fill(0);
            h[0] = 0;
        }
        if write && others || !mine {
            h[w] |= bit;
            h[0] += 1;
        }
        others && (write || !mine)
    }
}

/// Line address → a word, as an open-addressing table with linear
/// probing (model machinery: a line is looked up at every priced access,
/// and a general hash map spent several times this on it). Entries are
/// never removed.
struct LineMap {
    /// `EMPTY` in a free slot.
    keys: Vec<u64>,
    vals: Vec<u64>,
    /// Slots in use (with the line `EMPTY`'s, which has none).
    len: usize,
    /// 64 - log2(slots): a hash's top bits pick the slot.
    shift: u32,
    /// The value of the line whose address is `EMPTY`, if it is tracked.
    empty_line: Option<u64>,
}

const EMPTY: u64 = u64::MAX;

impl LineMap {
    fn new() -> Self {
        LineMap {
            keys: vec![EMPTY; 64],
            vals: vec![0; 64],
            len: 0,
            shift: 64 - 6,
            empty_line: None,
        }
    }

    /// The slot where `line` is, or the free one where it would go.
    #[inline]
    fn find(&self, line: u64) -> usize {
        let mask = self.keys.len() - 1;
        let mut i = (line.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize;
        while self.keys[i] != line && self.keys[i] != EMPTY {
            i = (i + 1) & mask;
        }
        i
    }

    /// `line`'s value, `init` put in first if the line is new.
    #[inline(always)]
    fn get_or_insert(&mut self, line: u64, init: u64) -> &mut u64 {
        let i = self.find(line);
        if self.keys[i] == EMPTY {
            return self.insert(line, init);
        }
        &mut self.vals[i]
    }

    /// Put in a line that is not in the table (or whose address is `EMPTY`).
    #[cold]
    #[inline(never)]
    fn insert(&mut self, line: u64, init: u64) -> &mut u64 {
        if line == EMPTY {
            if self.empty_line.is_none() {
                self.len += 1;
            }
            return self.empty_line.get_or_insert(init);
        }
        if 2 * (self.len + 1) > self.keys.len() {
            self.grow();
        }
        let i = self.find(line);
        self.keys[i] = line;
        self.vals[i] = init;
        self.len += 1;
        &mut self.vals[i]
    }

    /// Twice the slots, every entry put in again.
    #[cold]
    fn grow(&mut self) {
        let n = self.keys.len() * 2;
        let keys = std::mem::replace(&mut self.keys, vec![EMPTY; n]);
        let vals = std::mem::replace(&mut self.vals, vec![0; n]);
        self.shift -= 1;
        for (k, v) in keys.into_iter().zip(vals) {
            if k != EMPTY {
                let i = self.find(k);
                self.keys[i] = k;
                self.vals[i] = v;
            }
        }
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

    /// The table keeps every line's value through its growth, the line
    /// whose address is its free-slot marker too.
    #[test]
    fn line_map_holds_every_line() {
        let mut m = LineMap::new();
        let lines: Vec<u64> = (0..5000u64).map(|i| i * 64 + (i % 7) * (1 << 40)).collect();
        for (n, &l) in lines.iter().enumerate() {
            assert_eq!(*m.get_or_insert(l, n as u64), n as u64);
        }
        assert_eq!(*m.get_or_insert(EMPTY, 7), 7);
        *m.get_or_insert(EMPTY, 0) += 1;
        for (n, &l) in lines.iter().enumerate() {
            assert_eq!(*m.get_or_insert(l, 0), n as u64, "line {l:#x}");
        }
        assert_eq!(*m.get_or_insert(EMPTY, 0), 8);
        assert_eq!(m.len, lines.len() + 1);
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

    /// Both layouts against a set of holders per line, on a random mix of
    /// reads and writes by CPUs across bitmap words.
    #[test]
    fn both_layouts_follow_the_holder_sets() {
        use std::collections::{BTreeSet, HashMap};
        for cpus in [8usize, 64, 200, 1024] {
            let mut c = CacheModel::new(cpus);
            let mut sets: HashMap<u64, BTreeSet<CpuId>> = HashMap::new();
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // few CPUs and lines, so that lines are shared and stolen
                let cpu = ((x >> 8) % 6) as usize * (cpus - 1) / 5;
                let line = (x >> 20) % 12 * 64;
                let write = x & 3 == 0;
                let h = sets.entry(line).or_default();
                let mine = h.contains(&(cpu as CpuId));
                let others = h.len() > usize::from(mine);
                if write {
                    h.clear();
                }
                h.insert(cpu as CpuId);
                let want = others && (write || !mine);
                assert_eq!(c.access(cpu as CpuId, line, write), want, "{cpus} CPUs");
            }
        }
    }
}
