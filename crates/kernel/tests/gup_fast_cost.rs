//! Seed (b) step 2: what publishing `active_lockless_pt_walk_mm` adds to one
//! GUP-fast walk, priced from each bundled cost profile. The overhead is
//! the walk's own charges (two stores and one `smp_mb()`), not a figure.
use kernel::effects::Charge;
use kernel::user::UserOp;
use kernel::{Effects, World};
use machine::scenario::{Arch, Size};
use machine::{Cost, CostProfile, Scenario, HPAGE_SIZE};

const P: u64 = 0x7f00_0000_0000;
/// Every class a GUP-fast walk charges.
const WALK: [Cost; 4] = [
    Cost::GupFastWalk,
    Cost::LocklessWalkStore,
    Cost::LocklessWalkMb,
    Cost::LocklessWalkLineReown,
];

/// One `get_user_pages_fast` of `pages` pages of a populated 2 MiB, alone
/// on CPU1: the ns its steps charge, priced with `arch`'s profile.
fn walk_ns(arch: Arch, targeted: bool, pages: u32) -> f64 {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    s.machine.arch = arch;
    s.machine.memory = Size(64 << 20);
    s.mm.targeted_table_sync = targeted;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, P, HPAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + HPAGE_SIZE).unwrap();
    let prog = vec![
        UserOp::GupFast {
            base: P,
            span: 512,
            pages,
            stride: 1,
        },
        UserOp::Exit,
    ];
    w.spawn(mm, 1, prog, true);
    let profile = CostProfile::default_for(arch);
    let (mut ns, mut en, mut fx) = (0.0, Vec::new(), Effects::default());
    for _ in 0..10_000 {
        w.enabled(&mut en);
        let Some(&(c, kind)) = en.iter().find(|(c, _)| *c == 1) else {
            break;
        };
        fx.clear();
        w.step(c, kind, &mut fx);
        for ch in &fx.charges {
            if let Charge::Cost(cost, n) = ch {
                if WALK.contains(cost) {
                    ns += profile.ns(*cost) * *n as f64;
                }
            }
        }
    }
    assert_eq!(w.counters.gup_fast, 1);
    assert_eq!(w.counters.gup_fast_backoff, 0);
    assert!(
        w.cpus[1].active_lockless_pt_walk_mm.is_none(),
        "cleared on exit"
    );
    ns
}

/// Without step 2 a walk of n pages is 1 + 2n steps (the PMD, then a PTE
/// read and a grab with its re-check per page); step 2 adds exactly the
/// publication, the clear and one `smp_mb()` per walk, whatever its length.
#[test]
fn publication_costs_two_stores_and_a_barrier_per_walk() {
    for arch in [Arch::X86, Arch::Arm64, Arch::Riscv] {
        let p = CostProfile::default_for(arch);
        let extra = 2.0 * p.ns(Cost::LocklessWalkStore) + p.ns(Cost::LocklessWalkMb);
        assert!(extra > 0.0);
        for pages in [1u32, 4, 16] {
            let off = walk_ns(arch, false, pages);
            let on = walk_ns(arch, true, pages);
            let steps = 1.0 + 2.0 * pages as f64;
            assert_eq!(off, steps * p.ns(Cost::GupFastWalk), "{arch:?} {pages}");
            assert!(
                (on - off - extra).abs() < 1e-9,
                "{arch:?} {pages}: {on} vs {off}"
            );
            println!(
                "{:<6} {pages:>2} pages: {off:>6.0} ns -> {on:>6.0} ns per walk (+{:.1}%)",
                arch.name(),
                100.0 * (on - off) / off
            );
        }
    }
}
