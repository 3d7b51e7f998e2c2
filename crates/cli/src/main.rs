//! The `tlblab` command line: one module per subcommand in `cmd/`.

mod cmd;

use clap::{Parser, Subcommand};
use machine::Error;
use std::process::ExitCode;

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

#[derive(Subcommand)]
enum Cmd {
    /// Simulate one scenario (a file, a bundled name, or --workload).
    Run(cmd::run::Args),
    /// Run a scenario and variants of it side by side.
    Compare(cmd::compare::Args),
    /// Run the cross product of --over axes in parallel; write CSV and JSON.
    Sweep(cmd::sweep::Args),
    /// Explore every interleaving of a small configuration (or --all).
    Check(cmd::check::Args),
    /// Run herd7-format litmus tests on the architectures' memory models
    /// and compare each verdict with its reference (kinds file).
    Litmus(cmd::litmus::Args),
    /// Run the real workload on this host's kernel (threads pinned, /proc/interrupts deltas).
    Bench(cmd::bench::Args),
    /// Fit the cost profile to this host and write it (use with --profile).
    Calibrate(cmd::calibrate::Args),
    /// Compare host and model on a workload the calibration did not fit.
    Validate(cmd::validate::Args),
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
    Demo(cmd::demo::Args),
    /// Throughput of the simulator (every bundled scenario) and the checker,
    /// each next to a bare baseline measured in the same run.
    Speed(cmd::speed::Args),
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match real_main(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tlblab: {e}");
            ExitCode::from(2)
        }
    }
}

/// A command line clap refused: help and version as clap prints them;
/// anything else as one line (`tlblab: ...`, without clap's usage and
/// hints), exit 2 like every other bad input.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let text = e.to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    let mut msg = String::new();
    for l in lines {
        if !msg.is_empty() {
            // A list after "...:" continues its line; anything else is a
            // clause of its own.
            msg.push_str(if msg.ends_with(':') { " " } else { "; " });
        }
        msg.push_str(l);
    }
    eprintln!("tlblab: {}", msg.strip_prefix("error: ").unwrap_or(&msg));
    ExitCode::from(2)
}

/// Exit status: 0 when every run was safe, 1 when `run` or `compare`
/// recorded an invariant violation (like `check` on an unsafe verdict) or a
/// validation row was out of tolerance, 2 on bad input. Sweeps report
/// violations in a column and exit 0.
fn real_main(cli: Cli) -> Result<u8, Error> {
    match cli.cmd {
        Cmd::Run(a) => cmd::run::main(a),
        Cmd::Compare(a) => cmd::compare::main(a),
        Cmd::Sweep(a) => cmd::sweep::main(a),
        Cmd::Check(a) => cmd::check::main(a),
        Cmd::Litmus(a) => cmd::litmus::main(a),
        Cmd::Bench(a) => cmd::bench::main(a),
        Cmd::Calibrate(a) => cmd::calibrate::main(a),
        Cmd::Validate(a) => cmd::validate::main(a),
        #[cfg(target_os = "linux")]
        Cmd::GuestAgent {
            madvise_iterations,
            collapse_mib,
            collapse_rounds,
        } => bench::guest::agent_main(madvise_iterations, collapse_mib, collapse_rounds),
        #[cfg(not(target_os = "linux"))]
        Cmd::GuestAgent { .. } => Err(Error::Unsupported("the guest agent runs on Linux".into())),
        Cmd::List => cmd::list::main(),
        Cmd::Demo(a) => cmd::demo::main(a),
        Cmd::Speed(a) => cmd::speed::main(a),
    }
}
