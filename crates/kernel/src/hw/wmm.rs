//! The architectures' memory models as one view machine: x86-TSO, AArch64
//! (Arm's "external" multicopy-atomic model) and RISC-V RVWMO.
//!
//! The machine follows Promising-ARM/RISC-V (Pulte, Pichon-Pharabod, Kang,
//! Lee, Hur, "Promising-ARM/RISC-V: a simpler and faster operational
//! concurrency model", PLDI 2019), proven equivalent there to the axiomatic
//! models (Arm's `aarch64.cat`, RVWMO's `riscv.cat`); the rules below are
//! those of its user-mode definition in the rems-project ArchSem
//! development (`promising-arm/UMPromising.v`), with additions named
//! where they act: RISC-V's fences with predecessor and successor sets,
//! RVWMO's same-address load-load rule, Arm's single-instruction atomics
//! (LSE `SWP`/`LDADD`/`CAS`, which that file leaves out) and the ordering
//! after an acquire-release one ([`amo_acq_rel`]), and for the VMSA
//! extension ([`crate::hw::vmsa`]) the `DSB` rules of herd7's `DSB-ob`
//! ([`dsb`]).
//!
//! - **Memory** is a list of messages (location, value, thread); a
//!   message's *timestamp* is its position (1-based; 0 is the initial
//!   write of every location). The order of a location's messages is its
//!   coherence order. Memory is multicopy-atomic: every thread sees the
//!   same list.
//! - **A thread** runs its instructions in program order and keeps *views*
//!   (timestamps) that say how far into memory each later access must be:
//!   a read may return any message of its location that is not already
//!   overwritten at its view, so it may see an old value (load->load and
//!   store->load reordering); a write takes a timestamp above its view.
//!   Barriers, acquire/release, and address, data and control dependencies
//!   raise the views of later accesses.
//! - **Promises** give store->store and load->store reordering: a thread
//!   may append a message it will write later; it must then write exactly
//!   that message at that timestamp, with its view below it. A promise is
//!   allowed only if the thread, running alone from there, can fulfil all
//!   its promises (certification: no value out of thin air). Finding the
//!   promises is the explorer's job ([`crate::hw::wmm`] gives the steps;
//!   the litmus runner and the checker drive them).
//!
//! x86-TSO is the same machine with every load an RCpc acquire (`LDAPR`:
//! ordered before every later access, not after earlier stores) and every
//! store a release (after every earlier access); `mfence` and locked
//! instructions are full barriers. That is TSO: only store->load order is
//! relaxed, with store forwarding, over a multicopy-atomic memory.
//!
//! The machine takes only machine state (a [`Memory`] and a
//! [`ThreadView`] per CPU), so the checker's kernel paths and the litmus
//! runner drive the same rules.

use machine::scenario::Arch;

/// A timestamp: a position in [`Memory`] (0: the initial value).
pub type View = u32;

/// A location: a dense index the driver assigns (a litmus variable, a
/// PTE, a CPU's `mm_cpumask` bit, ...).
pub type LocId = usize;

/// What a message in memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsgKind {
    /// A write of `val` to `loc`.
    Write,
    /// A TLB invalidation (Arm VMSA, [`crate::hw::vmsa`]): an event with a
    /// timestamp but no value; `loc` is the page-table entry it
    /// invalidates (or [`crate::hw::vmsa::ALL`]), `val` 1 if broadcast.
    /// (`Ev.Tlbi` of `VMPromising.v`: TLBIs live in the same memory.)
    Tlbi,
    /// The completion of a TLBI by its thread's full `DSB`: `val` is the
    /// TLBI's timestamp ([`crate::hw::vmsa::complete_tlbis`]).
    TlbiDone,
}

/// One message in memory: a write, or a TLBI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Msg {
    pub loc: LocId,
    pub val: i64,
    pub tid: usize,
    pub kind: MsgKind,
}

impl Msg {
    /// A write message.
    pub fn write(loc: LocId, val: i64, tid: usize) -> Msg {
        Msg {
            loc,
            val,
            tid,
            kind: MsgKind::Write,
        }
    }
    /// Is this a write of `loc`?
    pub fn writes(&self, loc: LocId) -> bool {
        self.kind == MsgKind::Write && self.loc == loc
    }
}

