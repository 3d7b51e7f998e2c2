//! Run a parsed test on its architecture's model ([`kernel::hw::wmm`]):
//! every execution, its final states, and the verdict.
//!
//! The search follows Promising-ARM's exhaustive exploration (PLDI 2019,
//! section 6.1, proven sound there as "Optimised Global-Promising"):
//! first any sequence of promises, each certified when made (the thread,
//! running alone from that point, can fulfil all its promises); then the
//! threads' instructions, interleaved, with no further promises. A final
//! state counts only if every promise was fulfilled.

use crate::ast::{
    Addr, AluOp, Arch, Atom, BranchCond, Cond, FaultKind, Fence, Instr, LoadKind, Operand, Prop,
    PteLit, Quant, Reg, RmwOp, StoreKind, Test, Value,
};
use kernel::hw::vmsa::{self, Desc, Tthm};
use kernel::hw::wmm::{self, Barrier, Memory, Msg, Read, ReadKind, ThreadView, View, Write};
use rustc_hash::FxHashSet;

/// The model's answer for one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Verdict {
    Allowed,
    Forbidden,
    Required,
    /// Not produced by [`run`] (herd7 calls a `forall` test that holds in
    /// some final states only Allowed); kept for reading old results.
    NotRequired,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Allowed => "Allowed",
            Verdict::Forbidden => "Forbidden",
            Verdict::Required => "Required",
            Verdict::NotRequired => "NotRequired",
        }
    }
    pub fn parse(s: &str) -> Option<Verdict> {
        [
            Verdict::Allowed,
            Verdict::Forbidden,
            Verdict::Required,
            Verdict::NotRequired,
        ]
        .into_iter()
        .find(|v| v.name() == s)
    }
}

/// What a run found.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub verdict: Verdict,
    /// Distinct final states.
    pub outcomes: usize,
    /// Distinct states explored.
    pub states: usize,
}

/// The most states one test may explore before it is given up on.
pub const MAX_STATES: usize = 2_000_000;

/// A fault a thread took: the instruction, the location, the kind.
pub type Fault = (usize, usize, FaultKind);

/// Register values, memory and faults of a final state.
pub type Outcome = (Vec<Vec<i64>>, Vec<i64>, Vec<Vec<Fault>>);

/// The compiled test: locations as dense ids with addresses.
struct Prog<'a> {
    test: &'a Test,
    arch: machine::scenario::Arch,
    /// The address of each location (`Test::locs` order).
    addr: Vec<i64>,
    /// VMSA: hardware updates a walk chose but could not append, as a
    /// write of the entry came between its read and the end of memory:
    /// made earlier as a promise they may be possible, so they are
    /// candidates for promises ([`Prog::local_writes`]).
    early_updates: std::cell::RefCell<Vec<Msg>>,
}

/// Where an address leads.
enum Target {
    /// A memory location, accessed directly (no translation).
    Loc(usize),
    /// VMSA: the virtual address of location `i`, translated through its
    /// page-table entry.
    Virt(usize),
}

/// VMSA: page-table entries live at `PTE_BASE + address`, physical
/// addresses at `PA_BASE + address`.
const PTE_BASE: i64 = 1 << 40;
const PA_BASE: i64 = 1 << 41;

#[derive(Clone, PartialEq, Eq, Hash)]
struct TState {
    pc: usize,
    regs: Vec<(i64, View)>,
    /// The operands of the last `Cmp` and their view.
    flags: (i64, i64, View),
    /// Per register, its *pick* view: the views a conditional select
    /// (`CSEL`) chose by, which herd7 keeps apart from data (`pick-basic-dep`,
    /// `aarch64deps.cat`); and the flags' pick view.
    picks: Vec<View>,
    flags_pick: View,
    tv: ThreadView,
    /// VMSA: the faults taken, and whether the thread runs its handler.
    faults: Vec<Fault>,
    handler: bool,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    mem: Memory,
    th: Vec<TState>,
    /// Still in the promise phase (no instruction has run yet).
    promising: bool,
}

/// Locations live at multiples of this (so `[X1,W4,SXTW]` with `W4 = 0`
/// names X1's location, and any other offset names none).
const LOC_STRIDE: i64 = 0x1000;

/// Run `test` exhaustively, with the partial-order reduction (a thread
/// whose next step commutes with the rest runs alone). `Err`: the test
/// does something the model cannot express (an access to an address that
/// is no location, a loop), or exceeds [`MAX_STATES`].
pub fn run(test: &Test) -> Result<RunResult, String> {
    run_with(test, true)
}

/// [`run`], with the reduction on or off (`tlblab litmus --reduction off`,
/// and the tests that compare the two).
pub fn run_with(test: &Test, reduce: bool) -> Result<RunResult, String> {
    let prog = Prog::new(test)?;
    let (outcomes, states) = explore(&prog, reduce)?;
    let verdict = prog.verdict(&outcomes)?;
    Ok(RunResult {
        verdict,
        outcomes: outcomes.len(),
        states,
    })
}

/// Every final state of `test` (registers, memory, faults), sorted, and
/// the number of states explored: what the reduced and the full search
/// must agree on.
pub fn final_states(test: &Test, reduce: bool) -> Result<(Vec<Outcome>, usize), String> {
    let prog = Prog::new(test)?;
    let (outcomes, states) = explore(&prog, reduce)?;
    let mut v: Vec<Outcome> = outcomes.into_iter().collect();
    v.sort();
    Ok((v, states))
}

