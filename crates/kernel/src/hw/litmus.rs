//! A tiny exhaustive explorer over the store-buffer core
//! ([`crate::hw::memory_model`]), for litmus tests.
//!
//! Each thread is a list of loads, stores and barriers. A step either
//! executes one thread's next instruction or drains one buffered store the
//! model lets drain. Under TSO and SC instructions execute in program
//! order. Under the weak model a load may also execute before earlier
//! loads of other locations and before earlier store-store barriers
//! (load->load reordering, as ARMv8 and RVWMO allow without an
//! `smp_rmb()`/`dmb ishld`/`fence r,r`), and a store may execute before
//! earlier loads of other locations (load->store reordering, which gives
//! load buffering, LB, as ARMv8 and RVWMO allow); every other instruction
//! waits for all earlier ones, so any fence between a load and a later
//! store orders them. There are no dependencies (a store never depends
//! on a loaded value), so the "no thin-air" rule that forbids LB with
//! dependencies has nothing to act on. The kernel world does not have
//! load->store reordering (see docs/checker.md): only this explorer.

use crate::hw::memory_model::{Loc, MemoryModel, Order, StoreBuffer};
use std::collections::{BTreeSet, HashSet};

/// One instruction of a litmus thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instr {
    /// `WRITE_ONCE(var, val)`.
    Store(u8, u64),
    /// `reg = READ_ONCE(var)`.
    Load(u8, u8),
    Fence(Order),
}

const VARS: usize = 4;
const REGS: usize = 4;

#[derive(Clone, PartialEq, Eq, Hash)]
struct Thread {
    done: u32,
    buf: StoreBuffer,
    regs: [u64; REGS],
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    mem: [u64; VARS],
    threads: Vec<Thread>,
}

/// A final state: each thread's registers, then memory.
pub type Outcome = (Vec<[u64; REGS]>, [u64; VARS]);

fn var(l: Loc) -> usize {
    match l {
        Loc::Var(v) => v as usize,
        other => unreachable!("litmus tests use plain variables, not {other}"),
    }
}

/// May instruction `i` of `prog` execute now, given the done set?
fn ready(model: MemoryModel, prog: &[Instr], done: u32, i: usize) -> bool {
    if done & (1 << i) != 0 {
        return false;
    }
    (0..i).all(|j| {
        if done & (1 << j) != 0 {
            return true;
        }
        match (model, prog[i], prog[j]) {
            (MemoryModel::Weak, Instr::Load(vi, _), Instr::Load(vj, _)) => vi != vj,
            (MemoryModel::Weak, Instr::Load(..), Instr::Fence(Order::StoreStore)) => true,
            // Load->store: a store to another location may go into the
            // buffer (and drain) before an earlier load has read.
            (MemoryModel::Weak, Instr::Store(vi, _), Instr::Load(vj, _)) => vi != vj,
            _ => false,
        }
    })
}

fn execute(model: MemoryModel, s: &mut State, t: usize, ins: Instr) {
    let State { mem, threads } = s;
    let th = &mut threads[t];
    match ins {
        Instr::Store(v, val) if model == MemoryModel::Sc => mem[v as usize] = val,
        Instr::Store(v, val) => {
            if let Some(old) = th.buf.push(Loc::Var(v), val) {
                mem[var(old.loc)] = old.val;
            }
        }
        Instr::Load(v, r) => {
            th.regs[r as usize] = th.buf.forward(Loc::Var(v)).unwrap_or(mem[v as usize]);
        }
        Instr::Fence(o) => {
            for e in th.buf.barrier(o) {
                mem[var(e.loc)] = e.val;
            }
        }
    }
}

