//! Which CPUs' paging-structure caches may hold a page-table page: the
//! invariant-3 monitor's index, so that freeing a table asks a few CPUs,
//! not all of them.
//!
//! Model machinery, not a model of anything in the kernel. One row of CPUs
//! per bucket of tables (`pfn % 4096`): CPU `c` is in a bucket's row when
//! a slot of its paging-structure caches (live or stale) holds a table of
//! that bucket. The rows change only where those slots do, at the walker's
//! two fills in `hw/mmu.rs`, which pass on what the fill replaced
//! ([`machine::tlb::PscSwap`]). A CPU outside a table's row cannot hold
//! the table; one inside is asked as before. On machines with few CPUs
//! (the checker's) asking every CPU is as cheap as the index, which is
//! then left empty and never cloned.

use machine::tlb::PscSwap;
use machine::Pfn;

/// Machines with fewer CPUs than this keep no index.
const MIN_CPUS: usize = 16;

/// Buckets of tables: far more than a cache's slots, so that a row holds
/// few CPUs that do not cache the table itself.
const BUCKETS: usize = 4096;

fn bucket(table: Pfn) -> usize {
    table as usize % BUCKETS
}

/// Bucket rows of CPUs (see the module doc), if there is an index. A
/// hint, as [`crate::world::Hint`]: worlds never differ by it. (One word
/// in the world, which the checker moves and clones all the time.)
#[derive(Clone, Debug, Default)]
pub struct PscIndex(Option<Box<Rows>>);

#[derive(Clone, Debug)]
struct Rows {
    /// Words per row.
    words: usize,
    /// `bits[b * words + c / 64]` bit `c % 64`: CPU `c` caches a table of bucket `b`.
    bits: Vec<u64>,
}

impl PscIndex {
    /// Does a machine of `cpus` CPUs keep an index (and its TLBs the table
    /// of each slot, [`machine::tlb::Tlb::keep_table_slots`])?
    pub fn wanted(cpus: usize) -> bool {
        cpus >= MIN_CPUS
    }

    /// An index for `cpus` CPUs whose caches are all empty (or none).
    pub fn new(cpus: usize) -> Self {
        if !Self::wanted(cpus) {
            return PscIndex::default();
        }
        let words = cpus.div_ceil(64);
        PscIndex(Some(Box::new(Rows {
            words,
            bits: vec![0; BUCKETS * words],
        })))
    }

    /// The index of these CPUs' caches (CPU `c`'s slot tables are the `c`-th).
    pub fn of<'a>(cpus: impl ExactSizeIterator<Item = &'a [Pfn]>) -> Self {
        let mut idx = PscIndex::new(cpus.len());
        if let Some(r) = &mut idx.0 {
            for (c, pfns) in cpus.enumerate() {
                for &t in pfns.iter().filter(|&&t| t != 0) {
                    r.set(c, bucket(t), true);
                }
            }
        }
        idx
    }

    /// Is there an index (enough CPUs)?
    #[inline]
    pub fn enabled(&self) -> bool {
        self.0.is_some()
    }

    /// CPU `cpu` filled a slot (`swap`); `pfns`, its slots' tables after.
    #[inline]
    pub fn note(&mut self, cpu: usize, swap: PscSwap, pfns: &[Pfn]) {
        let Some(r) = &mut self.0 else { return };
        let b = bucket(swap.table);
        r.set(cpu, b, true);
        if let Some(g) = swap.gone.map(bucket).filter(|&g| g != b) {
            if !pfns.iter().any(|&t| t != 0 && bucket(t) == g) {
                r.set(cpu, g, false);
            }
        }
    }

    /// The CPUs, in increasing order, that cache a table of `table`'s
    /// bucket; `None` without an index (every CPU may hold it).
    pub fn cpus(&self, table: Pfn) -> Option<impl Iterator<Item = usize> + '_> {
        let r = self.0.as_ref()?;
        let b = bucket(table);
        let row = &r.bits[b * r.words..(b + 1) * r.words];
        Some(row.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let j = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + j
                })
            })
        }))
    }
}

impl Rows {
    fn set(&mut self, cpu: usize, b: usize, on: bool) {
        let r = &mut self.bits[b * self.words + cpu / 64];
        let bit = 1u64 << (cpu % 64);
        if on {
            *r |= bit;
        } else {
            *r &= !bit;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine::tlb::Tlb;

    /// The index follows fills that add and evict tables on 70 CPUs (two
    /// words a row): a CPU is in a table's row exactly when one of its
    /// slots holds a table of the bucket, rows list CPUs in increasing
    /// order, and an index built from the caches is the same.
    #[test]
    fn rows_follow_the_caches() {
        let n = 70;
        let mut tlbs: Vec<Tlb> = (0..n)
            .map(|_| Tlb::new(64, 4, 4).keep_table_slots())
            .collect();
        let mut idx = PscIndex::new(n);
        assert!(idx.enabled() && !PscIndex::new(MIN_CPUS - 1).enabled());
        // CPU 0's fills again, on a TLB that keeps its slots' tables only
        // when asked, at the end.
        let mut late = Tlb::new(64, 4, 4);
        let mut x = 7u64;
        // Tables collide in buckets (t and t + 4096), and evictions empty them.
        let table_of = |r: u64| 1 + (r % 20) as u32 * 3 + (r % 40 / 20) as u32 * 4096;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let c = (x >> 40) as usize % n;
            let table = table_of(x >> 20);
            let va = ((x >> 8) % 16) << 21;
            let swap = if step % 3 == 0 {
                if c == 0 {
                    late.pud_psc_fill(1, va << 9, table, 0);
                }
                Some(tlbs[c].pud_psc_fill(1, va << 9, table, 0))
            } else {
                if c == 0 {
                    late.psc_fill(1, va, table, 0);
                }
                tlbs[c].psc_fill(1, va, table, 0)
            };
            if let Some(swap) = swap {
                idx.note(c, swap, tlbs[c].psc_pfns());
            }
        }
        let mut partial = 0;
        for r in 0..40 {
            let table = table_of(r);
            let want: Vec<usize> = (0..n)
                .filter(|&c| {
                    let pfns = tlbs[c].psc_pfns();
                    pfns.iter().any(|&t| t != 0 && bucket(t) == bucket(table))
                })
                .collect();
            let got: Vec<usize> = idx.cpus(table).unwrap().collect();
            assert_eq!(got, want, "table {table}");
            partial += usize::from(!got.is_empty() && got.len() < n);
        }
        // Rows are neither all empty nor all full: the test tells them apart.
        assert!(partial > 10, "{partial}");
        assert_eq!(late.keep_table_slots().psc_pfns(), tlbs[0].psc_pfns());
        let built = PscIndex::of(tlbs.iter().map(|t| t.psc_pfns()));
        assert_eq!(built.0.unwrap().bits, idx.0.unwrap().bits);
    }
}
