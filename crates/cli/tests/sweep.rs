//! Sweeps: every combination, in a fixed order, identical whatever the
//! number of worker threads.
mod common;
use common::*;
use tlblab::sweep::{sweep, Axis};
use tlblab::RunOptions;

#[test]
fn sweep_is_deterministic_across_thread_counts() {
    let base = scenario("skip-sync-collapse", &["workload.size=32MiB"]);
    let axes = vec![
        Axis::parse("machine.cpus=4,8,16").unwrap(),
        Axis::parse("mm.skip_redundant_table_sync=false,true").unwrap(),
    ];
    let run_with = |threads| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            serde_json::to_string(&sweep(&base, &axes, &RunOptions::default(), false).unwrap())
                .unwrap()
        })
    };
    let one = run_with(1);
    assert_eq!(one, run_with(2));
    let rows: serde_json::Value = serde_json::from_str(&one).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    // Row order: first axis slowest; the CAL formula holds in every row.
    for (i, cpus) in [4u64, 8, 16].iter().enumerate() {
        assert_eq!(rows[2 * i]["cal_total"], 16 * (cpus - 1));
        assert_eq!(rows[2 * i + 1]["cal_total"], 0);
    }
    assert!(Axis::parse("machine.cpus").is_err());
    assert!(sweep(
        &base,
        &[Axis::parse("machine.cpus=0").unwrap()],
        &RunOptions::default(),
        false
    )
    .is_err());
}
