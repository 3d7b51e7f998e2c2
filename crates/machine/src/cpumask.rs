//! `struct cpumask`: a bitmap of CPUs (include/linux/cpumask.h).

use crate::CpuId;

/// A fixed-size CPU bitmap, sized for the machine's CPU count.
///
/// The first word is inline: masks of up to 64 CPUs (every checker world)
/// clone without allocating.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CpuMask {
    /// Number of 64-bit words (0 only for `Default`).
    nwords: u32,
    lo: u64,
    /// Words 1.. (empty, and unallocated, up to 64 CPUs).
    hi: Box<[u64]>,
}

impl CpuMask {
    /// An empty mask for `nr_cpu_ids` CPUs.
    pub fn new(nr_cpus: usize) -> Self {
        let n = nr_cpus.div_ceil(64).max(1);
        CpuMask {
            nwords: n as u32,
            lo: 0,
            hi: vec![0; n - 1].into_boxed_slice(),
        }
    }

    /// Word `i` (panics past the mask's size, as an index would).
    #[inline]
    fn word(&self, i: usize) -> u64 {
        if i == 0 && self.nwords > 0 {
            self.lo
        } else {
            self.hi[i.wrapping_sub(1)]
        }
    }

    #[inline]
    fn word_mut(&mut self, i: usize) -> &mut u64 {
        if i == 0 && self.nwords > 0 {
            &mut self.lo
        } else {
            &mut self.hi[i.wrapping_sub(1)]
        }
    }

    /// The words in order.
    #[inline]
    fn words(&self) -> impl Iterator<Item = u64> + '_ {
        (self.nwords > 0)
            .then_some(self.lo)
            .into_iter()
            .chain(self.hi.iter().copied())
    }

    /// `cpumask_set_cpu()`.
    #[inline]
    pub fn set(&mut self, cpu: CpuId) {
        *self.word_mut(cpu as usize / 64) |= 1 << (cpu % 64);
    }

    /// `cpumask_clear_cpu()`.
    #[inline]
    pub fn clear(&mut self, cpu: CpuId) {
        *self.word_mut(cpu as usize / 64) &= !(1 << (cpu % 64));
    }

    /// `cpumask_test_cpu()`.
    #[inline]
    pub fn test(&self, cpu: CpuId) -> bool {
        self.word(cpu as usize / 64) & (1 << (cpu % 64)) != 0
    }

    /// `cpumask_empty()`.
    pub fn is_empty(&self) -> bool {
        self.lo == 0 && self.hi.iter().all(|w| *w == 0)
    }

    /// `cpumask_weight()`.
    pub fn weight(&self) -> u32 {
        self.words().map(|w| w.count_ones()).sum()
    }

    /// `cpumask_clear()`.
    pub fn clear_all(&mut self) {
        self.lo = 0;
        self.hi.iter_mut().for_each(|w| *w = 0);
    }

    /// `cpumask_any_but(mask, cpu) < nr_cpu_ids`: is any CPU other than `cpu` set?
    pub fn any_but(&self, cpu: CpuId) -> bool {
        self.words().enumerate().any(|(i, mut w)| {
            if i == cpu as usize / 64 {
                w &= !(1 << (cpu % 64));
            }
            w != 0
        })
    }

    /// `for_each_cpu()`: the set CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.words().enumerate().flat_map(|(i, w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some((i * 64) as CpuId + b as CpuId)
            })
        })
    }

    /// The lowest set CPU, if any.
    pub fn first(&self) -> Option<CpuId> {
        self.iter().next()
    }

    /// The same set with every CPU `c` renamed to `perm[c]` (the checker's
    /// symmetry reduction; no kernel counterpart). The size stays the same.
    pub fn permuted(&self, perm: &[CpuId]) -> CpuMask {
        let mut m = CpuMask {
            nwords: self.nwords,
            lo: 0,
            hi: vec![0; self.hi.len()].into_boxed_slice(),
        };
        for c in self.iter() {
            m.set(perm[c as usize]);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_iter_any_but() {
        let mut m = CpuMask::new(130);
        for c in [0, 63, 64, 129] {
            m.set(c);
        }
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![0, 63, 64, 129]);
        assert_eq!(m.weight(), 4);
        assert!(m.any_but(0));
        m.clear(63);
        m.clear(64);
        m.clear(129);
        assert!(!m.any_but(0));
        assert!(m.any_but(5));
        m.clear(0);
        assert!(m.is_empty());
    }

    #[test]
    fn permuted_renames_each_cpu() {
        let mut m = CpuMask::new(4);
        m.set(1);
        m.set(3);
        let p = m.permuted(&[0, 2, 3, 1]);
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(p.permuted(&[0, 3, 1, 2]), m);
    }
}