/// Memory: the initial values and the messages in timestamp order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Memory {
    pub(crate) init: Vec<i64>,
    pub(crate) msgs: Vec<Msg>,
}

impl Memory {
    /// Memory whose locations hold `init` (one value per [`LocId`]).
    pub fn new(init: Vec<i64>) -> Memory {
        Memory {
            init,
            msgs: Vec::new(),
        }
    }
    pub fn locs(&self) -> usize {
        self.init.len()
    }
    /// The newest timestamp.
    pub fn len(&self) -> View {
        self.msgs.len() as View
    }
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }
    /// The message at timestamp `t` (`None` for 0, the initial write).
    pub fn msg(&self, t: View) -> Option<&Msg> {
        (t as usize).checked_sub(1).and_then(|i| self.msgs.get(i))
    }
    /// The value written at timestamp `t` to `loc` (0: the initial value).
    pub fn val(&self, loc: LocId, t: View) -> i64 {
        self.msg(t).map_or(self.init[loc], |m| m.val)
    }
    /// Append a message; its timestamp.
    pub fn push(&mut self, m: Msg) -> View {
        self.msgs.push(m);
        self.len()
    }
    /// The final value of `loc`: its coherence-last write.
    pub fn last(&self, loc: LocId) -> i64 {
        self.msgs
            .iter()
            .rev()
            .find(|m| m.writes(loc))
            .map_or(self.init[loc], |m| m.val)
    }
    /// The timestamp of the last write of `loc` at or before `v` (0: the
    /// initial write).
    pub fn last_write(&self, loc: LocId, v: View) -> View {
        self.msgs[..(v as usize).min(self.msgs.len())]
            .iter()
            .rposition(|m| m.writes(loc))
            .map_or(0, |i| i as View + 1)
    }
    /// The timestamps a read of `loc` at view `v` may return: the last
    /// write of `loc` at or before `v`, and every write of `loc` after it.
    pub fn readable(&self, loc: LocId, v: View) -> Vec<View> {
        let upto = (v as usize).min(self.msgs.len());
        let first = self.last_write(loc, v);
        let later = self.msgs[upto..]
            .iter()
            .enumerate()
            .filter(|(_, m)| m.writes(loc))
            .map(|(i, _)| (upto + i) as View + 1);
        std::iter::once(first).chain(later).collect()
    }
    /// Is no write of `loc` by a thread other than `tid` strictly between
    /// timestamps `from` and `to`? (An atomic's write must follow its read
    /// in `loc`'s coherence order with no other thread's write between.)
    pub fn exclusive(&self, loc: LocId, tid: usize, from: View, to: View) -> bool {
        (from + 1..to).all(|t| self.msg(t).is_none_or(|m| !m.writes(loc) || m.tid == tid))
    }
}

/// The kind of a read, as the models distinguish them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadKind {
    Plain,
    /// RCsc acquire (Arm `LDAR`, RISC-V `.aq`): also after earlier releases.
    Acquire,
    /// RCpc acquire (Arm `LDAPR`, every x86 load).
    AcquirePc,
}

/// What a barrier orders: earlier reads and/or writes before later reads
/// and/or writes (RISC-V `fence pred,succ`; Arm `DMB SY` = rw,rw, `DMB
/// LD` = r,rw, `DMB ST` = w,w; `fence.tso` is r,rw plus w,w).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Barrier {
    pub pred_r: bool,
    pub pred_w: bool,
    pub succ_r: bool,
    pub succ_w: bool,
}

impl Barrier {
    /// `smp_mb()`, `DMB ISH`, `fence rw,rw`, `mfence`.
    pub const FULL: Barrier = Barrier {
        pred_r: true,
        pred_w: true,
        succ_r: true,
        succ_w: true,
    };
}