/// Every final state of `progs` under `model`.
pub fn outcomes(model: MemoryModel, progs: &[Vec<Instr>]) -> BTreeSet<Outcome> {
    let init = State {
        mem: [0; VARS],
        threads: progs
            .iter()
            .map(|_| Thread {
                done: 0,
                buf: StoreBuffer::default(),
                regs: [0; REGS],
            })
            .collect(),
    };
    let mut seen = HashSet::new();
    let mut stack = vec![init];
    let mut out = BTreeSet::new();
    while let Some(s) = stack.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        let mut any = false;
        for (t, prog) in progs.iter().enumerate() {
            for (i, &ins) in prog.iter().enumerate() {
                if ready(model, prog, s.threads[t].done, i) {
                    let mut n = s.clone();
                    n.threads[t].done |= 1 << i;
                    execute(model, &mut n, t, ins);
                    stack.push(n);
                    any = true;
                }
            }
            for slot in s.threads[t].buf.drainable(model) {
                let mut n = s.clone();
                let e = n.threads[t].buf.take(slot);
                n.mem[var(e.loc)] = e.val;
                stack.push(n);
                any = true;
            }
        }
        if !any {
            out.insert((s.threads.iter().map(|t| t.regs).collect(), s.mem));
        }
    }
    out
}

/// Is some final state with these registers (`(thread, reg, value)`) and
/// memory values (`(var, value)`) reachable?
pub fn allowed(
    model: MemoryModel,
    progs: &[Vec<Instr>],
    regs: &[(usize, u8, u64)],
    mem: &[(u8, u64)],
) -> bool {
    outcomes(model, progs).iter().any(|(r, m)| {
        regs.iter().all(|&(t, reg, v)| r[t][reg as usize] == v)
            && mem.iter().all(|&(x, v)| m[x as usize] == v)
    })
}

#[cfg(test)]
mod tests {
    //! The classic shapes, with herd7's verdicts for x86-TSO (x86tso.cat),
    //! AArch64 (aarch64.cat) and RISC-V (riscv.cat) in the comments.
    use super::Instr::{Fence, Load, Store};
    use super::*;
    use MemoryModel::{Sc, Tso, Weak};

    const X: u8 = 0;
    const Y: u8 = 1;

    /// SB: `x=1; r0=y || y=1; r0=x`; the relaxed outcome is both 0.
    fn sb(f: Option<Order>) -> Vec<Vec<Instr>> {
        let t = |a, b| {
            let mut p = vec![Store(a, 1)];
            p.extend(f.map(Fence));
            p.push(Load(b, 0));
            p
        };
        vec![t(X, Y), t(Y, X)]
    }
    fn sb_relaxed(m: MemoryModel, f: Option<Order>) -> bool {
        allowed(m, &sb(f), &[(0, 0, 0), (1, 0, 0)], &[])
    }

    /// MP: `x=1; [wf] y=1 || r0=y; [rf] r1=x`; relaxed: r0=1, r1=0.
    fn mp_relaxed(m: MemoryModel, wf: Option<Order>, rf: Option<Order>) -> bool {
        let mut w = vec![Store(X, 1)];
        w.extend(wf.map(Fence));
        w.push(Store(Y, 1));
        let mut r = vec![Load(Y, 0)];
        r.extend(rf.map(Fence));
        r.push(Load(X, 1));
        allowed(m, &[w, r], &[(1, 0, 1), (1, 1, 0)], &[])
    }

    /// 2+2W: `x=1; [f] y=2 || y=1; [f] x=2`; relaxed: finally x=1, y=1.
    fn two_plus_two_w(m: MemoryModel, f: Option<Order>) -> bool {
        let t = |a, b| {
            let mut p = vec![Store(a, 1)];
            p.extend(f.map(Fence));
            p.push(Store(b, 2));
            p
        };
        allowed(m, &[t(X, Y), t(Y, X)], &[], &[(X, 1), (Y, 1)])
    }

    /// LB: `r0=x; [f] y=1 || r0=y; [f] x=1`; relaxed: both read 1.
    fn lb_relaxed(m: MemoryModel, f: Option<Order>) -> bool {
        let t = |a, b| {
            let mut p = vec![Load(a, 0)];
            p.extend(f.map(Fence));
            p.push(Store(b, 1));
            p
        };
        allowed(m, &[t(X, Y), t(Y, X)], &[(0, 0, 1), (1, 0, 1)], &[])
    }