/// Depth first over every state, each once: the final states and the
/// number of states.
///
/// The reduction (`reduce`) is a persistent set of one thread
/// ([`Prog::independent_thread`]): where some thread's next instruction
/// commutes with everything every other thread may still do, only that
/// thread's successors are explored. The state space is acyclic (no
/// backward branches), so every final state stays reachable (Godefroid's
/// persistent sets need no cycle proviso there) and state caching keeps
/// that (a state's reduced successors depend on the state alone).
fn explore(prog: &Prog, reduce: bool) -> Result<(FxHashSet<Outcome>, usize), String> {
    let mut seen = FxHashSet::default();
    let mut outcomes = FxHashSet::default();
    let mut stack = vec![prog.initial()?];
    while let Some(s) = stack.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        if seen.len() > MAX_STATES {
            return Err(format!("more than {MAX_STATES} states"));
        }
        if s.th.iter().enumerate().all(|(t, th)| prog.done(t, th)) {
            if s.th.iter().all(|th| th.tv.promises().is_empty()) {
                outcomes.insert(prog.outcome(&s));
            }
            continue;
        }
        if let Some(t) = reduce.then(|| prog.independent_thread(&s)).flatten() {
            let next = prog.step(&s, t)?;
            if !next.is_empty() {
                stack.extend(next);
                continue;
            }
        }
        if s.promising {
            for t in 0..s.th.len() {
                stack.extend(prog.promises(&s, t)?);
            }
        }
        for t in 0..s.th.len() {
            for mut n in prog.step(&s, t)? {
                n.promising = false;
                stack.push(n);
            }
        }
    }
    Ok((outcomes, seen.len()))
}

fn model_arch(a: Arch) -> machine::scenario::Arch {
    match a {
        Arch::AArch64 => machine::scenario::Arch::Arm64,
        Arch::RiscV => machine::scenario::Arch::Riscv,
        Arch::X86 => machine::scenario::Arch::X86,
    }
}

