//! Page migration's unmap flushes (issue 35 items 2 and 3):
//! `migrate_pages` → `migrate_pages_batch` → `try_to_migrate_one` with
//! `TTU_BATCH_FLUSH`, on the three architectures, with each one's
//! batched-unmap series on (today) and off (before it). The counts follow
//! from the mechanism:
//! - batched: one `try_to_unmap_flush` (`arch_tlbbatch_flush`) per
//!   `migrate_pages_batch`, which takes up to `NR_MAX_BATCHED_MIGRATION`
//!   (512) folios;
//! - not batched: one `ptep_clear_flush` per migrated folio.
//!
//! Each flush is one IPI to every other CPU in the process's `mm_cpumask`
//! on x86 and RISC-V (the writer threads: `migratepages` runs in another
//! process), one `DSB ISH` on arm64 (whose `TLBI VALE1IS`es go out at
//! unmap time, one per folio).
mod common;
use common::{assert_batched, assert_flushed_on_the_spot, run, scenario, total};

const NR_MAX_BATCHED_MIGRATION: u64 = 512;

/// `migrate-pages` on a two-node machine of 8 CPUs: `threads` writers on
/// CPUs 1..=threads (node 0, where the region is populated), `pages`
/// pages, `calls` migrate_pages calls (0 -> 1, then 1 -> 0, ...).
fn migrate(arch: &str, batched: bool, threads: u64, pages: u64, calls: u64) -> sim::Report {
    let s = scenario(
        "migrate-pages",
        &[
            &format!("machine.arch={arch}"),
            "machine.topology=two_nodes",
            "machine.cpus=8",
            &format!("{arch}.batched_unmap={batched}"),
            &format!("workload.threads={threads}"),
            &format!("workload.size={}", pages * 4096),
            &format!("workload.iterations={calls}"),
        ],
    );
    let r = run(&s);
    assert!(r.violations.is_empty(), "{arch}: {:?}", r.violations);
    r
}

/// Batched: every call migrates every page (all of them are on the
/// call's source node: the previous call moved them there), in
/// `ceil(pages / 512)` batches of one flush each; each flush IPIs the 3
/// writers' CPUs once (x86, RISC-V) or is one DSB for the batch's TLBIs
/// (arm64).
#[test]
fn migration_flushes_once_per_batch() {
    let (threads, calls) = (3u64, 6u64);
    for arch in ["x86", "arm64", "riscv"] {
        for pages in [3u64, 48, 600] {
            let r = migrate(arch, true, threads, pages, calls);
            let a = &r.arch;
            let flushes = calls * pages.div_ceil(NR_MAX_BATCHED_MIGRATION);
            assert_eq!(a["pgmigrate_success"], pages * calls, "{arch} {pages}");
            assert_eq!(a["pgmigrate_fail"], 0);
            assert_batched(&r, arch, pages * calls, flushes, threads);
        }
    }
}

/// The same before each architecture's series (`<arch>.batched_unmap =
/// false`, `try_to_migrate(src, 0)`): every migrated folio is flushed on
/// the spot, each flush one IPI per writer (or one TLBI + DSB).
#[test]
fn without_the_series_every_page_is_flushed_on_the_spot() {
    let (threads, calls, pages) = (3u64, 6u64, 48u64);
    for arch in ["x86", "arm64", "riscv"] {
        let r = migrate(arch, false, threads, pages, calls);
        let a = &r.arch;
        assert_eq!(a["pgmigrate_success"], pages * calls);
        assert_flushed_on_the_spot(&r, arch, pages * calls, threads);
    }
}

/// The bundled scenario as it comes (2-socket Ice Lake, 128 CPUs, one
/// node per socket): 256 pages a call, one batch, 3 IPIs a call; batching
/// off, 256 x 3. The writers fault only on migration entries (the region
/// is populated before the run), and some do.
#[test]
fn bundled_scenario_runs_without_settings() {
    let r = run(&scenario("migrate-pages", &[]));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let (pages, calls, threads) = (256u64, 200u64, 3u64);
    assert_eq!(r.arch["pgmigrate_success"], pages * calls);
    assert_eq!(total(&r, "TLB"), threads * calls);
    assert_eq!(r.page_faults, r.arch["migration_entry_wait"]);
    assert!(
        r.arch["migration_entry_wait"] > 0,
        "the writers met migrations"
    );
    let r = run(&scenario("migrate-pages", &["x86.batched_unmap=false"]));
    assert_eq!(total(&r, "TLB"), threads * pages * calls);
}

/// A machine with one NUMA node has nowhere to migrate to, and the
/// writers need CPUs besides migratepages': one-line refusals.
#[test]
fn refusals_are_one_line() {
    let one_node = scenario("migrate-pages", &["machine.cpus=64"]);
    let no_threads = scenario("migrate-pages", &["workload.threads=0"]);
    for s in [one_node, no_threads] {
        let Err(e) = tlblab::run_scenario(&s, &tlblab::RunOptions::default()) else {
            panic!("{} ran, but should refuse", s.name);
        };
        let e = e.to_string();
        assert!(!e.contains('\n') && e.contains("migrate_pages"), "{e}");
    }
    let s = scenario(
        "migrate-pages",
        &[
            "x86.batched_unmap=false",
            "inject.migrate_move_before_flush=true",
        ],
    );
    let e = s.validate().unwrap_err().to_string();
    assert!(!e.contains('\n') && e.contains("x86.batched_unmap"), "{e}");
}

/// `inject.migrate_move_before_flush`: the old frames are freed while the
/// writers' TLBs may still map them: the run's monitor sees a
/// use-after-free (invariant 1) in the bundled scenario.
#[test]
fn moving_before_the_flush_is_caught_in_a_run() {
    let s = scenario(
        "migrate-pages",
        &[
            "inject.migrate_move_before_flush=true",
            "workload.iterations=20",
        ],
    );
    let r = run(&s);
    assert!(
        r.violations.iter().any(|v| v.invariant == 1),
        "{:?}",
        r.violations
    );
}