/// A thread's own newest write of a location (store forwarding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Fwd {
    /// Its timestamp (0: none).
    pub(crate) time: View,
    /// Its address and data dependencies' view.
    pub(crate) view: View,
    /// Written by an atomic read-modify-write.
    pub(crate) atomic: bool,
}

/// A CPU's views: how far into memory its later accesses must be.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadView {
    pub(crate) arch: Arch,
    /// Per location: the newest timestamp this thread has read or written.
    pub(crate) coh: Vec<View>,
    /// The newest post-view of a read / timestamp of a write so far.
    pub(crate) vrd: View,
    pub(crate) vwr: View,
    /// Floors for later reads and writes (barriers, acquires, ISB).
    pub(crate) vfr: View,
    pub(crate) vfw: View,
    /// Control and address dependencies so far (orders later writes;
    /// ISB makes later reads wait for it).
    pub(crate) vcap: View,
    /// The newest release write (an RCsc acquire waits for it).
    pub(crate) vrel: View,
    pub(crate) fwd: Vec<Fwd>,
    /// RVWMO: per location, the last read since this thread's last write
    /// of it (timestamp read, post-view).
    pub(crate) last_read: Vec<Option<(View, View)>>,
    /// Timestamps promised and not yet written.
    pub(crate) promises: Vec<View>,
    /// VMSA ([`crate::hw::vmsa`]): the view a `DSB` completed (what a
    /// later context synchronisation orders translation walks after).
    pub(crate) vdsb: View,
    /// VMSA: the floor of translation walks (raised by ISB and exception
    /// entry: `vcse` of `VMPromising.v`).
    pub(crate) vcse: View,
    /// VMSA: the newest TLBI of this thread (a `DSB SY` waits for it:
    /// `vtlbi` of `VMPromising.v`).
    pub(crate) vtlbi: View,
    /// VMSA: the newest implicit access of this thread: a translation's
    /// fill time or a hardware update's timestamp (a full `DSB` orders
    /// every memory effect before it, implicit ones included: `[M]; po;
    /// [dsb.full]; po; [~(Imp & M)]`, `DSB-ob` of `aarch64hwreqs.cat`).
    pub(crate) vimp: View,
    /// VMSA: control dependencies so far (a TLBI waits for them: `ctrl;
    /// TLBI` in `dob` of herd7's `aarch64.cat`).
    pub(crate) vctrl: View,
    /// VMSA: per entry, the newest write this thread's walks of it read.
    pub(crate) walks: Vec<View>,
    /// VMSA: the timestamps of TLBIs issued and not yet completed by a
    /// full `DSB` ([`crate::hw::vmsa::tlbi`]).
    pub(crate) tlbis: Vec<View>,
}

impl ThreadView {
    pub fn new(arch: Arch, locs: usize) -> ThreadView {
        ThreadView {
            arch,
            coh: vec![0; locs],
            vrd: 0,
            vwr: 0,
            vfr: 0,
            vfw: 0,
            vcap: 0,
            vrel: 0,
            fwd: vec![Fwd::default(); locs],
            last_read: vec![None; locs],
            promises: Vec::new(),
            vdsb: 0,
            vcse: 0,
            vtlbi: 0,
            vimp: 0,
            vctrl: 0,
            walks: vec![0; locs],
            tlbis: Vec::new(),
        }
    }
    /// This view without its per-location entries (`coh`, `fwd`,
    /// `last_read`, `walks` empty): for a renaming that reorders them.
    pub(crate) fn clone_scalars(&self) -> ThreadView {
        ThreadView {
            coh: Vec::new(),
            fwd: Vec::new(),
            last_read: Vec::new(),
            walks: Vec::new(),
            promises: self.promises.clone(),
            tlbis: self.tlbis.clone(),
            ..*self
        }
    }
    /// Hash this view as it would be with its per-location vectors in
    /// `order` (new location `i` is old `order[i]`): a function of the
    /// reordered view, built without it ([`super::weak_mem::WeakMem::hash_renamed`]).
    pub(crate) fn hash_reordered<H: std::hash::Hasher>(&self, order: &[usize], h: &mut H) {
        use std::hash::Hash;
        // Destructured in full so that a new field cannot be forgotten here.
        let ThreadView {
            arch,
            coh,
            vrd,
            vwr,
            vfr,
            vfw,
            vcap,
            vrel,
            fwd,
            last_read,
            promises,
            vdsb,
            vcse,
            vtlbi,
            vimp,
            vctrl,
            walks,
            tlbis,
        } = self;
        (arch, vrd, vwr, vfr, vfw, vcap, vrel).hash(h);
        (promises, vdsb, vcse, vtlbi, vimp, vctrl, tlbis).hash(h);
        for &o in order {
            (coh[o], fwd[o], last_read[o], walks[o]).hash(h);
        }
    }
    /// VMSA: the TLBIs issued and not yet completed by a full `DSB`.
    pub fn pending_tlbis(&self) -> usize {
        self.tlbis.len()
    }
    pub fn promises(&self) -> &[View] {
        &self.promises
    }
    /// Promise message `m` (the caller certifies it): append it to memory.
    pub fn promise(&mut self, mem: &mut Memory, m: Msg) -> View {
        let t = mem.push(m);
        self.promises.push(t);
        t
    }
}