impl<'a> Prog<'a> {
    fn new(test: &'a Test) -> Result<Prog<'a>, String> {
        for th in &test.threads {
            for (i, ins) in th.code.iter().enumerate() {
                if let Instr::Branch { target, .. } = ins {
                    if *target <= i {
                        return Err("a backward branch (loop)".into());
                    }
                }
            }
        }
        let addr = (1..=test.locs.len() as i64)
            .map(|i| i * LOC_STRIDE)
            .collect();
        Ok(Prog {
            test,
            arch: model_arch(test.arch),
            addr,
            early_updates: Default::default(),
        })
    }

    fn value(&self, v: &Value) -> Result<i64, String> {
        self.value_of(v, None)
    }

    /// A value; an entry value without `oa` takes location `own`'s page.
    fn value_of(&self, v: &Value, own: Option<usize>) -> Result<i64, String> {
        match v {
            Value::Int(i) => Ok(*i),
            Value::Loc(name) => self.loc_named(name).map(|l| self.addr[l]),
            Value::PteOf(name) => self.loc_named(name).map(|l| PTE_BASE + self.addr[l]),
            Value::PhysOf(name) => self.loc_named(name).map(|l| PA_BASE + self.addr[l]),
            Value::Pte(lit) => self.desc(lit, own).map(Desc::encode),
        }
    }

    /// An entry as written, herd7's defaults filled in.
    fn desc(&self, lit: &PteLit, own: Option<usize>) -> Result<Desc, String> {
        let oa = match (&lit.oa, own) {
            (Some(x), _) => self.loc_named(x)?,
            (None, Some(l)) => l,
            (None, None) => return Err("an entry value without oa".into()),
        };
        let d = Desc::new(oa as u32);
        Ok(Desc {
            valid: lit.valid.unwrap_or(d.valid),
            af: lit.af.unwrap_or(d.af),
            db: lit.db.unwrap_or(d.db),
            dbm: lit.dbm.unwrap_or(d.dbm),
            el0: lit.el0.unwrap_or(d.el0),
            ..d
        })
    }

    /// The number of test locations (VMSA memory holds them, then their
    /// page-table entries).
    fn nlocs(&self) -> usize {
        self.test.locs.len()
    }

    fn loc_named(&self, name: &str) -> Result<usize, String> {
        self.test
            .locs
            .iter()
            .position(|l| l == name)
            .ok_or_else(|| format!("unknown location {name:?}"))
    }

    fn initial(&self) -> Result<State, String> {
        let n = self.nlocs();
        let mut init = vec![0; n];
        for (name, v) in &self.test.init_mem {
            let l = self.loc_named(name)?;
            init[l] = self.value_of(v, Some(l))?;
        }
        if let Some(vm) = &self.test.vmsa {
            init.extend((0..n).map(|i| Desc::new(i as u32).encode()));
            for (name, lit) in &vm.init_pte {
                let l = self.loc_named(name)?;
                init[n + l] = self.desc(lit, Some(l))?.encode();
            }
        }
        let mut th = Vec::new();
        for t in &self.test.threads {
            let mut regs = vec![(0, 0); t.regs.len()];
            for (r, v) in &t.init {
                regs[*r] = (self.value(v)?, 0);
            }
            th.push(TState {
                pc: 0,
                regs,
                flags: (0, 0, 0),
                picks: vec![0; t.regs.len()],
                flags_pick: 0,
                tv: ThreadView::new(self.arch, init.len()),
                faults: Vec::new(),
                handler: false,
            });
        }
        Ok(State {
            mem: Memory::new(init),
            th,
            promising: true,
        })
    }

    /// Has thread `t` finished (its code, or its fault handler)?
    fn done(&self, t: usize, th: &TState) -> bool {
        let code = &self.test.threads[t];
        th.pc >= code.code.len() || (!th.handler && th.pc >= code.main_len)
    }

    /// A thread whose next instruction commutes with every step every
    /// other thread may still take, if any (the first such): outside the
    /// promise phase and without VMSA, an instruction that touches only
    /// its thread (register operations, compares, branches, barriers:
    /// they change its registers and views alone), or a load of a
    /// location no other thread may still write ([`Prog::may_write`]:
    /// memory then keeps that location's messages, and a load changes
    /// its thread alone). Stores never qualify: each appends a message,
    /// and the order of messages is the state. In the promise phase any
    /// thread may still promise a write, so nothing is independent there.
    fn independent_thread(&self, s: &State) -> Option<usize> {
        if s.promising || self.test.vmsa.is_some() {
            return None;
        }
        (0..s.th.len()).find(|&t| {
            if self.done(t, &s.th[t]) {
                return false;
            }
            match self.test.threads[t].code[s.th[t].pc] {
                Instr::Store { .. } | Instr::Rmw { .. } | Instr::Tlbi { .. } => false,
                Instr::Load { addr, .. } => {
                    let (a, _) = self.address(&s.th[t], addr);
                    match self.target(a) {
                        Ok(Target::Loc(l)) => {
                            (0..s.th.len()).all(|u| u == t || !self.may_write(s, u, l))
                        }
                        _ => false,
                    }
                }
                _ => true,
            }
        })
    }

    /// May thread `u`, from its state in `s`, still write location `l`?
    /// Yes if a store or read-modify-write left in its code has `l` as
    /// its address, or an address it cannot tell yet: one computed from a
    /// register some instruction before it (from the current one on) may
    /// write. A TLBI left counts as a write of anything.
    fn may_write(&self, s: &State, u: usize, l: usize) -> bool {
        let th = &s.th[u];
        let code = &self.test.threads[u].code;
        let mut written: Vec<Reg> = Vec::new();
        for ins in code.iter().skip(th.pc) {
            let addr = match *ins {
                Instr::Store { addr, .. } | Instr::Rmw { addr, .. } => Some(addr),
                Instr::Tlbi { .. } => return true,
                _ => None,
            };
            if let Some(addr) = addr {
                let moved = |o: Operand| matches!(o, Operand::Reg(r) if written.contains(&r));
                if moved(addr.base) || moved(addr.offset) {
                    return true;
                }
                let (a, _) = self.address(th, addr);
                if !matches!(self.target(a), Ok(Target::Loc(x)) if x != l) {
                    return true;
                }
            }
            match *ins {
                Instr::Alu { dst, .. } | Instr::Csel { dst, .. } => written.push(dst),
                Instr::Load { dst: Some(d), .. } | Instr::Rmw { dst: Some(d), .. } => {
                    written.push(d)
                }
                _ => {}
            }
        }
        false
    }

    fn outcome(&self, s: &State) -> Outcome {
        let regs =
            s.th.iter()
                .map(|t| t.regs.iter().map(|r| r.0).collect())
                .collect();
        let mem = (0..s.mem.locs()).map(|l| s.mem.last(l)).collect();
        let faults = s.th.iter().map(|t| t.faults.clone()).collect();
        (regs, mem, faults)
    }

    /// Where address `a` leads.
    fn target(&self, a: i64) -> Result<Target, String> {
        let find = |base: i64| self.addr.iter().position(|&x| base + x == a);
        let n = self.nlocs();
        match (self.test.vmsa.is_some(), find(0)) {
            (false, Some(l)) => return Ok(Target::Loc(l)),
            (true, Some(l)) => return Ok(Target::Virt(l)),
            _ => {}
        }
        if self.test.vmsa.is_some() {
            if let Some(l) = find(PTE_BASE) {
                return Ok(Target::Loc(n + l));
            }
            if let Some(l) = find(PA_BASE) {
                return Ok(Target::Loc(l));
            }
        }
        Err(format!("an access to address {a:#x}, which is no location"))
    }
}

fn operand(p: &Prog, th: &TState, o: Operand) -> (i64, View) {
    match o {
        Operand::Reg(r) => th.regs[r],
        Operand::Imm(v) => (v, 0),
        Operand::Zero => (0, 0),
        Operand::Sym(l) => (p.addr[l], 0),
    }
}

/// The pick view of operand `o` ([`TState::picks`]).
fn pick_of(th: &TState, o: Operand) -> View {
    match o {
        Operand::Reg(r) => th.picks[r],
        _ => 0,
    }
}

/// The pick view of address `addr`.
fn addr_pick(th: &TState, addr: Addr) -> View {
    pick_of(th, addr.base).max(pick_of(th, addr.offset))
}

/// The value an atomic `op` writes and its data view, from the old value
/// and its read's post-view, the source operand and a `CAS`'s expected
/// value. `None`: a `CAS` that compares unequal writes nothing.
fn rmw_value(
    op: RmwOp,
    (old, post): (i64, View),
    (sv, vs): (i64, View),
    expected: Option<(i64, View)>,
) -> Option<(i64, View)> {
    Some(match (op, expected) {
        (RmwOp::Swap, _) => (sv, vs),
        (RmwOp::Add, _) => (old.wrapping_add(sv), vs.max(post)),
        (RmwOp::Set, _) => (old | sv, vs.max(post)),
        (RmwOp::Clr, _) => (old & !sv, vs.max(post)),
        (RmwOp::Cas { .. }, Some((e, _))) if e != old => return None,
        (RmwOp::Cas { .. }, e) => (sv, vs.max(post).max(e.map_or(0, |e| e.1))),
    })
}

fn alu(op: AluOp, a: i64, b: i64) -> i64 {
    match op {
        AluOp::Add => a.wrapping_add(b),
        AluOp::Sub => a.wrapping_sub(b),
        AluOp::And => a & b,
        AluOp::Or => a | b,
        AluOp::Xor => a ^ b,
        AluOp::Bic => a & !b,
        AluOp::Mov => a,
        AluOp::Lsr => ((a as u64).checked_shr(b as u32).unwrap_or(0)) as i64,
        AluOp::Lsl => ((a as u64).checked_shl(b as u32).unwrap_or(0)) as i64,
    }
}

fn holds(c: Cond, a: i64, b: i64) -> bool {
    match c {
        Cond::Eq => a == b,
        Cond::Ne => a != b,
        Cond::Lt => a < b,
        Cond::Ge => a >= b,
        Cond::Gt => a > b,
        Cond::Le => a <= b,
    }
}

fn set_reg(th: &mut TState, dst: Option<usize>, v: (i64, View)) {
    if let Some(r) = dst {
        th.regs[r] = v;
        th.picks[r] = 0;
    }
}

impl Prog<'_> {
    /// Every state thread `t` can reach by running its next instruction.
    fn step(&self, s: &State, t: usize) -> Result<Vec<State>, String> {
        if self.done(t, &s.th[t]) {
            return Ok(Vec::new());
        }
        let ins = self.test.threads[t].code[s.th[t].pc];
        let mut n = s.clone();
        n.th[t].pc += 1;
        match ins {
            Instr::Load { addr, .. } | Instr::Store { addr, .. } | Instr::Rmw { addr, .. } => {
                return self.access(n, t, ins, addr)
            }
            Instr::Tlbi { page, broadcast } => return Ok(self.tlbi(n, t, page, broadcast)),
            Instr::Fence(Fence::Dsb {
                pred_r: true,
                pred_w: true,
                ..
            }) => {
                let State { mem, th, .. } = &mut n;
                if !vmsa::complete_tlbis(&mut th[t].tv, mem, t) {
                    return Ok(Vec::new());
                }
                self.local(&mut n.th[t], ins)
            }
            _ => self.local(&mut n.th[t], ins),
        }
        Ok(vec![n])
    }

