//! Reclaim workloads: kswapd reclaiming the pages of a running process,
//! and `MADV_PAGEOUT` of pages the caller only reads (clean after their
//! first swap-in, so their unmaps batch).
//!
//! ```text
//!   kswapd_reclaim:        CPU0: kswapd (kernel thread) loops { one pass over the
//!                          process's region: shrink_folio_list, SWAP_CLUSTER_MAX
//!                          folios a call }                                <- measured, per pass
//!                          CPU1..=threads: threads of the process, each writing its
//!                          slice of the region once, then reading it in a loop
//!                          (faulting reclaimed pages back in: clean, in the swap cache)
//!   madvise_pageout_read:  CPU0: loop { read every page; madvise(MADV_PAGEOUT) }
//!                          CPU1..=threads: busy threads of the same process
//! ```
//! Every reclaimed page owes a flush on every CPU running the process: with
//! `<arch>.batched_unmap` one per batch (`try_to_unmap_flush`), without it
//! one per page (`ptep_clear_flush`); a dirty page's flush comes before its
//! `pageout()` either way (`try_to_unmap_flush_dirty`).

use crate::{measured_loop, size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::{World, INIT_MM};
use machine::{Error, Scenario, PAGE_SIZE};

pub const KSWAPD: WorkloadInfo = WorkloadInfo {
    name: "kswapd_reclaim",
    about: "kswapd on CPU 0 reclaims the anonymous pages of a process whose threads keep reading them on the other CPUs (batched unmap flushes: <arch>.batched_unmap)",
    keys: "threads = reader threads (CPUs 1..=threads); size = the region, split among them; iterations = kswapd passes over it",
    build: build_kswapd,
    needs,
};

pub const PAGEOUT_READ: WorkloadInfo = WorkloadInfo {
    name: "madvise_pageout_read",
    about: "one thread reads a region and madvise(MADV_PAGEOUT)s it in a loop, busy threads of the process on other CPUs: clean swap-cache pages, one batched flush per call",
    keys: "threads = busy threads; size = bytes read and paged out per op; iterations = madvise calls",
    build: build_pageout_read,
    needs,
};

fn needs(s: &Scenario) -> (u64, u64, u64) {
    (
        s.workload.size.0 / PAGE_SIZE + 8,
        tables_for(s.workload.size.0),
        s.workload.threads as u64 + 1,
    )
}

/// The threads plus the reclaiming task fit the machine.
fn check_cpus(s: &Scenario, what: &str) -> Result<(), Error> {
    let threads = s.workload.threads;
    if threads + 1 > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {threads} threads plus {what} need {} CPUs, machine.cpus = {}",
            threads + 1,
            s.machine.cpus
        )));
    }
    Ok(())
}

fn build_kswapd(s: &Scenario, w: &mut World) -> Result<(), Error> {
    check_cpus(s, "kswapd")?;
    let threads = s.workload.threads.max(1) as u64;
    let pages = size_pages(s)?;
    if pages < threads {
        return Err(Error::Range(format!(
            "workload.size = {} gives fewer pages than workload.threads = {threads}",
            s.workload.size
        )));
    }
    let mm = w.mm_alloc()?;
    w.add_vma(mm, MAP_BASE, s.workload.size.0);
    let op = w.op_id("kswapd_pass");
    let pass = vec![UserOp::Kswapd {
        mm,
        start: MAP_BASE,
        len: s.workload.size.0,
    }];
    let kswapd = measured_loop(0, op, pass, s.workload.iterations, UserOp::Exit);
    w.spawn(INIT_MM, 0, kswapd, true);
    let slice = pages / threads;
    for i in 0..s.workload.threads {
        let start = MAP_BASE + i as u64 * slice * PAGE_SIZE;
        let touch = |write| UserOp::TouchRange {
            start,
            pages: slice as u32,
            write,
        };
        let prog = vec![
            touch(true),
            touch(false),
            UserOp::Loop {
                to: 1,
                times: u64::MAX,
            },
        ];
        w.spawn(mm, (i + 1) as u16, prog, false);
    }
    Ok(())
}

fn build_pageout_read(s: &Scenario, w: &mut World) -> Result<(), Error> {
    check_cpus(s, "the madvise thread")?;
    let pages = size_pages(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, MAP_BASE, s.workload.size.0);
    let op = w.op_id("madvise_pageout");
    let body = vec![
        UserOp::TouchRange {
            start: MAP_BASE,
            pages: pages as u32,
            write: false,
        },
        UserOp::MadvisePageout {
            start: MAP_BASE,
            len: s.workload.size.0,
        },
    ];
    let prog = measured_loop(0, op, body, s.workload.iterations, UserOp::Exit);
    w.spawn(mm, 0, prog, true);
    for cpu in 1..=s.workload.threads {
        w.spawn(mm, cpu as u16, vec![UserOp::Spin], false);
    }
    Ok(())
}
