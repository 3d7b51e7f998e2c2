//! Seed x86-flush-tlb-info-on-stack v7: a flush that waits for its IPIs
//! with preemption off delays real-time wake-ups on its CPU; with the
//! preemptible flush they preempt the wait.
mod common;
use common::*;

fn rt(extra: &[&str]) -> sim::Report {
    run(&scenario("rt-latency", extra))
}

fn op<'a>(r: &'a sim::Report, name: &str) -> &'a sim::report::OpReport {
    r.ops.iter().find(|o| o.name == name).expect("op")
}

#[test]
fn preemptible_flush_cuts_the_latency_tail_not_the_throughput() {
    let base = rt(&[]);
    let seed = rt(&[
        "x86.flush_tlb_info=stack_aligned",
        "x86.preemptible_flush=true",
    ]);
    let (b, s) = (
        &op(&base, "rt_wakeup_latency").latency_ns,
        &op(&seed, "rt_wakeup_latency").latency_ns,
    );
    assert!(s.p99 * 10 < b.p99, "p99 {} -> {}", b.p99, s.p99);
    assert!(s.p999 * 2 < b.p999, "{b:?} -> {s:?}");
    // The maximum is set by the longest IRQ-off window that hits some
    // wake-up: on the RT CPU itself (both variants) or, upstream only, on
    // any target of the flush the RT CPU waits for. Each is one draw of an
    // exponential window (mean `irqoff_long`, 1 ms) from the run's RNG, which
    // the two variants consume differently, so which maximum is larger is
    // chance (issue 15: with the all-but-self shorthand IPI the seed's max
    // drew 3.63 ms, upstream's 3.27 ms). The mechanism bound is below: with
    // no long windows the preemptible flush's maximum is tens of us.
    let (tb, ts) = (op(&base, "madvise").per_sec, op(&seed, "madvise").per_sec);
    assert!((ts / tb - 1.0).abs() < 0.03, "madvise/s {tb} -> {ts}");
    assert!(base.violations.is_empty() && seed.violations.is_empty());
    // Without IRQ-off windows on the RT CPUs' own timers' way, and no long
    // tail, the preemptible flush leaves only the short non-preemptible
    // parts: the maximum is tens of microseconds.
    let quiet = rt(&[
        "x86.flush_tlb_info=stack_aligned",
        "x86.preemptible_flush=true",
        "machine.irqoff_long_pct=0",
    ]);
    assert!(op(&quiet, "rt_wakeup_latency").latency_ns.max < 100_000);
}

/// The per-CPU `flush_tlb_info` with preemption on: refused as a scenario
/// error, and caught by the monitor when forced (an RT thread of the same
/// process flushes while a preempted flush on its CPU still waits).
#[test]
fn percpu_info_with_preemptible_flush_is_refused_or_caught() {
    let s = scenario("rt-latency", &["x86.preemptible_flush=true"]);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("per-CPU") && !e.contains('\n'), "{e}");
    let race = |extra: &[&str]| {
        let mut sets = vec!["workload.name=rt_flush_race", "workload.iterations=100"];
        sets.extend_from_slice(extra);
        run(&scenario("rt-latency", &sets))
    };
    let bad = race(&[
        "x86.preemptible_flush=true",
        "inject.preemptible_percpu_flush=true",
    ]);
    assert!(bad
        .violations
        .iter()
        .any(|v| v.invariant == 2 && v.what.contains("overwrote")));
    for ok in [
        &[
            "x86.flush_tlb_info=stack_aligned",
            "x86.preemptible_flush=true",
        ][..],
        &[][..],
    ] {
        let r = race(ok);
        assert!(r.violations.is_empty(), "{ok:?}: {:?}", r.violations);
    }
}