    /// A memory instruction with address `addr`: directly at a location,
    /// or (VMSA) through a translation of a virtual address.
    fn access(&self, n: State, t: usize, ins: Instr, addr: Addr) -> Result<Vec<State>, String> {
        let (a, vaddr) = self.address(&n.th[t], addr);
        match self.target(a)? {
            Target::Loc(loc) if self.phantom(ins, loc) => {
                Ok(self.with_phantom(n, t, ins, loc, vaddr))
            }
            Target::Loc(loc) => Ok(self
                .explicit(n, t, ins, loc, vaddr)
                .into_iter()
                .map(|x| x.0)
                .collect()),
            Target::Virt(va) => self.translated(n, t, ins, va, vaddr),
        }
    }

    /// May `ins`, an explicit access to `loc`, come with a spurious AF
    /// update ([`vmsa::phantoms`])? When `loc` is an entry and some thread
    /// manages AF or DB in hardware (herd7's `some_ha`).
    fn phantom(&self, ins: Instr, loc: usize) -> bool {
        let hw = self
            .test
            .vmsa
            .as_ref()
            .is_some_and(|v| v.ha.iter().chain(&v.hd).any(|&b| b));
        hw && loc >= self.nlocs()
            && matches!(
                ins,
                Instr::Load { .. } | Instr::Store { .. } | Instr::Rmw { .. }
            )
    }

    /// The explicit access of `ins` to entry `loc` with no spurious AF
    /// update, one before it, or one after it.
    fn with_phantom(&self, n: State, t: usize, ins: Instr, loc: usize, vaddr: View) -> Vec<State> {
        let spurious = |s: &State| -> Vec<State> {
            vmsa::phantoms(&s.th[t].tv, &s.mem, t, loc)
                .into_iter()
                .map(|(tv, mem)| {
                    let mut x = s.clone();
                    x.th[t].tv = tv;
                    x.mem = mem;
                    x
                })
                .collect()
        };
        let mut out = Vec::new();
        for before in std::iter::once(n.clone()).chain(spurious(&n)) {
            for (x, _) in self.explicit(before, t, ins, loc, vaddr) {
                out.extend(spurious(&x));
                out.push(x);
            }
        }
        out
    }

