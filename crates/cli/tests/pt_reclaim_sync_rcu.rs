//! Issue 15 item 12: PT_RECLAIM (`MADV_DONTNEED` frees the PTE tables it
//! empties) and `tlb_remove_table_sync_rcu` (the batch-allocation
//! fallback without PT_RECLAIM, skipped by seed (b) patch 1/2).
mod common;
use common::{run, scenario};

/// madvise(MADV_DONTNEED) of a whole populated 2 MiB on x86: with
/// `mm.pt_reclaim = auto` (x86_64's default, 6.18) every call empties the
/// PTE table, so `zap_pte_range` frees it: exactly one table per call, and
/// the next touch faults a new one in. Off (or on arm64, where `auto` is
/// off in 6.18), none. The old model never freed a table on madvise
/// (`pt_reclaimed` stayed 0).
#[test]
fn madvise_of_a_whole_table_frees_it() {
    let iters = 40u64;
    let base = [
        "machine.cpus=4",
        "workload.threads=1",
        "workload.size=2MiB",
        "machine.jitter_pct=0",
    ];
    let go = |extra: &[&str]| {
        let mut sets: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        sets.push(format!("workload.iterations={iters}"));
        sets.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        run(&scenario("flush-tlb-info-madvise", &refs))
    };
    let on = go(&[]);
    assert!(on.violations.is_empty(), "{:?}", on.violations);
    assert_eq!(on.arch["pt_reclaimed"], iters);
    let off = go(&["mm.pt_reclaim=off"]);
    assert_eq!(off.arch["pt_reclaimed"], 0);
    let arm = go(&["machine.arch=arm64"]);
    assert_eq!(arm.arch["pt_reclaimed"], 0, "auto is off on arm64 in 6.18");
    let arm_on = go(&["machine.arch=arm64", "mm.pt_reclaim=on"]);
    assert_eq!(arm_on.arch["pt_reclaimed"], iters);
    assert!(arm_on.violations.is_empty(), "{:?}", arm_on.violations);
    // One table freed and faulted back per call; the last call's table is
    // not faulted back (the loop ends on the madvise), so one frame fewer
    // is in use at the end than without PT_RECLAIM.
    assert_eq!(on.arch["frames_in_use"] + 1, off.arch["frames_in_use"]);
}

/// lat_mmap on x86 (mmap 1 MiB, touch, munmap: `free_pgtables` frees one
/// PTE table per call). When `tlb_remove_table`'s batch page cannot be
/// allocated and PT_RECLAIM is off, `__tlb_remove_table_one` calls
/// `tlb_remove_table_sync_rcu()`: one `synchronize_rcu()` per munmap,
/// which adds exactly the `synchronize_rcu` price (3 ms, one grace period
/// at HZ=1000) to each mmap+munmap (jitter 0, no reader in an RCU section
/// to wait for beyond it). Seed (b)'s skip returns early under the x86
/// static key: no grace period, the op as without the fallback. With
/// PT_RECLAIM the fallback is `call_rcu`, no wait. The old model had no
/// fallback: the op never grew.
#[test]
fn batch_alloc_failure_waits_a_grace_period_unless_skipped() {
    let iters = 20u64;
    let go = |extra: &[&str]| {
        let mut sets = vec![
            "machine.arch=x86",
            "machine.cpus=4",
            "machine.timeslice_us=0",
            "machine.migrate_pct=0",
            "machine.jitter_pct=0",
        ];
        sets.extend_from_slice(extra);
        let it = format!("workload.iterations={iters}");
        sets.push(&it);
        let r = run(&scenario("lat-mmap", &sets));
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        r
    };
    let mean = |r: &sim::Report| r.main_op().unwrap().latency_ns.mean;
    let base = go(&[]);
    let rcu = go(&["mm.table_batch_alloc_fail=true", "mm.pt_reclaim=off"]);
    // One per munmap, and one more at the exit: `exit_mmap`'s
    // `free_pgtables` hands the PMD and PUD tables to the same gather
    // (one fallback per gather in the model), outside the measured op.
    assert_eq!(rcu.arch["table_sync_rcu"], iters + 1);
    assert_eq!(mean(&rcu) - mean(&base), 3_000_000.0);
    let skip = go(&[
        "mm.table_batch_alloc_fail=true",
        "mm.pt_reclaim=off",
        "mm.skip_redundant_table_sync=true",
    ]);
    assert_eq!(skip.arch["table_sync_rcu"], 0);
    assert_eq!(skip.arch["table_sync_rcu_skipped"], iters + 1);
    assert_eq!(mean(&skip), mean(&base));
    let pt = go(&["mm.table_batch_alloc_fail=true"]);
    assert_eq!(
        pt.arch["table_sync_rcu"] + pt.arch["table_sync_rcu_skipped"],
        0
    );
    assert_eq!(mean(&pt), mean(&base));
}
