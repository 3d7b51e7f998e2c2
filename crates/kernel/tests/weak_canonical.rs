//! `WeakMem::canonical_views` is a quotient, not a pruning: on random
//! sequences of the operations the kernel paths perform (plain stores and
//! loads, atomics' reads of the newest message, barriers, the ASID lock's
//! catch-up, stores seen by all, the clean-up with CPUs leaving), a weak
//! memory kept canonical after each operation and one never made
//! canonical offer every CPU the same messages at every load, and the
//! latter's canonical form is the former. By induction, every execution
//! from one has an execution from the other with the same loads, so the
//! checker's verdicts are those of the uncanonical model.

use kernel::hw::memory_model::{Loc, Order};
use kernel::hw::weak_mem::{barrier_of, WeakMem};
use machine::scenario::Arch;
use proptest::prelude::*;
use std::hash::{DefaultHasher, Hasher};

const LOCS: u8 = 3;

#[derive(Clone, Copy, Debug)]
enum Op {
    Store {
        cpu: u16,
        loc: u8,
        val: u64,
    },
    /// A load taking the `pick`-th of its choices (modulo their number).
    Load {
        cpu: u16,
        loc: u8,
        pick: usize,
    },
    LoadNewest {
        cpu: u16,
        loc: u8,
    },
    Barrier {
        cpu: u16,
        order: u8,
    },
    CatchUp {
        cpu: u16,
    },
    StoreSeenByAll {
        cpu: u16,
        loc: u8,
        val: u64,
    },
    /// The clean-up with the CPUs of `gone` (a bit each) out of tasks.
    Gc {
        gone: u8,
    },
}

fn op(cpus: u16) -> impl Strategy<Value = Op> {
    let cpu = 0..cpus;
    let loc = 0..LOCS + 1;
    prop_oneof![
        4 => (cpu.clone(), loc.clone(), 1..4u64).prop_map(|(cpu, loc, val)| Op::Store { cpu, loc, val }),
        5 => (cpu.clone(), loc.clone(), 0..4usize).prop_map(|(cpu, loc, pick)| Op::Load { cpu, loc, pick }),
        1 => (cpu.clone(), loc.clone()).prop_map(|(cpu, loc)| Op::LoadNewest { cpu, loc }),
        3 => (cpu.clone(), 0..3u8).prop_map(|(cpu, order)| Op::Barrier { cpu, order }),
        1 => cpu.clone().prop_map(|cpu| Op::CatchUp { cpu }),
        1 => (cpu, loc, 1..4u64).prop_map(|(cpu, loc, val)| Op::StoreSeenByAll { cpu, loc, val }),
        1 => (0..4u8).prop_map(|gone| Op::Gc { gone }),
    ]
}

/// Location `i`: plain variables, and one location only CPU 0 loads
/// (`need_tlb_flush` of hart 0), which the clean-up treats differently.
fn loc(i: u8) -> Loc {
    if i == LOCS {
        Loc::NeedTlbFlush(0)
    } else {
        Loc::Var(i)
    }
}

struct Pair {
    arch: Arch,
    cpus: usize,
    /// Memory's value of each location (the newest message).
    mem: [u64; LOCS as usize + 1],
    /// Never made canonical.
    plain: WeakMem,
    /// Made canonical after every operation.
    canon: WeakMem,
}

impl Pair {
    fn both(&mut self, f: impl Fn(&mut WeakMem)) {
        f(&mut self.plain);
        f(&mut self.canon);
    }

    fn apply(&mut self, op: Op) {
        let (arch, n) = (self.arch, self.cpus);
        match op {
            Op::Store { cpu, loc: l, val } | Op::StoreSeenByAll { cpu, loc: l, val } => {
                let old = self.mem[l as usize];
                self.mem[l as usize] = val;
                if matches!(op, Op::Store { .. }) {
                    self.both(|w| w.write(cpu, loc(l), old, val, arch, n));
                } else if self.plain.holds(loc(l)) {
                    self.both(|w| w.write_seen_by_all(cpu, loc(l), val, arch, n));
                }
            }
            Op::Load { cpu, loc: l, pick } => {
                let c = self.plain.choices(cpu, loc(l));
                if c.is_empty() {
                    self.both(|w| w.read_quiet(cpu));
                } else {
                    let t = c[pick % c.len()].0;
                    self.both(|w| w.read(cpu, loc(l), t));
                }
            }
            Op::LoadNewest { cpu, loc: l } => self.both(|w| w.read_newest(cpu, loc(l))),
            Op::Barrier { cpu, order } => {
                let o = [Order::Full, Order::StoreStore, Order::LoadLoad][order as usize];
                self.both(|w| w.barrier(cpu, barrier_of(o)));
            }
            Op::CatchUp { cpu } => self.both(|w| w.catch_up(cpu)),
            Op::Gc { .. } => {}
        }
        let gone = match op {
            Op::Gc { gone } => gone,
            _ => 0,
        };
        let task_ctx: Vec<bool> = (0..n).map(|c| gone & (1 << c) == 0).collect();
        self.plain.gc_keeping_views(&task_ctx);
        self.canon.gc(&task_ctx);
    }

