//! tlblab as a library: load scenarios, run them, compare variants, the demo.
//! The `tlblab` binary is a thin clap front end over this.

use machine::{CostProfile, Error, Scenario};
use sim::{Report, Sim, SimOptions};
use std::time::Instant;

pub mod calibrate;
pub mod demo;
pub mod plot;
pub mod speed;
pub mod sweep;

/// Scenarios shipped with the binary, usable by name (`tlblab run default`).
pub const BUNDLED: &[(&str, &str)] = &[
    ("default", include_str!("../../../scenarios/default.toml")),
    (
        "usemem-fork-exec",
        include_str!("../../../scenarios/usemem-fork-exec.toml"),
    ),
    (
        "rt-latency",
        include_str!("../../../scenarios/rt-latency.toml"),
    ),
    (
        "defer-race",
        include_str!("../../../scenarios/defer-race.toml"),
    ),
    (
        "vmalloc-race",
        include_str!("../../../scenarios/vmalloc-race.toml"),
    ),
    (
        "lat-pagefault",
        include_str!("../../../scenarios/lat-pagefault.toml"),
    ),
    ("lat-mmap", include_str!("../../../scenarios/lat-mmap.toml")),
    (
        "mmapstress01",
        include_str!("../../../scenarios/mmapstress01.toml"),
    ),
    (
        "cow-reuse-race",
        include_str!("../../../scenarios/cow-reuse-race.toml"),
    ),
    (
        "flush-tlb-info-madvise",
        include_str!("../../../scenarios/flush-tlb-info-madvise.toml"),
    ),
    (
        "tlb-flush-threads",
        include_str!("../../../scenarios/tlb-flush-threads.toml"),
    ),
    (
        "tlb-flush-processes",
        include_str!("../../../scenarios/tlb-flush-processes.toml"),
    ),
    (
        "skip-sync-collapse",
        include_str!("../../../scenarios/skip-sync-collapse.toml"),
    ),
    (
        "collapse-race",
        include_str!("../../../scenarios/collapse-race.toml"),
    ),
    (
        "hugetlb-unshare",
        include_str!("../../../scenarios/hugetlb-unshare.toml"),
    ),
    (
        "collapse-pin",
        include_str!("../../../scenarios/collapse-pin.toml"),
    ),
    (
        "kswapd-reclaim",
        include_str!("../../../scenarios/kswapd-reclaim.toml"),
    ),
    (
        "madvise-pageout-read",
        include_str!("../../../scenarios/madvise-pageout-read.toml"),
    ),
    (
        "migrate-pages",
        include_str!("../../../scenarios/migrate-pages.toml"),
    ),
];

/// Load a scenario from a file path, or a bundled one by name.
pub fn load_scenario(arg: &str) -> Result<Scenario, Error> {
    if let Ok(text) = std::fs::read_to_string(arg) {
        return Scenario::from_toml(&text, arg);
    }
    let stem = arg
        .trim_end_matches(".toml")
        .rsplit('/')
        .next()
        .unwrap_or(arg);
    match BUNDLED.iter().find(|(n, _)| *n == stem) {
        Some((n, text)) => Scenario::from_toml(text, n),
        None => {
            Err(Error::Io(format!(
            "scenario '{arg}': no such file, and no bundled scenario of that name (bundled: {})",
            BUNDLED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        )))
        }
    }
}

/// The scenario `tlblab run [SCENARIO] [--workload W] [--set K=V]...` runs:
/// a file or bundled scenario, else the workload's own defaults (its bundled
/// scenario), else `default`; then the `--set` overrides; validated.
pub fn resolve_scenario(
    arg: Option<&str>,
    workload: Option<&str>,
    sets: &[String],
) -> Result<Scenario, Error> {
    let mut s = match (arg, workload) {
        (Some(a), _) => load_scenario(a)?,
        // A workload alone runs as its benchmark runs: from its bundled scenario.
        (None, Some(w)) => workloads::defaults(w)?,
        (None, None) => load_scenario("default")?,
    };
    if let (Some(w), Some(_)) = (workload, arg) {
        workloads::find(w)?;
        s.workload.name = w.to_string();
        s.name = w.to_string();
    }
    for kv in sets {
        s.set(kv)?;
    }
    s.validate()?;
    Ok(s)
}

/// How a run is carried out (not part of the scenario).
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub profile: Option<String>,
    /// Refuse scenarios whose estimated host memory exceeds this (bytes).
    pub max_memory: u64,
    /// Show a progress bar on stderr when a run takes more than ~2 s.
    pub progress: bool,
    pub stop_on_violation: bool,
    /// Keep and print the run's last this many events (0 = none).
    pub trace: usize,
    /// `run --trace-out`: write the run as a Chrome trace to this file,
    /// holding at most this many events.
    pub trace_out: Option<(String, usize)>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            profile: None,
            max_memory: default_max_memory(),
            progress: false,
            stop_on_violation: false,
            trace: 0,
            trace_out: None,
        }
    }
}

