//! Speed: the simulator on the seeds' workloads (discrete events per
//! wall-clock second) and the checker on each protocol at 3 CPUs
//! (`cargo bench -p tlblab`), next to a bare binary-heap event loop over
//! as many events (`tlblab speed` prints the same as one table).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use tlblab::{load_scenario, run_scenario, RunOptions};

/// The allocator the `tlblab` binary uses.
#[global_allocator]
static GLOBAL: tlblab::speed::SplitAlloc = tlblab::speed::SplitAlloc;

fn madvise_64(c: &mut Criterion) {
    let mut s = load_scenario("flush-tlb-info-madvise").expect("bundled");
    s.set("machine.cpus=64").unwrap();
    s.set("workload.iterations=20000").unwrap();
    let (r, _) = run_scenario(&s, &RunOptions::default()).unwrap();
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(r.events));
    g.sample_size(20);
    g.bench_function("madvise_dontneed_64cpu_20k_ops", |b| {
        b.iter(|| run_scenario(&s, &RunOptions::default()).unwrap().0.events)
    });
    // The same number of events through nothing but a binary heap.
    g.bench_function("bare_heap_loop_64cpu_same_events", |b| {
        b.iter(|| tlblab::speed::bare_heap_rate(r.events, 64))
    });
    g.finish();
}

/// Seed (b)'s experiment: MADV_COLLAPSE of 20 GiB on 64 CPUs (10,240
/// collapses, 645,120 sync IPIs), upstream and with the skip.
fn collapse_64(c: &mut Criterion) {
    let s = load_scenario("skip-sync-collapse").expect("bundled");
    let mut g = c.benchmark_group("sim");
    g.sample_size(10);
    for (name, v) in [
        ("collapse_20gib_64cpu", ""),
        (
            "collapse_20gib_64cpu_skip",
            "mm.skip_redundant_table_sync=true",
        ),
    ] {
        let s = tlblab::apply_variant(&s, v).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| run_scenario(&s, &RunOptions::default()).unwrap().0.events)
        });
    }
    g.finish();
}

/// The checker: one 3-CPU configuration per protocol, with the reduction
/// the catalogue uses; throughput in states explored.
fn check_3cpu(c: &mut Criterion) {
    let mut g = c.benchmark_group("check");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for name in [
        "x86_madvise_race_3cpu",
        "x86_collapse_vs_gup_3cpu",
        "x86_hugetlb_unshare_seed",
        "arm64_wp_reuse_3cpu",
        "riscv_defer_vs_switch_mask_clearing",
        "x86_preemptible_flush_stack_3cpu",
    ] {
        let cfg = check::configs::find(name).unwrap();
        let o = check::configs::run(cfg, &[], check::Bounds::default(), true).unwrap();
        assert_eq!(o.verdict, "safe", "{name}");
        g.throughput(Throughput::Elements(o.states as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                check::configs::run(cfg, &[], check::Bounds::default(), true)
                    .unwrap()
                    .states
            })
        });
    }
    g.finish();
}

criterion_group!(benches, madvise_64, collapse_64, check_3cpu);
criterion_main!(benches);
