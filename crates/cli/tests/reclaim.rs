//! Reclaim's unmap flushes (issue 35 items 1 and 3): `shrink_folio_list`
//! → `try_to_unmap_one` with `TTU_BATCH_FLUSH`, on the three
//! architectures, with each one's batched-unmap series on (today) and off
//! (before it). The counts follow from the mechanism:
//! - batched: one `arch_tlbbatch_flush` per `free_folios` batch (31) of
//!   clean folios and per `shrink_folio_list` call; a dirty folio's flush
//!   comes before its `pageout()` (`try_to_unmap_flush_dirty`);
//! - not batched: one `ptep_clear_flush` per unmapped page.
//!
//! Each flush is one IPI to every other CPU running the process on x86 and
//! RISC-V, one `DSB ISH` on arm64 (whose TLBIs go out at unmap time).
mod common;
use common::{assert_batched, assert_flushed_on_the_spot, run, scenario, total};

const PAGEVEC_SIZE: u64 = 31;

fn pageout_read(arch: &str, batched: bool, threads: u64, pages: u64, iters: u64) -> sim::Report {
    let s = scenario(
        "madvise-pageout-read",
        &[
            &format!("machine.arch={arch}"),
            &format!("{arch}.batched_unmap={batched}"),
            &format!("workload.threads={threads}"),
            &format!("workload.size={}", pages * 4096),
            &format!("workload.iterations={iters}"),
        ],
    );
    let r = run(&s);
    assert!(r.violations.is_empty(), "{arch}: {:?}", r.violations);
    r
}

/// `madvise_pageout_read`: the first call pages out `pages` freshly
/// written (dirty) folios: one flush each, before each `pageout()`. Every
/// later call finds them clean in the swap cache (the loop read them back
/// in): batched, `ceil(pages / 31)` flushes a call (one table, one
/// `shrink_folio_list`); not batched, one per page. Each flush costs one
/// IPI per busy thread (x86, RISC-V) or one `DSB ISH` (arm64).
#[test]
fn pageout_of_clean_pages_flushes_once_per_batch() {
    let (threads, iters) = (3u64, 20u64);
    for arch in ["x86", "arm64", "riscv"] {
        for pages in [1u64, 16, 64] {
            let r = pageout_read(arch, true, threads, pages, iters);
            let a = &r.arch;
            let flushes = pages + (iters - 1) * pages.div_ceil(PAGEVEC_SIZE);
            assert_eq!(a["pgsteal"], pages * iters, "{arch} {pages}");
            assert_eq!(
                a["pswpout"], pages,
                "only the first call's pages were dirty"
            );
            assert_eq!(a["pswpin"], pages * (iters - 1));
            assert_batched(&r, arch, pages * iters, flushes, threads);
        }
    }
}

/// The same loop before each architecture's series (`<arch>.batched_unmap
/// = false`): every unmapped page is flushed on the spot, clean or dirty.
#[test]
fn without_the_series_every_page_is_flushed_on_the_spot() {
    let (threads, iters, pages) = (3u64, 20u64, 16u64);
    for arch in ["x86", "arm64", "riscv"] {
        let r = pageout_read(arch, false, threads, pages, iters);
        let a = &r.arch;
        assert_eq!(a["pgsteal"], pages * iters);
        assert_flushed_on_the_spot(&r, arch, pages * iters, threads);
    }
}

/// x86's `arch_tlbbatch_should_defer`: no other CPU in `mm_cpumask`, no
/// batching (a local flush is cheaper at once); arm64 and RISC-V defer
/// regardless.
#[test]
fn x86_defers_only_with_other_cpus_in_the_mask() {
    let (iters, pages) = (10u64, 8u64);
    let r = pageout_read("x86", true, 0, pages, iters);
    assert_eq!(r.arch["tlb_ubc_pending"], 0);
    assert_eq!(r.arch["ptep_clear_flush"], pages * iters);
    assert_eq!(total(&r, "TLB"), 0);
    for arch in ["arm64", "riscv"] {
        let r = pageout_read(arch, true, 0, pages, iters);
        assert_eq!(r.arch["tlb_ubc_pending"], pages * iters, "{arch}");
        assert_eq!(r.arch["ptep_clear_flush"], 0, "{arch}");
    }
}