/// Half of the host's RAM (from /proc/meminfo), or 8 GiB if unknown.
pub fn default_max_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024 / 2)
        .unwrap_or(8 << 30)
}

/// Load the cost profile a run uses.
/// Without a file, the bundled profile of the scenario's architecture; a
/// bundled profile's name (not a file) selects that profile.
pub fn load_profile(
    path: Option<&str>,
    arch: machine::scenario::Arch,
) -> Result<CostProfile, Error> {
    match path {
        None => Ok(CostProfile::default_for(arch)),
        Some(p) if !std::path::Path::new(p).exists() && CostProfile::bundled(p).is_some() => {
            Ok(CostProfile::bundled(p).expect("checked"))
        }
        Some(p) => {
            let text =
                std::fs::read_to_string(p).map_err(|e| Error::Io(format!("profile {p}: {e}")))?;
            CostProfile::from_toml(&text, p)
        }
    }
}

/// Wall-clock facts about a run (never part of the deterministic report).
#[derive(Clone, Copy, Debug)]
pub struct WallStats {
    /// Wall-clock seconds of the event loop (`Sim::run`).
    pub seconds: f64,
    /// CPU seconds of the event loop (the calling thread's).
    pub cpu_seconds: f64,
    pub events: u64,
    /// World steps run (events that ran model code).
    pub steps: u64,
}

impl WallStats {
    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.seconds.max(1e-9)
    }
}

/// Build, check the memory estimate, simulate, report.
pub fn run_scenario(s: &Scenario, opts: &RunOptions) -> Result<(Report, WallStats), Error> {
    s.validate()?;
    let need = workloads::estimate_bytes(s)?;
    if need > opts.max_memory {
        return Err(Error::TooBig(format!(
            "scenario needs about {} MiB of host memory, more than --max-memory {} MiB",
            need.div_ceil(1 << 20),
            opts.max_memory >> 20
        )));
    }
    run_with_profile(
        s,
        load_profile(opts.profile.as_deref(), s.machine.arch)?,
        opts,
    )
}

/// [`run_scenario`] with a cost profile already in hand.
pub fn run_with_profile(
    s: &Scenario,
    profile: CostProfile,
    opts: &RunOptions,
) -> Result<(Report, WallStats), Error> {
    s.validate()?;
    let world = workloads::build(s)?;
    let expected: u64 =
        world.tasks.iter().filter(|t| t.measured).count() as u64 * s.workload.iterations;
    let sopts = SimOptions {
        stop_on_violation: opts.stop_on_violation,
        trace_depth: opts.trace,
        ..SimOptions::for_scenario(s)
    };
    let replay_profile = profile.clone();
    let mut sim = Sim::new(world, profile, sopts.clone());
    let recorder = opts
        .trace_out
        .as_ref()
        .map(|(_, cap)| sim::chrome_trace::attach(&mut sim, *cap));
    let t0 = Instant::now();
    let c0 = speed::thread_cpu();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let show = opts.progress;
    let end = sim.run(|sim| {
        if !show || t0.elapsed().as_secs_f64() < 2.0 {
            return;
        }
        let b = bar.get_or_insert_with(|| {
            let b = indicatif::ProgressBar::with_draw_target(
                Some(expected),
                indicatif::ProgressDrawTarget::stderr(),
            );
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} ops {msg}",
                )
                .expect("template"),
            );
            b
        });
        b.set_position(sim.ops_done.min(expected));
        b.set_message(format!("{:.1} ms simulated", sim.now as f64 / 1e6));
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let (Some(rec), Some((path, _))) = (recorder, &opts.trace_out) {
        if let Some(note) = sim::chrome_trace::write(&mut sim, rec, path)? {
            eprintln!("tlblab: {note}");
        }
    }
    let wall = WallStats {
        seconds: t0.elapsed().as_secs_f64(),
        cpu_seconds: speed::thread_cpu() - c0,
        events: sim.events,
        steps: sim.steps,
    };
    let mut report = Report::build(&sim, s.to_json(), end);
    if !report.violations.is_empty() {
        // Deterministic replay with tracing on: the same run, now keeping the
        // events that led to each violation.
        let world = workloads::build(s)?;
        let mut replay = Sim::new(
            world,
            replay_profile,
            SimOptions {
                trace_depth: TRACE_DEPTH,
                ..sopts
            },
        );
        replay.run(|_| {});
        report.violations = replay.violations.clone();
        if opts.trace == 0 {
            report.trace.clear();
        }
    }
    Ok((report, wall))
}

