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
