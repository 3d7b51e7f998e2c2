//! The checker's arm64 and RISC-V shared memory on the view machine
//! ([`crate::hw::wmm`]): which message a load of a modelled location may
//! return.
//!
//! The kernel paths keep their store buffers ([`crate::hw::memory_model`]):
//! a store waits in its CPU's buffer and drains out of order across
//! locations (store->store reordering), and barriers drain it. What a
//! drained store becomes is a *message* of [`wmm::Memory`], and every CPU
//! keeps a [`wmm::ThreadView`]: a load may return any message of its
//! location that is not overwritten at its view (Promising-ARM/RISC-V's
//! read rule, `read_mem` of `UMPromising.v`, with RVWMO's same-address
//! rule), so a CPU may read an older value than another CPU already wrote
//! (load->load and store->load reordering), until a barrier, or its own
//! read or write of the location, raises its view. The store buffer gives
//! the writer's side what promises give in Promising; load->store
//! reordering (the LB shape) is not explored (docs/checker.md).
//!
//! Machine state only: locations are the kernel's [`Loc`]s, interned in
//! sorted order; CPUs are thread ids. Only locations with an old message
//! some CPU may still read are kept: [`WeakMem::gc`] folds the rest back
//! into plain memory (the world's fields), and renumbers timestamps by
//! rank, so two worlds that allow the same reads hash alike.

use crate::hw::memory_model::Loc;
use crate::hw::wmm::{self, Barrier, Fwd, LocId, Memory, Read, ReadKind, ThreadView, View};
use crate::world::{field, Hint};
use machine::footprint::{self, kind, Obj};
use machine::scenario::Arch;
use machine::CpuId;
use std::hash::{Hash, Hasher};

/// Messages and views of the locations some CPU may read stale.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeakMem {
    /// Interned locations, sorted ([`LocId`] = index).
    locs: Vec<Loc>,
    mem: Memory,
    /// One per CPU; empty while no location is interned.
    views: Vec<ThreadView>,
    /// The CPUs with tasks (a bit each) of the last clean-up, while
    /// nothing changed since: a clean-up with the same CPUs would change
    /// nothing ([`WeakMem::gc`] is idempotent), so it is skipped. Every
    /// public method that takes `&mut self` clears it (the private ones
    /// run only inside them). Hashes as nothing.
    clean: Hint<Option<u64>>,
}

/// [`WeakMem::renaming`]'s result.
struct Renaming {
    new_locs: Vec<Loc>,
    order: Vec<LocId>,
    to: Vec<LocId>,
    from: Vec<usize>,
}

impl Default for WeakMem {
    fn default() -> Self {
        WeakMem {
            locs: Vec::new(),
            mem: Memory::new(Vec::new()),
            views: Vec::new(),
            clean: Hint(None),
        }
    }
}

/// The footprint object of `loc`'s messages.
fn loc_obj(loc: Loc) -> Obj {
    let mut h = rustc_hash::FxHasher::default();
    loc.hash(&mut h);
    Obj::new(kind::WEAK_LOC, h.finish() as usize)
}

