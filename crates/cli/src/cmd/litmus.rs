//! `tlblab litmus`: herd7-format litmus tests on the architectures' memory
//! models (the same `kernel::hw::wmm` machine the checker drives), each
//! verdict held against a kinds file.

use litmus::catalogue::{self, FileError, Kinds, Reference, Row, Summary};
use machine::Error;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Litmus files, or directories of them (`../shared/litmus/*`).
    /// Other files named (README, licences) are skipped with a note.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Reference verdicts (`NAME Allowed|Forbidden|Required` per line).
    /// Default: the `kinds.txt` beside each test, where there is one.
    #[arg(long, value_name = "FILE")]
    kinds: Option<PathBuf>,
    /// One JSON document: a list of {name, arch, verdict, expected,
    /// agrees, unsupported}.
    #[arg(long)]
    json: bool,
    /// Partial-order reduction: where one thread's next instruction
    /// commutes with everything the others may still do (a register
    /// operation, a barrier, a load once no other thread has a store
    /// left), explore only that thread's step. `off` explores every
    /// interleaving, to compare; the verdicts do not depend on it.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    reduction: OnOff,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

fn parse_error(e: FileError) -> Error {
    Error::Parse(e.to_string())
}

/// Exit 0 when every supported test agrees with its reference, 1 on any
/// disagreement; malformed files are errors (exit 2).
pub fn main(args: Args) -> Result<u8, Error> {
    let (tests, other) = catalogue::expand(&args.paths).map_err(parse_error)?;
    if tests.is_empty() {
        let named: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::Io(format!("{}: no .litmus files", named.join(" "))));
    }
    for o in &other {
        eprintln!("note: skipped {} (not a .litmus file)", o.display());
    }
    let kinds = match &args.kinds {
        Some(f) => Kinds::load(f).map(Reference::One),
        None => Reference::beside(&tests),
    }
    .map_err(parse_error)?;
    let rows =
        catalogue::run_all(&tests, &kinds, args.reduction == OnOff::On).map_err(parse_error)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| Error::Write(e.to_string()))?
        );
    } else {
        print_rows(&rows);
        print_summary(&catalogue::summarise(&rows));
    }
    Ok(u8::from(rows.iter().any(|r| r.agrees == Some(false))))
}

fn print_rows(rows: &[Row]) {
    for r in rows {
        let name = &r.name;
        match (&r.unsupported, r.verdict) {
            (Some(why), _) => println!("{name:<44} unsupported: {why}"),
            (None, Some(v)) => {
                let (expected, mark) = match (r.expected, r.agrees) {
                    (Some(e), Some(true)) => (e.name(), "ok"),
                    (Some(e), _) => (e.name(), "DISAGREES"),
                    (None, _) => ("-", "no reference"),
                };
                println!(
                    "{name:<44} {:<7} {:<11} expected {expected:<11} {mark} ({} states)",
                    r.arch.unwrap_or("?"),
                    v.name(),
                    r.states
                );
            }
            (None, None) => {}
        }
    }
}

fn print_summary(by_dir: &BTreeMap<String, Summary>) {
    println!();
    println!(
        "{:<16} {:>6} {:>10} {:>7} {:>9} {:>12} {:>10}",
        "directory", "tests", "supported", "agree", "disagree", "no reference", "states"
    );
    for (dir, s) in by_dir {
        let pct = 100.0 * s.supported as f64 / s.tests.max(1) as f64;
        println!(
            "{dir:<16} {:>6} {:>4} ({pct:>3.0}%) {:>7} {:>9} {:>12} {:>10}",
            s.tests, s.supported, s.agree, s.disagree, s.unchecked, s.states
        );
        for (why, n) in &s.unsupported {
            println!("{:<16}   unsupported {n:>4}: {why}", "");
        }
    }
}
