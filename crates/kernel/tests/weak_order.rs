//! Why the partial-order reduction may not commute two CPUs' stores under
//! the weak models (docs/checker.md, "What stops the reduction under the
//! weak models"): the weak memory orders every message in one sequence, as
//! Promising-Arm/RISC-V do, and that order is observable. Two stores of
//! different CPUs to different locations reach different weak memories in
//! the two orders, and the difference is what a later full barrier and
//! load may return: the store-buffering shape (`SB+fences`), whose
//! "both loads read 0" outcome Arm and RISC-V forbid. So a store records a
//! write of the message order (`field::WEAK_ORDER`), and two stores are
//! never independent.

use kernel::hw::memory_model::{Loc, Order};
use kernel::hw::weak_mem::{barrier_of, WeakMem};
use machine::scenario::Arch;

const X: Loc = Loc::Var(0);
const Y: Loc = Loc::Var(1);

/// CPU 0 stores 1 to x, CPU 1 stores 1 to y (in the order given), each
/// then runs a full barrier; the values CPU 0 may load from y and CPU 1
/// from x, sorted.
fn sb(arch: Arch, x_first: bool) -> (WeakMem, Vec<u64>, Vec<u64>) {
    let mut w = WeakMem::default();
    let stores = [(0u16, X), (1u16, Y)];
    let order: Vec<_> = if x_first {
        stores.to_vec()
    } else {
        stores.iter().rev().copied().collect()
    };
    for (cpu, loc) in order {
        w.write(cpu, loc, 0, 1, arch, 2);
    }
    for cpu in 0..2 {
        w.barrier(cpu, barrier_of(Order::Full));
    }
    let vals = |w: &WeakMem, cpu, loc| {
        let mut v: Vec<u64> = w.choices(cpu, loc).into_iter().map(|c| c.1).collect();
        v.sort_unstable();
        v
    };
    let (y0, x1) = (vals(&w, 0, Y), vals(&w, 1, X));
    (w, y0, x1)
}

/// The two orders of the stores give different weak memories, and in each
/// exactly one CPU may still read the other's location as 0: the store
/// made first in the order is seen by the other CPU after its barrier.
#[test]
fn two_cpus_stores_to_different_locations_do_not_commute() {
    for arch in [Arch::Arm64, Arch::Riscv] {
        let (a, y0_a, x1_a) = sb(arch, true);
        let (b, y0_b, x1_b) = sb(arch, false);
        assert_ne!(a, b, "{arch:?}: the message order is state");
        // x first: CPU 1 must see x; CPU 0 may still read the old y.
        assert_eq!(
            (y0_a.as_slice(), x1_a.as_slice()),
            (&[0, 1][..], &[1][..]),
            "{arch:?}"
        );
        // y first: the other way round.
        assert_eq!(
            (y0_b.as_slice(), x1_b.as_slice()),
            (&[1][..], &[0, 1][..]),
            "{arch:?}"
        );
    }
}

/// Together the two orders allow each CPU alone to read 0, never both:
/// what the axiomatic models allow for `SB+fences` (herd7: the outcome
/// `0:r=0 /\ 1:r=0` is forbidden on AArch64 and RISC-V).
#[test]
fn the_two_orders_together_give_exactly_sb_with_fences() {
    for arch in [Arch::Arm64, Arch::Riscv] {
        let mut outcomes = Vec::new();
        for x_first in [true, false] {
            let (_, y0, x1) = sb(arch, x_first);
            for &r0 in &y0 {
                for &r1 in &x1 {
                    outcomes.push((r0, r1));
                }
            }
        }
        outcomes.sort_unstable();
        outcomes.dedup();
        assert_eq!(outcomes, vec![(0, 1), (1, 0), (1, 1)], "{arch:?}");
    }
}
