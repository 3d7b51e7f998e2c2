//! `sweep --shard I/N` then `sweep --merge DIR...` writes exactly the
//! sweep.csv and sweep.json of the unsharded sweep.
use std::path::PathBuf;

mod common;

/// Run the binary: exit code and stderr.
fn tlblab(args: &[&str]) -> (i32, String) {
    let (code, _, err) = common::tlblab(args);
    (code, err)
}

fn dir(tag: &str) -> PathBuf {
    // (Emptied and made here; the sweep writes into it.)
    common::scratch_dir(&format!("shard-{tag}"))
}

/// The sweep: 3 x 2 points of the madvise benchmark, metrics with decimals.
const SWEEP: [&str; 8] = [
    "sweep",
    "default",
    "--set",
    "workload.iterations=300",
    "--over",
    "machine.cpus=4,8,16",
    "--over",
    "x86.flush_tlb_info=percpu,stack_unaligned",
];

fn sweep_into(out: &std::path::Path, extra: &[&str]) {
    let mut args = SWEEP.to_vec();
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let (code, err) = tlblab(&args);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn merged_shards_are_byte_identical_to_the_unsharded_sweep() {
    let whole = dir("whole");
    sweep_into(&whole, &[]);
    // Shards 0 and 2 share a directory, shard 1 has its own (two job arrays).
    let (a, b) = (dir("a"), dir("b"));
    sweep_into(&a, &["--shard", "0/3"]);
    sweep_into(&b, &["--shard", "1/3"]);
    sweep_into(&a, &["--shard", "2/3"]);
    let merged = dir("merged");
    let (code, err) = tlblab(&[
        "sweep",
        "--merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    for f in ["sweep.csv", "sweep.json"] {
        let (w, m) = (
            std::fs::read(whole.join(f)).unwrap(),
            std::fs::read(merged.join(f)).unwrap(),
        );
        assert!(w == m, "{f} differs after the merge");
    }
    let csv = std::fs::read_to_string(merged.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6);
    // Without shard 1 the merge refuses, naming it.
    let (code, err) = tlblab(&[
        "sweep",
        "--merge",
        a.to_str().unwrap(),
        "--out",
        dir("partial").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("shard(s) 1 of 3 not found") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (code, err) = tlblab(&[
        "sweep",
        "default",
        "--over",
        "machine.cpus=2",
        "--shard",
        "3/3",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--shard '3/3'"), "{err}");
}
