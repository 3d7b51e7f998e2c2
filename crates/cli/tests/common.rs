//! Helpers shared by the integration tests.
#![allow(dead_code)]

use machine::Scenario;
use sim::Report;
use tlblab::{load_scenario, run_scenario, RunOptions};

/// A bundled scenario with `--set` overrides applied.
pub fn scenario(name: &str, sets: &[&str]) -> Scenario {
    let mut s = load_scenario(name).expect("bundled scenario");
    for kv in sets {
        s.set(kv).expect("valid override");
    }
    s
}

pub fn run(s: &Scenario) -> Report {
    run_scenario(s, &RunOptions::default())
        .expect("run succeeds")
        .0
}

pub fn total(r: &Report, row: &str) -> u64 {
    r.interrupt_totals[row]
}

pub fn ops(r: &Report) -> u64 {
    r.main_op().expect("a measured op").count
}

/// Run the `tlblab` binary: exit code, stdout, stderr.
pub fn tlblab(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tlblab"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An empty directory for a test's files, under the target directory
/// (`CARGO_TARGET_TMPDIR`, which `cargo clean` removes) rather than the
/// system's temporary directory, which tests would litter run after run.
pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// (guest, model): the first two numbers of the row of `validate
/// --guest`'s table whose label is `name`.
pub fn validate_row(text: &str, name: &str) -> (f64, f64) {
    let line = text
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{text}"));
    let f: Vec<f64> = line[name.len()..]
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    (f[0], f[1])
}
