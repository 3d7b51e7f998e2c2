//! The Arm VMSA extension of the view machine ([`crate::hw::wmm`]):
//! translation-table walks as reads, TLB caching, TLBIs and their
//! completion at a `DSB`, context synchronisation, translation faults and
//! hardware access-flag / dirty-bit updates (FEAT_HAFDBS, `TTHM`).
//!
//! The rules follow the operational VM model `promising-arm/VMPromising.v`
//! of rems-project/archsem (TLBIs are events in memory with timestamps;
//! a full `DSB` waits for the thread's TLBIs; a translation result is
//! usable only up to its invalidation: `read_mem_explicit` asserts
//! `vpost <= invalidation_time`), completed where that file leaves the TLB
//! out by the axiomatic model herd7's verdicts come from (the herdtools7
//! catalogue's `catalogue/aarch64-VMSA/cats/aarch64.cat`, `aarch64hwreqs.cat`,
//! `tlbi-after.cat`; `herd/libdir/aarch64hwreqs.cat`) and Simner et al.,
//! "Relaxed virtual memory in Armv8-A" (ESOP 2022):
//!
//! - a walk reads the last-level entry only (herd7's single `PTE` read);
//! - a walk reads the entry *as of a time* `tf` (the TLB fill): the value
//!   of the entry's last write at or before `tf`. A valid entry with its
//!   access flag set may be cached, so `tf` may lie before anything the
//!   walk is ordered after; an entry that would fault for translation or
//!   access flag is never cached (`TLBUncacheable`), so that walk happens
//!   at a `tf` at or after the walk's own floor (address and context
//!   synchronisation);
//! - a TLBI is two events: its *issue* ([`tlbi`]) and its *completion* by
//!   the thread's next full `DSB` ([`complete_tlbis`]). herd7 orders every
//!   translation read before or after every TLBI that a full `DSB` follows
//!   (`tlbi-after`, `CTLBI`): a read filled before the issue is before it
//!   and must be ordered before what follows the completion
//!   (`TTD-read-ordered-before`; for other threads' accesses `tr-ib^-1;
//!   TTD-read-ordered-before & ext`), a read filled after the issue is
//!   after it (`tlbi-ca` then holds by construction);
//! - a stale fill also orders the thread's earlier walks of the same
//!   address before that completion (`po-va-loc; TTD-read-ordered-before
//!   & ext`);
//! - walks order later writes and everything after a later context
//!   synchronisation, and after no later write of its thread to the entry
//!   (`[R & PTE & Imp]; po-loc; [W & PTE]`); a full `DSB` orders walks and
//!   hardware updates before later explicit events (`DSB-ob`);
//! - hardware updates of AF/DB are atomic with their walk ([`hw_update`]),
//!   and explicit accesses of entries may come with spurious AF updates
//!   ([`phantoms`]).
//!
//! Like [`crate::hw::wmm`], these are functions over machine state (a
//! [`Memory`] and a [`ThreadView`]): the kernel checker's page walks and
//! shootdowns are meant to drive the same steps.

use crate::hw::wmm::{fulfil_or_append, LocId, Memory, Msg, MsgKind, ThreadView, View};

/// The scope of a TLBI that invalidates every entry (`TLBI VMALLE1IS`).
pub const ALL: LocId = usize::MAX;

/// A last-level page-table entry, herd7's `pteval` (`oa`, `valid`, `af`,
/// `db`, `dbm`, `el0`; `herd/libdir/asl-pseudocode/physmem-vmsa.asl`).
/// `oa` is the index of a physical page (the driver's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Desc {
    pub oa: u32,
    pub valid: bool,
    pub af: bool,
    pub db: bool,
    pub dbm: bool,
    pub el0: bool,
}

impl Desc {
    /// The tag bit that marks an encoded descriptor (outside every field).
    const TAG: i64 = 1 << 62;
    /// Bit positions of the fields in an Armv8 stage-1 block/page
    /// descriptor (Arm ARM D8.3; herd7's `pteval` packs the same bits):
    /// valid 0, `AP[1]` (EL0 access) 6, `AP[2]` (read-only: the dirty
    /// bit is its negation under `DBM`) 7, AF 10, DBM 51; the output
    /// address from bit 12.
    const VALID: u32 = 0;
    const AP1: u32 = 6;
    const AP2: u32 = 7;
    const AF: u32 = 10;
    const DBM: u32 = 51;
    const OA: u32 = 12;

