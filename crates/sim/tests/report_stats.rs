//! The report's statistics from a tiny known input: latency percentiles,
//! mean and deviation, per-second rates, interrupt totals and the flush
//! share, each computed by hand below and compared with `Report::build`.

use hdrhistogram::Histogram;
use kernel::World;
use machine::cost::CostProfile;
use machine::Scenario;
use sim::engine::OpStats;
use sim::{End, Report, Sim, SimOptions};

/// A two-CPU world with no tasks: only the numbers the test writes in.
fn empty_sim() -> Sim {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    let w = World::new(&s).unwrap();
    Sim::new(w, CostProfile::default_x86(), SimOptions::default())
}

/// Samples `lats` (ns), the first starting at `first_begin`, the last ending at `last_end`.
fn stats(lats: &[u64], first_begin: Option<u64>, last_end: u64) -> OpStats {
    let mut hist = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    for &l in lats {
        hist.record(l).unwrap();
    }
    OpStats {
        hist,
        count: lats.len() as u64,
        sum: lats.iter().map(|&l| l as f64).sum(),
        sum_sq: lats.iter().map(|&l| (l * l) as f64).sum(),
        first_begin,
        last_end,
    }
}

fn build(sim: &Sim) -> Report {
    Report::build(sim, serde_json::json!({"name": "t"}), End::Done)
}

/// 1..=1000 ns, one sample each. Below 2048 a 3-significant-digit
/// histogram stores every value exactly, so the quantiles are order
/// statistics: the q-quantile is the ceil(q*1000)-th smallest sample:
/// p50 = 500, p99 = 990, p99.9 = 999, max = 1000, min (q=0) = 1.
/// mean = 1001/2 = 500.5; variance of 1..n = (n^2 - 1)/12 = 83333.25,
/// stddev = 288.6749..., rounded to three decimals 288.675.
/// Span: first begin 1000 ns, last end 2_001_000 ns = 2 ms, so
/// per_sec = 1000 ops / 2 ms = 500_000.
#[test]
fn percentiles_mean_stddev_and_rate() {
    let mut sim = empty_sim();
    let lats: Vec<u64> = (1..=1000).collect();
    let op = sim.world.op_id("probe");
    assert_eq!(op, 1, "op 0 is the kernel's flush_tlb_mm_range span");
    sim.ops.push(stats(&[], None, 0));
    sim.ops.push(stats(&lats, Some(1000), 2_001_000));
    let r = build(&sim);
    assert_eq!(r.ops.len(), 1, "an op with no samples is left out");
    let o = &r.ops[0];
    assert_eq!(o.name, "probe");
    assert_eq!(o.count, 1000);
    let l = &o.latency_ns;
    assert_eq!((l.p50, l.p99, l.p999, l.max), (500, 990, 999, 1000));
    assert_eq!(l.mean, 500.5);
    assert_eq!(l.stddev, 288.675);
    assert_eq!(o.per_sec, 500_000.0);
    assert_eq!(o.cdf.len(), sim::report::CDF_QUANTILES.len());
    assert_eq!(o.cdf.first(), Some(&(0.0, 1)));
    assert_eq!(o.cdf.last(), Some(&(1.0, 1000)));
    // cdf at 0.9 is the 900th sample, at 0.05 the 50th.
    assert!(o.cdf.contains(&(0.9, 900)) && o.cdf.contains(&(0.05, 50)));
    for pair in o.cdf.windows(2) {
        assert!(pair[0].1 <= pair[1].1, "the CDF is monotone: {pair:?}");
    }
}

/// Workload ops come first in registration order, the kernel span (op 0)
/// last; a constant latency has zero deviation; an op that never recorded a
/// start (`first_begin` None) spans from time 0; three decimals of per_sec.
#[test]
fn op_order_constant_latency_and_rate_rounding() {
    let mut sim = empty_sim();
    sim.world.op_id("a");
    sim.world.op_id("b");
    // Kernel span: 4 samples of 250 ns, over 3 µs from time 0.
    sim.ops.push(stats(&[250; 4], None, 3000));
    sim.ops.push(stats(&[7; 3], Some(0), 7));
    sim.ops.push(stats(&[100, 300], Some(500), 1500));
    let r = build(&sim);
    let names: Vec<&str> = r.ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "flush_tlb_mm_range"]);
    // a: 3 ops in 7 ns = 428_571_428.571... /s, rounded to 3 decimals.
    assert_eq!(r.ops[0].per_sec, 428_571_428.571);
    assert_eq!(r.ops[0].latency_ns.stddev, 0.0);
    // b: mean 200, variance (100^2 + 300^2)/2 - 200^2 = 10_000: stddev 100;
    // 2 ops in 1000 ns = 2_000_000/s.
    assert_eq!(r.ops[1].latency_ns.mean, 200.0);
    assert_eq!(r.ops[1].latency_ns.stddev, 100.0);
    assert_eq!(r.ops[1].per_sec, 2_000_000.0);
    // Kernel span: 4 in 3000 ns from t=0 = 1_333_333.333/s.
    assert_eq!(r.ops[2].per_sec, 1_333_333.333);
    assert_eq!(r.ops[2].latency_ns.p50, 250);
}

/// A zero span (every op began and ended at one instant) is counted as
/// 1 ns, not a division by zero.
#[test]
fn zero_span_is_one_nanosecond() {
    let mut sim = empty_sim();
    sim.world.op_id("instant");
    sim.ops.push(stats(&[], None, 0));
    sim.ops.push(stats(&[1, 1], Some(40), 40));
    let r = build(&sim);
    assert_eq!(r.ops[0].per_sec, 2e9);
}

/// flush_share = maint / busy, rounded to 0.001 %: 1 of 3 µs is
/// 33.333 %, i.e. 0.33333; busy and maintenance are reported in ns
/// (the driver keeps ps). No busy time gives 0, not NaN.
#[test]
fn flush_share_and_cycle_units() {
    let mut sim = empty_sim();
    sim.busy_ps = 3_000_000;
    sim.maint_ps = 1_000_000;
    sim.dvm_wait_ps = 250_000;
    let r = build(&sim);
    assert_eq!(r.cycles.busy_ns, 3000);
    assert_eq!(r.cycles.tlb_maintenance_ns, 1000);
    assert_eq!(r.cycles.dvm_wait_ns, 250);
    assert!((r.cycles.flush_share - 0.33333).abs() < 1e-12);
    sim.busy_ps = 0;
    sim.maint_ps = 0;
    assert_eq!(build(&sim).cycles.flush_share, 0.0);
    // 2/3: 66.6666...% rounds up to 66.667 %.
    sim.busy_ps = 3_000_000;
    sim.maint_ps = 2_000_000;
    assert!((build(&sim).cycles.flush_share - 0.66667).abs() < 1e-12);
}

/// interrupt_totals are the per-CPU rows summed; the rows are copied as is.
#[test]
fn interrupt_totals_sum_the_rows() {
    let mut sim = empty_sim();
    let c = &mut sim.world.counters;
    c.irq_tlb = vec![3, 4];
    c.irq_cal = vec![0, 9];
    c.irq_res = vec![1, 0];
    let r = build(&sim);
    assert_eq!(r.interrupts.tlb, [3, 4]);
    assert_eq!(r.interrupt_totals["TLB"], 7);
    assert_eq!(r.interrupt_totals["CAL"], 9);
    assert_eq!(r.interrupt_totals["RES"], 1);
    let t = r.text();
    assert!(t.contains("interrupts: TLB 7  CAL 9  RES 1"), "{t}");
    assert!(t.contains("TLB maintenance: 0.00% of 0.000 ms"), "{t}");
}
