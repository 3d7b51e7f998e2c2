//! LTP `mmapstress01` and lmbench `lat_pagefault` / `lat_mmap`: the
//! workloads of seed riscv-defer-flush-to-context-switch and its review.
//!
//! ```text
//!   mmapstress01: the parent keeps min(cpus-1, 20) children alive, forking a
//!                 new one as others finish; each child loops
//!                 mmap(shared 4 KiB file) -> write it (fault) -> munmap, then exits.
//!                 fork = flush_tlb_mm(parent), munmap = flush_tlb_range(child):
//!                 each IPIs every hart in that mm's mm_cpumask, which on
//!                 RISC-V only grows as the task migrates
//!   lat_pagefault: one process maps a file and faults each page (per-fault latency)
//!   lat_mmap:      one process mmap()s a file, touches it, munmap()s (per pair)
//! ```
//! No task is pinned (LTP and lmbench do not call `sched_setaffinity`):
//! the fair class places them (`kernel::sched::fair` on the machine's
//! topology): a child where `sched_balance_fork` finds the idlest CPU,
//! tasks pulled by new-idle and periodic balancing at the
//! `machine.timeslice_us` tick. The parent and each lmbench process start
//! on hart 0 (process i on hart i).

use crate::{measured_loop, size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

pub const MMAPSTRESS01: WorkloadInfo = WorkloadInfo {
    name: "mmapstress01",
    about: "LTP mmapstress01: a parent keeps forking children that mmap a shared file, write it and munmap it in a loop, then exit (seed riscv-defer-flush-to-context-switch)",
    keys: "threads = children alive at once (0 = LTP's min(cpus-1, 20)); size = the shared file (4KiB); iterations = children forked in all (the measured op is the parent's fork); period_us = time between forks (0 = child lifetime / threads)",
    build: build_mmapstress,
    needs: needs_mmapstress,
};

pub const LAT_PAGEFAULT: WorkloadInfo = WorkloadInfo {
    name: "lat_pagefault",
    about: "lmbench lat_pagefault: map a file and fault in each page; the op is one fault",
    keys: "threads = processes running it at once (1); size = the file; iterations = map/fault/unmap rounds",
    build: build_lat_pagefault,
    needs: needs_lat,
};

pub const LAT_MMAP: WorkloadInfo = WorkloadInfo {
    name: "lat_mmap",
    about: "lmbench lat_mmap: mmap a file, touch it, munmap; the op is one mmap+munmap pair",
    keys: "threads = processes running it at once (1); size = the file; iterations = pairs",
    build: build_lat_mmap,
    needs: needs_lat,
};

/// LTP's default: `min(ncpus - 1, 20)` children.
pub fn children(s: &Scenario) -> u32 {
    match s.workload.threads {
        0 => (s.machine.cpus.saturating_sub(1)).clamp(1, 20),
        n => n,
    }
}

fn needs_mmapstress(s: &Scenario) -> (u64, u64, u64) {
    let n = children(s) as u64;
    let pages = s.workload.size.0 / PAGE_SIZE;
    (pages + 16, n * (tables_for(s.workload.size.0) + 1), n + 1)
}

fn needs_lat(s: &Scenario) -> (u64, u64, u64) {
    let n = s.workload.threads.max(1) as u64;
    let pages = s.workload.size.0 / PAGE_SIZE;
    (pages + 16, n * (tables_for(s.workload.size.0) + 1), n)
}

/// mmap/write/munmap rounds each child makes before it exits (LTP's
/// children map the file and access it in a loop of this order).
pub const CHILD_ROUNDS: u64 = 100;

fn build_mmapstress(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let n = children(s);
    let pages = size_pages(s)?;
    if s.machine.cpus < 2 || n > 4 * s.machine.cpus {
        return Err(Error::Range(format!(
            "mmapstress01 needs machine.cpus >= 2 and workload.threads <= 4 x cpus (got {} CPUs, {n} children)",
            s.machine.cpus
        )));
    }
    let file = w.create_file(pages as u32)?;
    let len = s.workload.size.0;
    let mut child = vec![UserOp::Loop { to: 0, times: 0 }];
    child.clear();
    child.push(UserOp::MmapFile {
        start: MAP_BASE,
        len,
        file,
    });
    child.push(UserOp::TouchRange {
        start: MAP_BASE,
        pages: pages as u32,
        write: true,
    });
    child.push(UserOp::Munmap {
        start: MAP_BASE,
        len,
    });
    child.push(UserOp::Loop {
        to: 0,
        times: CHILD_ROUNDS,
    });
    child.push(UserOp::Exit);
    let child: std::sync::Arc<[UserOp]> = child.into();
    // The parent keeps about `n` children alive: it forks one every
    // (child lifetime / n); wake_up_new_task places each
    // (sched_balance_fork), so the Fork's CPU is not used.
    let period_ns = if s.workload.period_us > 0 {
        s.workload.period_us * 1000
    } else {
        // A child lives about CHILD_ROUNDS x ~10 us.
        CHILD_ROUNDS * 10_000 / n as u64
    };
    let op = w.op_id("fork");
    let p = vec![
        UserOp::OpBegin(op),
        UserOp::Fork {
            child_cpu: 0,
            child,
        },
        UserOp::OpEnd(op),
        UserOp::Compute {
            ns: period_ns.min(u32::MAX as u64) as u32,
        },
        UserOp::Loop {
            to: 0,
            times: s.workload.iterations,
        },
        UserOp::Exit,
    ];
    let parent = w.mm_alloc()?;
    let t = w.spawn(parent, 0, p, true);
    w.tasks[t as usize].cpus_allowed_all = true;
    Ok(())
}

fn lat_procs(s: &Scenario) -> Result<u32, Error> {
    let n = s.workload.threads.max(1);
    if n > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {n} processes (allowed 1..=machine.cpus = {})",
            s.machine.cpus
        )));
    }
    Ok(n)
}