/// A read about to choose its message: [`read_choices`] lists them, and
/// [`read_at`] performs the read of one.
#[derive(Clone, Copy, Debug)]
pub struct Read {
    pub loc: LocId,
    /// The view of the address's registers.
    pub vaddr: View,
    pub kind: ReadKind,
    /// Arm's no-return atomics (destination `XZR`): the read is not
    /// ordered as a read (`DMB LD`, acquire) and feeds no register.
    pub noret: bool,
}

impl ThreadView {
    /// The view a read must be at: its address, the barriers, acquires
    /// and ISBs before it, and for an RCsc acquire the last release.
    fn read_pre(&self, r: &Read) -> View {
        let mut v = r.vaddr.max(self.vfr);
        if r.kind == ReadKind::Acquire && !r.noret {
            v = v.max(self.vrel);
        }
        v
    }
    /// RVWMO rule 2 (same-address loads): a load of the location this
    /// thread last read (with no write of it between) that returns a
    /// different write is ordered after that load.
    fn rdw_floor(&self, loc: LocId, t: View) -> View {
        match (self.arch, self.last_read[loc]) {
            (Arch::Riscv, Some((tp, post))) if tp != t => post,
            _ => 0,
        }
    }
}

/// The view read `r` must be at (its address, barriers, acquires, ISBs):
/// the floor of a fault in its place ([`crate::hw::vmsa::fault_view`]).
pub fn read_floor(tv: &ThreadView, r: &Read) -> View {
    tv.read_pre(r)
}

/// The view write `w` must be above, before coherence (a fault in its
/// place is at this view, [`crate::hw::vmsa::fault_view`]).
pub fn write_floor(tv: &ThreadView, w: &Write) -> View {
    let mut pre = w.vaddr.max(w.vdata).max(tv.vcap).max(tv.vfw);
    if w.release {
        pre = pre.max(tv.vrd).max(tv.vwr);
    }
    pre
}

/// `r`'s possible timestamps for this thread now.
/// (`read_mem` of `UMPromising.v`, with RVWMO's rule 2.)
pub fn read_choices(tv: &ThreadView, mem: &Memory, r: &Read) -> Vec<View> {
    let pre = tv.read_pre(r);
    let mut out = mem.readable(r.loc, pre.max(tv.coh[r.loc]));
    out.retain(|&t| {
        let floor = tv.rdw_floor(r.loc, t);
        floor <= pre || mem.last_write(r.loc, floor.max(pre).max(tv.coh[r.loc])) <= t
    });
    out
}

