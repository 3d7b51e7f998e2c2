//! Same scenario and seed: byte-identical output.
mod common;
use common::*;

#[test]
fn same_seed_same_bytes() {
    let s = scenario(
        "tlb-flush-threads",
        &["workload.threads=6", "workload.iterations=20"],
    );
    let a = serde_json::to_string(&run(&s)).unwrap();
    let b = serde_json::to_string(&run(&s)).unwrap();
    assert_eq!(a, b);
    let mut s2 = s.clone();
    s2.seed = 2;
    let c = serde_json::to_string(&run(&s2)).unwrap();
    assert_ne!(a, c, "the seed drives the jitter draws");
}

/// The same for each architecture and for the scheduler-driven workloads
/// (ticks, migration, hrtimers, IRQ-off windows all draw from the seed).
#[test]
fn every_architecture_is_deterministic() {
    for (name, sets) in [
        ("cow-reuse-race", vec!["workload.iterations=50"]),
        ("mmapstress01", vec!["workload.iterations=200"]),
        ("rt-latency", vec!["workload.iterations=50"]),
        ("defer-race", vec!["workload.iterations=2000"]),
    ] {
        let s = scenario(name, &sets);
        let a = serde_json::to_string(&run(&s)).unwrap();
        let b = serde_json::to_string(&run(&s)).unwrap();
        assert_eq!(a, b, "{name}");
    }
}