/// `cpu` reads `loc`'s messages with its views.
fn record_read(loc: Loc, cpu: CpuId) {
    footprint::read(|| loc_obj(loc));
    footprint::read(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
}

/// `cpu` adds a message to `loc` (its views rise).
fn record_write(loc: Loc, cpu: CpuId) {
    footprint::write(|| loc_obj(loc));
    footprint::write(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
}

/// A load's possible results: (timestamp, value), newest first.
pub type Choices = Vec<(View, u64)>;

impl WeakMem {
    /// No location has a message beside its current value.
    pub fn is_empty(&self) -> bool {
        self.locs.is_empty()
    }

    /// The locations held (sorted).
    pub fn locs(&self) -> &[Loc] {
        &self.locs
    }

    /// Does the weak memory hold `loc` (an older value some CPU may read)?
    pub fn holds(&self, loc: Loc) -> bool {
        footprint::read(|| loc_obj(loc));
        self.id(loc).is_some()
    }

    fn id(&self, loc: Loc) -> Option<LocId> {
        self.locs.binary_search(&loc).ok()
    }

    /// Intern `loc`, whose current (initial) value is `cur`.
    fn intern(&mut self, loc: Loc, cur: u64, arch: Arch, cpus: usize) -> LocId {
        let at = match self.locs.binary_search(&loc) {
            Ok(i) => return i,
            Err(i) => i,
        };
        if self.views.is_empty() {
            self.views = (0..cpus).map(|_| ThreadView::new(arch, 0)).collect();
        }
        self.locs.insert(at, loc);
        self.mem.init.insert(at, cur as i64);
        for m in &mut self.mem.msgs {
            if m.loc >= at {
                m.loc += 1;
            }
        }
        for tv in &mut self.views {
            tv.coh.insert(at, 0);
            tv.fwd.insert(at, Fwd::default());
            tv.last_read.insert(at, None);
            tv.walks.insert(at, 0);
        }
        at
    }

    /// `cpu`'s store of `val` to `loc` (whose value was `old`) reaches
    /// memory: a new message, the newest of `loc`.
    pub fn write(&mut self, cpu: CpuId, loc: Loc, old: u64, val: u64, arch: Arch, cpus: usize) {
        self.clean.0 = None;
        record_write(loc, cpu);
        footprint::write(|| Obj::new(kind::FIELD, field::WEAK_ORDER));
        let id = self.intern(loc, old, arch, cpus);
        let w = wmm::Write {
            loc: id,
            val: val as i64,
            vaddr: 0,
            vdata: 0,
            release: false,
            release_sc: false,
            atomic_read: None,
        };
        let tv = &mut self.views[cpu as usize];
        wmm::write(tv, &mut self.mem, cpu as usize, &w).expect("no promises: a write appends");
    }

    /// `cpu`'s store of `val` to `loc` (held) seen by every CPU at once: a
    /// new message that every CPU's view of `loc` reaches, so that no CPU
    /// loads an older value of `loc` from now on.
    pub fn write_seen_by_all(&mut self, cpu: CpuId, loc: Loc, val: u64, arch: Arch, cpus: usize) {
        self.write(cpu, loc, val, val, arch, cpus);
        let id = self.id(loc).expect("just written");
        let t = self.newest(id);
        for (c, tv) in self.views.iter_mut().enumerate() {
            footprint::write(|| Obj::new(kind::WEAK_VIEW, c));
            tv.coh[id] = tv.coh[id].max(t);
        }
    }

    /// What a plain load (`READ_ONCE`) of `loc` by `cpu` may return, newest
    /// first; empty when `loc` has no old message (the load reads memory).
    pub fn choices(&self, cpu: CpuId, loc: Loc) -> Choices {
        record_read(loc, cpu);
        let Some(id) = self.id(loc) else {
            return Vec::new();
        };
        let r = plain(id);
        let mut out: Choices = wmm::read_choices(&self.views[cpu as usize], &self.mem, &r)
            .into_iter()
            .map(|t| (t, self.mem.val(id, t) as u64))
            .collect();
        out.reverse();
        out
    }

    /// `cpu` loads `loc` and gets the message at `t` (one of
    /// [`WeakMem::choices`]): its views rise.
    pub fn read(&mut self, cpu: CpuId, loc: Loc, t: View) {
        self.clean.0 = None;
        record_read(loc, cpu);
        footprint::write(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
        let id = self.id(loc).expect("a location with choices is interned");
        wmm::read_at(&mut self.views[cpu as usize], &self.mem, &plain(id), t);
    }

    /// `cpu` loads a location that has no message (it reads memory, the
    /// location's only value, as of timestamp 0): its views rise as a load
    /// of the newest message would raise them, to the load's floor. So a
    /// load gives the same views whether or not the clean-up
    /// ([`WeakMem::gc`]) already folded the location's last messages into
    /// memory, and two loads of different CPUs commute (the footprint
    /// audit, `crates/check/tests/footprint.rs`, found the difference).
    pub fn read_quiet(&mut self, cpu: CpuId) {
        self.clean.0 = None;
        footprint::write(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
        if let Some(tv) = self.views.get_mut(cpu as usize) {
            let floor = wmm::read_floor(tv, &plain(0));
            tv.vrd = tv.vrd.max(floor);
        }
    }

    /// `cpu` reads the newest message of `loc` (an atomic's read), if
    /// `loc` has messages.
    pub fn read_newest(&mut self, cpu: CpuId, loc: Loc) {
        self.clean.0 = None;
        record_read(loc, cpu);
        footprint::write(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
        if let Some(id) = self.id(loc) {
            let t = self.newest(id);
            wmm::read_at(&mut self.views[cpu as usize], &self.mem, &plain(id), t);
        }
    }

    /// `cpu` takes a lock whose previous holder published everything held
    /// here (its stores under the lock, released by its unlock): from now
    /// on `cpu` reads the newest message of every location. Stronger than
    /// an acquire (which orders only what that holder wrote), a modelling
    /// choice for `cpu_asid_lock`, whose holders write the allocator state.
    pub fn catch_up(&mut self, cpu: CpuId) {
        self.clean.0 = None;
        footprint::read(|| Obj::new(kind::FIELD, field::WEAK_ORDER));
        footprint::write(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
        for id in 0..self.locs.len() {
            let t = self.newest(id);
            let tv = &mut self.views[cpu as usize];
            tv.coh[id] = tv.coh[id].max(t);
        }
    }

    /// Is `t` the newest message of `loc`?
    pub fn is_newest(&self, loc: Loc, t: View) -> bool {
        footprint::read(|| loc_obj(loc));
        let id = self.id(loc).expect("interned");
        self.newest(id) == t
    }

    fn newest(&self, id: LocId) -> View {
        self.mem.last_write(id, self.mem.len())
    }

    /// `cpu` executes barrier `b` (after its store buffer drained).
    pub fn barrier(&mut self, cpu: CpuId, b: Barrier) {
        self.clean.0 = None;
        footprint::write(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
        if let Some(tv) = self.views.get_mut(cpu as usize) {
            wmm::barrier(tv, b);
        }
    }

    /// May `cpu` read an older value than memory holds of some location?
    pub fn stale_for(&self, cpu: CpuId) -> bool {
        footprint::read(|| Obj::new(kind::FIELD, field::WEAK_ORDER));
        footprint::read(|| Obj::new(kind::WEAK_VIEW, cpu as usize));
        (0..self.locs.len()).any(|id| self.floor(cpu as usize, id) < self.newest(id))
    }

    /// The oldest message of `id` that `cpu` may read.
    fn floor(&self, cpu: usize, id: LocId) -> View {
        let tv = &self.views[cpu];
        self.mem.last_write(id, tv.coh[id].max(tv.vfr))
    }

    /// Drop what no CPU can read any more: a location's messages older
    /// than the floor of every CPU that may still load it (`task_ctx[c]`:
    /// CPU `c` still runs tasks, [`Loc::may_load`]); the oldest message
    /// left becomes its initial value; a location left without messages
    /// leaves the tables; the timestamps are renumbered by rank; then the
    /// views are lowered to their canonical values
    /// ([`WeakMem::canonical_views`]).
    pub fn gc(&mut self, task_ctx: &[bool]) {
        let ctx = (task_ctx.len() <= 64).then(|| {
            (task_ctx.iter().enumerate()).fold(0u64, |m, (c, &on)| m | (u64::from(on) << c))
        });
        if ctx.is_some() && self.clean.0 == ctx {
            debug_assert!(
                {
                    let mut again = self.clone();
                    again.gc_keeping_views(task_ctx);
                    again.canonical_views();
                    again == *self
                },
                "a clean-up of clean tables changed them"
            );
            return;
        }
        self.gc_keeping_views(task_ctx);
        self.canonical_views();
        self.clean.0 = ctx;
    }

    /// [`WeakMem::gc`] without the canonical views: the clean-up alone,
    /// which `crates/kernel/tests/weak_canonical.rs` compares against.
    pub fn gc_keeping_views(&mut self, task_ctx: &[bool]) {
        self.clean.0 = None;
        if self.locs.is_empty() {
            return;
        }
        // A CPU that will not load a location reads memory if it ever
        // does: its floor moves to the newest message.
        let mut newest = vec![0; self.locs.len()];
        for (i, m) in self.mem.msgs.iter().enumerate() {
            if m.kind == wmm::MsgKind::Write {
                newest[m.loc] = i as View + 1;
            }
        }
        for (id, &newest) in newest.iter().enumerate() {
            for (c, tv) in self.views.iter_mut().enumerate() {
                if !self.locs[id].may_load(c as CpuId, task_ctx[c]) {
                    tv.coh[id] = tv.coh[id].max(newest);
                }
            }
        }
        let n = self.mem.msgs.len();
        // keep[t]: message t (1-based) stays.
        let mut keep = vec![false; n + 1];
        let mut first = vec![View::MAX; self.locs.len()];
        for (id, f) in first.iter_mut().enumerate() {
            for c in 0..self.views.len() {
                *f = (*f).min(self.floor(c, id));
            }
        }
        for (i, m) in self.mem.msgs.iter().enumerate() {
            let t = i as View + 1;
            let f = first[m.loc];
            // The oldest readable message becomes the initial value.
            if t == f {
                self.mem.init[m.loc] = m.val;
            }
            keep[t as usize] = t > f;
        }
        self.compact(&keep);
        self.drop_quiet_locs();
        if self.locs.is_empty() {
            *self = WeakMem::default();
        }
    }

    /// Lower every view to the least timestamp that orders the same reads
    /// (`canonical_view`), so that two worlds whose CPUs may read the
    /// same messages now and after any further steps hash alike.
    ///
    /// In the kernel's use of the view machine (plain loads and stores
    /// with no address or data dependency, barriers; no promises, no VMSA
    /// events) a view acts only through the reads it orders: a load of
    /// `x` may return the messages of `x` from the last one at or before
    /// `max(vfr, coh[x])` on, views only rise and combine by `max`, and a
    /// store appends above every view. So two values of a view are
    /// interchangeable when, for every location, the last message at or
    /// before each is the same or no newer than what the CPU's own
    /// `coh` already orders; `coh[x]` counts only through its last
    /// message of `x`; an own write forwards nothing once the CPU may not
    /// load it or its read view orders everything the write does; and
    /// RVWMO's same-address rule orders nothing more than a later barrier
    /// does (below).
    ///
    /// `crates/kernel/tests/weak_canonical.rs` runs random operations on
    /// two copies, one canonical after each, and asserts that every load
    /// has the same choices in both and that the other's canonical form
    /// is the first.
    pub fn canonical_views(&mut self) {
        self.clean.0 = None;
        // Only `write` adds messages here: no TLBI events, no promises.
        debug_assert!(self.mem.msgs.iter().all(|m| m.kind == wmm::MsgKind::Write));
        let (mem, msgs) = (&self.mem, &self.mem.msgs);
        for tv in &mut self.views {
            debug_assert!(tv.promises.is_empty() && tv.tlbis.is_empty());
            for (x, c) in tv.coh.iter_mut().enumerate() {
                *c = mem.last_write(x, *c);
            }
            let canon = |v: View| canonical_view(&tv.coh, msgs, v);
            tv.vrd = canon(tv.vrd);
            tv.vwr = canon(tv.vwr);
            tv.vfr = canon(tv.vfr);
            tv.vfw = canon(tv.vfw);
            tv.vcap = canon(tv.vcap);
            tv.vrel = canon(tv.vrel);
            for f in &mut tv.fwd {
                f.view = canon(f.view);
            }
            // RVWMO's same-address rule orders a load after the CPU's
            // previous load of the location; that is seen only by what
            // depends on the later load (no kernel path's load carries a
            // dependency), and the earlier load's post-view is already in
            // `vrd`, which every barrier after both orders.
            tv.last_read.iter_mut().for_each(|l| *l = None);
            for x in 0..tv.coh.len() {
                // An own write forwarded to a load leaves the load's
                // post-view below the write; read from memory it would
                // raise `vrd` to it. That differs only while the write
                // orders something `vrd` does not, and while the CPU may
                // still load it.
                let t = tv.fwd[x].time;
                if t < tv.coh[x].max(mem.last_write(x, tv.vfr)) || canon(t) <= tv.vrd {
                    tv.fwd[x] = Fwd::default();
                }
            }
        }
    }

    /// Remove the messages not in `keep`, renumbering every view by rank.
    fn compact(&mut self, keep: &[bool]) {
        if keep.iter().skip(1).all(|&k| k) {
            return;
        }
        // rank[v]: kept messages at or before v.
        let mut rank = vec![0 as View; keep.len()];
        for t in 1..keep.len() {
            rank[t] = rank[t - 1] + keep[t] as View;
        }
        let r = |v: View| rank[(v as usize).min(keep.len() - 1)];
        let kept = |t: View| keep.get(t as usize).copied().unwrap_or(false);
        for tv in &mut self.views {
            for v in [
                &mut tv.vrd,
                &mut tv.vwr,
                &mut tv.vfr,
                &mut tv.vfw,
                &mut tv.vcap,
                &mut tv.vrel,
                &mut tv.vdsb,
                &mut tv.vcse,
                &mut tv.vtlbi,
                &mut tv.vimp,
                &mut tv.vctrl,
            ] {
                *v = r(*v);
            }
            for c in &mut tv.coh {
                *c = r(*c);
            }
            for f in &mut tv.fwd {
                f.time = if kept(f.time) { r(f.time) } else { 0 };
                f.view = r(f.view);
            }
            for lr in tv.last_read.iter_mut().flatten() {
                // A folded or dropped message is the location's initial
                // value now (timestamp 0).
                lr.0 = if kept(lr.0) { r(lr.0) } else { 0 };
                lr.1 = r(lr.1);
            }
        }
        let msgs = std::mem::take(&mut self.mem.msgs);
        self.mem.msgs = msgs
            .into_iter()
            .enumerate()
            .filter(|(i, _)| keep[i + 1])
            .map(|(_, m)| m)
            .collect();
    }

    /// Remove the locations without messages: every CPU reads memory.
    fn drop_quiet_locs(&mut self) {
        let mut id = 0;
        while id < self.locs.len() {
            if self.mem.msgs.iter().any(|m| m.writes(id)) {
                id += 1;
                continue;
            }
            self.locs.remove(id);
            self.mem.init.remove(id);
            for m in &mut self.mem.msgs {
                if m.loc > id {
                    m.loc -= 1;
                }
            }
            for tv in &mut self.views {
                tv.coh.remove(id);
                tv.fwd.remove(id);
                tv.last_read.remove(id);
                tv.walks.remove(id);
            }
        }
    }

    /// What renaming CPU `c` to `perm[c]` does to these tables (held
    /// locations, so `perm` covers every view): the renamed locations by
    /// old id, `order[new] = old` (re-sorted by renamed location), `to[old]
    /// = new`, and `from[k]`, the old CPU whose view becomes CPU `k`'s.
    fn renaming(&self, perm: &[CpuId]) -> Renaming {
        let new_locs: Vec<Loc> = (self.locs.iter())
            .map(|l| l.renamed(|c| perm[c as usize]))
            .collect();
        let mut order: Vec<LocId> = (0..self.locs.len()).collect();
        order.sort_unstable_by_key(|&i| new_locs[i]);
        let mut to = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            to[old] = new;
        }
        let mut from = vec![0; self.views.len()];
        for c in 0..self.views.len() {
            from[perm[c] as usize] = c;
        }
        Renaming {
            new_locs,
            order,
            to,
            from,
        }
    }

    /// These tables with CPU `c` renamed `perm[c]` (views reordered,
    /// locations and writers renamed), re-sorted.
    pub fn renamed(&self, perm: &[CpuId]) -> WeakMem {
        if self.locs.is_empty() {
            return self.clone();
        }
        let Renaming {
            new_locs,
            order,
            to,
            from,
        } = self.renaming(perm);
        let views = from
            .iter()
            .map(|&c| {
                let tv = &self.views[c];
                ThreadView {
                    coh: order.iter().map(|&o| tv.coh[o]).collect(),
                    fwd: order.iter().map(|&o| tv.fwd[o]).collect(),
                    last_read: order.iter().map(|&o| tv.last_read[o]).collect(),
                    walks: order.iter().map(|&o| tv.walks[o]).collect(),
                    ..tv.clone_scalars()
                }
            })
            .collect();
        let mut mem = self.mem.clone();
        mem.init = order.iter().map(|&o| self.mem.init[o]).collect();
        for m in &mut mem.msgs {
            m.loc = to[m.loc];
            m.tid = perm[m.tid] as usize;
        }
        WeakMem {
            locs: order.iter().map(|&o| new_locs[o]).collect(),
            mem,
            views,
            clean: Hint(None),
        }
    }

    /// Hash `self.renamed(perm)` without building it (the symmetry
    /// reduction hashes a renaming of every successor): the same
    /// contents in the same order, so a function of the renamed value.
    pub fn hash_renamed<H: Hasher>(&self, perm: &[CpuId], h: &mut H) {
        if self.locs.is_empty() {
            return self.hash(h);
        }
        let Renaming {
            new_locs,
            order,
            to,
            from,
        } = self.renaming(perm);
        h.write_usize(order.len());
        for &o in &order {
            (new_locs[o], self.mem.init[o]).hash(h);
        }
        h.write_usize(self.mem.msgs.len());
        for m in &self.mem.msgs {
            (to[m.loc], m.val, perm[m.tid], m.kind).hash(h);
        }
        h.write_usize(from.len());
        for &c in &from {
            self.views[c].hash_reordered(&order, h);
        }
    }

    /// The held locations whose newest message is not `mem`'s value of
    /// them: a store that reached memory without a message
    /// ([`crate::hw::memory_model::write_direct`] makes one).
    pub fn stale_newest(&self, mem: impl Fn(Loc) -> u64) -> Vec<(Loc, u64, u64)> {
        let newest = |id| self.mem.val(id, self.newest(id)) as u64;
        (0..self.locs.len())
            .map(|id| (self.locs[id], newest(id), mem(self.locs[id])))
            .filter(|(_, n, m)| n != m)
            .collect()
    }

    /// The value of message `t` of `loc`, for a label.
    pub fn value(&self, loc: Loc, t: View) -> Option<u64> {
        self.id(loc).map(|id| self.mem.val(id, t) as u64)
    }
}

/// The least view ordering the same reads as `v` for a CPU whose
/// per-location coherence views are `coh` (each the timestamp of its
/// location's message, or 0): the newest message at or before `v` newer
/// than `coh` of its location, 0 if there is none. (For each location
/// `x`, the last message of `x` at or before that view is the last at or
/// before `v` where that one is newer than `coh[x]`; elsewhere both are
/// no newer than `coh[x]`, which orders the CPU's reads of `x` anyway.)
fn canonical_view(coh: &[View], msgs: &[wmm::Msg], v: View) -> View {
    (1..=(v as usize).min(msgs.len()) as View)
        .rev()
        .find(|&t| t > coh[msgs[t as usize - 1].loc])
        .unwrap_or(0)
}

fn plain(loc: LocId) -> Read {
    Read {
        loc,
        vaddr: 0,
        kind: ReadKind::Plain,
        noret: false,
    }
}

/// The view machine's barrier for a kernel barrier kind.
pub fn barrier_of(order: crate::hw::memory_model::Order) -> Barrier {
    use crate::hw::memory_model::Order;
    match order {
        // smp_mb(), dmb ish, fence rw,rw, dsb(ish); dsb(nsh) orders every
        // access of this CPU too.
        Order::Full | Order::NonShareable => Barrier::FULL,
        // smp_wmb(), dmb ishst, fence w,w.
        Order::StoreStore => Barrier {
            pred_r: false,
            pred_w: true,
            succ_r: false,
            succ_w: true,
        },
        // smp_rmb(): dmb ishld (r -> rw) on arm64, fence r,r on RISC-V;
        // later writes are appended after the reads anyway.
        Order::LoadLoad => Barrier {
            pred_r: true,
            pred_w: false,
            succ_r: true,
            succ_w: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::memory_model::Order;

    const X: Loc = Loc::Var(0);
    const Y: Loc = Loc::Var(1);
    const ARM: Arch = Arch::Arm64;

    fn vals(w: &WeakMem, cpu: CpuId, l: Loc) -> Vec<u64> {
        w.choices(cpu, l).iter().map(|c| c.1).collect()
    }

    #[test]
    fn a_load_may_return_an_older_message_until_a_barrier_orders_it() {
        // MP with the writer's stores in order in memory: x=1 then y=1.
        let mut w = WeakMem::default();
        w.write(0, X, 0, 1, ARM, 2);
        w.write(0, Y, 0, 1, ARM, 2);
        // CPU1 reads y=1 (the newest, listed first) ...
        assert_eq!(vals(&w, 1, Y), vec![1, 0]);
        let t = w.choices(1, Y)[0].0;
        w.read(1, Y, t);
        // ... and may still read the old x without a barrier,
        assert_eq!(vals(&w, 1, X), vec![1, 0]);
        // but not after dmb ishld / fence r,r.
        let mut b = w.clone();
        b.barrier(1, barrier_of(Order::LoadLoad));
        assert_eq!(vals(&b, 1, X), vec![1]);
        // The writer reads its own newest write only.
        assert_eq!(vals(&w, 0, X), vec![1]);
    }

    #[test]
    fn a_full_barrier_after_a_store_orders_later_loads_after_it() {
        // SB: x=1; fence; r=y || y=1; fence; r=x: not both old.
        let mut w = WeakMem::default();
        w.write(0, X, 0, 1, ARM, 2);
        w.barrier(0, barrier_of(Order::Full));
        // CPU0 reads y: only the initial value exists, no choice.
        assert!(w.choices(0, Y).is_empty());
        w.write(1, Y, 0, 1, ARM, 2);
        w.barrier(1, barrier_of(Order::Full));
        // CPU1's fence orders its load of x after x=1 (older in memory).
        assert_eq!(vals(&w, 1, X), vec![1]);
        // Without CPU1's fence it could read the old x.
        let mut n = WeakMem::default();
        n.write(0, X, 0, 1, ARM, 2);
        n.write(1, Y, 0, 1, ARM, 2);
        assert_eq!(vals(&n, 1, X), vec![1, 0]);
        // smp_wmb orders no later load.
        n.barrier(1, barrier_of(Order::StoreStore));
        assert_eq!(vals(&n, 1, X), vec![1, 0]);
    }

    #[test]
    fn gc_forgets_what_no_cpu_can_read_and_renumbers() {
        let mut w = WeakMem::default();
        w.write(0, X, 0, 1, ARM, 2);
        w.write(0, X, 1, 2, ARM, 2);
        w.gc(&[true, true]);
        // CPU1 may read any of the three values of x.
        assert_eq!(vals(&w, 1, X), vec![2, 1, 0]);
        let t = w.choices(1, X)[1].0;
        w.read(1, X, t);
        w.gc(&[true, true]);
        // The initial value is gone; 1 is now x's oldest readable value.
        assert_eq!(vals(&w, 1, X), vec![2, 1]);
        let t = w.choices(1, X)[0].0;
        w.read(1, X, t);
        w.gc(&[true, true]);
        assert!(w.is_empty(), "everyone reads memory again: {w:?}");
        assert_eq!(w, WeakMem::default());
    }

    #[test]
    fn a_cpu_that_never_loads_a_location_keeps_no_message_alive() {
        // need_tlb_flush(1) is read by hart 1 only.
        let l = Loc::NeedTlbFlush(1);
        let mut w = WeakMem::default();
        w.write(0, l, 0, 1, Arch::Riscv, 2);
        w.gc(&[true, true]);
        assert_eq!(vals(&w, 1, l), vec![1, 0]);
        let t = w.choices(1, l)[0].0;
        w.read(1, l, t);
        w.gc(&[true, true]);
        assert!(w.is_empty());
        // Another hart's loaded_asid: kept for a CPU with tasks, not for
        // one whose tasks all exited.
        let l = Loc::LoadedAsid(1);
        let mut w = WeakMem::default();
        w.write(1, l, 0, 2, Arch::Riscv, 2);
        w.gc(&[true, true]);
        assert!(!w.is_empty());
        w.gc(&[false, true]);
        assert!(w.is_empty());
        // Another CPU's active_asids: never loaded, only exchanged by a
        // rollover (an atomic, which reads the newest), so not kept even
        // for a CPU with tasks.
        let l = Loc::ActiveAsids(1);
        let mut w = WeakMem::default();
        w.write(1, l, 0, 2, Arch::Arm64, 2);
        w.gc(&[true, true]);
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn renaming_cpus_moves_views_and_locations() {
        let mut w = WeakMem::default();
        w.write(0, Loc::LoadedAsid(0), 0, 3, Arch::Riscv, 2);
        w.write(1, Loc::NeedTlbFlush(0), 0, 1, Arch::Riscv, 2);
        let swap = [1, 0];
        let r = w.renamed(&swap);
        assert_eq!(r.locs(), &[Loc::LoadedAsid(1), Loc::NeedTlbFlush(1)]);
        // CPU1 (was CPU0) wrote loaded_asid: it reads only its own write.
        assert_eq!(vals(&r, 1, Loc::LoadedAsid(1)), vec![3]);
        assert_eq!(vals(&r, 0, Loc::LoadedAsid(1)), vec![3, 0]);
        assert_eq!(r.renamed(&swap), w);
    }
}