/// Perform read `r` of timestamp `t` (one of [`read_choices`]): the value
/// and the read's post-view (the view of the register it writes).
pub fn read_at(tv: &mut ThreadView, mem: &Memory, r: &Read, t: View) -> (i64, View) {
    let pre = tv.read_pre(r).max(tv.rdw_floor(r.loc, t));
    let fwd = tv.fwd[r.loc];
    let seen = if fwd.time == t && t != 0 {
        // Forwarded from this thread's own write: visible at the write's
        // dependencies, unless an acquire reads an atomic's write (Arm:
        // `[range(rmw)]; lrs; [A | Q]`).
        if fwd.atomic && r.kind != ReadKind::Plain {
            t
        } else {
            fwd.view
        }
    } else {
        t
    };
    let post = pre.max(seen);
    tv.coh[r.loc] = tv.coh[r.loc].max(t);
    tv.vcap = tv.vcap.max(r.vaddr);
    if !r.noret {
        tv.vrd = tv.vrd.max(post);
        if r.kind != ReadKind::Plain {
            tv.vfr = tv.vfr.max(post);
            tv.vfw = tv.vfw.max(post);
        }
    }
    if tv.arch == Arch::Riscv {
        tv.last_read[r.loc] = Some((t, post));
    }
    (mem.val(r.loc, t), post)
}

/// A write about to be performed by [`write()`].
#[derive(Clone, Copy, Debug)]
pub struct Write {
    pub loc: LocId,
    pub val: i64,
    pub vaddr: View,
    /// The view of the value's registers.
    pub vdata: View,
    pub release: bool,
    /// An RCsc release (Arm `STLR`, RISC-V AMO `.rl`): a later RCsc
    /// acquire waits for it. RISC-V `sw.rl` is RCpc (herd7's riscv.cat).
    pub release_sc: bool,
    /// The read of an atomic read-modify-write this write completes: its
    /// timestamp and post-view (the write follows it in coherence with no
    /// other thread's write between, and is ordered after it).
    pub atomic_read: Option<(View, View)>,
}

/// The timestamp message `m` of thread `tv` takes above view `floor`: its
/// oldest promise of `m`, else a new message appended. `None`: that
/// promise lies at or below `floor` (the execution is discarded). The
/// caller drops the promise once the write is done.
pub(crate) fn fulfil_or_append(
    tv: &ThreadView,
    mem: &mut Memory,
    m: Msg,
    floor: View,
) -> Option<View> {
    match tv
        .promises
        .iter()
        .copied()
        .find(|&p| mem.msg(p) == Some(&m))
    {
        Some(p) if p > floor => Some(p),
        Some(_) => None,
        None => Some(mem.push(m)),
    }
}

/// Perform write `w` by thread `tid`: fulfil its oldest promise of the
/// same message, else append a new message. `None`: the write cannot be
/// performed (a promise it must fulfil lies below its view), and this
/// execution is discarded. The timestamp written otherwise.
/// (`write_mem` of `UMPromising.v`, with atomics.)
pub fn write(tv: &mut ThreadView, mem: &mut Memory, tid: usize, w: &Write) -> Option<View> {
    let mut pre = write_floor(tv, w);
    if let Some((_, rpost)) = w.atomic_read {
        pre = pre.max(rpost);
    }
    let floor = pre.max(tv.coh[w.loc]);
    let t = fulfil_or_append(tv, mem, Msg::write(w.loc, w.val, tid), floor)?;
    if let Some((tr, _)) = w.atomic_read {
        if !mem.exclusive(w.loc, tid, tr, t) {
            return None;
        }
    }
    tv.promises.retain(|&p| p != t);
    tv.coh[w.loc] = t;
    tv.vwr = tv.vwr.max(t);
    if w.release_sc {
        tv.vrel = tv.vrel.max(t);
    }
    tv.vcap = tv.vcap.max(w.vaddr);
    tv.fwd[w.loc] = Fwd {
        time: t,
        view: w.vaddr.max(w.vdata),
        atomic: w.atomic_read.is_some(),
    };
    tv.last_read[w.loc] = None;
    Some(t)
}

/// Arm `SWPAL`, `LDADDAL`, `CASAL`, ...: the write of an atomic whose
/// read is an acquire and whose write a release is ordered before every
/// later access (`[range([A]; amo; [L])]; po` in `bob` of
/// `aarch64hwreqs.cat`, `po; ([A]; amo; [L]); po` in `aarch64.cat`) and
/// every later fault (`A; amo; L; po; [MMU & FAULT]`).
pub fn amo_acq_rel(tv: &mut ThreadView, t: View) {
    tv.vfr = tv.vfr.max(t);
    tv.vfw = tv.vfw.max(t);
}

