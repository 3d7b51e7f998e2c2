//! `tlblab validate --guest` against a real Linux guest under QEMU. Ignored
//! by default; `.ci/run` runs it with `--ignored` where QEMU and a guest
//! kernel are installed (scripts/install-guest.sh), and it fails, not passes,
//! when run without them.

mod common;

use std::process::Command;

#[test]
#[ignore = "needs QEMU and a guest kernel (scripts/install-guest.sh)"]
fn guest_counts_match_the_model() {
    if let Err(e) = bench::guest::prerequisites() {
        panic!("this host cannot boot the guest: {e}");
    }
    // 4 vCPUs: the madvise loop has 3 busy threads of the same mm, so every
    // madvise sends 3 TLB-shootdown IPIs (each also a CAL); each 2 MiB
    // collapse ends with tlb_remove_table_sync_one, 3 CAL. KVM paravirt
    // flush is not offered (the table must match native_flush_tlb_multi).
    let out = Command::new(env!("CARGO_BIN_EXE_tlblab"))
        .args(["validate", "--guest", "--cpus", "4", "--paravirt", "off"])
        .args(["--iterations", "300", "--timeout", "300"])
        .output()
        .expect("run tlblab");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    // Exit 1 is allowed only for the collapse CAL row (checked below): every
    // other row must be within its tolerance.
    let out_rows: Vec<&str> = text.lines().filter(|l| l.ends_with(" OUT")).collect();
    assert!(
        out.status.success()
            || (out.status.code() == Some(1)
                && out_rows.len() == 1
                && out_rows[0].starts_with("MADV_COLLAPSE CAL per collapse")),
        "validate --guest failed:\n{text}\n{err}"
    );
    let row = |name: &str| common::validate_row(&text, name);
    let (g, m) = row("madvise TLB per op");
    assert_eq!(m, 3.0, "model: 3 busy CPUs in the mm");
    assert!((g - 3.0).abs() < 0.3, "guest TLB per madvise {g}");
    let (g, m) = row("MADV_COLLAPSE CAL per collapse");
    assert_eq!(m, 3.0, "model: one sync IPI to each of 3 other CPUs");
    // The model sends exactly cpus - 1 sync IPIs per collapse. The guest
    // kernel also runs call-function work the model lacks (lru_add_drain_all's
    // per-CPU drains, the first collapse's flush to the agent's lazy start
    // CPU): +0.13 to +0.42 per collapse over runs on this 2-core machine. So
    // the guest sees every modelled IPI, plus at most one unmodelled call per
    // two collapses.
    assert!((2.95..3.5).contains(&g), "guest CAL per collapse {g}");
    let (g, m) = row("collapses (thp_collapse_alloc)");
    assert_eq!(g, m, "every 2 MiB extent collapsed once, and nothing else");
}
