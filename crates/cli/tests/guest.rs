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
    let tol = tlblab::calibrate::COUNT_TOLERANCE;
    let (g, m) = row("madvise TLB per op");
    assert_eq!(m, 3.0, "model: 3 busy CPUs in the mm");
    // The guest runs the path the model follows (`flush_tlb_mm_range` ->
    // `native_flush_tlb_multi`, one remote `flush_tlb_func` per CPU that
    // `should_flush_tlb` keeps, each counted once in the TLB row), and
    // tlblab is PID 1, the only user process, so nothing else flushes a
    // user mm during the loop (kernel-range flushes do not run
    // `flush_tlb_func` and are not counted there; the window holds the
    // loop alone, bench::madvise). Each madvise reaches at most the 3 other
    // CPUs: the TLB row cannot exceed the model's. (Assumed: no kernel
    // thread flushes the agent's mm inside the window, e.g. khugepaged
    // collapsing its heap; a failure here would name such a flusher.)
    assert!(g <= m, "guest TLB per madvise {g} above the 3 other CPUs");
    // One initiator that waits for its csds: every remote flush arrives in
    // a call-function interrupt of its own, so CAL >= TLB.
    let (cal, _) = row("madvise CAL per op");
    assert!(cal >= g, "guest CAL {cal} < TLB {g} per madvise");
    // Below the model only when a busy vCPU is lazy at the flush (a kernel
    // thread runs there and `should_flush_tlb` skips it); how often is the
    // guest's scheduling and is not derived (0 to 2 of 900 IPIs missing in
    // runs on this machine). The floor is validate's own acceptance
    // criterion, COUNT_TOLERANCE, not a number read off a run (this
    // replaces |g - 3| < 0.3).
    assert!(g >= m * (1.0 - tol), "guest TLB per madvise {g}");
    let (g, m) = row("MADV_COLLAPSE CAL per collapse");
    assert_eq!(m, 3.0, "model: one sync IPI to each of 3 other CPUs");
    // The model sends exactly cpus - 1 sync IPIs per collapse
    // (`tlb_remove_table_sync_one`: `smp_call_function` to every other
    // online CPU, unconditionally), and so does the guest; validate
    // subtracts the guest's idle call-function traffic over as long a
    // window (`host_row_per_op`). The guest kernel also runs call-function
    // work the model lacks (per-CPU drains, wake-ups of per-CPU workers,
    // the first collapse's flush to the agent's lazy start CPU): +0.13 to
    // +0.42 per collapse in runs on this machine. Neither that excess nor
    // the noise of the subtracted background is derived, so the former
    // band 2.95..3.5 (read off those runs) becomes: the guest must not
    // fall short of the modelled IPIs beyond validate's tolerance, so the
    // OUT this row may carry (the only one allowed, above) is an excess.
    // No upper bound is asserted: the excess is unmodelled guest work.
    assert!(g >= m * (1.0 - tol), "guest CAL per collapse {g}");
    let (g, m) = row("collapses (thp_collapse_alloc)");
    assert_eq!(g, m, "every 2 MiB extent collapsed once, and nothing else");
}
