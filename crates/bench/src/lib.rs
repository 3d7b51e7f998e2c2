//! `tlblab bench`: run the real equivalent of a simulated workload on this
//! host's kernel, with threads pinned, and read `/proc/interrupts` before and
//! after. The output has the same keys as `tlblab run --json`, so host and
//! model can be put side by side.

#[cfg(target_os = "linux")]
pub mod collapse;
#[cfg(target_os = "linux")]
pub mod guest;
#[cfg(target_os = "linux")]
pub mod guest_fork;
#[cfg(target_os = "linux")]
pub mod guest_ltp;
pub mod interrupts;
#[cfg(target_os = "linux")]
pub mod lat;
#[cfg(target_os = "linux")]
pub mod madvise;
#[cfg(target_os = "linux")]
pub mod mmapstress;
#[cfg(target_os = "linux")]
pub(crate) mod procs;
#[cfg(target_os = "linux")]
pub mod tlb_flush;
#[cfg(target_os = "linux")]
pub mod tracefs;

use machine::Error;

/// Results of a host run, shaped like the simulator's report.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct HostReport {
    pub scenario: serde_json::Value,
    pub sim_time_ns: u64,
    pub events: u64,
    pub interrupts: std::collections::BTreeMap<String, Vec<u64>>,
    pub interrupt_totals: std::collections::BTreeMap<String, u64>,
    pub tlb_flush: std::collections::BTreeMap<String, u64>,
    pub ops: Vec<serde_json::Value>,
    pub spurious_faults: u64,
    pub violations: Vec<serde_json::Value>,
    pub arch: std::collections::BTreeMap<String, u64>,
    pub host: serde_json::Value,
}

impl HostReport {
    /// Mean latency of the first op in µs.
    pub fn us_per_op(&self) -> f64 {
        self.ops
            .first()
            .and_then(|o| o["latency_ns"]["mean"].as_f64())
            .unwrap_or(0.0)
            / 1000.0
    }
    /// The median op time in µs (the collapse bench records each round's
    /// time per extent, so this is the median round).
    pub fn us_per_op_median(&self) -> f64 {
        self.ops
            .first()
            .and_then(|o| o["latency_ns"]["p50"].as_f64())
            .unwrap_or(0.0)
            / 1000.0
    }
    /// Operations counted.
    pub fn op_count(&self) -> u64 {
        self.ops
            .first()
            .and_then(|o| o["count"].as_u64())
            .unwrap_or(0)
    }
}

/// Why the host cannot run the IPI benchmarks, if it cannot: fewer than
/// 2 CPUs, or no TLB/CAL rows in `/proc/interrupts`.
pub fn host_unsuitable() -> Option<&'static str> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if ncpu < 2 || interrupts::read(&["TLB", "CAL"]).is_err() {
        return Some("needs 2 CPUs and TLB/CAL rows in /proc/interrupts");
    }
    None
}

/// The workloads [`run`] knows.
pub const WORKLOADS: [&str; 7] = [
    "madvise_dontneed",
    "tlb_flush_threads",
    "tlb_flush_processes",
    "mmapstress01",
    "khugepaged_collapse",
    "lat_pagefault",
    "lat_mmap",
];

/// One host benchmark at a time in this process: they read system-wide
/// counters (and share one tracefs instance name).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run a host benchmark by workload name, counting `tlb:tlb_flush` by reason
/// through tracefs when it can (see `traced`).
pub fn run(workload: &str, threads: u32, iterations: u64) -> Result<HostReport, Error> {
    run_with(workload, threads, iterations, true)
}

/// [`run`], with tracefs counting on or off: the enabled tracepoint costs
/// time on every flush (~8% on madvise_dontneed's µs/op on a 2-CPU VM), so
/// latency fits (calibrate) should run untraced.
pub fn run_with(
    workload: &str,
    threads: u32,
    iterations: u64,
    trace: bool,
) -> Result<HostReport, Error> {
    if iterations == 0 || iterations > 100_000_000 {
        return Err(Error::Range(format!(
            "--iterations {iterations} (allowed 1..=100000000)"
        )));
    }
    if !WORKLOADS.contains(&workload) {
        return Err(Error::Unsupported(format!(
            "no host benchmark for workload '{workload}' yet (available: {})",
            WORKLOADS.join(", ")
        )));
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !trace {
        let mut r = dispatch(workload, threads, iterations)?;
        r.host["tracefs"] = "not asked for (untraced run); tlb_flush left empty".into();
        return Ok(r);
    }
    traced(|| dispatch(workload, threads, iterations))
}

/// Run `f` inside a tracefs session and fill `tlb_flush` from it; when tracefs
/// is missing or not permitted the run goes ahead and `host["tracefs"]` says why.
#[cfg(target_os = "linux")]
fn traced(f: impl FnOnce() -> Result<HostReport, Error>) -> Result<HostReport, Error> {
    let session = tracefs::Session::start();
    // An error or a panic in `f` drops the session: the instance goes too.
    let mut r = f()?;
    let note = match session.and_then(tracefs::Session::finish) {
        Ok((counts, note)) => {
            r.tlb_flush = counts;
            note
        }
        Err(why) => why,
    };
    r.host["tracefs"] = note.into();
    Ok(r)
}

/// No tracefs off Linux.
#[cfg(not(target_os = "linux"))]
fn traced(f: impl FnOnce() -> Result<HostReport, Error>) -> Result<HostReport, Error> {
    f()
}

/// The benchmark for `workload` (a name from [`WORKLOADS`]).
fn dispatch(workload: &str, threads: u32, iterations: u64) -> Result<HostReport, Error> {
    match workload {
        #[cfg(target_os = "linux")]
        "madvise_dontneed" => madvise::run(threads, iterations),
        #[cfg(target_os = "linux")]
        "tlb_flush_threads" => tlb_flush::run_threads(threads, 1 << 20, iterations),
        #[cfg(target_os = "linux")]
        "tlb_flush_processes" => tlb_flush::run_processes(threads, 1 << 20, iterations),
        // As LTP runs it (guest_ltp): iterations = children forked in all.
        #[cfg(target_os = "linux")]
        "mmapstress01" => guest_ltp::run(threads, iterations.min(2000)),
        #[cfg(target_os = "linux")]
        "khugepaged_collapse" => collapse::run(64 << 20, iterations.min(1000)),
        #[cfg(target_os = "linux")]
        "lat_pagefault" => lat::lat_pagefault(1 << 20, iterations),
        #[cfg(target_os = "linux")]
        "lat_mmap" => lat::lat_mmap(1 << 20, iterations),
        #[cfg(not(target_os = "linux"))]
        _ => Err(Error::Unsupported("host benchmarks need Linux".into())),
        #[cfg(target_os = "linux")]
        other => Err(Error::Unsupported(format!(
            "no host benchmark for workload '{other}'"
        ))),
    }
}
