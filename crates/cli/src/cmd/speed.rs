//! `tlblab speed`: simulator and checker throughput, each next to a bare
//! baseline measured in the same run.

use machine::Error;

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args {
        names,
        checks,
        no_check,
        threads,
        json,
    } = args;
    super::set_checker_threads(threads)?;
    let checks = if no_check { Vec::new() } else { checks };
    tlblab::speed::speed(&names, &checks, json)?;
    Ok(0)
}
