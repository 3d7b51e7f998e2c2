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

/// The flushes of a batched unmap (reclaim's or migration's
/// `TTU_BATCH_FLUSH`): `unmapped` pages joined a batch, `flushes`
/// `arch_tlbbatch_flush` calls ran, each reaching `threads` other CPUs:
/// arm64 a TLBI at each unmap and one DSB per batch, x86 and RISC-V one
/// IPI per thread per batch (x86: on the TLB row).
pub fn assert_batched(r: &Report, arch: &str, unmapped: u64, flushes: u64, threads: u64) {
    let a = &r.arch;
    assert_eq!(a["tlb_ubc_pending"], unmapped, "{arch}");
    assert_eq!(a["ptep_clear_flush"], 0, "{arch}");
    assert_eq!(a["tlbbatch_flushes"], flushes, "{arch} {unmapped}");
    match arch {
        "arm64" => {
            assert_eq!(a["tlbi_is"], unmapped, "a TLBI at each unmap");
            assert_eq!(a["dsb_ish"], flushes, "one DSB per batch");
        }
        _ => assert_eq!(a["ipis_sent"], threads * flushes, "{arch} {unmapped}"),
    }
    if arch == "x86" {
        assert_eq!(total(r, "TLB"), threads * flushes);
    }
}

/// Before each architecture's batched-unmap series: every one of the
/// `pages` unmapped is flushed on the spot (`ptep_clear_flush`), one IPI
/// per other thread's CPU or one TLBI + DSB each.
pub fn assert_flushed_on_the_spot(r: &Report, arch: &str, pages: u64, threads: u64) {
    let a = &r.arch;
    assert_eq!(a["tlb_ubc_pending"], 0, "{arch}");
    assert_eq!(a["ptep_clear_flush"], pages, "{arch}");
    assert_eq!(a["tlbbatch_flushes"], 0, "{arch}");
    match arch {
        "arm64" => {
            assert_eq!(a["tlbi_is"], pages);
            assert_eq!(a["dsb_ish"], pages, "a DSB per page");
        }
        _ => assert_eq!(a["ipis_sent"], threads * pages, "{arch}"),
    }
}
