//! The `tlblab` command line.

use clap::{Parser, Subcommand};
use machine::{scenario::Size, Cost, CostProfile, Error, Scenario};
use std::process::ExitCode;
use tlblab::{apply_variant, compare_table, load_scenario, run_scenario, RunOptions};

#[derive(Parser)]
#[command(
    name = "tlblab",
    version,
    about = "A lab for Linux TLB-flush strategies: simulate, check, measure"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct Common {
    /// Override a scenario field: dotted.key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Use this cost profile instead of the bundled one.
    #[arg(long, value_name = "FILE")]
    profile: Option<String>,
    /// Refuse scenarios estimated to need more host memory (default: half of RAM).
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Stop at the first invariant violation.
    #[arg(long)]
    stop_on_violation: bool,
    /// Print the last N events of the run (kernel paths, IPIs, flushes, faults)
    #[arg(long, value_name = "N", default_value_t = 0)]
    trace: usize,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulate one scenario (a file, a bundled name, or --workload).
    Run {
        /// Scenario file or bundled scenario name.
        scenario: Option<String>,
        /// Run this workload on the default scenario instead.
        #[arg(long)]
        workload: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Run a scenario and variants of it side by side.
    Compare {
        scenario: Option<String>,
        #[arg(long)]
        workload: Option<String>,
        /// A variant: "key=value[,key=value...]" (repeatable).
        #[arg(long = "vs", value_name = "KEY=VALUE,...", required = true)]
        vs: Vec<String>,
        /// Also draw the main op's latency CDF of every variant to this SVG.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Run the cross product of --over axes in parallel; write CSV and JSON.
    Sweep {
        scenario: Option<String>,
        #[arg(long)]
        workload: Option<String>,
        /// An axis: "key=v1,v2,..." (repeatable; the first varies slowest).
        #[arg(long = "over", value_name = "KEY=V1,V2,...", required = true)]
        over: Vec<String>,
        /// Directory for sweep.csv and sweep.json.
        #[arg(long, default_value = "target/tlblab-sweep")]
        out: String,
        /// Also draw a metric against the last axis, one line per value of
        /// the other axes, to this SVG.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<String>,
        /// The metric --plot draws (a sweep.csv column).
        #[arg(long, default_value = "us_per_op")]
        y: String,
        #[command(flatten)]
        common: Common,
    },
    /// Explore every interleaving of a small configuration (or --all).
    Check {
        /// A check from the catalogue (`tlblab check --all` lists them).
        name: Option<String>,
        /// Run the whole catalogue and print a verdict table.
        #[arg(long)]
        all: bool,
        /// Override a setting of the check's scenario (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        #[arg(long, default_value_t = 400)]
        max_depth: usize,
        #[arg(long, default_value_t = 2_000_000)]
        max_states: usize,
        /// Symmetry reduction over the check's interchangeable CPUs (where
        /// it declares some): `off` explores every renamed copy, to compare.
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        symmetry: String,
        #[arg(long)]
        json: bool,
        /// Worker threads of the exploration (0: one per core). Verdicts,
        /// counts and counterexamples do not depend on it.
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
    /// Run the real workload on this host's kernel (threads pinned, /proc/interrupts deltas).
    Bench {
        workload: String,
        #[arg(long, default_value_t = 100_000)]
        iterations: u64,
        /// Busy threads (madvise_dontneed; default one per other CPU, at most 3),
        /// tasks (tlb_flush_threads: same default; tlb_flush_processes: one per
        /// CPU, at most 4), children alive (mmapstress01: LTP's min(cpus-1, 20)).
        #[arg(long)]
        threads: Option<u32>,
        /// Also simulate the same workload at the host's CPU count and compare.
        #[arg(long)]
        vs_model: bool,
        /// Do not count tlb:tlb_flush through tracefs (the tracepoint slows each flush).
        #[arg(long)]
        no_trace: bool,
        #[arg(long)]
        json: bool,
    },
    /// Fit the cost profile to this host and write it (use with --profile).
    Calibrate {
        #[arg(long, default_value = "target/tlblab-calibrated.toml")]
        out: String,
        #[arg(long, default_value_t = 100_000)]
        iterations: u64,
    },
    /// Compare host and model on a workload the calibration did not fit.
    Validate {
        /// Profile to validate (default: calibrate now).
        #[arg(long)]
        profile: Option<String>,
        #[arg(long, default_value_t = 1000)]
        iterations: u64,
        /// Validate against a Linux guest booted under QEMU instead of this host
        /// (needs scripts/install-guest.sh; KVM when /dev/kvm opens, else TCG).
        #[arg(long)]
        guest: bool,
        /// vCPUs of the guest (with --guest).
        #[arg(long, default_value_t = 8)]
        cpus: u32,
        /// Paravirtual TLB flush in the guest: on, off or both (with --guest; on needs KVM).
        #[arg(long, default_value = "both")]
        paravirt: String,
        /// Seconds to wait for each guest boot.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
    /// The benchmark side of `validate --guest`: PID 1 of the guest's initramfs.
    #[command(hide = true)]
    GuestAgent {
        #[arg(long, default_value_t = 2000)]
        madvise_iterations: u64,
        #[arg(long, default_value_t = 64)]
        collapse_mib: u64,
        #[arg(long, default_value_t = 2)]
        collapse_rounds: u64,
    },
    /// List workloads, switches, bundled scenarios and cost-profile entries.
    List,
    /// Every seed result built so far, as tables like the cover letters'.
    Demo {
        /// Iterations of the madvise experiment (others scale from it).
        #[arg(long, default_value_t = 20000)]
        iterations: u64,
    },
    /// Throughput of the simulator (every bundled scenario) and the checker,
    /// each next to a bare baseline measured in the same run.
    Speed {
        /// Scenarios to simulate (default: every bundled one).
        names: Vec<String>,
        /// Checks to explore with symmetry off (repeatable).
        #[arg(long = "check", default_values_t = ["x86_madvise_race_4cpu".to_string()])]
        checks: Vec<String>,
        /// Skip the checker.
        #[arg(long)]
        no_check: bool,
        /// Checker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        #[arg(long)]
        json: bool,
    },
}

/// mimalloc for small blocks, the system allocator for large ones (see
/// `tlblab::speed::SplitAlloc`).
#[global_allocator]
static GLOBAL: tlblab::speed::SplitAlloc = tlblab::speed::SplitAlloc;

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes
    // away (`tlblab check --all | head`) instead of panicking on EPIPE.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE at start-up.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tlblab: {e}");
            ExitCode::from(2)
        }
    }
}

fn scenario_of(
    arg: Option<&str>,
    workload: Option<&str>,
    common: &Common,
) -> Result<Scenario, Error> {
    let mut s = match arg {
        Some(a) => load_scenario(a)?,
        None => load_scenario("default")?,
    };
    if let Some(w) = workload {
        workloads::find(w)?;
        s.workload.name = w.to_string();
        s.name = w.to_string();
    }
    for kv in &common.set {
        s.set(kv)?;
    }
    s.validate()?;
    Ok(s)
}

fn options(common: &Common) -> Result<RunOptions, Error> {
    let mut o = RunOptions {
        profile: common.profile.clone(),
        progress: !common.json,
        ..RunOptions::default()
    };
    if let Some(m) = &common.max_memory {
        o.max_memory = Size::parse(m)
            .map_err(|e| Error::Config(format!("--max-memory: {e}")))?
            .0;
    }
    o.stop_on_violation = common.stop_on_violation;
    if common.trace > 100_000 {
        return Err(Error::Range(format!(
            "--trace {} (allowed 0..=100000 events)",
            common.trace
        )));
    }
    o.trace = common.trace;
    Ok(o)
}

/// A validation table: metric, `source` (host or guest), model, ratio and
/// tolerance with its verdict. Returns whether every row is within.
fn print_checks(source: &str, rows: &[tlblab::calibrate::Check]) -> bool {
    println!(
        "{:<32} {:>12} {:>12} {:>8} {:>10}",
        "metric", source, "model", "ratio", "within"
    );
    for r in rows {
        println!(
            "{:<32} {:>12.4} {:>12.4} {:>8.3} {:>9.0}% {}",
            r.metric,
            r.host,
            r.model,
            r.model / r.host.max(1e-12),
            r.tolerance * 100.0,
            if r.ok() { "ok" } else { "OUT" }
        );
    }
    rows.iter().all(|r| r.ok())
}

/// `tlblab validate --guest`: one table per guest boot (paravirt off / on).
#[cfg(target_os = "linux")]
fn validate_guest(
    profile: Option<String>,
    iterations: u64,
    cpus: u32,
    paravirt: &str,
    timeout: u64,
) -> Result<u8, Error> {
    let modes: &[bool] = match paravirt {
        "off" => &[false],
        "on" => &[true],
        "both" if bench::guest::kvm_usable() => &[false, true],
        "both" => {
            eprintln!(
                "note: KVM unusable ({}): TCG guest, paravirt flush off only",
                bench::guest::kvm_unusable_reason().unwrap_or("?")
            );
            &[false]
        }
        other => {
            return Err(Error::Config(format!(
                "--paravirt {other} (expected on, off or both)"
            )))
        }
    };
    let p = tlblab::load_profile(profile.as_deref(), machine::scenario::Arch::X86)?;
    let mut all = true;
    for &pv in modes {
        let plan = bench::guest::GuestPlan {
            cpus,
            paravirt: pv,
            madvise_iterations: iterations,
            collapse_mib: 64,
            collapse_rounds: 2,
            timeout: std::time::Duration::from_secs(timeout),
        };
        let v = tlblab::calibrate::validate_guest(&p, &plan)?;
        let g = &v.run;
        println!(
            "guest {} ({}, {cpus} vCPUs on {} host CPUs), paravirt flush {} (guest kernel chose {}), busy vCPUs preempted {:.1}% of the time",
            g.kernel,
            g.accel,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            if pv { "offered" } else { "hidden" },
            if g.pv_tlb_flush { "kvm_flush_tlb_multi" } else { "native_flush_tlb_multi" },
            g.steal_fraction * 100.0
        );
        all &= print_checks("guest", &v.rows);
        for (metric, h, m) in &v.info {
            println!(
                "{metric:<32} {h:>12.2} {m:>12.2} {:>8.3} {:>10}",
                m / h.max(1e-12),
                "(info)"
            );
        }
        println!();
    }
    Ok(u8::from(!all))
}

#[cfg(not(target_os = "linux"))]
fn validate_guest(_: Option<String>, _: u64, _: u32, _: &str, _: u64) -> Result<u8, Error> {
    Err(Error::Unsupported(
        "validate --guest needs a Linux host".into(),
    ))
}

fn real_main(cli: Cli) -> Result<u8, Error> {
    match cli.cmd {
        Cmd::Run {
            scenario,
            workload,
            common,
        } => {
            let s = scenario_of(scenario.as_deref(), workload.as_deref(), &common)?;
            let (r, wall) = run_scenario(&s, &options(&common)?)?;
            if common.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&r).expect("report serialises")
                );
            } else {
                print!("{}", r.text());
                eprintln!(
                    "  wall {:.3} s, {:.2} M events/s",
                    wall.seconds,
                    wall.events_per_sec() / 1e6
                );
            }
        }
        Cmd::Compare {
            scenario,
            workload,
            vs,
            plot,
            common,
        } => {
            let base = scenario_of(scenario.as_deref(), workload.as_deref(), &common)?;
            let opts = options(&common)?;
            let mut labels = vec!["as given".to_string()];
            let mut scenarios = vec![base.clone()];
            for v in &vs {
                scenarios.push(apply_variant(&base, v)?);
                labels.push(v.clone());
            }
            let mut reports = Vec::new();
            for s in &scenarios {
                reports.push(run_scenario(s, &opts)?.0);
            }
            if common.json {
                let runs: Vec<_> = labels
                    .iter()
                    .zip(&reports)
                    .map(|(l, r)| serde_json::json!({"label": l, "report": r}))
                    .collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({"runs": runs})).expect("json")
                );
            } else {
                println!(
                    "scenario {} ({} CPUs, workload {})",
                    base.name, base.machine.cpus, base.workload.name
                );
                print!("{}", compare_table(&labels, &reports));
            }
            if let Some(path) = plot {
                let svg = tlblab::plot::latency_cdf(&base.name, &labels, &reports)
                    .map_err(Error::Config)?;
                std::fs::write(&path, svg).map_err(|e| Error::Io(format!("{path}: {e}")))?;
                eprintln!("wrote {path}");
            }
        }
        Cmd::Sweep {
            scenario,
            workload,
            over,
            out,
            plot,
            y,
            common,
        } => {
            let base = scenario_of(scenario.as_deref(), workload.as_deref(), &common)?;
            let axes: Vec<tlblab::sweep::Axis> = over
                .iter()
                .map(|o| tlblab::sweep::Axis::parse(o))
                .collect::<Result<_, _>>()?;
            let opts = options(&common)?;
            if plot.is_some() && !tlblab::sweep::METRICS.iter().any(|(n, _)| *n == y) {
                return Err(Error::Config(format!(
                    "--y {y}: not a sweep metric ({})",
                    tlblab::sweep::metric_names()
                )));
            }
            let rows = tlblab::sweep::sweep(&base, &axes, &opts, !common.json)?;
            let csv = tlblab::sweep::to_csv(&axes, &rows);
            let json = serde_json::to_string_pretty(&serde_json::json!({
                "scenario": base.to_json(),
                "axes": axes.iter().map(|a| serde_json::json!({"key": a.key, "values": a.values})).collect::<Vec<_>>(),
                "rows": rows,
            }))
            .expect("json");
            std::fs::create_dir_all(&out).map_err(|e| Error::Io(format!("{out}: {e}")))?;
            std::fs::write(format!("{out}/sweep.csv"), &csv)
                .map_err(|e| Error::Io(format!("{out}/sweep.csv: {e}")))?;
            std::fs::write(format!("{out}/sweep.json"), &json)
                .map_err(|e| Error::Io(format!("{out}/sweep.json: {e}")))?;
            if common.json {
                println!("{json}");
            } else {
                print!("{csv}");
                eprintln!("wrote {out}/sweep.csv and {out}/sweep.json");
            }
            if let Some(path) = plot {
                let svg = tlblab::plot::sweep_chart(&base.name, &axes, &rows, &y)
                    .map_err(Error::Config)?;
                std::fs::write(&path, svg).map_err(|e| Error::Io(format!("{path}: {e}")))?;
                eprintln!("wrote {path}");
            }
        }
        Cmd::Check {
            name,
            all,
            set,
            max_depth,
            max_states,
            symmetry,
            json,
            threads,
        } => {
            check::set_threads(threads);
            let bounds = check::Bounds {
                max_depth,
                max_states,
            };
            let symmetry = symmetry == "on";
            if all {
                return check_all(&set, bounds, symmetry, json);
            }
            let name =
                name.ok_or_else(|| Error::Config("tlblab check needs a NAME or --all".into()))?;
            let c = check::configs::find(&name)?;
            let o = check::configs::run(c, &set, bounds, symmetry)?;
            let sym = match (o.symmetry.is_empty(), c.sym.is_empty()) {
                (false, _) => format!(" (symmetry: {})", check::groups_text(&o.symmetry)),
                (true, false) => " (symmetry off)".to_string(),
                (true, true) => String::new(),
            };
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({"check": name, "outcome": o}))
                        .expect("json")
                );
            } else if o.verdict == "unsafe" {
                println!(
                    "unsafe: {} states, {} transitions, counterexample of {} steps, {:.2} s{sym}",
                    o.states, o.transitions, o.depth, o.seconds
                );
                for l in &o.counterexample {
                    println!("  {l}");
                }
            } else {
                println!(
                    "{}: {} states, {} transitions, depth {}, {:.2} s, {:.0} states/s{sym}",
                    o.verdict,
                    o.states,
                    o.transitions,
                    o.depth,
                    o.seconds,
                    o.states as f64 / o.seconds.max(1e-9)
                );
            }
            return Ok(u8::from(o.verdict == "unsafe"));
        }
        Cmd::Bench {
            workload,
            iterations,
            threads,
            vs_model,
            no_trace,
            json,
        } => {
            let ncpu = std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1);
            // Busy threads for madvise_dontneed; tasks (one per CPU) for the
            // tlb_flush pair; children alive at once for mmapstress01.
            let threads = threads.unwrap_or(match workload.as_str() {
                "tlb_flush_processes" => ncpu.min(4),
                "mmapstress01" => bench::mmapstress::default_children(ncpu as usize),
                _ => (ncpu - 1).min(3),
            });
            let host = bench::run_with(&workload, threads, iterations, !no_trace)?;
            let n = host.op_count().max(1) as f64;
            let model = if vs_model {
                let mut s = load_scenario("default")?;
                s.set(&format!("machine.cpus={ncpu}"))?;
                s.set(&format!("workload.name={workload}"))?;
                s.set(&format!("workload.threads={threads}"))?;
                // The region or file the host program uses (bench::run).
                match workload.as_str() {
                    "tlb_flush_threads" | "tlb_flush_processes" | "lat_pagefault" | "lat_mmap" => {
                        s.set("workload.size=1MiB")?
                    }
                    "mmapstress01" => s.set("workload.size=4KiB")?,
                    _ => {}
                }
                // mmapstress01's iterations are children forked (the host caps them at 2000).
                let cap = if workload == "mmapstress01" {
                    2000
                } else {
                    200_000
                };
                s.set(&format!("workload.iterations={}", iterations.min(cap)))?;
                Some(run_scenario(&s, &RunOptions::default())?.0)
            } else {
                None
            };
            if json {
                let v = serde_json::json!({"host": host, "model": model});
                println!("{}", serde_json::to_string_pretty(&v).expect("json"));
                return Ok(0);
            }
            let t = &host.interrupt_totals;
            println!(
                "host {} ({} CPUs), {workload}, threads {threads}, {} ops",
                host.host["kernel"].as_str().unwrap_or("?"),
                ncpu,
                host.op_count()
            );
            println!(
                "{:<14} {:>12} {:>12} {:>8}",
                "metric", "host", "model", "ratio"
            );
            let rows: Vec<(&str, f64, Option<f64>)> = vec![
                (
                    "us/op",
                    host.us_per_op(),
                    model
                        .as_ref()
                        .and_then(|m| m.main_op())
                        .map(|o| o.latency_ns.mean / 1000.0),
                ),
                (
                    "TLB per op",
                    t["TLB"] as f64 / n,
                    model.as_ref().map(|m| {
                        m.interrupt_totals["TLB"] as f64 / m.main_op().map_or(1, |o| o.count) as f64
                    }),
                ),
                (
                    "CAL per op",
                    t["CAL"] as f64 / n,
                    model.as_ref().map(|m| {
                        m.interrupt_totals["CAL"] as f64 / m.main_op().map_or(1, |o| o.count) as f64
                    }),
                ),
            ];
            for (name, h, m) in rows {
                match m {
                    Some(m) => println!("{name:<14} {h:>12.4} {m:>12.4} {:>8.3}", m / h.max(1e-12)),
                    None => println!("{name:<14} {h:>12.4}"),
                }
            }
            let flushes: Vec<String> = host
                .tlb_flush
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            if !flushes.is_empty() {
                println!("tlb:tlb_flush  {}", flushes.join(", "));
            }
            if let Some(note) = host.host["tracefs"].as_str() {
                println!("tracefs: {note}");
            }
        }
        Cmd::Calibrate { out, iterations } => {
            let c = tlblab::calibrate::calibrate(iterations)?;
            if let Some(dir) = std::path::Path::new(&out)
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
            }
            std::fs::write(&out, c.profile.to_toml())
                .map_err(|e| Error::Io(format!("{out}: {e}")))?;
            println!(
                "{:<22} {:>10} {:>14} {:>16} {:>8}",
                "metric", "host", "model default", "model calibrated", "ratio"
            );
            for r in &c.rows {
                println!(
                    "{:<22} {:>10.4} {:>14.4} {:>16.4} {:>8.3}",
                    r.metric,
                    r.host,
                    r.before,
                    r.after,
                    r.after / r.host.max(1e-12)
                );
            }
            println!("wrote {out}; use it with: tlblab run --profile {out}");
        }
        Cmd::Validate {
            profile,
            iterations,
            guest: true,
            cpus,
            paravirt,
            timeout,
        } => return validate_guest(profile, iterations, cpus, &paravirt, timeout),
        Cmd::Validate {
            profile,
            iterations,
            ..
        } => {
            let p = match profile {
                Some(path) => tlblab::load_profile(Some(&path), machine::scenario::Arch::X86)?,
                None => tlblab::calibrate::calibrate(50_000)?.profile,
            };
            let rows = tlblab::calibrate::validate(&p, iterations)?;
            return Ok(u8::from(!print_checks("host", &rows)));
        }
        #[cfg(target_os = "linux")]
        Cmd::GuestAgent {
            madvise_iterations,
            collapse_mib,
            collapse_rounds,
        } => bench::guest::agent_main(madvise_iterations, collapse_mib, collapse_rounds),
        #[cfg(not(target_os = "linux"))]
        Cmd::GuestAgent { .. } => {
            return Err(Error::Unsupported("the guest agent runs on Linux".into()))
        }
        Cmd::List => {
            println!("workloads:");
            for w in workloads::catalogue() {
                println!(
                    "  {:<22} {}\n  {:<22} keys: {}",
                    w.name, w.about, "", w.keys
                );
            }
            println!("\nswitches (--set key=value):");
            for (k, v, about) in Scenario::switches() {
                println!("  {k:<36} {v:<42} {about}");
            }
            println!("\nbundled scenarios:");
            for (n, _) in tlblab::BUNDLED {
                println!("  {n}");
            }
            use machine::scenario::Arch;
            let ps: Vec<CostProfile> = [Arch::X86, Arch::Arm64, Arch::Riscv]
                .into_iter()
                .map(CostProfile::default_for)
                .collect();
            println!("\nbundled cost profiles (the default is the one of machine.arch; sources in crates/machine/profiles/):");
            for p in &ps {
                println!("  {:<20} {}", p.name, p.description);
            }
            println!(
                "\n  {:<24} {:>9} {:>9} {:>9}  x86 source",
                "cost (ns)", "x86", "arm64", "riscv"
            );
            for c in Cost::ALL {
                println!(
                    "  {:<24} {:>9.1} {:>9.1} {:>9.1}  {}",
                    c.name(),
                    ps[0].ns(*c),
                    ps[1].ns(*c),
                    ps[2].ns(*c),
                    ps[0].source(*c)
                );
            }
        }
        Cmd::Demo { iterations } => {
            if iterations == 0 || iterations > 10_000_000 {
                return Err(Error::Range(format!(
                    "--iterations {iterations} (allowed 1..=10000000)"
                )));
            }
            let opts = RunOptions {
                progress: false,
                ..RunOptions::default()
            };
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(2),
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {pos}/{len} {msg}",
                )
                .expect("template"),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar.set_message("seed experiments and check --all");
            // The seed runs and the exhaustive checks are independent.
            let (tables, checks) = rayon::join(
                || tlblab::demo::demo(&opts, iterations),
                tlblab::demo::checks,
            );
            let mut tables = tables?;
            tables.push_str(&checks?.0);
            bar.inc(1);
            bar.set_message("figure sweeps");
            let figs = tlblab::demo::figures(&opts)?;
            bar.finish_and_clear();
            print!("{tables}");
            let path = tlblab::demo::write_report("target/tlblab-report", &tables, &figs)?;
            println!("\nreport: {path}");
        }
        Cmd::Speed {
            names,
            checks,
            no_check,
            threads,
            json,
        } => {
            check::set_threads(threads);
            let checks = if no_check { Vec::new() } else { checks };
            tlblab::speed::speed(&names, &checks, json)?;
        }
    }
    Ok(0)
}