    /// The explicit access of `ins` to `loc`: each state, with the view
    /// at which the access used its translation (a read's post-view, a
    /// write's timestamp).
    fn explicit(
        &self,
        n: State,
        t: usize,
        ins: Instr,
        loc: usize,
        vaddr: View,
    ) -> Vec<(State, View)> {
        // A picked address orders the write it addresses and every later
        // write (`pick-addr-dep; [W]`, `pick-addr-dep; [M & Exp]; po; [W]`),
        // not the read itself.
        let p = match ins {
            Instr::Load { addr, .. } | Instr::Store { addr, .. } | Instr::Rmw { addr, .. } => {
                addr_pick(&n.th[t], addr)
            }
            _ => 0,
        };
        let mut out = match ins {
            Instr::Load { dst, kind, .. } => self.load(n, t, dst, loc, vaddr, kind),
            Instr::Store { src, kind, .. } => self.store(n, t, src, loc, vaddr.max(p), kind),
            Instr::Rmw { .. } => self.rmw(n, t, ins, loc, (vaddr, p)),
            _ => Vec::new(),
        };
        for (x, _) in &mut out {
            wmm::pick_addr(&mut x.th[t].tv, p);
        }
        out
    }

    /// Hardware management for thread `t` (`TTHM`).
    fn tthm(&self, t: usize) -> Tthm {
        self.test.vmsa.as_ref().map_or(Tthm::default(), |v| {
            let hd = v.hd.get(t).copied().unwrap_or(false);
            Tthm {
                ha: hd || v.ha.get(t).copied().unwrap_or(false),
                hd,
            }
        })
    }

    /// VMSA: `ins` at virtual address of location `va`: every walk of its
    /// entry ([`vmsa::walk_choices`]), then the access through the entry
    /// (if its translation is still usable then, [`vmsa::usable`]), or
    /// the fault.
    fn translated(
        &self,
        n: State,
        t: usize,
        ins: Instr,
        va: usize,
        vaddr: View,
    ) -> Result<Vec<State>, String> {
        let write = !matches!(ins, Instr::Load { .. });
        let w = vmsa::Walk {
            pte: self.nlocs() + va,
            vaddr,
            write,
            tthm: self.tthm(t),
        };
        let mut out = Vec::new();
        for c in vmsa::walk_choices(&n.th[t].tv, &n.mem, t, &w) {
            let mut m = n.clone();
            let desc = match c.outcome {
                vmsa::Outcome::Ok(d) => d,
                vmsa::Outcome::Update(d) => {
                    let State { mem, th, .. } = &mut m;
                    if vmsa::hw_update(&mut th[t].tv, mem, t, &w, &c, d).is_none() {
                        let m = Msg::write(w.pte, d.encode(), t);
                        let mut early = self.early_updates.borrow_mut();
                        if !early.contains(&m) {
                            early.push(m);
                        }
                        continue;
                    }
                    d
                }
                vmsa::Outcome::Fault(k) => {
                    out.extend(self.fault(m, t, va, &w, &c, k));
                    continue;
                }
            };
            vmsa::walked(&mut m.th[t].tv, w.pte, &c);
            let loc = desc.oa as usize;
            for (x, used) in self.explicit(m, t, ins, loc, vaddr.max(c.tf)) {
                if vmsa::usable(&x.mem, t, w.pte, c.tf, used) {
                    out.push(x);
                }
            }
        }
        Ok(out)
    }

    /// The fault of `ins` (at walk choice `c`): recorded, then the
    /// thread's handler runs (exception entry, [`vmsa::take_fault`]), or
    /// the thread ends (no handler, or `Variant=fatal`).
    fn fault(
        &self,
        mut m: State,
        t: usize,
        va: usize,
        w: &vmsa::Walk,
        c: &vmsa::Choice,
        k: vmsa::FaultKind,
    ) -> Option<State> {
        let th = &mut m.th[t];
        let v = vmsa::fault_view(&th.tv, w.vaddr, c.tf);
        if !vmsa::fault_ok(&m.mem, t, w.pte, c, v) {
            return None;
        }
        let kind = match k {
            vmsa::FaultKind::Translation => FaultKind::Translation,
            vmsa::FaultKind::AccessFlag => FaultKind::AccessFlag,
            vmsa::FaultKind::Permission => FaultKind::Permission,
        };
        th.faults.push((th.pc - 1, va, kind));
        vmsa::walked(&mut th.tv, w.pte, c);
        let code = &self.test.threads[t];
        // The address, picked or not, decides the exception entry (the
        // branch `B` of `tr-ib`): `ctrl; [CSE]`, `pick-ctrl-dep; [CSE]`.
        let pick = match code.code[th.pc - 1] {
            Instr::Load { addr, .. } | Instr::Store { addr, .. } | Instr::Rmw { addr, .. } => {
                addr_pick(th, addr)
            }
            _ => 0,
        };
        let fatal = self.test.vmsa.as_ref().is_some_and(|v| v.fatal);
        if th.handler || fatal || code.main_len == code.code.len() {
            th.pc = code.code.len();
        } else {
            th.pc = code.main_len;
            vmsa::take_fault(&mut th.tv, w.vaddr.max(pick), c.tf);
        }
        th.handler = true;
        Some(m)
    }

