//! x86 `flush_tlb_kernel_range` on the vmalloc/vfree loop (`vmalloc_race`
//! with `machine.arch = x86`). Before issue 15 item 12 the workload refused
//! x86 ("kernel-range flushes are modelled on RISC-V only").
mod common;
use common::{run, scenario, total};

/// Each `vfree` ends in `flush_tlb_kernel_range` of one page:
/// `on_each_cpu(do_kernel_range_flush)` IPIs every other online CPU (one
/// initiator that waits for every target, so each IPI finds an empty
/// `call_single_queue`: no coalescing) and runs it locally too. Exactly
/// (cpus - 1) CAL interrupts per vfree, none in the TLB row (only
/// `flush_tlb_func` counts there), one INVLPG per CPU per vfree; idle CPUs
/// are interrupted as well (kernel entries are global). The readers never
/// see a stale global entry.
#[test]
fn vfree_ipis_every_other_cpu_in_cal_only() {
    for (cpus, threads) in [(4u64, 3), (8, 3)] {
        let iters = 200u64;
        let s = scenario(
            "vmalloc-race",
            &[
                "machine.arch=x86",
                &format!("machine.cpus={cpus}"),
                &format!("workload.threads={threads}"),
                &format!("workload.iterations={iters}"),
            ],
        );
        let r = run(&s);
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!(r.arch["kernel_range_flushes"], iters);
        assert_eq!(total(&r, "CAL"), iters * (cpus - 1), "{cpus} CPUs");
        assert_eq!(total(&r, "TLB"), 0);
        assert_eq!(r.arch["ipis_sent"], iters * (cpus - 1));
        assert_eq!(r.arch["invlpg"], iters * cpus);
    }
}

/// `madvise(MADV_PAGEOUT)` of `pages` pages with `threads` busy threads of
/// the same process (`madvise_pageout`, x86): each call unmaps every PTE
/// with a batched flush pending (`arch_tlbbatch_add_pending`), but the
/// pages were just written: each is dirty, so `shrink_folio_list` calls
/// `try_to_unmap_flush_dirty` before its `pageout()`, and that flushes the
/// batch (its PTE was dirty). One `arch_tlbbatch_flush` per page: a
/// `TLB_FLUSH_ALL`, `mm = NULL` `flush_tlb_multi` to the mm's CPUs, so
/// exactly `threads` TLB (and CAL) interrupts per page and call, and no
/// INVLPG at all. (Before issue 35 the model flushed once per call: it
/// had no `try_to_unmap_flush_dirty`.)
#[test]
fn pageout_of_dirty_pages_is_one_batched_full_flush_per_page() {
    for (threads, pages) in [(1u64, 1u64), (3, 4), (3, 16)] {
        let iters = 100u64;
        let s = scenario(
            "flush-tlb-info-madvise",
            &[
                "workload.name=madvise_pageout",
                "machine.cpus=8",
                &format!("workload.threads={threads}"),
                &format!("workload.size={}", pages * 4096),
                &format!("workload.iterations={iters}"),
            ],
        );
        let r = run(&s);
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!(r.main_op().unwrap().name, "madvise_pageout");
        assert_eq!(r.arch["pswpout"], iters * pages, "every page was dirty");
        assert_eq!(r.arch["tlbbatch_flushes"], iters * pages);
        let ipis = iters * pages * threads;
        assert_eq!(total(&r, "TLB"), ipis, "{threads} threads, {pages} pages");
        assert_eq!(total(&r, "CAL"), ipis);
        assert_eq!(r.arch["invlpg"], 0);
    }
}

/// Seed (a) v7 moves `flush_tlb_kernel_range`'s `flush_tlb_info` to the
/// stack as well; the cache-line prices of the madvise benchmark apply.
/// Per-CPU and aligned stack: one line written by the initiator and read
/// by every target, the same time. Unaligned (offset 32, 40 bytes): two
/// lines. The initiator's ownership request of the second line costs one
/// `cache_line_concurrent` but is hidden here: each reader takes the IPI
/// only at the end of its current step (its kernel reads of the vmalloc'd
/// object), later than the IPI arrives either way. The targets' read of
/// the second line is on the critical path (the last ack): exactly one
/// `cache_line_concurrent` more per vfree (14 ns of ~2.8 us at jitter 0).
#[test]
fn vfree_pays_the_unaligned_second_line_once() {
    let us = |placement: &str| {
        let s = scenario(
            "vmalloc-race",
            &[
                "machine.arch=x86",
                "workload.iterations=200",
                "machine.jitter_pct=0",
                &format!("x86.flush_tlb_info={placement}"),
            ],
        );
        run(&s).main_op().unwrap().latency_ns.mean
    };
    let (percpu, aligned, unaligned) = (us("percpu"), us("stack_aligned"), us("stack_unaligned"));
    assert_eq!(aligned, percpu);
    let line = machine::CostProfile::default_x86().ns(machine::Cost::CacheLineConcurrent);
    assert!(
        (unaligned - aligned - line).abs() < 0.01,
        "unaligned costs {} ns more per vfree, expected {line}",
        unaligned - aligned
    );
}
