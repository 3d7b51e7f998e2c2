//! A tiny exhaustive explorer of litmus tests on the checker's own memory
//! model: the store buffers of [`crate::hw::memory_model`] and, under the
//! weak model, the view machine's old messages ([`crate::hw::weak_mem`]),
//! driven exactly as the kernel paths drive them.
//!
//! Each thread is a list of loads, stores and barriers, executed in
//! program order. A step executes one thread's next instruction (a load
//! under the weak model once per message it may return) or drains one
//! buffered store the model lets drain. So the shapes below test what the
//! checker explores: store->load and store->store reordering from the
//! buffers, load->load reordering from old messages, and no load->store
//! reordering (LB), which the checker does not explore (docs/checker.md).
//! `tlblab litmus` runs herd7's catalogues on the full Promising machine
//! ([`crate::hw::wmm`]) instead.

use crate::hw::memory_model::{Loc, MemoryModel, Order, StoreBuffer};
use crate::hw::weak_mem::{barrier_of, WeakMem};
use machine::scenario::Arch;
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
    pc: usize,
    buf: StoreBuffer,
    regs: [u64; REGS],
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    mem: [u64; VARS],
    weak: WeakMem,
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

impl State {
    /// Thread `t`'s store of `val` to `l` reaches memory (as
    /// `memory_model::publish` does for the kernel's locations).
    fn publish(&mut self, model: MemoryModel, t: usize, l: Loc, val: u64) {
        if model == MemoryModel::Weak {
            let n = self.threads.len();
            self.weak
                .write(t as u16, l, self.mem[var(l)], val, Arch::Arm64, n);
        }
        self.mem[var(l)] = val;
    }

    /// The values a load of `v` by `t` may return now.
    fn load_choices(&self, model: MemoryModel, t: usize, v: u8) -> Vec<(u32, u64)> {
        let l = Loc::Var(v);
        if let Some(x) = self.threads[t].buf.forward(l) {
            return vec![(u32::MAX, x)];
        }
        let c = self.weak.choices(t as u16, l);
        if model != MemoryModel::Weak || c.is_empty() {
            return vec![(u32::MAX, self.mem[v as usize])];
        }
        c
    }

    /// Thread `t` executes `ins`; a load returns choice `pick`.
    fn execute(&mut self, model: MemoryModel, t: usize, ins: Instr, pick: (u32, u64)) {
        self.threads[t].pc += 1;
        match ins {
            Instr::Store(v, val) if model == MemoryModel::Sc => self.mem[v as usize] = val,
            Instr::Store(v, val) => {
                if let Some(old) = self.threads[t].buf.push(Loc::Var(v), val) {
                    self.publish(model, t, old.loc, old.val);
                }
            }
            Instr::Load(v, r) => {
                if pick.0 != u32::MAX {
                    self.weak.read(t as u16, Loc::Var(v), pick.0);
                }
                self.threads[t].regs[r as usize] = pick.1;
            }
            Instr::Fence(o) => {
                for e in self.threads[t].buf.barrier(o) {
                    self.publish(model, t, e.loc, e.val);
                }
                if !self.weak.is_empty() {
                    self.weak.barrier(t as u16, barrier_of(o));
                }
            }
        }
    }
}

/// Every final state of `progs` under `model`.
pub fn outcomes(model: MemoryModel, progs: &[Vec<Instr>]) -> BTreeSet<Outcome> {
    let init = State {
        mem: [0; VARS],
        weak: WeakMem::default(),
        threads: progs
            .iter()
            .map(|_| Thread {
                pc: 0,
                buf: StoreBuffer::default(),
                regs: [0; REGS],
            })
            .collect(),
    };
    let live = vec![true; progs.len()];
    let mut seen = HashSet::new();
    let mut stack = vec![init];
    let mut out = BTreeSet::new();
    let push = |mut n: State, stack: &mut Vec<State>| {
        n.weak.gc(&live);
        stack.push(n);
    };
    while let Some(s) = stack.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        let mut any = false;
        for (t, prog) in progs.iter().enumerate() {
            if let Some(&ins) = prog.get(s.threads[t].pc) {
                let picks = match ins {
                    Instr::Load(v, _) => s.load_choices(model, t, v),
                    _ => vec![(u32::MAX, 0)],
                };
                for p in picks {
                    let mut n = s.clone();
                    n.execute(model, t, ins, p);
                    push(n, &mut stack);
                    any = true;
                }
            }
            for slot in s.threads[t].buf.drainable(model) {
                let mut n = s.clone();
                let e = n.threads[t].buf.take(slot);
                n.publish(model, t, e.loc, e.val);
                push(n, &mut stack);
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
    fn lb_is_the_one_shape_the_checker_does_not_explore() {
        // herd7: LB forbidden on x86-TSO (x86tso.cat: po from a load is
        // preserved); allowed on AArch64 (aarch64.cat) and RISC-V
        // (riscv.cat) without barriers. The checker's model executes a
        // store after the loads before it (a load returns a message
        // already in memory), so LB is forbidden here: the documented
        // gap (docs/checker.md). `tlblab litmus` (Promising's promises)
        // allows it.
        assert!(!lb_relaxed(Sc, None));
        assert!(!lb_relaxed(Tso, None));
        assert!(!lb_relaxed(Weak, None));
        assert!(!lb_relaxed(Weak, Some(Order::Full)));
    }

    #[test]
    fn loads_reorder_without_a_load_barrier() {
        // herd7 aarch64.cat / riscv.cat: MP+dmb.ishst+po allowed (the
        // reader's loads reorder); with dmb ishld / fence r,r forbidden.
        // The checker gets the reader's side from old messages: with a
        // full barrier on the writer (its stores in order in memory)
        // only the reader's load->load reordering can give r0=1, r1=0.
        assert!(mp_relaxed(Weak, Some(Order::Full), None));
        assert!(!mp_relaxed(Weak, Some(Order::Full), Some(Order::LoadLoad)));
        assert!(!mp_relaxed(Tso, Some(Order::Full), None));
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
