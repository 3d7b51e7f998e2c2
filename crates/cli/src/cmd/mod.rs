//! One module per `tlblab` subcommand: its arguments (`Args`) and its
//! `main`, which returns the exit status (0 ok, 1 unsafe or out of
//! tolerance; errors exit 2 in `main.rs`).

pub mod bench;
pub mod calibrate;
pub mod check;
pub mod compare;
pub mod demo;
pub mod list;
pub mod litmus;
pub mod run;
pub mod speed;
pub mod sweep;
pub mod validate;

use machine::{scenario::Size, Error, Scenario};
use tlblab::RunOptions;

/// Most worker threads `--threads` takes (more would only oversubscribe
/// the machine; each costs a stack).
const MAX_THREADS: usize = 1024;

/// `--threads N` for the checker: 0 (one per core) up to [`MAX_THREADS`].
pub fn set_checker_threads(n: usize) -> Result<(), Error> {
    if n > MAX_THREADS {
        return Err(Error::Range(format!(
            "--threads {n} (allowed 0..={MAX_THREADS}, 0: one per core)"
        )));
    }
    ::check::set_threads(n);
    Ok(())
}

#[derive(clap::Args, Clone)]
pub struct Common {
    /// Override a scenario field: dotted.key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Use this cost profile instead of the bundled one.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<String>,
    /// Refuse scenarios estimated to need more host memory (default: half of RAM).
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Stop at the first invariant violation.
    #[arg(long)]
    pub stop_on_violation: bool,
    /// Print the last N events of the run (kernel paths, IPIs, flushes, faults)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub trace: usize,
}

pub fn scenario_of(
    arg: Option<&str>,
    workload: Option<&str>,
    common: &Common,
) -> Result<Scenario, Error> {
    tlblab::resolve_scenario(arg, workload, &common.set)
}

pub fn options(common: &Common) -> Result<RunOptions, Error> {
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
