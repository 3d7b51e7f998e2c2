//! `tlblab sweep`: the cross product of `--over key=v1,v2,...` axes, run in
//! parallel (rayon), results in a fixed order whatever the thread count.

use crate::{apply_variant, run_scenario, RunOptions};
use machine::{Error, Scenario};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// Share of busy CPU time in TLB maintenance (`cycles.flush_share`, or
    /// the measurement window's when the scenario sets one).
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
            flush_share: r
                .window
                .as_ref()
                .map_or(r.cycles.flush_share, |w| w.cycles.flush_share),
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
    let rows = sweep_shard(base, axes, opts, progress, Shard { index: 0, count: 1 })?;
    Ok(rows.into_iter().map(|(_, r)| r).collect())
}

/// [`sweep`] of one shard: the points whose index is `shard.index` modulo
/// `shard.count`, with their indices. Every point is validated, so every
/// shard of a bad sweep fails the same way before it runs anything.
pub fn sweep_shard(
    base: &Scenario,
    axes: &[Axis],
    opts: &RunOptions,
    progress: bool,
    shard: Shard,
) -> Result<Vec<(usize, Row)>, Error> {
    let all = combinations(axes);
    if all.len() > 10_000 {
        return Err(Error::Range(format!(
            "sweep of {} runs (allowed up to 10000)",
            all.len()
        )));
    }
    let scenarios: Vec<Scenario> = all
        .iter()
        .map(|p| {
            let spec: Vec<String> = p.iter().map(|(k, v)| format!("{k}={v}")).collect();
            apply_variant(base, &spec.join(","))
        })
        .collect::<Result<_, _>>()?;
    let (points, scenarios): (Vec<_>, Vec<_>) = all
        .into_iter()
        .zip(scenarios)
        .enumerate()
        .filter(|(i, _)| i % shard.count == shard.index)
        .map(|(i, (p, s))| ((i, p), s))
        .unzip();
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
        .map(|((i, p), r)| r.map(|r| (i, Row::from(p, &r))))
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

/// `sweep.csv` and `sweep.json` of a whole sweep: its base scenario (as
/// JSON), axes and rows in point order.
pub fn outputs(scenario: &Value, axes: &[Axis], rows: &[Row]) -> (String, String) {
    let json = serde_json::to_string_pretty(&json!({
        "scenario": scenario,
        "axes": axes.iter().map(|a| json!({"key": a.key, "values": a.values})).collect::<Vec<_>>(),
        "rows": rows,
    }))
    .expect("json");
    (to_csv(axes, rows), json)
}

/// `--shard I/N`: this job runs the points whose index is I modulo N
/// (0 <= I < N), as a Slurm array task `--shard $SLURM_ARRAY_TASK_ID/N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub fn parse(spec: &str) -> Result<Shard, Error> {
        let bad = || {
            Error::Config(format!(
                "--shard '{spec}' is not I/N with 0 <= I < N <= 10000"
            ))
        };
        let (i, n) = spec.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index >= count || count > 10_000 {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The file a shard writes into its `--out` directory.
    pub fn file_name(&self) -> String {
        format!("shard-{}-of-{}.json", self.index, self.count)
    }
}

/// A shard's file: the whole sweep's description and this shard's rows
/// with their point indices. Floats are stored as their bits so that the
/// merge prints exactly what the unsharded sweep prints.
pub fn shard_doc(base: &Scenario, axes: &[Axis], shard: Shard, rows: &[(usize, Row)]) -> String {
    let rows: Vec<Value> = rows
        .iter()
        .map(|(i, r)| json!({"index": i, "row": exact(serde_json::to_value(r).expect("row"))}))
        .collect();
    serde_json::to_string_pretty(&json!({
        "shard": shard.index,
        "of": shard.count,
        "points": combinations(axes).len(),
        "scenario": exact(base.to_json()),
        "axes": axes.iter().map(|a| json!({"key": a.key, "values": a.values})).collect::<Vec<_>>(),
        "rows": rows,
    }))
    .expect("json")
}

/// Every float as `{"f64_bits": n}` (JSON text does not round-trip them exactly).
fn exact(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => json!({"f64_bits": n.as_f64().expect("f64").to_bits()}),
        Value::Array(a) => Value::Array(a.into_iter().map(exact).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, exact(v))).collect()),
        other => other,
    }
}

