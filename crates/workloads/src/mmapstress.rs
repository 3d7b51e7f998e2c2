//! LTP `mmapstress01` and lmbench `lat_pagefault` / `lat_mmap`: the
//! workloads of seed riscv-defer-flush-to-context-switch and its review.
//!
//! ```text
//!   mmapstress01 (LTP testcases/kernel/mem/mmapstress/mmapstress01.c):
//!     parent: fork nprocs = min(cpus-1, 20) children, then
//!             loop { wait(); fork() a replacement }       (runtime 12 s)
//!             each fork: flush_tlb_mm(parent) in dup_mmap, then the
//!             parent's stack and pidarray writes fault (wp_page_copy:
//!             flush_tlb_page(parent))
//!     child:  mmap(shared 4 KiB file); 500 x (check + write its bytes
//!             of the page); munmap (flush_tlb_range(child)); exit
//!             (exit_mmap: flush_tlb_mm(child)), which wakes the parent
//!   lat_pagefault: one process maps a file and faults each page (per-fault latency)
//!   lat_mmap:      one process mmap()s a file, touches it, munmap()s (per pair)
//! ```
//! Each flush IPIs the other harts of the mm's `mm_cpumask`, which on
//! RISC-V only grows as the task moves. No task is pinned (LTP and lmbench
//! do not call `sched_setaffinity`): the fair class places them
//! (`kernel::sched::fair` on the machine's topology): a child where
//! `sched_balance_fork` finds the idlest CPU, the parent where
//! `select_task_rq_fair` wakes it when a child exits, tasks pulled by
//! new-idle and periodic balancing at the `machine.timeslice_us` tick.
//! The parent and each lmbench process start on hart 0 (process i on hart i).

use crate::{measured_loop, size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

pub const MMAPSTRESS01: WorkloadInfo = WorkloadInfo {
    name: "mmapstress01",
    about: "LTP mmapstress01: a parent forks children that mmap a shared file, check and write it 500 times, munmap it and exit; it waits for each and forks a replacement (seed riscv-defer-flush-to-context-switch)",
    keys: "threads = children alive at once (0 = LTP's min(cpus-1, 20)); size = the shared file (4KiB, LTP's default); iterations = children forked in all (the measured op is the parent's fork)",
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
    // The parent's pages and each live child's copies of them; the file's
    // and the parent's regions in separate page-table subtrees.
    let per_mm = PARENT_PAGES as u64 + 1;
    (
        pages + 16 + (n + 1) * per_mm,
        (n + 1) * (tables_for(s.workload.size.0) + 4),
        n + 1,
    )
}

fn needs_lat(s: &Scenario) -> (u64, u64, u64) {
    let n = s.workload.threads.max(1) as u64;
    let pages = s.workload.size.0 / PAGE_SIZE;
    (pages + 16, n * (tables_for(s.workload.size.0) + 1), n)
}

/// LTP's `MAXLOOPS`: each child checks and writes its bytes of a random
/// page of the map this many times (the file is one page by default).
pub const MAXLOOPS: u64 = 500;

/// The parent's own writable pages (its stack and the heap page holding
/// `pidarray`), written after every `fork()`: the write-protect faults
/// `dup_mmap` left (`wp_page_copy`, one `flush_tlb_page` of the parent's
/// mm each).
pub const PARENT_BASE: u64 = 0x7ff0_0000_0000;
pub const PARENT_PAGES: u32 = 2;

/// The child: LTP's `child_mapper` on the shared file, then `exit(0)`.
fn child_mapper(s: &Scenario, file: u32, nprocs: u32) -> Result<Vec<UserOp>, Error> {
    let pages = size_pages(s)?;
    let len = s.workload.size.0;
    // Bytes i = procno, procno + nprocs, ... of one page: a load and a
    // store each, MAXLOOPS times.
    let accesses = 2 * MAXLOOPS * (PAGE_SIZE / nprocs as u64);
    Ok(vec![
        // Its stack (copy-on-write since the fork).
        UserOp::Touch {
            addr: PARENT_BASE,
            write: true,
        },
        UserOp::MmapFile {
            start: MAP_BASE,
            len,
            file,
        },
        // The first access to each page faults it in.
        UserOp::TouchRange {
            start: MAP_BASE,
            pages: pages.min(MAXLOOPS) as u32,
            write: true,
        },
        UserOp::Charge {
            cost: machine::Cost::UserAccess,
            n: accesses.min(u32::MAX as u64) as u32,
        },
        UserOp::Munmap {
            start: MAP_BASE,
            len,
        },
        // exit: exit_mmap tears down what it inherited (its pages, and
        // its tables at every level but the PGD) with one fullmm flush.
        UserOp::Exit,
    ])
}

/// LTP mmapstress01 (testcases/kernel/mem/mmapstress/mmapstress01.c,
/// the LTP-framework version): the parent forks `nprocs` children, then
/// loops `pid = wait(&st); pidarray[i] = fork();` until the run ends.
fn build_mmapstress(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let n = children(s);
    if s.machine.cpus < 2 || n > 4 * s.machine.cpus {
        return Err(Error::Range(format!(
            "mmapstress01 needs machine.cpus >= 2 and workload.threads <= 4 x cpus (got {} CPUs, {n} children)",
            s.machine.cpus
        )));
    }
    let file = w.create_file(size_pages(s)? as u32)?;
    let child: std::sync::Arc<[UserOp]> = child_mapper(s, file, n)?.into();
    let op = w.op_id("fork");
    let p = ltp_parent(op, child, n as u64, s.workload.iterations);
    let parent = w.mm_alloc()?;
    let t = w.spawn(parent, 0, p, true);
    w.tasks[t as usize].cpus_allowed_all = true;
    Ok(())
}

/// LTP's parent: `nprocs` forks (fewer if the run has fewer), then
/// `wait()` and a replacement fork until `forks` children were forked.
/// The op `op` times each `fork()`.
fn ltp_parent(op: u16, child: std::sync::Arc<[UserOp]>, nprocs: u64, forks: u64) -> Vec<UserOp> {
    let first = forks.min(nprocs);
    let fork = UserOp::Fork {
        child_cpu: 0,
        child,
    };
    // After fork() returns: its stack and pidarray[i] = pid.
    let after_fork = UserOp::TouchRange {
        start: PARENT_BASE,
        pages: PARENT_PAGES,
        write: true,
    };
    let mut p = vec![
        UserOp::Mmap {
            start: PARENT_BASE,
            len: PARENT_PAGES as u64 * PAGE_SIZE,
        },
        after_fork.clone(),
        // for (i = 0; i < nprocs; i++) pidarray[i] = fork();
        UserOp::OpBegin(op),
        fork.clone(),
        UserOp::OpEnd(op),
        after_fork.clone(),
        UserOp::Loop {
            to: 2,
            times: first,
        },
    ];
    if forks > first {
        // while (!finished) { pid = wait(&st); ...; pidarray[i] = fork(); }
        p.extend([
            UserOp::Wait,
            UserOp::OpBegin(op),
            fork,
            UserOp::OpEnd(op),
            after_fork,
            UserOp::Loop {
                to: 7,
                times: forks - first,
            },
        ]);
    }
    p.push(UserOp::Exit);
    p
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