    /// herd7's default entry of page `oa`: valid, accessed, dirty, no DBM.
    pub fn new(oa: u32) -> Desc {
        Desc {
            oa,
            valid: true,
            af: true,
            db: true,
            dbm: false,
            el0: true,
        }
    }
    /// The descriptor as a machine value, in Arm's bit layout (so that
    /// software's `ORR`/`AND` of descriptor bits acts as on hardware).
    pub fn encode(self) -> i64 {
        let bit = |b: bool, i: u32| i64::from(b) << i;
        Desc::TAG
            | (i64::from(self.oa) << Desc::OA)
            | bit(self.valid, Desc::VALID)
            | bit(self.el0, Desc::AP1)
            | bit(!self.db, Desc::AP2)
            | bit(self.af, Desc::AF)
            | bit(self.dbm, Desc::DBM)
    }
    /// A machine value as a descriptor (`None`: not one; such an entry is
    /// invalid, as its bit 0 would be).
    pub fn decode(v: i64) -> Option<Desc> {
        if v & Desc::TAG == 0 || v < 0 {
            return None;
        }
        let bit = |i: u32| v >> i & 1 == 1;
        Some(Desc {
            oa: ((v >> Desc::OA) & 0xffff_ffff) as u32,
            valid: bit(Desc::VALID),
            af: bit(Desc::AF),
            db: !bit(Desc::AP2),
            dbm: bit(Desc::DBM),
            el0: bit(Desc::AP1),
        })
    }
}

/// Hardware management of the access flag and dirty bit (`TTHM=HA HD`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tthm {
    pub ha: bool,
    pub hd: bool,
}

/// A fault of a translation (herd7's `MMU:Translation`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    Translation,
    AccessFlag,
    Permission,
}

/// What an entry gives an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The access goes ahead with this entry.
    Ok(Desc),
    /// The hardware first writes this entry (AF/DB update), atomically
    /// after the walk's read.
    Update(Desc),
    Fault(FaultKind),
}

/// How entry value `v` serves an access (a write if `write`), and whether
/// the walk may have been served from a TLB. Checks in Arm's order of fault
/// priority (translation, access flag, permission: `physmem-vmsa.asl`); `HA` sets a clear AF, `HD` sets DB where DBM allows it.
/// Translation and access-flag faults and updates read memory
/// (`TLBUncacheable`, `aarch64hwreqs.cat`); permission faults may not.
pub fn classify(v: i64, write: bool, tthm: Tthm) -> (Outcome, bool) {
    let Some(d) = Desc::decode(v).filter(|d| d.valid) else {
        return (Outcome::Fault(FaultKind::Translation), false);
    };
    if !d.af && !tthm.ha {
        return (Outcome::Fault(FaultKind::AccessFlag), false);
    }
    if write && !d.db && !(d.dbm && tthm.hd) {
        return (Outcome::Fault(FaultKind::Permission), d.af);
    }
    if !d.af || (write && !d.db) {
        let new = Desc {
            af: true,
            db: d.db || write,
            ..d
        };
        return (Outcome::Update(new), false);
    }
    (Outcome::Ok(d), true)
}

/// A walk about to choose its entry: [`walk_choices`] lists the choices.
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    /// The entry's location.
    pub pte: LocId,
    /// The view of the address's registers.
    pub vaddr: View,
    /// The access is a write (or an atomic read-modify-write).
    pub write: bool,
    pub tthm: Tthm,
}

/// One way a walk may go: the entry's write it read (`tw`), the fill
/// time (`tf`), and what the entry gives the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub tw: View,
    pub tf: View,
    pub outcome: Outcome,
}

/// The floor of a walk: its address and the last context
/// synchronisation (`vcse`; `CSE-ob` of `aarch64hwreqs.cat`).
pub fn walk_floor(tv: &ThreadView, w: &Walk) -> View {
    w.vaddr.max(tv.vcse)
}