    #[test]
    fn sb_is_allowed_without_a_full_barrier() {
        // herd7: SB allowed on x86, AArch64 and RISC-V; SB+mfences,
        // SB+dmb.ishs, SB+fence.rw.rws (and fence w,r) forbidden.
        assert!(!sb_relaxed(Sc, None));
        assert!(sb_relaxed(Tso, None));
        assert!(!sb_relaxed(Tso, Some(Order::Full)));
        assert!(sb_relaxed(Weak, None));
        assert!(!sb_relaxed(Weak, Some(Order::Full)));
        // smp_wmb() does not order a store before a later load.
        assert!(sb_relaxed(Weak, Some(Order::StoreStore)));
    }

    #[test]
    fn mp_is_forbidden_on_tso_and_needs_both_barriers_when_weak() {
        // herd7 x86tso: MP forbidden (stores and loads each stay in order).
        assert!(!mp_relaxed(Tso, None, None));
        // AArch64 / RISC-V: MP allowed; MP+dmb.ishs and
        // MP+dmb.ishst+dmb.ishld (smp_wmb + smp_rmb) forbidden; one side
        // only (MP+dmb.ishst+po, MP+po+dmb.ishld) allowed.
        assert!(mp_relaxed(Weak, None, None));
        assert!(!mp_relaxed(Weak, Some(Order::Full), Some(Order::Full)));
        assert!(!mp_relaxed(
            Weak,
            Some(Order::StoreStore),
            Some(Order::LoadLoad)
        ));
        assert!(mp_relaxed(Weak, Some(Order::StoreStore), None));
        assert!(mp_relaxed(Weak, None, Some(Order::LoadLoad)));
    }

    #[test]
    fn two_plus_two_w_needs_store_order() {
        // herd7: 2+2W forbidden on x86-TSO, allowed on AArch64 and RISC-V
        // without barriers, forbidden with dmb ishst / fence w,w.
        assert!(!two_plus_two_w(Sc, None));
        assert!(!two_plus_two_w(Tso, None));
        assert!(two_plus_two_w(Weak, None));
        assert!(!two_plus_two_w(Weak, Some(Order::StoreStore)));
    }

    #[test]
    fn lb_needs_load_to_store_reordering() {
        // herd7: LB forbidden on x86-TSO (x86tso.cat: po from a load is
        // preserved); allowed on AArch64 (aarch64.cat) and RISC-V
        // (riscv.cat) without barriers; LB+dmb.sys / LB+fence.rw.rws
        // forbidden.
        assert!(!lb_relaxed(Sc, None));
        assert!(!lb_relaxed(Tso, None));
        assert!(lb_relaxed(Weak, None));
        assert!(!lb_relaxed(Weak, Some(Order::Full)));
        // dmb ishld (smp_rmb() on arm64) orders a load before later
        // stores too: LB+dmb.ishlds is forbidden in herd7's aarch64.cat.
        assert!(!lb_relaxed(Weak, Some(Order::LoadLoad)));
    }

    #[test]
    fn mp_on_x86_is_forbidden_and_weak_needs_barriers_on_both_sides() {
        // The list in one place: MP forbidden on x86 (TSO keeps
        // store and load order), allowed on arm64/RISC-V without
        // barriers, forbidden with dmb ish (smp_mb) on both sides and
        // with smp_wmb + smp_rmb.
        assert!(!mp_relaxed(Tso, None, None));
        assert!(!mp_relaxed(Sc, None, None));
        assert!(mp_relaxed(Weak, None, None));
        assert!(!mp_relaxed(Weak, Some(Order::Full), Some(Order::Full)));
        assert!(!mp_relaxed(
            Weak,
            Some(Order::StoreStore),
            Some(Order::LoadLoad)
        ));
        // 2+2W: forbidden under x86-TSO, allowed under ARMv8 / RVWMO.
        assert!(!two_plus_two_w(Tso, None));
        assert!(two_plus_two_w(Weak, None));
    }
}
