//! The simulator's event queue: a 4-ary min-heap on `(time, sequence)`.
//!
//! Engine machinery, not a model of anything in the kernel. The sequence
//! number is unique, so the order is total and events leave in exactly the
//! order of the `BinaryHeap<Reverse<_>>` it replaces; a 4-ary heap is half
//! as deep, and its four children share a cache line or two, which made
//! the pop the engine's largest single cost after the model's steps.
//!
//! An entry that is pushed while it is less than everything queued (a CPU
//! rescheduling itself ahead of every other CPU, half of all steps in
//! some scenarios) waits in a slot in front of the heap: the next pop
//! takes it without sifting it in and out.
//!
//! A pop leaves the heap's root vacant: the next push (a step's CPU
//! rescheduling itself, most of the time) sifts down from there, instead
//! of the pop sifting the heap's last entry down and the push sifting the
//! new one up; a pop finds the root vacant only after a pop without push.

/// An event queue entry: anything with a `(time, sequence)` key, given as
/// one `u128` (time in the high half) so that a comparison is one wide
/// compare instead of a lexicographic pair.
pub trait Keyed: Copy {
    fn key(&self) -> u128;
}

/// The key of `(time, seq)`: ordered as the pair is.
#[inline]
pub fn key(time: u64, seq: u64) -> u128 {
    (time as u128) << 64 | seq as u128
}

/// A min-heap of `T` by [`Keyed::key`], four children per node, with a
/// slot in front for an entry less than every one in the heap.
pub struct Queue<T> {
    /// Less than every entry of `v` when set.
    front: Option<T>,
    v: Vec<T>,
    /// `v[0]` is vacant (the entry popped last; the heap's entries are
    /// the rest of `v`): the index and key of its least child (`u128::MAX`:
    /// it has none), which a push compares with first.
    hole: Option<(usize, u128)>,
}

impl<T: Keyed> Queue<T> {
    pub fn with_capacity(n: usize) -> Self {
        Queue {
            front: None,
            v: Vec::with_capacity(n),
            hole: None,
        }
    }