/// Every choice of walk `w` by thread `tid`: for each write of the entry
/// (0: the initial one), the fill times at which it is the entry's value:
/// the earliest one allowed (at the write if cacheable, else at the walk's
/// floor), and just after each TLBI affecting the entry while it holds
/// that value (a later fill escapes that TLBI). A fill never reaches this
/// thread's own unfulfilled write of the entry (`[Imp & TTD & R]; (po &
/// same-loc); [W]`). A fill before another thread's TLBI orders this
/// thread's earlier walks of the same address before that TLBI's
/// completion too (`po-va-loc; TTD-read-ordered-before & ext` in
/// `tlbi-ob` of the catalogue's `aarch64.cat`): so none of them may have
/// read a write at or after the completion (`walks`, the `coRR-pte9`
/// family).
pub fn walk_choices(tv: &ThreadView, mem: &Memory, tid: usize, w: &Walk) -> Vec<Choice> {
    let floor = walk_floor(tv, w);
    let own = tv
        .promises
        .iter()
        .copied()
        .filter(|&p| mem.msg(p).is_some_and(|m| m.writes(w.pte)))
        .min()
        .unwrap_or(View::MAX);
    let mut out = Vec::new();
    for tw in mem.readable(w.pte, 0) {
        let next = next_write(mem, w.pte, tw).min(own);
        let (outcome, cacheable) = classify(mem.val(w.pte, tw), w.write, w.tthm);
        let base = if cacheable { tw } else { tw.max(floor) };
        let tlbis = (base + 1..next.min(mem.len() + 1))
            .filter(|&t| affects(mem, t, tid, w.pte))
            .collect::<Vec<_>>();
        // `va-loc` relates walks through the location of what they lead
        // to; herd7 gives a fault event that location (`same-loc`:
        // `[MMU & Translation & FAULT]; same-low-order-bits`) only for a
        // translation fault (the `F2.mod` family: a stale permission fault
        // after a fresh access of the address).
        let located = !matches!(
            outcome,
            Outcome::Fault(FaultKind::Permission | FaultKind::AccessFlag)
        );
        let earlier = if located { tv.walks[w.pte] } else { 0 };
        for tf in std::iter::once(base).chain(tlbis) {
            if tf < next
                && survives(mem, tid, w.pte, tf, floor)
                && usable(mem, tid, w.pte, tf, earlier)
            {
                out.push(Choice { tw, tf, outcome });
            }
        }
    }
    out
}

/// The timestamp of the first write of `loc` after `t` (`View::MAX`: none).
fn next_write(mem: &Memory, loc: LocId, t: View) -> View {
    (t + 1..=mem.len())
        .find(|&u| mem.msg(u).is_some_and(|m| m.writes(loc)))
        .unwrap_or(View::MAX)
}

/// Is the message at `t` the issue of a TLBI that invalidates entry `pte`
/// in thread `tid`'s TLB? A broadcast TLBI (`...IS`) reaches every
/// thread, a local one only its own.
fn affects(mem: &Memory, t: View, tid: usize, pte: LocId) -> bool {
    mem.msg(t).is_some_and(|m| {
        m.kind == MsgKind::Tlbi && (m.loc == pte || m.loc == ALL) && (m.val == 1 || m.tid == tid)
    })
}

/// Is the message at `t` the completion of a TLBI that was issued after
/// `tf` and invalidates entry `pte` for thread `tid`, by a thread other
/// than `tid` if `other`? herd7 orders each translation read before or
/// after each TLBI (`TLBI-after`): a read filled before the TLBI's issue
/// is before it, and must be ordered before what follows the TLBI's
/// completing `DSB` (`TTD-read-ordered-before`); one filled after the
/// issue is after it, and the TLBI needs only precede the write that
/// overwrites what it read (`TLBI-ca`), which a fill after the issue
/// guarantees.
fn completes(mem: &Memory, t: View, tid: usize, pte: LocId, tf: View, other: bool) -> bool {
    mem.msg(t).is_some_and(|m| {
        let issue = m.val as View;
        m.kind == MsgKind::TlbiDone
            && issue > tf
            && affects(mem, issue, tid, pte)
            && (!other || m.tid != tid)
    })
}

/// Is an entry filled at `tf` still in thread `tid`'s TLB at `until` (the
/// walk's floor)? Not if a TLBI issued after the fill completed at or
/// before it: a walk after a context synchronisation that follows the
/// TLBI's completion is ordered after the TLBI (`TLBI-after; TLBI; po;
/// dsb.full; po; ISB; po; [NExp & M]` in herd7's
/// `TTD-read-ordered-before`).
fn survives(mem: &Memory, tid: usize, pte: LocId, tf: View, until: View) -> bool {
    !(tf + 1..=until.min(mem.len())).any(|t| completes(mem, t, tid, pte, tf, false))
}

/// May a translation filled at `tf` still be used by an access of thread
/// `tid` at view `used`? Not past the completion of a TLBI of another
/// thread issued after the fill: the access must be ordered before what
/// follows the TLBI's `DSB` (`TLBI-ob`, whose access clause relates
/// accesses on other threads (`ext`) than the TLBI's; `read_mem_explicit`
/// of `VMPromising.v`: `vpost <= invalidation_time`). The thread's own
/// TLBIs bind its walks only through context synchronisation
/// ([`walk_choices`]).
pub fn usable(mem: &Memory, tid: usize, pte: LocId, tf: View, used: View) -> bool {
    !(tf + 1..=used.min(mem.len())).any(|t| completes(mem, t, tid, pte, tf, true))
}