/// A barrier (`DMB`/`DSB` of a type, RISC-V `fence`, `mfence`): later
/// accesses of the successor kinds wait for earlier ones of the
/// predecessor kinds.
pub fn barrier(tv: &mut ThreadView, b: Barrier) {
    let mut v = 0;
    if b.pred_r {
        v = v.max(tv.vrd);
    }
    if b.pred_w {
        v = v.max(tv.vwr);
    }
    if b.succ_r {
        tv.vfr = tv.vfr.max(v);
    }
    if b.succ_w {
        tv.vfw = tv.vfw.max(v);
    }
}

/// RISC-V `fence.tso`: r -> rw and w -> w.
pub fn fence_tso(tv: &mut ThreadView) {
    barrier(
        tv,
        Barrier {
            pred_r: true,
            pred_w: false,
            succ_r: true,
            succ_w: true,
        },
    );
    barrier(
        tv,
        Barrier {
            pred_r: false,
            pred_w: true,
            succ_r: false,
            succ_w: true,
        },
    );
}

/// Arm `ISB` (and RISC-V `fence.i`, as herd7's riscv.cat and the
/// litmus-tests-riscv catalogue order `ctrl; fence.i`): later accesses
/// wait for earlier control and address dependencies.
pub fn isb(tv: &mut ThreadView) {
    tv.vfr = tv.vfr.max(tv.vcap);
    tv.vfw = tv.vfw.max(tv.vcap);
    tv.vcse = tv.vcse.max(tv.vcap).max(tv.vdsb);
}

/// Arm `DSB` of a type: the accesses of its predecessor kind are ordered
/// before *every* later access, not only those of the successor kind
/// (`DSB-ob` of `aarch64hwreqs.cat`: `[Exp & W]; po; [dsb.st]; po;
/// [~(Imp & M)]`, `R+rel+dsb.st_ww-mmufault-po`), and before walks after
/// a later context synchronisation (`vdsb`; `DSB-ob; [CSE]; po`). A full
/// `DSB` also waits for this thread's TLBIs (`run_barrier` of
/// `VMPromising.v`: `vpost` of `dsb sy` includes `vtlbi`; the driver
/// completes them first, [`crate::hw::vmsa::complete_tlbis`]) and for
/// its implicit accesses, translation reads and hardware updates
/// (`DSB-ob` of `aarch64hwreqs.cat`: `[M]; po; [dsb.full]; po;
/// [~(Imp & M)]`, where `M` includes them; `dsb.ld` and `dsb.st` order
/// only explicit reads, writes). Without VMSA this is [`barrier`].
pub fn dsb(tv: &mut ThreadView, b: Barrier) {
    let mut v = 0;
    if b.pred_r {
        v = v.max(tv.vrd);
    }
    if b.pred_w {
        v = v.max(tv.vwr);
    }
    if b.pred_r && b.pred_w {
        v = v.max(tv.vtlbi).max(tv.vimp);
    }
    tv.vdsb = tv.vdsb.max(v);
    tv.vfr = tv.vfr.max(v);
    tv.vfw = tv.vfw.max(v);
}

/// An access through an address *picked* by a conditional select (Arm
/// `CSEL`) of view `v`: every later write, and everything after a later
/// context synchronisation, is ordered after `v` (`pick-addr-dep; [M &
/// Exp]; po; [W]`, `pick-addr-dep; [Exp]; po; [CSE]; po` in `pob` of
/// herd7's `aarch64hwreqs.cat`), but the access itself is not (a picked
/// address orders no read).
pub fn pick_addr(tv: &mut ThreadView, v: View) {
    tv.vcap = tv.vcap.max(v);
}

/// A conditional branch on registers of view `v`: a control dependency
/// of every later write.
pub fn branch(tv: &mut ThreadView, v: View) {
    tv.vcap = tv.vcap.max(v);
    tv.vctrl = tv.vctrl.max(v);
}