/// `mm.swap = none`: `add_to_swap` fails, `shrink_folio_list` keeps every
/// anonymous folio mapped (`activate_locked`): nothing unmapped, nothing
/// flushed, no fault afterwards.
#[test]
fn without_swap_anonymous_folios_stay_mapped() {
    let (threads, iters, pages) = (2u64, 10u64, 8u64);
    for arch in ["x86", "arm64", "riscv"] {
        let s = scenario(
            "madvise-pageout-read",
            &[
                &format!("machine.arch={arch}"),
                "mm.swap=none",
                &format!("workload.threads={threads}"),
                &format!("workload.size={}", pages * 4096),
                &format!("workload.iterations={iters}"),
            ],
        );
        let r = run(&s);
        assert_eq!(r.arch["reclaim_kept"], pages * iters, "{arch}");
        assert_eq!(r.arch["pgsteal"], 0);
        assert_eq!(r.arch["tlbbatch_flushes"] + r.arch["ptep_clear_flush"], 0);
        assert_eq!(r.arch["ipis_sent"], 0);
        assert_eq!(r.page_faults, pages, "only the first touches fault");
    }
}

/// kswapd (a kernel thread on CPU 0, not in the process's `mm_cpumask`)
/// reclaims while 3 threads read the pages back: how many pages each pass
/// finds depends on timing, but per flush the cost is fixed: batched, one
/// IPI to each of the 3 CPUs per `arch_tlbbatch_flush` (x86, RISC-V) or
/// one `DSB ISH` for all the batch's TLBIs (arm64); not batched, the same
/// per reclaimed page.
#[test]
fn kswapd_costs_one_flush_round_per_batch_or_per_page() {
    for arch in ["x86", "arm64", "riscv"] {
        for batched in [true, false] {
            let s = scenario(
                "kswapd-reclaim",
                &[
                    &format!("machine.arch={arch}"),
                    &format!("{arch}.batched_unmap={batched}"),
                    "workload.iterations=20",
                ],
            );
            let r = run(&s);
            assert!(r.violations.is_empty(), "{arch}: {:?}", r.violations);
            let a = &r.arch;
            let stolen = a["pgsteal"];
            assert!(stolen >= 255, "{arch}: the first pass takes all 255 pages");
            let rounds = if batched {
                assert_eq!(a["tlb_ubc_pending"], stolen);
                assert_eq!(a["ptep_clear_flush"], 0);
                a["tlbbatch_flushes"]
            } else {
                assert_eq!(a["ptep_clear_flush"], stolen);
                assert_eq!(a["tlbbatch_flushes"], 0);
                stolen
            };
            match arch {
                "arm64" => {
                    assert_eq!(a["tlbi_is"], stolen);
                    assert_eq!(a["dsb_ish"], rounds, "{batched}");
                }
                _ => assert_eq!(a["ipis_sent"], 3 * rounds, "{arch} {batched}"),
            }
        }
    }
}

/// Each architecture's switch runs on its architecture and refuses, in one
/// line, on the others (it would change nothing there).
#[test]
fn batched_unmap_switches_refuse_other_architectures() {
    for (key, arch) in [
        ("x86.batched_unmap", "arm64"),
        ("arm64.batched_unmap", "x86"),
        ("riscv.batched_unmap", "x86"),
        ("riscv.batched_unmap", "arm64"),
    ] {
        let s = scenario(
            "kswapd-reclaim",
            &[&format!("machine.arch={arch}"), &format!("{key}=false")],
        );
        let e = s.validate().unwrap_err().to_string();
        assert!(
            !e.contains('\n') && e.contains(key.split('.').next().unwrap()),
            "{e}"
        );
    }
}

/// `inject.skip_try_to_unmap_flush` drops the batch; with the series off
/// there is no batch to drop, so it refuses in one line.
#[test]
fn skip_try_to_unmap_flush_needs_the_series() {
    let s = scenario(
        "kswapd-reclaim",
        &[
            "x86.batched_unmap=false",
            "inject.skip_try_to_unmap_flush=true",
        ],
    );
    let e = s.validate().unwrap_err().to_string();
    assert!(!e.contains('\n') && e.contains("x86.batched_unmap"), "{e}");
}