/// Record walk `c` of entry `pte` (to a translation or a fault): later
/// writes, and everything after a later context synchronisation, are
/// ordered after its fill (`[Imp & TTD & R]; tr-ib; po; [Exp & W]` and
/// `...; po; [CSE]; po`), a later full `DSB` too (`vimp`), and later
/// walks of the entry are checked against the write it read (`walks`,
/// [`walk_choices`]).
pub fn walked(tv: &mut ThreadView, pte: LocId, c: &Choice) {
    tv.vcap = tv.vcap.max(c.tf);
    tv.vimp = tv.vimp.max(c.tf);
    tv.walks[pte] = tv.walks[pte].max(c.tw);
}

/// The hardware update of entry `pte` to `new` after the walk read the
/// write at `tw` (filled at `tf`): a write of thread `tid`, atomic with the
/// read (no write of the entry between), after the walk and after the
/// thread's dependencies and context synchronisation (`[Exp & R]; ctrl;
/// [HU]`, `addr; [HU]`, `[Imp & TTD & R]; rmw; [HU]`), but ordered by no
/// barrier. It fulfils a promise of the same message or is appended.
/// `None`: impossible in this execution.
pub fn hw_update(
    tv: &mut ThreadView,
    mem: &mut Memory,
    tid: usize,
    w: &Walk,
    c: &Choice,
    new: Desc,
) -> Option<View> {
    let m = Msg::write(w.pte, new.encode(), tid);
    let pre = walk_floor(tv, w).max(tv.vcap).max(c.tf);
    let t = fulfil_or_append(tv, mem, m, pre)?;
    if (c.tw + 1..t).any(|u| mem.msg(u).is_some_and(|x| x.writes(w.pte))) {
        return None;
    }
    tv.promises.retain(|&p| p != t);
    tv.vimp = tv.vimp.max(t);
    Some(t)
}

/// The spurious ("phantom") access-flag updates an explicit access of
/// entry `pte` by thread `tid` may come with, when hardware management is
/// on:
/// herd7 pairs such an access, unordered (`>>|`), with an optional atomic
/// test-and-set of the entry's AF (`fire_spurious_af` /
/// `test_and_set_af_succeeds` of herd7's `AArch64Sem`: read the entry,
/// and if it is valid with AF clear, write it with AF set, an `HU`
/// event), at most one per instruction and location. herd7's comment
/// there: "explicit loads or stores yield a potential spurious update of
/// the AF flag"; the catalogue's verdicts take them on both (`TwoPhantoms`
/// needs two on one thread's loads, `S+dmb.st+dsb.ish-isb-HUaf` one on a
/// store; later herd7 versions pick one direction, `PhantomOnLoad`). Each
/// state after
/// one: its write follows the entry's write it read with none between
/// (`rmw`), after the thread's coherence view of the entry and its last
/// context synchronisation (`CSE-ob`: `[CSE]; po`), fulfilling a promise
/// of it or appended. A full `DSB` orders it (`vimp`).
pub fn phantoms(
    tv: &ThreadView,
    mem: &Memory,
    tid: usize,
    pte: LocId,
) -> Vec<(ThreadView, Memory)> {
    let set_af = |v: i64| {
        Desc::decode(v)
            .filter(|d| d.valid && !d.af)
            .map(|d| Desc { af: true, ..d }.encode())
    };
    let floor = tv.coh[pte].max(tv.vcse);
    let mut out = Vec::new();
    let mut at = |tv: &ThreadView, mem: &Memory, t: Option<View>| {
        let (mut tv, mut mem) = (tv.clone(), mem.clone());
        let t = t.unwrap_or_else(|| {
            let v = set_af(mem.last(pte)).unwrap_or_default();
            mem.push(Msg::write(pte, v, tid))
        });
        tv.promises.retain(|&p| p != t);
        tv.coh[pte] = t;
        tv.vimp = tv.vimp.max(t);
        out.push((tv, mem));
    };
    if set_af(mem.last(pte)).is_some() {
        at(tv, mem, None);
    }
    for &p in &tv.promises {
        let prev = mem.last_write(pte, p - 1);
        let ok = mem.msg(p).is_some_and(|m| m.writes(pte))
            && p > floor
            && set_af(mem.val(pte, prev)) == Some(mem.val(pte, p));
        if ok {
            at(tv, mem, Some(p));
        }
    }
    out
}

