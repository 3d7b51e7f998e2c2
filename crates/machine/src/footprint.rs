//! What a step of the model reads and writes: its footprint.
//!
//! Model machinery, not a model of anything in the kernel. The checker's
//! partial-order reduction needs to know when two steps of different CPUs
//! commute, and it learns that from what each step actually touched, not
//! from declarations: every container of world state records its accesses
//! here while a recording is on (`kernel::cow`'s vectors and boxes per
//! element, [`crate::mem::PhysMem`] per frame, the world's other fields and
//! the weak memory per location and per CPU). Two steps are independent
//! when neither writes what the other reads or writes
//! ([`Footprint::independent`]).
//!
//! The recorder is per thread and off unless [`start`] turned it on. The
//! containers carry their own "tracked" flag and call [`note`], which is
//! out of line, only when it is set: the simulator's untracked worlds pay
//! one flag test per access and no inlined recording code (8.7% more
//! instructions than no recording at all on `run default`, but the time
//! within noise of it: `tlblab speed`, medians of 5).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One piece of world state: a kind ([`Obj::kind`]) and an index within it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Obj(pub u32);

/// The kinds of state a footprint names (the top byte of an [`Obj`]).
pub mod kind {
    /// `World::cpus[i]`.
    pub const CPU: u8 = 1;
    /// `World::tasks[i]`.
    pub const TASK: u8 = 2;
    /// `World::mms[i]`.
    pub const MM: u8 = 3;
    /// `World::membufs[i]` (a CPU's store buffer).
    pub const MEMBUF: u8 = 4;
    /// Physical frame `i`: its page-table entries and metadata.
    pub const FRAME: u8 = 5;
    /// The frame allocator's free list and counts.
    pub const FRAME_ALLOC: u8 = 6;
    /// A field of the world that is one object (index: which field).
    pub const FIELD: u8 = 7;
    /// A location of the weak memory (index: a hash of the location).
    pub const WEAK_LOC: u8 = 8;
    /// A CPU's views in the weak memory.
    pub const WEAK_VIEW: u8 = 9;
    /// The length of a vector of kind `i` (elements added or removed).
    pub const LEN: u8 = 10;
    /// A field of `World::mms[i]` (index: `i * 32 + field`, the field
    /// numbered as `kernel::world::mm_field` numbers it).
    pub const MM_FIELD: u8 = 11;
    /// Everything: a write of it conflicts with every access.
    pub const ALL: u8 = 255;
}

impl Obj {
    /// Object `index` of `kind` (the index is truncated to 24 bits: two
    /// objects that collide are only judged dependent, never independent).
    pub fn new(kind: u8, index: usize) -> Obj {
        Obj((kind as u32) << 24 | (index as u32 & 0x00ff_ffff))
    }

    pub fn kind(self) -> u8 {
        (self.0 >> 24) as u8
    }
}

/// Recordings on in any thread: the one test the simulator pays per
/// access (a relaxed load of a line nobody writes while it runs).
static ANY: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static LOG: RefCell<Footprint> = RefCell::new(Footprint::default());
}

/// The objects one step read and wrote, each sorted and without repeats
/// once [`take`] returns it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Footprint {
    pub reads: Vec<Obj>,
    pub writes: Vec<Obj>,
}

impl Footprint {
    /// Neither writes what the other reads or writes (an [`kind::ALL`]
    /// write conflicts with everything).
    pub fn independent(&self, other: &Footprint) -> bool {
        let all = |f: &Footprint| f.writes.iter().any(|o| o.kind() == kind::ALL);
        if all(self) || all(other) {
            return false;
        }
        disjoint(&self.writes, &other.writes)
            && disjoint(&self.writes, &other.reads)
            && disjoint(&self.reads, &other.writes)
    }