    /// `TLBI` of the page in `page` (or every page) ([`vmsa::tlbi`]).
    fn tlbi(&self, mut n: State, t: usize, page: Option<Operand>, broadcast: bool) -> Vec<State> {
        let (pte, vaddr) = match page {
            None => (vmsa::ALL, 0),
            Some(o) => {
                let (p, v) = operand(self, &n.th[t], o);
                // `pick-addr-dep; TLBI` (`pob`).
                let v = v.max(pick_of(&n.th[t], o));
                let va = p.wrapping_mul(LOC_STRIDE);
                match self.addr.iter().position(|&x| x == va) {
                    Some(l) => (self.nlocs() + l, v),
                    None => (vmsa::ALL - 1, v),
                }
            }
        };
        let State { mem, th, .. } = &mut n;
        match vmsa::tlbi(&mut th[t].tv, mem, t, pte, broadcast, vaddr) {
            Some(_) => vec![n],
            None => Vec::new(),
        }
    }

    /// An instruction that touches no memory.
    fn local(&self, th: &mut TState, ins: Instr) {
        match ins {
            Instr::Nop
            | Instr::Load { .. }
            | Instr::Store { .. }
            | Instr::Rmw { .. }
            | Instr::Tlbi { .. } => {}
            Instr::Alu {
                dst,
                op,
                a: x,
                b: y,
            } => {
                let ((a, va), (b, vb)) = (operand(self, th, x), operand(self, th, y));
                th.regs[dst] = (alu(op, a, b), va.max(vb));
                th.picks[dst] = pick_of(th, x).max(pick_of(th, y));
            }
            Instr::Cmp { a: x, b: y } => {
                let ((a, va), (b, vb)) = (operand(self, th, x), operand(self, th, y));
                th.flags = (a, b, va.max(vb));
                th.flags_pick = pick_of(th, x).max(pick_of(th, y));
            }
            Instr::Csel {
                dst,
                a: x,
                b: y,
                cond,
            } => self.csel(th, dst, (x, y), cond),
            Instr::Fence(f) => self.fence(th, f),
            Instr::Branch { cond, target } => {
                // A branch on a picked value is a control dependency all
                // the same (`pick-ctrl-dep` orders what `ctrl` does).
                let (taken, v) = match cond {
                    BranchCond::Always => (true, 0),
                    BranchCond::Flags(c) => (
                        holds(c, th.flags.0, th.flags.1),
                        th.flags.2.max(th.flags_pick),
                    ),
                    BranchCond::Cmp(x, y, c) => {
                        let ((a, va), (b, vb)) = (operand(self, th, x), operand(self, th, y));
                        let p = pick_of(th, x).max(pick_of(th, y));
                        (holds(c, a, b), va.max(vb).max(p))
                    }
                };
                wmm::branch(&mut th.tv, v);
                if taken {
                    th.pc = target;
                }
            }
        }
    }

    /// `CSEL dst, a, b, cond` (and `CSET`): the chosen operand's value
    /// and view; the condition's views (and every pick view involved)
    /// become the result's pick view, not its view: herd7's
    /// `pick-basic-dep` orders only later writes (`[Exp]; pick-dep; [W]`,
    /// `pick-addr-dep; [M & Exp]; po; [W]`, `pick-lob`), what follows a
    /// context synchronisation, and TLBIs (`pob` of `aarch64hwreqs.cat`),
    /// not reads nor faults.
    fn csel(&self, th: &mut TState, dst: usize, (x, y): (Operand, Operand), cond: Cond) {
        let (a, b) = (operand(self, th, x), operand(self, th, y));
        let chosen = if holds(cond, th.flags.0, th.flags.1) {
            a
        } else {
            b
        };
        th.regs[dst] = chosen;
        let picks = pick_of(th, x).max(pick_of(th, y));
        th.picks[dst] = picks.max(th.flags.2).max(th.flags_pick);
    }

    fn fence(&self, th: &mut TState, f: Fence) {
        match f {
            Fence::Order {
                pred_r,
                pred_w,
                succ_r,
                succ_w,
            }
            | Fence::Dsb {
                pred_r,
                pred_w,
                succ_r,
                succ_w,
            } => {
                let b = Barrier {
                    pred_r,
                    pred_w,
                    succ_r,
                    succ_w,
                };
                if matches!(f, Fence::Dsb { .. }) {
                    wmm::dsb(&mut th.tv, b)
                } else {
                    wmm::barrier(&mut th.tv, b)
                }
            }
            Fence::Tso => wmm::fence_tso(&mut th.tv),
            Fence::Isb | Fence::FenceI => wmm::isb(&mut th.tv),
        }
    }

    /// The address `addr` names and its view.
    fn address(&self, th: &TState, addr: Addr) -> (i64, View) {
        let (b, vb) = operand(self, th, addr.base);
        let (o, vo) = operand(self, th, addr.offset);
        (b.wrapping_add(o), vb.max(vo))
    }

    /// The model's kind of a load (`atomic`: of an atomic read-modify-write).
    /// x86 loads are all RCpc acquires; RISC-V's `.aq` is RCsc only on
    /// AMOs (RVWMO rule 7; `lw.aq` is RCpc in herd7's riscv.cat).
    fn read_kind(&self, k: LoadKind, atomic: bool) -> ReadKind {
        match (self.test.arch, k) {
            (Arch::X86, _) | (_, LoadKind::AcquirePc) => ReadKind::AcquirePc,
            (_, LoadKind::Plain) => ReadKind::Plain,
            (Arch::RiscV, LoadKind::Acquire) if !atomic => ReadKind::AcquirePc,
            (_, LoadKind::Acquire) => ReadKind::Acquire,
        }
    }

