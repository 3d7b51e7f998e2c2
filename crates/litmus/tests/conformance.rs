//! tlblab's architecture models against the reference catalogues in
//! `../shared/litmus` (herd7's verdicts) and the x86 shapes bundled here.

use litmus::catalogue::{self, Row, Summary};
use std::path::{Path, PathBuf};

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/litmus")
}

fn run_dir(dir: &Path) -> (Vec<Row>, Summary) {
    let (tests, _) = catalogue::expand(&[dir.to_owned()]).expect("directory reads");
    assert!(!tests.is_empty(), "no tests in {}", dir.display());
    let kinds = catalogue::Reference::beside(&tests).expect("kinds file parses");
    let rows = catalogue::run_all(&tests, &kinds, true).expect("every file parses");
    let s = catalogue::summarise(&rows)
        .into_values()
        .next()
        .expect("one directory");
    (rows, s)
}

fn disagreements(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.agrees == Some(false))
        .map(|r| {
            format!(
                "{}: model {:?}, reference {:?}",
                r.name, r.verdict, r.expected
            )
        })
        .collect()
}

/// Run one catalogue folder: no disagreement, every test reported, at
/// least `min_pct` of them supported.
fn catalogue(folder: &str, min_pct: f64) {
    let dir = shared().join(folder);
    if !dir.exists() {
        eprintln!("SKIPPED: {} is absent (../shared/litmus)", dir.display());
        return;
    }
    let (rows, s) = run_dir(&dir);
    eprintln!("{folder}: {s:?}");
    assert_eq!(disagreements(&rows), Vec::<String>::new());
    assert_eq!(
        s.agree + s.disagree + s.unchecked + s.unsupported.values().sum::<usize>(),
        s.tests
    );
    assert_eq!(
        s.unchecked, 0,
        "every supported test has a reference verdict"
    );
    let pct = 100.0 * s.supported as f64 / s.tests as f64;
    assert!(
        pct >= min_pct,
        "{folder}: {pct:.1}% supported, goal {min_pct}%"
    );
}

#[test]
fn aarch64_catalogue_agrees_with_herd() {
    catalogue("aarch64", 90.0);
}

#[test]
fn riscv_catalogue_agrees_with_herd() {
    catalogue("riscv", 90.0);
}

/// The VMSA catalogue (page-table writes, TLBIs, faults, hardware
/// updates): no disagreement, and 96% of it supported (447 of 465;
/// docs/vmsa.md lists what is left out).
#[test]
fn aarch64_vmsa_catalogue_agrees_with_herd() {
    catalogue("aarch64-vmsa", 96.0);
}

#[test]
fn x86_shapes_agree_with_x86_tso() {
    let (rows, s) = run_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x86"));
    assert_eq!(disagreements(&rows), Vec::<String>::new());
    assert_eq!(s.agree, s.tests, "{s:?}");
}