    /// The objects that make `self` and `other` dependent: written by
    /// one and touched by the other.
    pub fn conflicts(&self, other: &Footprint) -> Vec<Obj> {
        let mut out: Vec<Obj> = Vec::new();
        for (w, t) in [(&self.writes, other), (&other.writes, self)] {
            for o in w.iter() {
                let all = o.kind() == kind::ALL;
                if all || t.reads.binary_search(o).is_ok() || t.writes.binary_search(o).is_ok() {
                    out.push(*o);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A footprint that conflicts with every other: a write of
    /// [`kind::ALL`] (what nobody knows, judged dependent on everything).
    pub fn everything() -> Footprint {
        Footprint {
            reads: Vec::new(),
            writes: vec![Obj::new(kind::ALL, 0)],
        }
    }

    /// Add what `other` reads and writes (both stay sorted, without
    /// repeats): a union conflicts with whatever either part does.
    pub fn union_with(&mut self, other: &Footprint) {
        merge(&mut self.reads, &other.reads);
        merge(&mut self.writes, &other.writes);
    }

    fn normalise(&mut self) {
        for v in [&mut self.reads, &mut self.writes] {
            v.sort_unstable();
            v.dedup();
        }
    }
}

/// `into` := the sorted union of sorted `into` and `from` (one linear
/// merge; nothing to do when `from` adds nothing).
fn merge(into: &mut Vec<Obj>, from: &[Obj]) {
    if from.is_empty() || from.iter().all(|o| into.binary_search(o).is_ok()) {
        return;
    }
    let mut out = Vec::with_capacity(into.len() + from.len());
    let (mut i, mut j) = (0, 0);
    while i < into.len() && j < from.len() {
        match into[i].cmp(&from[j]) {
            std::cmp::Ordering::Less => {
                out.push(into[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(from[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(into[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&into[i..]);
    out.extend_from_slice(&from[j..]);
    *into = out;
}

/// Do two sorted lists share no element?
fn disjoint(a: &[Obj], b: &[Obj]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return false,
        }
    }
    true
}

/// Is a recording on (on this thread)?
#[inline(always)]
pub fn recording() -> bool {
    ANY.load(Ordering::Relaxed) != 0 && ON.with(|on| on.get())
}

/// Turn this thread's recording on or off, keeping [`ANY`] in step.
fn set_on(on: bool) {
    let was = ON.with(|c| c.replace(on));
    match (was, on) {
        (false, true) => ANY.fetch_add(1, Ordering::Relaxed),
        (true, false) => ANY.fetch_sub(1, Ordering::Relaxed),
        _ => 0,
    };
}

/// Start recording this thread's accesses (an empty footprint).
pub fn start() {
    LOG.with(|l| {
        let mut l = l.borrow_mut();
        l.reads.clear();
        l.writes.clear();
    });
    set_on(true);
}

/// Stop recording and return what was recorded since [`start`].
pub fn take() -> Footprint {
    set_on(false);
    LOG.with(|l| {
        let mut f = std::mem::take(&mut *l.borrow_mut());
        f.normalise();
        f
    })
}

/// Run `f` with recording paused (model machinery that reads or rewrites
/// the whole state as a function of it, such as a canonicalisation).
pub fn paused<T>(f: impl FnOnce() -> T) -> T {
    let was = ON.with(|on| on.get());
    set_on(false);
    let out = f();
    set_on(was);
    out
}

/// Record a read of `obj` when a recording is on.
#[inline(always)]
pub fn read(obj: impl FnOnce() -> Obj) {
    if ANY.load(Ordering::Relaxed) != 0 {
        log(obj(), false);
    }
}

/// Record a write of `obj` when a recording is on.
#[inline(always)]
pub fn write(obj: impl FnOnce() -> Obj) {
    if ANY.load(Ordering::Relaxed) != 0 {
        log(obj(), true);
    }
}

/// Record an access to `obj` when a recording is on: for containers
/// that carry their own "tracked" flag and call this only when it is set,
/// so an untracked world pays that flag's test and nothing is inlined.
#[cold]
#[inline(never)]
pub fn note(obj: Obj, write: bool) {
    if ANY.load(Ordering::Relaxed) != 0 {
        log(obj, write);
    }
}

/// Some thread records: log `o` if this one does.
#[cold]
#[inline(never)]
fn log(o: Obj, write: bool) {
    if ON.with(|on| on.get()) {
        LOG.with(|l| {
            let mut l = l.borrow_mut();
            let v = match write {
                true => &mut l.writes,
                false => &mut l.reads,
            };
            // A step reads the same object many times in a row (a CPU's
            // fields): keep one of each run ([`take`] sorts the rest out).
            if v.last() != Some(&o) {
                v.push(o);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn independence_is_about_writes() {
        let (a, b) = (Obj::new(kind::CPU, 0), Obj::new(kind::CPU, 1));
        let f = |r: &[Obj], w: &[Obj]| Footprint {
            reads: r.to_vec(),
            writes: w.to_vec(),
        };
        // Two readers of the same object commute; a writer does not.
        assert!(f(&[a], &[]).independent(&f(&[a], &[b])));
        assert!(!f(&[a], &[]).independent(&f(&[], &[a])));
        assert!(!f(&[], &[a]).independent(&f(&[], &[a])));
        let all = f(&[], &[Obj::new(kind::ALL, 0)]);
        assert!(!all.independent(&f(&[], &[])));
    }

    #[test]
    fn a_union_is_sorted_and_without_repeats() {
        let o = |i| Obj::new(kind::FRAME, i);
        let mut f = Footprint {
            reads: vec![o(1), o(4), o(6)],
            writes: vec![o(2)],
        };
        f.union_with(&Footprint {
            reads: vec![o(0), o(4), o(5), o(9)],
            writes: vec![],
        });
        assert_eq!(f.reads, vec![o(0), o(1), o(4), o(5), o(6), o(9)]);
        assert_eq!(f.writes, vec![o(2)]);
        // Whatever either conflicts with, the union conflicts with.
        let w5 = Footprint {
            reads: vec![],
            writes: vec![o(5)],
        };
        assert!(!f.independent(&w5));
        assert!(f.independent(&Footprint {
            reads: vec![o(3)],
            writes: vec![],
        }));
    }

    #[test]
    fn recording_is_per_start_and_off_by_default() {
        read(|| Obj::new(kind::CPU, 3));
        start();
        read(|| Obj::new(kind::CPU, 2));
        write(|| Obj::new(kind::TASK, 1));
        read(|| Obj::new(kind::CPU, 2));
        paused(|| write(|| Obj::new(kind::MM, 9)));
        let f = take();
        assert_eq!(f.reads, vec![Obj::new(kind::CPU, 2)]);
        assert_eq!(f.writes, vec![Obj::new(kind::TASK, 1)]);
        assert!(!recording());
    }
}