    /// Is a store of kind `k` a release, and an RCsc one? (x86 stores are
    /// all releases; RISC-V's `.rl` is RCsc only on AMOs.)
    fn release(&self, k: StoreKind, atomic: bool) -> (bool, bool) {
        match (self.test.arch, k) {
            (Arch::X86, _) => (true, false),
            (_, StoreKind::Plain) => (false, false),
            (Arch::RiscV, StoreKind::Release) => (true, atomic),
            (_, StoreKind::Release) => (true, true),
        }
    }

    fn load(
        &self,
        n: State,
        t: usize,
        dst: Option<usize>,
        loc: usize,
        vaddr: View,
        kind: LoadKind,
    ) -> Vec<(State, View)> {
        let r = Read {
            loc,
            vaddr,
            kind: self.read_kind(kind, false),
            noret: false,
        };
        wmm::read_choices(&n.th[t].tv, &n.mem, &r)
            .into_iter()
            .map(|ts| {
                let mut m = n.clone();
                let v = wmm::read_at(&mut m.th[t].tv, &m.mem, &r, ts);
                set_reg(&mut m.th[t], dst, v);
                (m, v.1)
            })
            .collect()
    }

    /// A write request of kind `k` (`atomic`: of a read-modify-write).
    fn write_req(
        &self,
        loc: usize,
        val: i64,
        vaddr: View,
        vdata: View,
        k: StoreKind,
        atomic: bool,
    ) -> Write {
        let (release, release_sc) = self.release(k, atomic);
        Write {
            loc,
            val,
            vaddr,
            vdata,
            release,
            release_sc,
            atomic_read: None,
        }
    }

    fn store(
        &self,
        mut n: State,
        t: usize,
        src: Operand,
        loc: usize,
        vaddr: View,
        kind: StoreKind,
    ) -> Vec<(State, View)> {
        let (val, vdata) = operand(self, &n.th[t], src);
        let vdata = vdata.max(pick_of(&n.th[t], src));
        let w = self.write_req(loc, val, vaddr, vdata, kind, false);
        let State { mem, th, .. } = &mut n;
        match wmm::write(&mut th[t].tv, mem, t, &w) {
            Some(ts) => vec![(n, ts)],
            None => Vec::new(),
        }
    }
}