/// Events kept before each violation.
pub const TRACE_DEPTH: usize = 40;

/// A named variant of a base scenario: `key=value[,key=value...]`.
pub fn apply_variant(base: &Scenario, spec: &str) -> Result<Scenario, Error> {
    let mut s = base.clone();
    for kv in spec.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
        s.set(kv)?;
    }
    s.validate()?;
    Ok(s)
}

/// Reads one metric from a report.
pub type Metric = fn(&Report) -> f64;

/// Metrics `compare` puts side by side: name and how to read it from a report.
pub fn compare_rows(arch: machine::scenario::Arch) -> Vec<(&'static str, Metric)> {
    use machine::scenario::Arch;
    fn op(r: &Report) -> Option<&sim::report::OpReport> {
        r.main_op()
    }
    fn per_op(r: &Report, row: &str) -> f64 {
        let n = op(r).map_or(0, |o| o.count).max(1) as f64;
        r.interrupt_totals[row] as f64 / n
    }
    let mut rows: Vec<(&'static str, Metric)> = vec![
        ("us/op (mean)", |r| {
            op(r).map_or(0.0, |o| o.latency_ns.mean / 1000.0)
        }),
        ("p99 ns", |r| op(r).map_or(0.0, |o| o.latency_ns.p99 as f64)),
        ("p99.9 ns", |r| {
            op(r).map_or(0.0, |o| o.latency_ns.p999 as f64)
        }),
        ("max ns", |r| op(r).map_or(0.0, |o| o.latency_ns.max as f64)),
        ("ops/s", |r| op(r).map_or(0.0, |o| o.per_sec)),
        ("2nd op ops/s", |r| {
            r.ops
                .get(1)
                .filter(|o| o.name != "flush_tlb_mm_range")
                .map_or(0.0, |o| o.per_sec)
        }),
    ];
    let ipi_rows: Vec<(&'static str, Metric)> = vec![
        ("TLB total", |r| r.interrupt_totals["TLB"] as f64),
        ("CAL total", |r| r.interrupt_totals["CAL"] as f64),
        ("TLB per op", |r| per_op(r, "TLB")),
        ("CAL per op", |r| per_op(r, "CAL")),
    ];
    match arch {
        Arch::X86 => {
            rows.extend(ipi_rows);
            rows.push(("remote_send_ipi", |r| r.tlb_flush["remote_send_ipi"] as f64));
            rows.push(("flush us (mean)", |r| {
                r.ops
                    .iter()
                    .find(|o| o.name == "flush_tlb_mm_range")
                    .map_or(0.0, |o| o.latency_ns.mean / 1000.0)
            }));
        }
        Arch::Arm64 => {
            rows.push(("TLBI IS ops", |r| r.arch["tlbi_is"] as f64));
            rows.push(("local TLBIs", |r| r.arch["tlbi_local"] as f64));
            rows.push(("DVM wait ms", |r| r.cycles.dvm_wait_ns as f64 / 1e6));
        }
        Arch::Riscv => {
            rows.extend(ipi_rows);
            rows.push(("SBI rfences", |r| r.arch["sbi_rfence"] as f64));
            rows.push(("deferred flushes", |r| r.arch["deferred_flushes"] as f64));
        }
    }
    rows.push(("flush share %", |r| r.cycles.flush_share * 100.0));
    rows.push(("spurious faults", |r| r.spurious_faults as f64));
    rows.push(("sim time ms", |r| r.sim_time_ns as f64 / 1e6));
    rows.push(("violations", |r| r.violations.len() as f64));
    rows
}

/// Render a comparison table: one column per run, ratios against the first.
pub fn compare_table(labels: &[String], reports: &[Report]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let w = labels
        .iter()
        .map(|l| l.len())
        .max()
        .unwrap_or(8)
        .clamp(12, 48);
    let _ = write!(s, "{:<18}", "metric");
    for l in labels {
        let _ = write!(s, " | {l:>w$}");
    }
    let _ = writeln!(s);
    let arch = reports[0]
        .scenario
        .pointer("/machine/arch")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or(machine::scenario::Arch::X86);
    for (name, f) in compare_rows(arch) {
        let base = f(&reports[0]);
        let _ = write!(s, "{name:<18}");
        for (i, r) in reports.iter().enumerate() {
            let v = f(r);
            let cell = if i == 0 || base == 0.0 {
                fmt_num(v)
            } else {
                format!("{} ({:+.2}%)", fmt_num(v), (v / base - 1.0) * 100.0)
            };
            let _ = write!(s, " | {cell:>w$}");
        }
        let _ = writeln!(s);
    }
    s
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.4}")
    }
}
