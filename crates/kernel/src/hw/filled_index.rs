//! Which CPUs' TLBs ever filled a translation of an ASID: the CPUs a
//! broadcast `TLBI VALE1IS` can change, so that applying one visits those
//! CPUs, not all of them.
//!
//! Model machinery, not a model of anything in the kernel (the hardware
//! broadcasts to every core). Each TLB already knows, per bucket of ASIDs
//! (`asid % 64`), whether it ever filled one ([`machine::tlb::Tlb::may_hold`]):
//! a bit that is set by a fill and never cleared. This index keeps, per
//! bucket, the CPUs whose bit is set, so that finding them reads one mask
//! instead of every CPU's TLB (128 cache misses per broadcast TLBI on the
//! arm64 usemem machine). It changes only where a bit is set, at the
//! walker's fills in `hw/mmu.rs` (`hw::mmu::tlb_fill`). On
//! machines with few CPUs (the checker's) asking every CPU is as cheap,
//! and the index is left empty and never cloned.

use machine::tlb::Tlb;
use machine::{CpuId, CpuMask};

/// Machines with fewer CPUs than this keep no index.
const MIN_CPUS: usize = 16;

/// ASID buckets, as [`Tlb::may_hold`]'s.
const BUCKETS: usize = 64;

/// Per ASID bucket, the CPUs whose TLB may hold a translation of it, if
/// there is an index. A hint, as [`crate::world::Hint`]: it follows from
/// the TLBs, and worlds never differ by it.
#[derive(Clone, Debug, Default)]
pub struct FilledIndex(Option<Box<[CpuMask]>>);

impl FilledIndex {
    /// An index for `cpus` CPUs whose TLBs never filled anything (or none).
    pub fn new(cpus: usize) -> Self {
        FilledIndex((cpus >= MIN_CPUS).then(|| vec![CpuMask::new(cpus); BUCKETS].into()))
    }

    /// The index of these TLBs (the checker's renamed worlds).
    pub fn of<'a>(tlbs: impl ExactSizeIterator<Item = &'a Tlb>) -> Self {
        let mut ix = FilledIndex::new(tlbs.len());
        if let Some(rows) = &mut ix.0 {
            for (c, tlb) in tlbs.enumerate() {
                for (b, row) in rows.iter_mut().enumerate() {
                    if tlb.may_hold(b as u16) {
                        row.set(c as CpuId);
                    }
                }
            }
        }
        ix
    }

    /// CPU `cpu`'s TLB fills its first translation of `asid`'s bucket.
    #[inline]
    pub fn note(&mut self, cpu: CpuId, asid: u16) {
        if let Some(rows) = &mut self.0 {
            rows[asid as usize % BUCKETS].set(cpu);
        }
    }

    /// The CPUs whose TLB may hold a translation of `asid`, in ascending
    /// order; `None` without an index.
    #[inline]
    pub fn cpus(&self, asid: u16) -> Option<&CpuMask> {
        self.0.as_ref().map(|rows| &rows[asid as usize % BUCKETS])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine::tlb::TlbHit;

    /// Noted fills and the index rebuilt from the TLBs agree, on every
    /// bucket, with asking each TLB.
    #[test]
    fn follows_the_tlbs() {
        let n = 20;
        let mut tlbs: Vec<Tlb> = (0..n).map(|_| Tlb::new(64, 4, 4)).collect();
        let mut ix = FilledIndex::new(n);
        let hit = TlbHit {
            owner: 1,
            pfn: 5,
            frame_gen: 0,
            writable: true,
            huge: false,
        };
        for (c, asid) in [(3, 7u16), (19, 71), (3, 7), (0, 64), (12, 130)] {
            if !tlbs[c].may_hold(asid) {
                ix.note(c as CpuId, asid);
            }
            tlbs[c].fill(asid, 0x1000 * asid as u64, hit);
        }
        let rebuilt = FilledIndex::of(tlbs.iter());
        for asid in 0..200u16 {
            let want: Vec<CpuId> = (0..n as CpuId)
                .filter(|&c| tlbs[c as usize].may_hold(asid))
                .collect();
            for i in [&ix, &rebuilt] {
                assert_eq!(i.cpus(asid).unwrap().iter().collect::<Vec<_>>(), want);
            }
        }
        assert_eq!(ix.cpus(7).unwrap().iter().collect::<Vec<_>>(), [3, 19]);
        assert!(
            FilledIndex::new(8).cpus(7).is_none(),
            "no index on small machines"
        );
    }
}