impl Prog<'_> {
    /// An atomic read-modify-write: the read, then (unless a `CAS`
    /// compares unequal) the write, adjacent in the location's coherence
    /// order. x86's locked forms are full barriers on both sides.
    /// An atomic's source operand, a `CAS`'s expected value, and their
    /// pick view (which orders the write only).
    fn rmw_operands(
        &self,
        th: &TState,
        op: RmwOp,
        src: Operand,
    ) -> ((i64, View), Option<(i64, View)>, View) {
        let (expected, pick) = match op {
            RmwOp::Cas { expected } => (Some(operand(self, th, expected)), pick_of(th, expected)),
            _ => (None, 0),
        };
        (operand(self, th, src), expected, pick.max(pick_of(th, src)))
    }

    /// `vaddr, pick`: the address's view and pick view (the write's only).
    fn rmw(
        &self,
        n: State,
        t: usize,
        ins: Instr,
        loc: usize,
        (vaddr, pick): (View, View),
    ) -> Vec<(State, View)> {
        let Instr::Rmw {
            op,
            dst,
            src,
            load,
            store,
            ..
        } = ins
        else {
            return Vec::new();
        };
        let locked = self.test.arch == Arch::X86;
        let r = Read {
            loc,
            vaddr,
            kind: self.read_kind(load, true),
            noret: dst.is_none() && self.test.arch == Arch::AArch64,
        };
        let mut base = n;
        if locked {
            wmm::barrier(&mut base.th[t].tv, Barrier::FULL);
        }
        let ((sv, vs), expected, data_pick) = self.rmw_operands(&base.th[t], op, src);
        let mut out = Vec::new();
        for ts in wmm::read_choices(&base.th[t].tv, &base.mem, &r) {
            let mut m = base.clone();
            let (old, post) = wmm::read_at(&mut m.th[t].tv, &m.mem, &r, ts);
            set_reg(&mut m.th[t], dst, (old, post));
            let Some((val, vdata)) = rmw_value(op, (old, post), (sv, vs), expected) else {
                out.push((m, post));
                continue;
            };
            let (release, release_sc) = self.release(store, true);
            let w = Write {
                loc,
                val,
                vaddr: vaddr.max(pick),
                vdata: vdata.max(data_pick),
                release,
                release_sc,
                atomic_read: Some((ts, post)),
            };
            let State { mem, th, .. } = &mut m;
            if let Some(tw) = wmm::write(&mut th[t].tv, mem, t, &w) {
                if self.test.arch == Arch::AArch64 && r.kind == ReadKind::Acquire && release_sc {
                    wmm::amo_acq_rel(&mut th[t].tv, tw);
                }
                if locked {
                    wmm::barrier(&mut th[t].tv, Barrier::FULL);
                }
                out.push((m, tw));
            }
        }
        out
    }

    /// Messages thread `t` may still add (a bound on its promises):
    /// writes, and with VMSA TLBIs (issue and completion, also of those
    /// issued and pending) and hardware updates (any access may make one
    /// under `TTHM`).
    fn writes_left(&self, th: &TState, t: usize) -> usize {
        let hw = self.tthm(t);
        let hw = hw.ha || hw.hd;
        let spurious = self
            .test
            .vmsa
            .as_ref()
            .is_some_and(|v| v.ha.iter().chain(&v.hd).any(|&b| b));
        self.test.threads[t].code[th.pc.min(self.test.threads[t].code.len())..]
            .iter()
            .map(|i| match i {
                Instr::Tlbi { .. } => 2,
                Instr::Rmw { .. } => 1 + usize::from(hw) + usize::from(spurious),
                Instr::Load { .. } => usize::from(hw) + usize::from(spurious),
                Instr::Store { .. } => 1 + usize::from(hw) + usize::from(spurious),
                _ => 0,
            })
            .sum::<usize>()
            + th.tv.pending_tlbis()
    }

    /// States after one certified promise of thread `t`.
    fn promises(&self, s: &State, t: usize) -> Result<Vec<State>, String> {
        if s.th[t].tv.promises().len() >= self.writes_left(&s.th[t], t) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for msg in self.local_writes(s, t)? {
            let mut n = s.clone();
            let State { mem, th, .. } = &mut n;
            th[t].tv.promise(mem, msg);
            if self.certified(&n, t)? {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// Every state thread `t` reaches running alone from `s`, visited in
    /// turn by `f`, which returns true to stop.
    fn alone(
        &self,
        s: &State,
        t: usize,
        mut f: impl FnMut(&State, &State) -> bool,
    ) -> Result<bool, String> {
        let mut seen = FxHashSet::default();
        let mut stack = vec![s.clone()];
        while let Some(x) = stack.pop() {
            if !seen.insert(x.th[t].clone()) {
                continue;
            }
            for n in self.step(&x, t)? {
                if f(&x, &n) {
                    return Ok(true);
                }
                stack.push(n);
            }
        }
        Ok(false)
    }

    /// Every new message (write, TLBI, hardware update) thread `t` can
    /// add running alone from `s`, and the hardware updates it could make
    /// only early (`early_updates`): the messages it could promise.
    fn local_writes(&self, s: &State, t: usize) -> Result<Vec<Msg>, String> {
        let mut out = Vec::new();
        self.alone(s, t, |x, n| {
            for ts in x.mem.len() + 1..=n.mem.len() {
                if let Some(m) = n.mem.msg(ts) {
                    if !out.contains(m) {
                        out.push(*m);
                    }
                }
            }
            false
        })?;
        for m in self.early_updates.borrow().iter() {
            if m.tid == t && !out.contains(m) {
                out.push(*m);
            }
        }
        Ok(out)
    }

    /// Can thread `t`, running alone from `s`, fulfil all its promises?
    fn certified(&self, s: &State, t: usize) -> Result<bool, String> {
        if s.th[t].tv.promises().is_empty() {
            return Ok(true);
        }
        self.alone(s, t, |_, n| n.th[t].tv.promises().is_empty())
    }

    fn verdict(&self, outcomes: &FxHashSet<Outcome>) -> Result<Verdict, String> {
        if outcomes.is_empty() {
            return Err("no execution completes".into());
        }
        let mut sat = 0;
        for o in outcomes {
            if self.eval(&self.test.cond, o)? {
                sat += 1;
            }
        }
        Ok(match self.test.quant {
            Quant::Exists | Quant::NotExists if sat > 0 => Verdict::Allowed,
            Quant::Exists | Quant::NotExists => Verdict::Forbidden,
            // herd7 names a `forall` test's result by how many final
            // states satisfy it: always (Required), sometimes (Allowed),
            // never (Forbidden).
            Quant::Forall if sat == outcomes.len() => Verdict::Required,
            Quant::Forall if sat > 0 => Verdict::Allowed,
            Quant::Forall => Verdict::Forbidden,
        })
    }

    fn eval(&self, p: &Prop, o: &Outcome) -> Result<bool, String> {
        Ok(match p {
            Prop::True => true,
            Prop::False => false,
            Prop::Eq(Atom::Reg { thread, reg }, v) => {
                let got = o.0.get(*thread).and_then(|r| r.get(*reg));
                got == Some(&self.value(v)?)
            }
            Prop::Eq(Atom::Mem(name), v) => {
                let l = self.loc_named(name)?;
                o.1[l] == self.value_of(v, Some(l))?
            }
            Prop::Eq(Atom::Pte(name), v) => {
                let l = self.loc_named(name)?;
                let got = o.1.get(self.nlocs() + l).ok_or("an entry without VMSA")?;
                *got == self.value_of(v, Some(l))?
            }
            Prop::Fault {
                thread,
                at,
                loc,
                kind,
            } => {
                let loc = loc.as_deref().map(|x| self.loc_named(x)).transpose()?;
                o.2.get(*thread).is_some_and(|fs| {
                    fs.iter().any(|&(pc, l, k)| {
                        at.is_none_or(|a| a == pc)
                            && loc.is_none_or(|x| x == l)
                            && kind.is_none_or(|x| x == k)
                    })
                })
            }
            Prop::Not(q) => !self.eval(q, o)?,
            Prop::And(qs) => {
                for q in qs {
                    if !self.eval(q, o)? {
                        return Ok(false);
                    }
                }
                true
            }
            Prop::Or(qs) => {
                for q in qs {
                    if self.eval(q, o)? {
                        return Ok(true);
                    }
                }
                false
            }
        })
    }
}
