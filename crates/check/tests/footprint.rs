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