/// The inverse of [`exact`].
fn inexact(v: Value) -> Value {
    match v {
        Value::Object(o) if o.len() == 1 && o.get("f64_bits").is_some_and(Value::is_u64) => {
            let bits = o["f64_bits"].as_u64().expect("u64");
            serde_json::Number::from_f64(f64::from_bits(bits)).map_or(Value::Null, Value::Number)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(inexact).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, inexact(v))).collect()),
        other => other,
    }
}

/// A merged sweep: base scenario (JSON), axes, rows in point order.
pub struct Merged {
    pub scenario: Value,
    pub axes: Vec<Axis>,
    pub rows: Vec<Row>,
}

/// Every `shard-*.json` in the directories, parsed, with its path.
fn read_shards(dirs: &[String]) -> Result<Vec<(String, Value)>, Error> {
    let mut docs = Vec::new();
    for d in dirs {
        let rd = std::fs::read_dir(d).map_err(|e| Error::Io(format!("--merge {d}: {e}")))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("shard-") && n.ends_with(".json"))
            .collect();
        names.sort();
        for n in names {
            let path = format!("{d}/{n}");
            let text =
                std::fs::read_to_string(&path).map_err(|e| Error::Io(format!("{path}: {e}")))?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| Error::Config(format!("{path}: not a shard file ({e})")))?;
            docs.push((path, v));
        }
    }
    Ok(docs)
}

/// `sweep --merge DIR...`: read every `shard-I-of-N.json` in the
/// directories; they must describe the same sweep and hold every point once.
pub fn merge(dirs: &[String]) -> Result<Merged, Error> {
    let docs = read_shards(dirs)?;
    let Some((first_path, first)) = docs.first() else {
        return Err(Error::Config(format!(
            "--merge {}: no shard-*.json files",
            dirs.join(" ")
        )));
    };
    let points = first["points"].as_u64().unwrap_or(0) as usize;
    let mut rows: Vec<Option<Row>> = vec![None; points];
    for (path, d) in &docs {
        if let Some(k) = ["of", "points", "scenario", "axes"]
            .iter()
            .find(|k| d[**k] != first[**k])
        {
            return Err(Error::Config(format!(
                "{path}: '{k}' differs from {first_path}: shards of different sweeps"
            )));
        }
        for r in d["rows"].as_array().into_iter().flatten() {
            let i = r["index"]
                .as_u64()
                .map(|i| i as usize)
                .filter(|&i| i < points);
            let row: Option<Row> = serde_json::from_value(inexact(r["row"].clone())).ok();
            let (Some(i), Some(row)) = (i, row) else {
                return Err(Error::Config(format!("{path}: a malformed row")));
            };
            if rows[i].replace(row).is_some() {
                return Err(Error::Config(format!("{path}: point {i} is in two shards")));
            }
        }
    }
    let of = first["of"].as_u64().unwrap_or(1).max(1) as usize;
    let mut lost: Vec<usize> = (0..points)
        .filter(|&i| rows[i].is_none())
        .map(|i| i % of)
        .collect();
    if !lost.is_empty() {
        lost.sort();
        lost.dedup();
        let list: Vec<String> = lost.iter().map(|s| s.to_string()).collect();
        return Err(Error::Config(format!(
            "--merge: points missing: shard(s) {} of {of} not found",
            list.join(", ")
        )));
    }
    let axes = first["axes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| Axis {
            key: a["key"].as_str().unwrap_or("").to_string(),
            values: a["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect(),
        })
        .collect();
    Ok(Merged {
        scenario: inexact(first["scenario"].clone()),
        axes,
        rows: rows.into_iter().flatten().collect(),
    })
}
