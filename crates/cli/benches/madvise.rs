//! Simulator speed: the seed's madvise workload at 64 CPUs, measured in
//! discrete events per wall-clock second (`cargo bench -p tlblab`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tlblab::{load_scenario, run_scenario, RunOptions};

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
    g.finish();
}

criterion_group!(benches, madvise_64);
criterion_main!(benches);