    /// Same loads offered, and the canonical form of the plain copy.
    fn agree(&self) -> Result<(), TestCaseError> {
        for cpu in 0..self.cpus as u16 {
            for l in 0..=LOCS {
                prop_assert_eq!(
                    self.plain.choices(cpu, loc(l)),
                    self.canon.choices(cpu, loc(l)),
                    "CPU{}'s load of {}",
                    cpu,
                    loc(l)
                );
            }
            prop_assert_eq!(self.plain.stale_for(cpu), self.canon.stale_for(cpu));
        }
        let mut c = self.plain.clone();
        c.canonical_views();
        prop_assert_eq!(&c, &self.canon);
        self.hash_renamed_is_of_the_renamed_value()
    }

    /// The symmetry reduction's `hash_renamed(p)`, which hashes a renaming
    /// without building it, is a function of the renamed value: it equals
    /// the identity's hash of `renamed(p)` (so renamings of one another
    /// get one key) for every permutation of the CPUs.
    fn hash_renamed_is_of_the_renamed_value(&self) -> Result<(), TestCaseError> {
        let hash = |w: &WeakMem, p: &[u16]| {
            let mut h = DefaultHasher::new();
            w.hash_renamed(p, &mut h);
            h.finish()
        };
        assert_eq!(self.cpus, 3, "the permutations below are of 3 CPUs");
        let id = [0, 1, 2];
        for p in [[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
            let p = &p[..];
            let r = self.canon.renamed(p);
            prop_assert_eq!(hash(&self.canon, p), hash(&r, &id), "renamed by {:?}", p);
        }
        Ok(())
    }
}

fn run(arch: Arch, cpus: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut p = Pair {
        arch,
        cpus,
        mem: [0; LOCS as usize + 1],
        plain: WeakMem::default(),
        canon: WeakMem::default(),
    };
    for &o in ops {
        p.apply(o);
        p.agree()?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn arm64_canonical_views_offer_the_same_loads(ops in prop::collection::vec(op(3), 1..40)) {
        run(Arch::Arm64, 3, &ops)?;
    }

    /// RVWMO's same-address rule keeps the last read per location.
    #[test]
    fn riscv_canonical_views_offer_the_same_loads(ops in prop::collection::vec(op(3), 1..40)) {
        run(Arch::Riscv, 3, &ops)?;
    }
}

/// The views are canonical in fact: a CPU whose coherence views already
/// order everything its read view does has read view 0, whichever loads
/// raised it; without it the two worlds below differ.
#[test]
fn a_view_that_orders_nothing_new_is_lowered() {
    let (x, y) = (Loc::Var(0), Loc::Var(1));
    let all = [true; 3];
    let mut w = WeakMem::default();
    // CPU0: x=1 then y=1 (timestamps 1, 2); CPU2 has read neither, so
    // both messages stay.
    w.write(0, x, 0, 1, Arch::Arm64, 3);
    w.write(0, y, 0, 1, Arch::Arm64, 3);
    // CPU1 takes the ASID lock (it reads every newest message after it):
    // directly, or after loading y's newest, which raised its read view
    // to 2.
    let mut a = w.clone();
    let t = a.choices(1, y)[0].0;
    a.read(1, y, t);
    a.catch_up(1);
    let mut b = w.clone();
    b.catch_up(1);
    let (mut a0, mut b0) = (a.clone(), b.clone());
    a0.gc_keeping_views(&all);
    b0.gc_keeping_views(&all);
    assert_ne!(a0, b0, "the read views differ (2 and 0)");
    a.gc(&all);
    b.gc(&all);
    assert_eq!(a, b);
    // And the canonical world offers every CPU the loads it did.
    for cpu in 0..3 {
        for l in [x, y] {
            assert_eq!(a.choices(cpu, l), a0.choices(cpu, l));
        }
    }
}
