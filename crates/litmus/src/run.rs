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
    AluOp, Arch, Atom, BranchCond, Cond, Fence, Instr, LoadKind, Operand, Prop, Quant, RmwOp,
    StoreKind, Test, Value,
};
use kernel::hw::wmm::{self, Barrier, Memory, Msg, Read, ReadKind, ThreadView, View, Write};
use rustc_hash::FxHashSet;

/// The model's answer for one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Verdict {
    Allowed,
    Forbidden,
    Required,
    /// A `forall` whose proposition fails in some final state.
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

/// Register values and memory of a final state.
type Outcome = (Vec<Vec<i64>>, Vec<i64>);

/// The compiled test: locations as dense ids with addresses.
struct Prog<'a> {
    test: &'a Test,
    arch: machine::scenario::Arch,
    /// The address of each location (`Test::locs` order).
    addr: Vec<i64>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct TState {
    pc: usize,
    regs: Vec<(i64, View)>,
    /// The operands of the last `Cmp` and their view.
    flags: (i64, i64, View),
    tv: ThreadView,
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

/// Run `test` exhaustively. `Err`: the test does something the model
/// cannot express (an access to an address that is no location, a loop),
/// or exceeds [`MAX_STATES`].
pub fn run(test: &Test) -> Result<RunResult, String> {
    let prog = Prog::new(test)?;
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
    let verdict = prog.verdict(&outcomes)?;
    Ok(RunResult {
        verdict,
        outcomes: outcomes.len(),
        states: seen.len(),
    })
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
        })
    }

    fn value(&self, v: &Value) -> Result<i64, String> {
        match v {
            Value::Int(i) => Ok(*i),
            Value::Loc(name) => self.loc_named(name).map(|l| self.addr[l]),
        }
    }

    fn loc_named(&self, name: &str) -> Result<usize, String> {
        self.test
            .locs
            .iter()
            .position(|l| l == name)
            .ok_or_else(|| format!("unknown location {name:?}"))
    }

    fn initial(&self) -> Result<State, String> {
        let mut init = vec![0; self.test.locs.len()];
        for (name, v) in &self.test.init_mem {
            init[self.loc_named(name)?] = self.value(v)?;
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
                tv: ThreadView::new(self.arch, init.len()),
            });
        }
        Ok(State {
            mem: Memory::new(init),
            th,
            promising: true,
        })
    }

    fn done(&self, t: usize, th: &TState) -> bool {
        th.pc >= self.test.threads[t].code.len()
    }

    fn outcome(&self, s: &State) -> Outcome {
        let regs =
            s.th.iter()
                .map(|t| t.regs.iter().map(|r| r.0).collect())
                .collect();
        let mem = (0..s.mem.locs()).map(|l| s.mem.last(l)).collect();
        (regs, mem)
    }

    /// The location at address `a`.
    fn loc_at(&self, a: i64) -> Result<usize, String> {
        self.addr
            .iter()
            .position(|&x| x == a)
            .ok_or_else(|| format!("an access to address {a:#x}, which is no location"))
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

fn alu(op: AluOp, a: i64, b: i64) -> i64 {
    match op {
        AluOp::Add => a.wrapping_add(b),
        AluOp::Sub => a.wrapping_sub(b),
        AluOp::And => a & b,
        AluOp::Or => a | b,
        AluOp::Xor => a ^ b,
        AluOp::Mov => a,
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
            Instr::Load { dst, addr, kind } => return self.load(n, t, dst, addr, kind),
            Instr::Store { src, addr, kind } => return self.store(n, t, src, addr, kind),
            Instr::Rmw { .. } => return self.rmw(n, t, ins),
            _ => self.local(&mut n.th[t], ins),
        }
        Ok(vec![n])
    }

    /// An instruction that touches no memory.
    fn local(&self, th: &mut TState, ins: Instr) {
        match ins {
            Instr::Nop | Instr::Load { .. } | Instr::Store { .. } | Instr::Rmw { .. } => {}
            Instr::Alu { dst, op, a, b } => {
                let ((a, va), (b, vb)) = (operand(self, th, a), operand(self, th, b));
                th.regs[dst] = (alu(op, a, b), va.max(vb));
            }
            Instr::Cmp { a, b } => {
                let ((a, va), (b, vb)) = (operand(self, th, a), operand(self, th, b));
                th.flags = (a, b, va.max(vb));
            }
            Instr::Csel { dst, a, b, cond } => {
                let ((a, va), (b, vb)) = (operand(self, th, a), operand(self, th, b));
                let pick = if holds(cond, th.flags.0, th.flags.1) {
                    a
                } else {
                    b
                };
                th.regs[dst] = (pick, va.max(vb));
            }
            Instr::Fence(f) => self.fence(th, f),
            Instr::Branch { cond, target } => {
                let (taken, v) = match cond {
                    BranchCond::Always => (true, 0),
                    BranchCond::Flags(c) => (holds(c, th.flags.0, th.flags.1), th.flags.2),
                    BranchCond::Cmp(a, b, c) => {
                        let ((a, va), (b, vb)) = (operand(self, th, a), operand(self, th, b));
                        (holds(c, a, b), va.max(vb))
                    }
                };
                wmm::branch(&mut th.tv, v);
                if taken {
                    th.pc = target;
                }
            }
        }
    }

    fn fence(&self, th: &mut TState, f: Fence) {
        match f {
            Fence::Order {
                pred_r,
                pred_w,
                succ_r,
                succ_w,
            } => wmm::barrier(
                &mut th.tv,
                Barrier {
                    pred_r,
                    pred_w,
                    succ_r,
                    succ_w,
                },
            ),
            Fence::Tso => wmm::fence_tso(&mut th.tv),
            Fence::Isb | Fence::FenceI => wmm::isb(&mut th.tv),
        }
    }

    /// The location and address view of `addr`.
    fn address(&self, th: &TState, addr: crate::ast::Addr) -> Result<(usize, View), String> {
        let (b, vb) = operand(self, th, addr.base);
        let (o, vo) = operand(self, th, addr.offset);
        Ok((self.loc_at(b.wrapping_add(o))?, vb.max(vo)))
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
        addr: crate::ast::Addr,
        kind: LoadKind,
    ) -> Result<Vec<State>, String> {
        let (loc, vaddr) = self.address(&n.th[t], addr)?;
        let r = Read {
            loc,
            vaddr,
            kind: self.read_kind(kind, false),
            noret: false,
        };
        Ok(wmm::read_choices(&n.th[t].tv, &n.mem, &r)
            .into_iter()
            .map(|ts| {
                let mut m = n.clone();
                let v = wmm::read_at(&mut m.th[t].tv, &m.mem, &r, ts);
                set_reg(&mut m.th[t], dst, v);
                m
            })
            .collect())
    }

    fn store(
        &self,
        mut n: State,
        t: usize,
        src: Operand,
        addr: crate::ast::Addr,
        kind: StoreKind,
    ) -> Result<Vec<State>, String> {
        let (loc, vaddr) = self.address(&n.th[t], addr)?;
        let (val, vdata) = operand(self, &n.th[t], src);
        let (release, release_sc) = self.release(kind, false);
        let w = Write {
            loc,
            val,
            vaddr,
            vdata,
            release,
            release_sc,
            atomic_read: None,
        };
        let State { mem, th, .. } = &mut n;
        Ok(match wmm::write(&mut th[t].tv, mem, t, &w) {
            Some(_) => vec![n],
            None => Vec::new(),
        })
    }
}

