//! `tlblab bench`: the real workload on this host's kernel, optionally next to the model.

use machine::Error;
use tlblab::{run_scenario, RunOptions};

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args {
        workload,
        iterations,
        threads,
        vs_model,
        no_trace,
        json,
    } = args;
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
    let model = if vs_model {
        Some(model_of(&workload, ncpu, threads, iterations)?)
    } else {
        None
    };
    if json {
        let v = serde_json::json!({"host": host, "model": model});
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return Ok(0);
    }
    print_table(&host, model.as_ref(), &workload, ncpu, threads);
    Ok(0)
}

/// `--vs-model`: the same workload simulated at the host's CPU count,
/// with the region or file size and the iterations the host program used.
fn model_of(
    workload: &str,
    ncpu: u32,
    threads: u32,
    iterations: u64,
) -> Result<sim::Report, Error> {
    // The workload's own bundled scenario, moved to this host: its
    // architecture and CPUs, no noise knob (the host programs pin their
    // threads and children, except mmapstress01, which runs LTP's shape
    // unpinned as the model's workload does), the host run's threads.
    let mut s = workloads::defaults(workload)?;
    s.set(&format!("machine.arch={}", host_arch()))?;
    s.set(&format!("machine.cpus={ncpu}"))?;
    s.set("machine.migrate_pct=0")?;
    s.set(&format!("workload.threads={threads}"))?;
    // The region or file the host program uses (bench::run).
    match workload {
        "tlb_flush_threads" | "tlb_flush_processes" | "lat_pagefault" | "lat_mmap" => {
            s.set("workload.size=1MiB")?
        }
        "mmapstress01" => s.set("workload.size=4KiB")?,
        // One pinned thread collapses 64 MiB (bench::collapse), no GUP threads.
        "khugepaged_collapse" => {
            s.set("workload.size=64MiB")?;
            s.set("workload.threads=0")?
        }
        _ => {}
    }
    // mmapstress01's iterations are children forked (the host caps them at 2000).
    let cap = if workload == "mmapstress01" {
        2000
    } else {
        200_000
    };
    s.set(&format!("workload.iterations={}", iterations.min(cap)))?;
    Ok(run_scenario(&s, &RunOptions::default())?.0)
}

/// The model's name for the architecture this binary runs on.
fn host_arch() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "arm64"
    } else if cfg!(target_arch = "riscv64") {
        "riscv"
    } else {
        "x86"
    }
}

/// The model's op that matches the host program's: one 2 MiB
/// `collapse_huge_page` for khugepaged_collapse (not the whole
/// `MADV_COLLAPSE` call), else the workload's main op.
fn host_op<'a>(m: &'a sim::Report, workload: &str) -> Option<&'a sim::report::OpReport> {
    match workload {
        "khugepaged_collapse" => m.ops.iter().find(|o| o.name == "collapse_huge_page"),
        _ => m.main_op(),
    }
}

/// The host's figures per op next to the model's, then the host's
/// `tlb:tlb_flush` reasons.
fn print_table(
    host: &bench::HostReport,
    model: Option<&sim::Report>,
    workload: &str,
    ncpu: u32,
    threads: u32,
) {
    let n = host.op_count().max(1) as f64;
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
    let per_op = |m: &sim::Report, row: &str| {
        m.interrupt_totals[row] as f64 / host_op(m, workload).map_or(1, |o| o.count) as f64
    };
    let rows: Vec<(&str, f64, Option<f64>)> = vec![
        (
            "us/op",
            host.us_per_op(),
            model
                .and_then(|m| host_op(m, workload))
                .map(|o| o.latency_ns.mean / 1000.0),
        ),
        (
            "TLB per op",
            t["TLB"] as f64 / n,
            model.map(|m| per_op(m, "TLB")),
        ),
        (
            "CAL per op",
            t["CAL"] as f64 / n,
            model.map(|m| per_op(m, "CAL")),
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