fn build_lat_pagefault(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let n = lat_procs(s)?;
    let pages = size_pages(s)?;
    if pages > 4096 {
        return Err(Error::Range(format!(
            "lat_pagefault: workload.size = {} (at most 16MiB: one op per page)",
            s.workload.size
        )));
    }
    let file = w.create_file(pages as u32)?;
    let op = w.op_id("pagefault");
    let len = s.workload.size.0;
    for i in 0..n {
        let mm = w.mm_alloc()?;
        let mut p = vec![UserOp::Charge {
            cost: machine::Cost::TaskCreate,
            n: i,
        }];
        let top = p.len() as u16;
        p.push(UserOp::MmapFile {
            start: MAP_BASE,
            len,
            file,
        });
        for k in 0..pages {
            p.push(UserOp::OpBegin(op));
            p.push(UserOp::Touch {
                addr: MAP_BASE + k * PAGE_SIZE,
                write: false,
            });
            p.push(UserOp::OpEnd(op));
        }
        p.push(UserOp::Munmap {
            start: MAP_BASE,
            len,
        });
        p.push(UserOp::Loop {
            to: top,
            times: s.workload.iterations,
        });
        p.push(UserOp::Exit);
        let t = w.spawn(mm, i as u16, p, true);
        w.tasks[t as usize].cpus_allowed_all = true;
    }
    Ok(())
}

fn build_lat_mmap(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let n = lat_procs(s)?;
    let pages = size_pages(s)?;
    let file = w.create_file(pages as u32)?;
    let op = w.op_id("mmap_munmap");
    let len = s.workload.size.0;
    for i in 0..n {
        let mm = w.mm_alloc()?;
        // lmbench touches one byte per 16 KiB: as many pages, taken in order.
        let body = vec![
            UserOp::MmapFile {
                start: MAP_BASE,
                len,
                file,
            },
            UserOp::TouchRange {
                start: MAP_BASE,
                pages: pages.div_ceil(4) as u32,
                write: false,
            },
            UserOp::Munmap {
                start: MAP_BASE,
                len,
            },
        ];
        let t = w.spawn(
            mm,
            i as u16,
            measured_loop(i, op, body, s.workload.iterations, UserOp::Exit),
            true,
        );
        w.tasks[t as usize].cpus_allowed_all = true;
    }
    Ok(())
}