/// `TLBI` of entry `pte` (or [`ALL`]), broadcast or local, whose address
/// registers have view `vaddr`, by thread `tid`: its issue is an event in
/// memory after the thread's last `DSB` and context synchronisation
/// (`run_tlbi` of `VMPromising.v`: `vpre = vcse ⊔ vdsb ⊔ deps`; `Ev.Tlbi`)
/// and after its control dependencies (`ctrl; TLBI` in `dob` of herd7's
/// `aarch64.cat`),
/// fulfilling a promise of it or appended. It takes effect on other
/// threads' translations when a later full `DSB` completes it
/// ([`complete_tlbis`]): herd7 relates a TLBI to the accesses it orders
/// only through that `DSB` (every clause of `TLBI-ob` is `TLBI-after;
/// TLBI; po; dsb.full; po; ...`). `None`: a promise of it lies below its
/// view.
pub fn tlbi(
    tv: &mut ThreadView,
    mem: &mut Memory,
    tid: usize,
    pte: LocId,
    broadcast: bool,
    vaddr: View,
) -> Option<View> {
    let m = Msg {
        loc: pte,
        val: i64::from(broadcast),
        tid,
        kind: MsgKind::Tlbi,
    };
    let t = place(tv, mem, m, tv.vcse.max(tv.vdsb).max(tv.vctrl).max(vaddr))?;
    tv.tlbis.push(t);
    Some(t)
}

/// Message `m` of thread `tv` above view `pre`: its promise fulfilled, or
/// appended. `None`: the promise lies at or below `pre`.
fn place(tv: &mut ThreadView, mem: &mut Memory, m: Msg, pre: View) -> Option<View> {
    let t = fulfil_or_append(tv, mem, m, pre)?;
    tv.promises.retain(|&p| p != t);
    Some(t)
}

/// A full `DSB` of thread `tid` completes its TLBIs: each completion is
/// an event in memory after its issue (`MsgKind::TlbiDone`, naming the
/// issue's timestamp), and the `DSB` waits for it (`vtlbi` of
/// `VMPromising.v`, [`crate::hw::wmm::dsb`]). `false`: a promise of one
/// lies below its issue (no execution).
pub fn complete_tlbis(tv: &mut ThreadView, mem: &mut Memory, tid: usize) -> bool {
    for issue in std::mem::take(&mut tv.tlbis) {
        let m = Msg {
            loc: mem.msg(issue).map_or(ALL, |m| m.loc),
            val: i64::from(issue),
            tid,
            kind: MsgKind::TlbiDone,
        };
        match place(tv, mem, m, issue) {
            Some(t) => tv.vtlbi = tv.vtlbi.max(t),
            None => return false,
        }
    }
    true
}

/// May a fault at view `v` come from walk choice `c` of thread `tid`?
/// Like an access, it must be taken before a TLBI of another thread
/// invalidates the entry it used ([`usable`]); a permission fault may
/// come from a stale cached entry, a translation or access-flag fault
/// only from memory (the walk's floor, [`walk_choices`]).
pub fn fault_ok(mem: &Memory, tid: usize, pte: LocId, c: &Choice, v: View) -> bool {
    usable(mem, tid, pte, c.tf, v)
}

/// The view of a fault: its address, the barriers and acquires before it
/// (`lob; [MMU & FAULT]`: `dmb.full`, `dmb.ld` after reads, `[A | Q];
/// po`, ISB after dependencies, and `DMB ST`, which orders earlier writes
/// before any fault: `[W]; po; [dmb.st]; po; [W | MMU & FAULT]`), and the
/// walk's fill time. Not a release's or a data dependency's ordering: a
/// fault writes nothing (`po; [L]` and `data` reach only the write).
pub fn fault_view(tv: &ThreadView, vaddr: View, tf: View) -> View {
    vaddr.max(tv.vfr).max(tv.vfw).max(tf)
}

/// Take the exception of a fault whose walk read its entry at fill time
/// `tf` through an address of view `vaddr`: exception entry is a context
/// synchronisation (`EXC-ENTRY-CSE` of `aarch64hwreqs.cat`), so the
/// handler runs after the walk (`[Imp & TTD & R]; tr-ib; po; [CSE]; po`
/// in `CSE-ob`) and the address (`ReturnException`/`run_cse` of
/// `VMPromising.v`), but not after what orders the fault itself: the
/// barriers before it (`[W]; po; [dmb.st]; po; [MMU & FAULT]`) order the
/// fault, not the handler's accesses (`R+rel+dmb.st-mmufault-po`).
pub fn take_fault(tv: &mut ThreadView, vaddr: View, tf: View) {
    tv.vcap = tv.vcap.max(vaddr).max(tf);
    crate::hw::wmm::isb(tv);
}
