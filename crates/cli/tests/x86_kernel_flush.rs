//! x86 `flush_tlb_kernel_range` on the vmalloc/vfree loop (`vmalloc_race`
//! with `machine.arch = x86`). Before issue 15 item 12 the workload refused
//! x86 ("kernel-range flushes are modelled on RISC-V only").
mod common;
use common::{run, scenario, total};

/// `vfree` flushes nothing itself (mm/vmalloc.c: `vunmap_range_noflush`,
/// `free_vmap_area_noflush`); the area's pages, its `size` and a guard
/// page, go on `vmap_lazy_nr`, and the vfree that takes it past
/// `lazy_max_pages()` = 32 MiB of pages × `fls(cpus)` purges: one
/// `flush_tlb_kernel_range` of the merged range, longer than the
/// 33-page ceiling, so `on_each_cpu(do_flush_tlb_all)`: (cpus - 1) CAL
/// interrupts, none in the TLB row, no INVLPG. With S pages a vfree, a
/// purge every `lazy_max / (S + 1) + 1` vfrees (`vmap_lazy_nr` starts
/// again from 0). Until issue 35 every vfree IPI'd: iters × (cpus - 1).
/// The readers never see a stale global entry.
#[test]
fn vfree_ipis_only_at_the_lazy_purge() {
    for (cpus, threads, iters) in [(4u64, 3, 200u64), (8, 3, 300)] {
        let s = scenario(
            "vmalloc-race",
            &[
                "machine.arch=x86",
                &format!("machine.cpus={cpus}"),
                &format!("workload.threads={threads}"),
                &format!("workload.iterations={iters}"),
                "workload.size=1MiB",
            ],
        );
        let r = run(&s);
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        let lazy_max = (64 - cpus.leading_zeros() as u64) * (32 << 20) / 4096;
        assert_eq!(lazy_max, kernel::mm::vmalloc::lazy_max_pages(cpus as u32));
        let per_purge = lazy_max / (256 + 1) + 1;
        let purges = iters / per_purge;
        assert_eq!(
            (per_purge, purges),
            if cpus == 4 { (96, 2) } else { (128, 2) }
        );
        assert_eq!(r.arch["kernel_range_flushes"], purges, "{cpus} CPUs");
        assert_eq!(total(&r, "CAL"), purges * (cpus - 1), "{cpus} CPUs");
        assert_eq!(total(&r, "TLB"), 0);
        assert_eq!(r.arch["ipis_sent"], purges * (cpus - 1));
        assert_eq!(r.arch["invlpg"], 0);
    }
}

/// `lazy_max_pages()` (mm/vmalloc.c): `fls(num_online_cpus())` × 8,192.
#[test]
fn lazy_max_pages_follows_fls_of_the_cpus() {
    use kernel::mm::vmalloc::lazy_max_pages;
    let got: Vec<u64> = [1, 2, 3, 4, 7, 8, 64].map(lazy_max_pages).to_vec();
    let k = 8192;
    assert_eq!(got, [k, 2 * k, 2 * k, 3 * k, 3 * k, 4 * k, 7 * k]);
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
/// stack as well, but vfree's flush is now the lazy purge's, whose merged
/// range is longer than the 33-page ceiling: `kernel_tlb_flush_all` =
/// `on_each_cpu(do_flush_tlb_all, NULL, 1)`, whose targets never read the
/// struct, so its placement changes no vfree's time. (Until issue 35 each
/// vfree flushed its one page by `do_kernel_range_flush(info)`, and the
/// unaligned struct cost one `cache_line_concurrent` a vfree.)
#[test]
fn vfree_purge_does_not_read_flush_tlb_info() {
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
        let r = run(&s);
        assert_eq!(r.arch["kernel_range_flushes"], 2, "two purges");
        r.main_op().unwrap().latency_ns.mean
    };
    let (percpu, aligned, unaligned) = (us("percpu"), us("stack_aligned"), us("stack_unaligned"));
    assert_eq!(aligned, percpu);
    assert_eq!(unaligned, aligned);
}
