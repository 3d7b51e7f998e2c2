//! `workload.populate_stride`: a collapse copies only the present pages, so
//! the model's time per 2 MiB is `fixed + present x collapse_copy_page`,
//! the linear form `tlblab calibrate` solves the collapse prices from.

mod common;
use common::{run, scenario, tlblab};

fn collapse_run(stride: u32) -> sim::Report {
    let stride = format!("workload.populate_stride={stride}");
    run(&scenario(
        "skip-sync-collapse",
        &[
            "machine.cpus=2",
            "machine.jitter_pct=0",
            "workload.size=8MiB",
            &stride,
        ],
    ))
}

/// ns of the one `MADV_COLLAPSE` call.
fn call_ns(r: &sim::Report) -> f64 {
    let op = r.ops.iter().find(|o| o.name == "madvise_collapse").unwrap();
    op.latency_ns.mean * op.count as f64
}

#[test]
fn collapse_time_is_linear_in_present_pages() {
    let copy = machine::CostProfile::default_x86().ns(machine::Cost::CollapseCopyPage);
    let runs: Vec<_> = [1, 2, 8].map(collapse_run).into();
    // Every stride still collapses all four extents (MADV_COLLAPSE ignores
    // max_ptes_none) and sends the same flushes and sync IPIs.
    for r in &runs {
        assert_eq!(r.arch["collapses"], 4);
        assert_eq!(r.interrupt_totals, runs[0].interrupt_totals);
    }
    // 4 extents x (512 - 512/stride) fewer copies, nothing else changes.
    for (r, stride) in runs[1..].iter().zip([2.0, 8.0]) {
        let fewer = 4.0 * (512.0 - 512.0 / stride);
        let saved = call_ns(&runs[0]) - call_ns(r);
        assert!(
            (saved - fewer * copy).abs() < 1.0,
            "stride {stride}: saved {saved} ns, expected {} ns",
            fewer * copy
        );
    }
}

#[test]
fn populate_stride_is_refused_where_it_means_nothing() {
    for (args, needle) in [
        (
            vec![
                "run",
                "scenarios/default.toml",
                "--set",
                "workload.populate_stride=2",
            ],
            "key of khugepaged_collapse only",
        ),
        (
            vec![
                "run",
                "scenarios/skip-sync-collapse.toml",
                "--set",
                "workload.populate_stride=513",
            ],
            "allowed 1..=512",
        ),
    ] {
        let (code, _, err) = tlblab(&args);
        assert_eq!(code, 2);
        assert!(err.contains(needle) && err.lines().count() == 1, "{err}");
    }
}