impl Prog<'_> {
    /// An atomic read-modify-write: the read, then (unless a `CAS`
    /// compares unequal) the write, adjacent in the location's coherence
    /// order. x86's locked forms are full barriers on both sides.
    fn rmw(&self, n: State, t: usize, ins: Instr) -> Result<Vec<State>, String> {
        let Instr::Rmw {
            op,
            dst,
            src,
            addr,
            load,
            store,
        } = ins
        else {
            return Ok(Vec::new());
        };
        let locked = self.test.arch == Arch::X86;
        let (loc, vaddr) = self.address(&n.th[t], addr)?;
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
        let (sv, vs) = operand(self, &base.th[t], src);
        let expected = match op {
            RmwOp::Cas { expected } => Some(operand(self, &base.th[t], expected)),
            _ => None,
        };
        let mut out = Vec::new();
        for ts in wmm::read_choices(&base.th[t].tv, &base.mem, &r) {
            let mut m = base.clone();
            let (old, post) = wmm::read_at(&mut m.th[t].tv, &m.mem, &r, ts);
            set_reg(&mut m.th[t], dst, (old, post));
            let (val, vdata) = match (op, expected) {
                (RmwOp::Swap, _) => (sv, vs),
                (RmwOp::Add, _) => (old.wrapping_add(sv), vs.max(post)),
                (RmwOp::Cas { .. }, Some((e, _))) if e != old => {
                    out.push(m);
                    continue;
                }
                (RmwOp::Cas { .. }, e) => (sv, vs.max(post).max(e.map_or(0, |e| e.1))),
            };
            let (release, release_sc) = self.release(store, true);
            let w = Write {
                loc,
                val,
                vaddr,
                vdata,
                release,
                release_sc,
                atomic_read: Some((ts, post)),
            };
            let State { mem, th, .. } = &mut m;
            if wmm::write(&mut th[t].tv, mem, t, &w).is_some() {
                if locked {
                    wmm::barrier(&mut th[t].tv, Barrier::FULL);
                }
                out.push(m);
            }
        }
        Ok(out)
    }

    /// Writes thread `t` may still perform (a bound on its promises).
    fn writes_left(&self, th: &TState, t: usize) -> usize {
        self.test.threads[t].code[th.pc.min(self.test.threads[t].code.len())..]
            .iter()
            .filter(|i| matches!(i, Instr::Store { .. } | Instr::Rmw { .. }))
            .count()
    }

    /// States after one certified promise of thread `t`.
    fn promises(&self, s: &State, t: usize) -> Result<Vec<State>, String> {
        if s.th[t].tv.promises().len() >= self.writes_left(&s.th[t], t) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (loc, val) in self.local_writes(s, t)? {
            let mut n = s.clone();
            let State { mem, th, .. } = &mut n;
            th[t].tv.promise(mem, Msg { loc, val, tid: t });
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

    /// The (location, value) of every new write thread `t` can make running
    /// alone from `s`: the messages it could promise.
    fn local_writes(&self, s: &State, t: usize) -> Result<Vec<(usize, i64)>, String> {
        let mut out = Vec::new();
        self.alone(s, t, |x, n| {
            if n.mem.len() > x.mem.len() {
                if let Some(m) = n.mem.msg(n.mem.len()) {
                    if !out.contains(&(m.loc, m.val)) {
                        out.push((m.loc, m.val));
                    }
                }
            }
            false
        })?;
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
            Quant::Forall if sat == outcomes.len() => Verdict::Required,
            Quant::Forall => Verdict::NotRequired,
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
            Prop::Eq(Atom::Mem(name), v) => o.1[self.loc_named(name)?] == self.value(v)?,
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
