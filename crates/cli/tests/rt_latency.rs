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

/// Where the wake-up latency tail comes from, derived from the mechanism.
///
/// A CPU is inside a long IRQ-off window (exponential, mean `L` =
/// profile `irqoff_long`) a share `q = irqoff_hz x irqoff_long_pct/100 x L`
/// of the time (0.4 % here); short windows (mean `irqoff_short`, 5 us) never
/// reach `tau` = 20 x `irqoff_short` (probability e^-20). A wake-up waits
/// past `tau` only behind a long window:
/// - with the preemptible flush, only one on its own CPU: a share `q` of
///   wake-ups (< 1 %, so p99 < tau; > 0.1 %, so p99.9 > tau: the series
///   does nothing for the CPU's own IRQ-off windows);
/// - upstream, also when it lands in a flush wait with preemption off and
///   any of the `N - 1` targets sits in a long window. Each CPU's madvise
///   thread flushes every few microseconds, so a target's long window
///   catches a flush from every CPU within microseconds: the share is
///   `P = q + 1 - (1 - q)^(N-1)` (6.2 %, so p99 > tau).
///
/// By memorylessness the rest of a long window is again exponential with
/// mean `L`, so `P(latency > x) ~ share x e^(-x/L)` in the tail and the
/// p99.9 of the two differ by `L ln(P / q)` (2.74 ms here) in expectation.
/// One run's p99.9 is set by its few longest windows (one target's window
/// holds up every CPU's wake-up at once), so its spread is of the order of
/// `L` itself: seeds 1-4 gave gaps of 4.74, 2.30, 1.81 and 0.40 ms. The
/// 0.5-1.5x band around the derived gap that stood here was read off such
/// runs; a tolerance for the mean of four seeds would need the law of the
/// 8th-largest of 8,000 correlated latencies, which is not derived. What
/// the mechanism dictates is asserted instead: the tail thresholds above
/// (`tau` against p99 and p99.9 of each variant, from `q` and `P`) and the
/// ordering of the two variants' p99.9, mean over the seeds.
#[test]
fn preemptible_flush_cuts_the_latency_tail_not_the_throughput() {
    let sc = scenario("rt-latency", &[]);
    // (upstream, seed) for seeds 1-4; seed 1 is the scenario's own.
    let runs: Vec<(sim::Report, sim::Report)> = (1..=4)
        .map(|n| {
            let sd = format!("seed={n}");
            let up = rt(&[sd.as_str()]);
            let pre = rt(&[
                sd.as_str(),
                "x86.flush_tlb_info=stack_aligned",
                "x86.preemptible_flush=true",
            ]);
            (up, pre)
        })
        .collect();
    let (base, seed) = &runs[0];
    let (b, s) = (
        &op(base, "rt_wakeup_latency").latency_ns,
        &op(seed, "rt_wakeup_latency").latency_ns,
    );
    let p = machine::CostProfile::default_x86();
    let (long, short) = (
        p.ns(machine::Cost::IrqOffLong),
        p.ns(machine::Cost::IrqOffShort),
    );
    let m = &sc.machine;
    let q = m.irqoff_hz as f64 * m.irqoff_long_pct as f64 / 100.0 * long / 1e9;
    let shared = q + 1.0 - (1.0 - q).powi(m.cpus as i32 - 1);
    let tau = 20.0 * short;
    assert!(q < 0.01 && q > 0.001 && shared > 0.01, "q {q}, P {shared}");
    assert!((s.p99 as f64) < tau, "seed p99 {} >= tau {tau}", s.p99);
    assert!(s.p999 as f64 > tau, "seed p99.9 {} <= tau {tau}", s.p999);
    assert!(b.p99 as f64 > tau, "upstream p99 {} <= tau {tau}", b.p99);
    let gap = long * (shared / q).ln();
    let p999 = |r: &sim::Report| op(r, "rt_wakeup_latency").latency_ns.p999 as f64;
    let measured = runs
        .iter()
        .map(|(up, pre)| p999(up) - p999(pre))
        .sum::<f64>()
        / 4.0;
    assert!(
        measured > 0.0,
        "p99.9 gap {measured} ns (expected {gap} ns): upstream's tail is not longer"
    );
    // The maximum is set by the longest IRQ-off window that hits some
    // wake-up: on the RT CPU itself (both variants) or, upstream only, on
    // any target of the flush the RT CPU waits for. Each is one draw of an
    // exponential window (mean `irqoff_long`, 1 ms) from the run's RNG, which
    // the two variants consume differently, so which maximum is larger is
    // chance (issue 15: with the all-but-self shorthand IPI the seed's max
    // drew 3.63 ms, upstream's 3.27 ms). The mechanism bound is below: with
    // no long windows the preemptible flush's maximum is tens of us.
    // Throughput: the same work either way (the preemptible flush changes
    // only what runs on the initiator's CPU during the wait), so the
    // expected madvise/s ratio is 1; its spread comes from the long
    // windows. Every flusher IPIs every other CPU, so while any CPU sits in
    // a long window the whole storm waits on it: a run of `T` = iterations
    // x period loses the sum `S` of its long windows' lengths. Their number
    // is Poisson with mean `k = irqoff_hz x irqoff_long_pct/100 x T x cpus`
    // (32 here), each exponential with mean `L`, so (compound Poisson)
    // `sd(S) = sqrt(k x E[X^2]) = L sqrt(2k)` and one run's madvise/s has a
    // relative sd of `sd(S) / T` (1.6 %; overlapping windows only lower
    // it). The two variants draw their windows independently (they use
    // the RNG differently), so a seed's ratio has sqrt(2) that and the mean
    // of four seeds half of it: the ratio must lie within 3 sd of 1.
    // (Observed per seed: +5.0, +0.3, -2.2 %; the former bound, 3 %, was
    // read off them.)
    let t_ns = sc.workload.iterations as f64 * sc.workload.period_us as f64 * 1e3;
    let k = m.irqoff_hz as f64 * m.irqoff_long_pct as f64 / 100.0 * t_ns / 1e9 * m.cpus as f64;
    let sd_run = long * (2.0 * k).sqrt() / t_ns;
    let sd_mean = sd_run * 2f64.sqrt() / 2.0;
    let ratio = runs
        .iter()
        .map(|(up, pre)| op(pre, "madvise").per_sec / op(up, "madvise").per_sec)
        .sum::<f64>()
        / 4.0;
    assert!(
        (ratio - 1.0).abs() < 3.0 * sd_mean,
        "madvise/s seed/upstream {ratio}, sd of the mean {sd_mean}"
    );
    for (up, pre) in &runs {
        assert!(up.violations.is_empty() && pre.violations.is_empty());
    }
    // Without the long tail the preemptible flush leaves a wake-up behind
    // only a short IRQ-off window (exponential, mean `irqoff_short`) and
    // the flush's short non-preemptible parts (a few us). The run draws
    // about `irqoff_hz x T x cpus` = 1,600 short windows; the chance that
    // any reaches `tau` = 20 x `irqoff_short` (100 us) is below
    // 1,600 x e^-20 = 3e-6, so the maximum stays below `tau`.
    let quiet = rt(&[
        "x86.flush_tlb_info=stack_aligned",
        "x86.preemptible_flush=true",
        "machine.irqoff_long_pct=0",
    ]);
    let windows = m.irqoff_hz as f64 * t_ns / 1e9 * m.cpus as f64;
    assert!(windows * (-20f64).exp() < 1e-5, "{windows} short windows");
    let qmax = op(&quiet, "rt_wakeup_latency").latency_ns.max;
    assert!((qmax as f64) < tau, "quiet max {qmax} >= tau {tau}");
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
