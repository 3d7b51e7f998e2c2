//! The footing of the partial-order reduction: steps that the recorded
//! footprints call independent really commute, on every catalogue check.
use check::configs::{build, CATALOGUE};
use check::por::audit;

/// For each catalogue check, every pair of enabled steps of different
/// CPUs in its first 400 states: each pair judged independent reaches
/// the same world in both orders, neither disabling the other. And the
/// footprints are not so coarse that nothing is independent: the x86,
/// arm64 and RISC-V flush races each have independent pairs.
#[test]
fn independent_steps_commute_on_every_check() {
    let mut with_independent = Vec::new();
    for c in CATALOGUE {
        let w = build(c, &[]).expect("builds");
        let a = audit(&w, 400);
        assert_eq!(a.failed, 0, "{}: {:#?}", c.name, a.failures);
        if a.independent > 0 {
            with_independent.push(c.name);
        }
    }
    for name in [
        "x86_madvise_race",
        "arm64_madvise_race",
        "riscv_madvise_race",
    ] {
        assert!(
            with_independent.contains(&name),
            "{name}: no independent pair"
        );
    }
}

/// The audit names each conflict by what it is: on RISC-V seed (d) under
/// RVWMO the stores of different harts conflict through the weak memory's
/// one order of messages (`field::WEAK_ORDER`: two stores never commute,
/// `kernel/tests/weak_order.rs`), the harts joining and leaving the mm
/// through `mm_cpumask`, and the accesses through the weak locations.
#[test]
fn the_audit_names_the_message_order_among_riscv_conflicts() {
    let c = check::configs::find("riscv_defer_vs_switch").expect("in the catalogue");
    let a = audit(&build(c, &[]).expect("builds"), 400);
    let order = format!("field{}", kernel::world::field::WEAK_ORDER);
    for key in [order.as_str(), "mm.cpumask", "weak_loc", "cpu"] {
        assert!(
            a.conflicts.get(key).is_some_and(|&n| n > 0),
            "{key} not among {:?}",
            a.conflicts.keys().collect::<Vec<_>>()
        );
    }
    assert!(
        a.conflicts
            .keys()
            .all(|k| !k.starts_with("kind")
                || k == &format!("kind{}", machine::footprint::kind::ALL)),
        "{:?}",
        a.conflicts
    );
}
