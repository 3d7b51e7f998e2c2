//! IPI and flush counts derived from the mechanism.
mod common;
use common::*;

/// madvise_dontneed: one initiator, `k` busy threads of the same mm on other
/// CPUs. Every madvise flushes one page; `should_flush_tlb` selects exactly
/// the k non-lazy CPUs running the mm, so TLB = CAL = k per op, and only
/// those CPUs count anything.
#[test]
fn madvise_sends_one_ipi_per_busy_thread() {
    for k in [1u32, 3, 7] {
        let s = scenario(
            "default",
            &[&format!("workload.threads={k}"), "workload.iterations=500"],
        );
        let r = run(&s);
        let n = ops(&r);
        assert_eq!(n, 500);
        assert_eq!(total(&r, "TLB"), k as u64 * n, "TLB row, k={k}");
        assert_eq!(
            total(&r, "CAL"),
            k as u64 * n,
            "CAL row (one initiator never coalesces), k={k}"
        );
        assert_eq!(r.tlb_flush["remote_send_ipi"], n);
        assert_eq!(r.tlb_flush["remote_shootdown"], k as u64 * n);
        assert_eq!(r.tlb_flush["local_mm_shootdown"], n);
        for (cpu, &c) in r.interrupts.tlb.iter().enumerate() {
            let expect = if (1..=k as usize).contains(&cpu) {
                n
            } else {
                0
            };
            assert_eq!(c, expect, "TLB count of CPU{cpu}, k={k}");
        }
        // One page per op: a partial flush, one INVLPG on each of k+1 CPUs.
        assert_eq!(r.arch["invlpg"], (k as u64 + 1) * n);
        assert!(r.violations.is_empty());
    }
}

/// tlb_flush_threads: N threads of one mm each madvise 1 MiB. Every madvise
/// reaches the N-1 other CPUs (none is lazy: finished threads keep spinning),
/// so TLB = ops × (N − 1) exactly; CAL ≤ TLB because csds queued on a target
/// whose IPI is still pending share one interrupt (llist_add into a non-empty
/// call_single_queue sends no IPI).
#[test]
fn threads_ipi_formula() {
    for n in [2u32, 4, 8] {
        let s = scenario(
            "tlb-flush-threads",
            &[&format!("workload.threads={n}"), "workload.iterations=30"],
        );
        let r = run(&s);
        let o = ops(&r);
        assert_eq!(o, 30 * n as u64);
        assert_eq!(total(&r, "TLB"), o * (n as u64 - 1), "N={n}");
        assert_eq!(r.tlb_flush["remote_send_ipi"], o);
        assert!(total(&r, "CAL") <= total(&r, "TLB"));
        assert!(total(&r, "CAL") > 0);
        // 256 pages > the 33-page ceiling: every flush is a full flush.
        assert_eq!(r.arch["invlpg"], 0);
        assert!(r.violations.is_empty());
    }
}

/// tlb_flush_processes: each mm_cpumask holds only its own CPU, so
/// flush_tlb_mm_range flushes locally and sends nothing.
#[test]
fn processes_send_no_ipis() {
    let r = run(&scenario(
        "tlb-flush-processes",
        &["workload.threads=8", "workload.iterations=30"],
    ));
    assert_eq!(ops(&r), 240);
    assert_eq!(total(&r, "TLB"), 0);
    assert_eq!(total(&r, "CAL"), 0);
    assert_eq!(r.tlb_flush["remote_send_ipi"], 0);
    assert_eq!(r.tlb_flush["local_mm_shootdown"], 240);
}

/// `tlb_single_page_flush_ceiling`: up to 33 pages are flushed one INVLPG at
/// a time on every CPU; beyond that, one full flush each.
#[test]
fn flush_ceiling_switches_to_full_flush() {
    for (pages, partial) in [(33u64, true), (34, false)] {
        let s = scenario(
            "default",
            &[
                "workload.threads=2",
                "workload.iterations=50",
                &format!("workload.size={}KiB", pages * 4),
            ],
        );
        let r = run(&s);
        if partial {
            assert_eq!(r.arch["invlpg"], 3 * 50 * pages);
        } else {
            assert_eq!(r.arch["invlpg"], 0);
            assert!(r.arch["full_flushes"] >= 3 * 50);
        }
    }
    let r = run(&scenario(
        "default",
        &[
            "workload.threads=2",
            "workload.iterations=50",
            "workload.size=40KiB",
            "x86.tlb_single_page_flush_ceiling=64",
        ],
    ));
    assert_eq!(r.arch["invlpg"], 3 * 50 * 10, "the ceiling is a tunable");
}