fn check_all(
    set: &[String],
    bounds: check::Bounds,
    symmetry: bool,
    json: bool,
) -> Result<u8, Error> {
    let mut rows = Vec::new();
    let mut ok = true;
    for c in check::configs::CATALOGUE {
        let o = check::configs::run(c, set, bounds, symmetry)?;
        let expected = if c.expect_safe { "safe" } else { "unsafe" };
        let pass = o.verdict == expected;
        ok &= pass;
        rows.push((c, expected, pass, o));
    }
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(c, e, p, o)| serde_json::json!({"check": c.name, "expected": e, "pass": p, "outcome": o}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        println!(
            "{:<32} {:>8} {:>8} {:>9} {:>11} {:>6} {:>8} {:>12} {:>9}  ",
            "check",
            "expected",
            "verdict",
            "states",
            "transitions",
            "depth",
            "seconds",
            "states/s",
            "symmetry"
        );
        for (c, e, p, o) in &rows {
            let sym = if o.symmetry.is_empty() {
                "-".to_string()
            } else {
                check::groups_text(&o.symmetry)
            };
            println!(
                "{:<32} {:>8} {:>8} {:>9} {:>11} {:>6} {:>8.2} {:>12.0} {:>9}  {}",
                c.name,
                e,
                o.verdict,
                o.states,
                o.transitions,
                o.depth,
                o.seconds,
                o.states as f64 / o.seconds.max(1e-9),
                sym,
                if *p { "ok" } else { "UNEXPECTED" }
            );
        }
        for (c, _, _, o) in rows.iter().filter(|r| r.3.verdict == "unsafe") {
            println!("\n{} ({}): counterexample", c.name, c.about);
            for l in &o.counterexample {
                println!("  {l}");
            }
        }
    }
    Ok(u8::from(!ok))
}
