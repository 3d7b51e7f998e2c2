//! The invariant monitor runs in every simulation and catches injected bugs.
mod common;
use common::*;

fn race(sets: &[&str]) -> sim::Report {
    let mut all = vec!["workload.name=madvise_race", "workload.iterations=300"];
    all.extend_from_slice(sets);
    run(&scenario("default", &all))
}

#[test]
fn correct_model_has_no_violations() {
    let r = race(&[]);
    assert!(r.violations.is_empty(), "{:?}", r.violations.first());
    assert_eq!(ops(&r), 300);
}

/// Each injected bug lets a reader use its stale TLB entry after the page
/// was freed: invariant 1, with the events that led to it.
#[test]
fn injected_bugs_are_caught_with_a_trace() {
    for bug in [
        "inject.free_before_flush=true",
        "inject.no_ipi_wait=true",
        "inject.skip_flush_in_flush_tlb_func=true",
    ] {
        let r = race(&[bug]);
        let v = r
            .violations
            .first()
            .unwrap_or_else(|| panic!("{bug} not caught"));
        assert_eq!(v.invariant, 1, "{bug}: {}", v.what);
        assert!(
            v.what.contains("freed") || v.what.contains("free") || v.what.contains("reused"),
            "{}",
            v.what
        );
        assert!(
            !v.trace.is_empty(),
            "{bug}: the violation carries its trace"
        );
        assert!(
            v.trace.iter().any(|l| l.contains("madvise")),
            "{bug}: trace shows the madvise: {:?}",
            v.trace
        );
    }
}
