//! The flush_tlb_info seed's microbenchmark (commit 3db6d5a5ecaf's program).
//!
//! ```text
//!   CPU0: loop { addr[0] = 1; madvise(addr, PAGE_SIZE, MADV_DONTNEED); }  <- measured, us/op
//!   CPU1..=threads: while (!stop) nop;   (same process: in mm_cpumask, IPI'd)
//!   other CPUs: idle
//! ```
//! Every madvise zaps the page and flushes it on every CPU running the mm:
//! one call-function IPI per busy thread.

use crate::{measured_loop, size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario};

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "madvise_dontneed",
    about: "one thread writes a page and madvise(MADV_DONTNEED)s it in a loop while busy-waiting threads of the same process spin on other CPUs (seed x86-flush-tlb-info-on-stack)",
    keys: "threads = busy-waiting threads (the seed: 3); size = bytes madvised per op (4KiB); iterations = madvise calls",
    build,
    needs,
};

fn needs(s: &Scenario) -> (u64, u64, u64) {
    (
        s.workload.size.0 / 4096 + 8,
        tables_for(s.workload.size.0),
        s.workload.threads as u64 + 1,
    )
}

fn build(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let threads = s.workload.threads;
    if threads + 1 > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {threads} busy threads plus the madvise thread need {} CPUs, machine.cpus = {}",
            threads + 1,
            s.machine.cpus
        )));
    }
    let pages = size_pages(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, MAP_BASE, s.workload.size.0);
    let op = w.op_id("madvise_dontneed");
    let body = vec![
        UserOp::TouchRange {
            start: MAP_BASE,
            pages: pages as u32,
            write: true,
        },
        UserOp::MadviseDontneed {
            start: MAP_BASE,
            len: s.workload.size.0,
        },
    ];
    w.spawn(
        mm,
        0,
        measured_loop(0, op, body, s.workload.iterations, UserOp::Exit),
        true,
    );
    for cpu in 1..=threads {
        w.spawn(mm, cpu as u16, vec![UserOp::Spin], false);
    }
    Ok(())
}

/// A variant whose other threads *read* the page being madvised, so a TLB
/// entry they hold is live while the page is zapped, flushed and freed.
pub const RACE: WorkloadInfo = WorkloadInfo {
    name: "madvise_race",
    about: "like madvise_dontneed, but the other threads keep reading the madvised page: a missed or early flush shows up as an access to a freed frame",
    keys: "threads = reader threads; size = bytes madvised per op; iterations = madvise calls",
    build: build_race,
    needs,
};

/// Iterations of a reader's own loop between two reads of the shared page.
const READER_SPIN: u32 = 100;

fn build_race(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build(s, w)?;
    for t in w.tasks.iter_mut().filter(|t| !t.measured) {
        t.prog = vec![
            UserOp::Touch {
                addr: MAP_BASE,
                write: false,
            },
            UserOp::Charge {
                cost: machine::Cost::UserLoop,
                n: READER_SPIN,
            },
            UserOp::Loop {
                to: 0,
                times: u64::MAX,
            },
        ]
        .into();
    }
    Ok(())
}

/// The same loop with `MADV_PAGEOUT`: reclaim unmaps the pages with
/// batched flushes (`try_to_unmap_one` + `TTU_BATCH_FLUSH`). The pages
/// were just written (dirty), so each one's flush is paid before its
/// `pageout()` (`try_to_unmap_flush_dirty`): one flush per page and call.
pub const PAGEOUT: WorkloadInfo = WorkloadInfo {
    name: "madvise_pageout",
    about: "like madvise_dontneed, with madvise(MADV_PAGEOUT): reclaim's unmap flushes (dirty pages: one flush each, before pageout)",
    keys: "threads = busy-waiting threads; size = bytes paged out per op; iterations = madvise calls",
    build: build_pageout,
    needs,
};

fn build_pageout(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build(s, w)?;
    if let Some(name) = w.op_names.iter_mut().find(|n| *n == "madvise_dontneed") {
        *name = "madvise_pageout".to_string();
    }
    let t = &mut w.tasks[0];
    t.prog = kernel::user::pageout_instead_of_dontneed(&t.prog);
    Ok(())
}
