//! `tlblab sweep`: the cross product of `--over key=v1,v2,...` axes, run in
//! parallel (rayon), results in a fixed order whatever the thread count.

use crate::{apply_variant, run_scenario, RunOptions};
use machine::{Error, Scenario};
use rayon::prelude::*;
use serde::Serialize;
use sim::Report;
use std::sync::atomic::{AtomicU64, Ordering};

/// One axis: a scenario key and its values.
#[derive(Clone, Debug)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

impl Axis {
    /// Parse `key=v1,v2,...`.
    pub fn parse(spec: &str) -> Result<Axis, Error> {
        let (k, v) = spec
            .split_once('=')
            .ok_or_else(|| Error::Config(format!("--over '{spec}' is not key=v1,v2,...")))?;
        let values: Vec<String> = v
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if values.is_empty() {
            return Err(Error::Config(format!("--over '{spec}' lists no values")));
        }
        Ok(Axis {
            key: k.trim().to_string(),
            values,
        })
    }
}

/// One run's row: the swept values and the headline metrics.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub values: Vec<(String, String)>,
    pub us_per_op: f64,
    pub ops_per_sec: f64,
    pub p99_ns: u64,
    pub tlb_total: u64,
    pub cal_total: u64,
    pub tlb_per_op: f64,
    pub cal_per_op: f64,
    pub violations: usize,
    pub sim_time_ns: u64,
    pub events: u64,
    /// Share of busy CPU time in TLB maintenance (`cycles.flush_share`).
    pub flush_share: f64,
    /// arm64 broadcast TLBI operations.
    pub tlbi_is: u64,
    pub spurious_faults: u64,
}

impl Row {
    fn from(values: Vec<(String, String)>, r: &Report) -> Row {
        let op = r.main_op();
        let n = op.map_or(0, |o| o.count).max(1) as f64;
        Row {
            values,
            us_per_op: op.map_or(0.0, |o| o.latency_ns.mean / 1000.0),
            ops_per_sec: op.map_or(0.0, |o| o.per_sec),
            p99_ns: op.map_or(0, |o| o.latency_ns.p99),
            tlb_total: r.interrupt_totals["TLB"],
            cal_total: r.interrupt_totals["CAL"],
            tlb_per_op: r.interrupt_totals["TLB"] as f64 / n,
            cal_per_op: r.interrupt_totals["CAL"] as f64 / n,
            violations: r.violations.len(),
            sim_time_ns: r.sim_time_ns,
            events: r.events,
            flush_share: r.cycles.flush_share,
            tlbi_is: r.arch["tlbi_is"],
            spurious_faults: r.spurious_faults,
        }
    }
}

/// Every combination of the axes, first axis slowest.
pub fn combinations(axes: &[Axis]) -> Vec<Vec<(String, String)>> {
    let mut out = vec![vec![]];
    for a in axes {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                a.values.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push((a.key.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    out
}

/// Validate every point first (so a bad value fails before any run), then
/// run them in parallel.
pub fn sweep(
    base: &Scenario,
    axes: &[Axis],
    opts: &RunOptions,
    progress: bool,
) -> Result<Vec<Row>, Error> {
    let points = combinations(axes);
    if points.len() > 10_000 {
        return Err(Error::Range(format!(
            "sweep of {} runs (allowed up to 10000)",
            points.len()
        )));
    }
    let scenarios: Vec<Scenario> = points
        .iter()
        .map(|p| {
            let spec: Vec<String> = p.iter().map(|(k, v)| format!("{k}={v}")).collect();
            apply_variant(base, &spec.join(","))
        })
        .collect::<Result<_, _>>()?;
    let bar = if progress {
        let b = indicatif::ProgressBar::with_draw_target(
            Some(points.len() as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} runs",
            )
            .expect("template"),
        );
        Some(b)
    } else {
        None
    };
    let done = AtomicU64::new(0);
    let quiet = RunOptions {
        progress: false,
        ..opts.clone()
    };
    let results: Vec<Result<Report, Error>> = scenarios
        .par_iter()
        .map(|s| {
            let r = run_scenario(s, &quiet).map(|(r, _)| r);
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            if let Some(b) = &bar {
                b.set_position(n);
            }
            r
        })
        .collect();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    points
        .into_iter()
        .zip(results)
        .map(|(p, r)| r.map(|r| Row::from(p, &r)))
        .collect()
}

/// The metric columns of `sweep.csv`, in order, with their decimals
/// (0: a count). `sweep --plot --y` takes any of them.
pub const METRICS: [(&str, usize); 13] = [
    ("us_per_op", 4),
    ("ops_per_sec", 1),
    ("p99_ns", 0),
    ("tlb_total", 0),
    ("cal_total", 0),
    ("tlb_per_op", 4),
    ("cal_per_op", 4),
    ("violations", 0),
    ("sim_time_ns", 0),
    ("events", 0),
    ("flush_share", 5),
    ("tlbi_is", 0),
    ("spurious_faults", 0),
];

/// The names of [`METRICS`], for messages.
pub fn metric_names() -> String {
    METRICS.map(|(n, _)| n).join(", ")
}

impl Row {
    /// The value of metric column `name` (one of [`METRICS`]).
    pub fn metric(&self, name: &str) -> Option<f64> {
        Some(match name {
            "us_per_op" => self.us_per_op,
            "ops_per_sec" => self.ops_per_sec,
            "p99_ns" => self.p99_ns as f64,
            "tlb_total" => self.tlb_total as f64,
            "cal_total" => self.cal_total as f64,
            "tlb_per_op" => self.tlb_per_op,
            "cal_per_op" => self.cal_per_op,
            "violations" => self.violations as f64,
            "sim_time_ns" => self.sim_time_ns as f64,
            "events" => self.events as f64,
            "flush_share" => self.flush_share,
            "tlbi_is" => self.tlbi_is as f64,
            "spurious_faults" => self.spurious_faults as f64,
            _ => return None,
        })
    }
}

/// The rows as CSV: one column per axis, then the metrics.
pub fn to_csv(axes: &[Axis], rows: &[Row]) -> String {
    let mut s = String::new();
    let mut head: Vec<String> = axes.iter().map(|a| a.key.clone()).collect();
    head.extend(METRICS.map(|(n, _)| n.to_string()));
    s.push_str(&head.join(","));
    s.push('\n');
    for r in rows {
        let mut cells: Vec<String> = r.values.iter().map(|(_, v)| v.clone()).collect();
        cells.extend(METRICS.map(|(n, d)| format!("{:.d$}", r.metric(n).unwrap_or(0.0))));
        s.push_str(&cells.join(","));
        s.push('\n');
    }
    s
}