    pub fn len(&self) -> usize {
        self.v.len() - usize::from(self.hole.is_some()) + usize::from(self.front.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry with the least key, without removing it.
    pub fn peek(&mut self) -> Option<&T> {
        self.fill_hole();
        self.front.as_ref().or(self.v.first())
    }

    #[inline(always)]
    pub fn push(&mut self, e: T) {
        let k = e.key();
        if let Some(least) = self.hole {
            return self.push_into_hole(e, k, least);
        }
        match self.front {
            Some(f) if k < f.key() => {
                self.front = Some(e);
                self.sift_in(f);
            }
            Some(_) => self.sift_in(e),
            None if self.v.first().is_none_or(|m| k < m.key()) => self.front = Some(e),
            None => self.sift_in(e),
        }
    }

    /// Push `e` (key `k`) while the root is vacant, its least child `least`.
    #[inline(always)]
    fn push_into_hole(&mut self, e: T, k: u128, (m, mk): (usize, u128)) {
        let e = match self.front {
            // Less than the whole heap: in front, the root left vacant.
            None if k < mk => {
                self.front = Some(e);
                return;
            }
            None => e,
            // The front's entry goes in the heap instead.
            Some(f) if k < f.key() => {
                self.front = Some(e);
                f
            }
            Some(_) => e,
        };
        self.hole = None;
        if e.key() < mk {
            self.v[0] = e;
        } else {
            self.v[0] = self.v[m];
            self.sift_down(m, e);
        }
    }

    /// The entry with the least key.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<T> {
        if let Some(f) = self.front.take() {
            return Some(f);
        }
        self.pop_heap()
    }

    /// Take the heap's least entry, leaving its place vacant.
    #[inline(always)]
    fn pop_heap(&mut self) -> Option<T> {
        self.fill_hole();
        let top = *self.v.first()?;
        self.hole = Some(self.least_child(0).unwrap_or((0, u128::MAX)));
        Some(top)
    }

    /// Add `e` to the heap.
    fn sift_in(&mut self, e: T) {
        let mut i = self.v.len();
        self.v.push(e);
        let k = e.key();
        let v = &mut self.v[..];
        while i > 0 {
            let p = (i - 1) / 4;
            if k >= v[p].key() {
                break;
            }
            v[i] = v[p];
            i = p;
        }
        v[i] = e;
    }

    /// Fill a vacant root with the heap's last entry.
    #[inline(always)]
    fn fill_hole(&mut self) {
        if self.hole.take().is_none() {
            return;
        }
        let last = self.v.pop().expect("the vacant root is in the heap");
        if !self.v.is_empty() {
            self.sift_down(0, last);
        }
    }

    /// The index and key of the least child of `v[i]`, if it has any.
    #[inline]
    fn least_child(&self, i: usize) -> Option<(usize, u128)> {
        let v = &self.v[..];
        let n = v.len();
        let first = 4 * i + 1;
        if first >= n {
            return None;
        }
        let (m, mk) = if first + 4 <= n {
            min_of_four(&v[first..first + 4])
        } else {
            let kids = &v[first..n];
            let (mut m, mut mk) = (0, kids[0].key());
            for (j, c) in kids.iter().enumerate().skip(1) {
                if c.key() < mk {
                    (m, mk) = (j, c.key());
                }
            }
            (m, mk)
        };
        Some((first + m, mk))
    }

    /// Put `e` in the vacant `v[i]` and sift it down to its place.
    fn sift_down(&mut self, mut i: usize, e: T) {
        let k = e.key();
        while let Some((c, ck)) = self.least_child(i) {
            if ck >= k {
                break;
            }
            self.v[i] = self.v[c];
            i = c;
        }
        self.v[i] = e;
    }
}

/// The index and key of the least of four entries, as a tournament of
/// two pairs (keys are unique: no ties).
#[inline]
fn min_of_four<T: Keyed>(q: &[T]) -> (usize, u128) {
    let (a, b, c, d) = (q[0].key(), q[1].key(), q[2].key(), q[3].key());
    let (i, x) = if b < a { (1, b) } else { (0, a) };
    let (j, y) = if d < c { (3, d) } else { (2, c) };
    if y < x {
        (j, y)
    } else {
        (i, x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct E(u64, u64);
    impl Keyed for E {
        fn key(&self) -> u128 {
            key(self.0, self.1)
        }
    }

    /// Pops come out in the order of a binary heap of the same keys, over
    /// interleaved pushes and pops with many equal times.
    #[test]
    fn pops_in_binary_heap_order() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut q = Queue::with_capacity(4);
        let mut b = BinaryHeap::new();
        let mut x = 12345u64;
        for seq in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            q.push(E(x >> 60, seq));
            b.push(Reverse((x >> 60, seq)));
            if x & (1 << 20) != 0 {
                assert_eq!(q.pop().map(|e| (e.0, e.1)), b.pop().map(|r| r.0));
            }
            assert_eq!(q.len(), b.len());
            // (A peek fills the root a pop left vacant: not every time.)
            if x & (1 << 30) != 0 {
                assert_eq!(q.peek().map(|e| (e.0, e.1)), b.peek().map(|r| r.0));
            }
        }
        while let Some(Reverse(k)) = b.pop() {
            assert_eq!(q.pop().map(|e| (e.0, e.1)), Some(k));
        }
        assert!(q.pop().is_none() && q.is_empty());
    }

    /// A CPU that keeps rescheduling itself ahead of the others (the front
    /// slot's case), then falls behind them: the same order as a binary heap.
    #[test]
    fn front_slot_keeps_the_order() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut q = Queue::with_capacity(4);
        let mut b = BinaryHeap::new();
        let mut seq = 0;
        let mut push = |q: &mut Queue<E>, b: &mut BinaryHeap<_>, t: u64| {
            seq += 1;
            q.push(E(t, seq));
            b.push(Reverse((t, seq)));
        };
        for t in [100, 200, 300] {
            push(&mut q, &mut b, t);
        }
        for round in 0..50u64 {
            // Ahead of everything, equal to the least, then behind.
            let t = q.peek().unwrap().0;
            for next in [t.saturating_sub(1), t, t + 1 + round % 7] {
                push(&mut q, &mut b, next);
                assert_eq!(q.len(), b.len());
                assert_eq!(q.pop().map(|e| (e.0, e.1)), b.pop().map(|r| r.0));
            }
            push(&mut q, &mut b, 400 + round);
        }
        while let Some(Reverse(k)) = b.pop() {
            assert_eq!(q.pop().map(|e| (e.0, e.1)), Some(k));
        }
        assert!(q.is_empty());
    }
}
