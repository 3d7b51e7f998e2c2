//! will-it-scale `tlb_flush2` (model only): one mm's threads IPI each
//! other, separate processes do not.

use super::{curve, figure, series, Figure, Section, Table};
use crate::plot::line_chart;
use crate::sweep::{sweep, Axis, Row as SweepRow};
use crate::{load_scenario, run_scenario, RunOptions};
use machine::Error;
use std::fmt::Write;

/// will-it-scale `tlb_flush2`: one mm's threads IPI each other, separate
/// processes do not (model only).
pub(super) fn will_it_scale(opts: &RunOptions, iterations: u64) -> Result<Section, Error> {
    let mut out = String::new();
    let mut w = Section::new(
        "will-it-scale",
        false,
        "will-it-scale tlb_flush2: threads vs processes",
    );
    let mut wt = Table {
        caption: "model only: one mm IPIs its other CPUs, separate mms do not".into(),
        head: ["workload", "ops", "TLB IPIs", "TLB per op", "us/op"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    // The will-it-scale pair: shared mm IPIs, separate mms do not.
    let _ = writeln!(out, "== will-it-scale tlb_flush2: threads vs processes ==");
    let _ = writeln!(
        out,
        "{:<22} {:>10} {:>12} {:>12} {:>14}",
        "workload", "ops", "TLB IPIs", "TLB per op", "us/op"
    );
    for name in ["tlb-flush-threads", "tlb-flush-processes"] {
        let mut s = w.scenario(name)?;
        s.workload.iterations = (iterations / 100).max(20);
        let (r, _) = run_scenario(&s, opts)?;
        let o = r.main_op().expect("workload op");
        let tlb = r.interrupt_totals["TLB"];
        let _ = writeln!(
            out,
            "{:<22} {:>10} {:>12} {:>12.2} {:>14.3}",
            name,
            o.count,
            tlb,
            tlb as f64 / o.count as f64,
            o.latency_ns.mean / 1000.0
        );
        wt.rows.push(vec![
            name.to_string(),
            o.count.to_string(),
            tlb.to_string(),
            format!("{:.2}", tlb as f64 / o.count as f64),
            format!("{:.3}", o.latency_ns.mean / 1000.0),
        ]);
    }
    w.tables.push(wt);
    w.text = out;
    Ok(w)
}

/// will-it-scale `tlb_flush2`: TLB IPIs per op, threads against processes.
pub(super) fn will_it_scale_figure(opts: &RunOptions) -> Result<Figure, Error> {
    let mut wis = load_scenario("tlb-flush-threads")?;
    wis.set("workload.iterations=30")?;
    let axes = [
        Axis::parse("workload.name=tlb_flush_threads,tlb_flush_processes")?,
        Axis::parse("workload.threads=2,4,8,16,32")?,
    ];
    let rows = sweep(&wis, &axes, opts, false)?;
    let per_op = |r: &SweepRow| r.tlb_per_op;
    figure(
        "will-it-scale",
        "will-it-scale tlb_flush2: TLB shootdown IPIs per madvise",
        line_chart(
            "TLB IPIs per op vs tasks (64 CPUs)",
            "tasks",
            "TLB IPIs per op",
            &[
                series(
                    "threads (one mm)",
                    curve(&rows, "tlb_flush_threads", per_op),
                ),
                series("processes", curve(&rows, "tlb_flush_processes", per_op)),
            ],
        ),
    )
}
