//! will-it-scale `tlb_flush2`-style loops: each task faults in its own region
//! and `MADV_DONTNEED`s it, over and over.
//!
//! ```text
//!   threads:   one mm, task i on CPU i, region i   -> every madvise IPIs the other tasks' CPUs
//!   processes: one mm per task                     -> mm_cpumask = {own CPU}: local flushes only
//! ```
//! A task that finishes its iterations keeps spinning in user mode (it stays a
//! non-lazy member of `mm_cpumask`), so every madvise of a threads run
//! reaches exactly `threads - 1` other CPUs.

use crate::{measured_loop, size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario};

pub const THREADS: WorkloadInfo = WorkloadInfo {
    name: "tlb_flush_threads",
    about: "threads of one process each fault in and madvise(MADV_DONTNEED) their own region in a loop (will-it-scale tlb_flush2 threads)",
    keys: "threads = tasks, one per CPU; size = region per task (1MiB); iterations = loops per task",
    build: build_threads,
    needs,
};

pub const PROCESSES: WorkloadInfo = WorkloadInfo {
    name: "tlb_flush_processes",
    about: "processes each fault in and madvise(MADV_DONTNEED) their own region in a loop (will-it-scale tlb_flush2 processes)",
    keys: "threads = tasks, one per CPU; size = region per task (1MiB); iterations = loops per task",
    build: build_processes,
    needs,
};

fn needs(s: &Scenario) -> (u64, u64, u64) {
    let n = s.workload.threads.max(1) as u64;
    (
        n * (s.workload.size.0 / 4096 + 2),
        n * tables_for(s.workload.size.0),
        n,
    )
}

fn build_threads(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build(s, w, true)
}

fn build_processes(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build(s, w, false)
}

fn build(s: &Scenario, w: &mut World, shared_mm: bool) -> Result<(), Error> {
    let n = s.workload.threads;
    if n == 0 || n > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {n} tasks (allowed 1..=machine.cpus = {})",
            s.machine.cpus
        )));
    }
    let pages = size_pages(s)?;
    let size = s.workload.size.0;
    // Regions 2 MiB-aligned so tasks never share a PTE table.
    let stride = size.div_ceil(machine::HPAGE_SIZE) * machine::HPAGE_SIZE;
    let op = w.op_id(if shared_mm {
        "tlb_flush_threads"
    } else {
        "tlb_flush_processes"
    });
    let shared = if shared_mm { Some(w.mm_alloc()?) } else { None };
    for i in 0..n {
        let (mm, start) = match shared {
            Some(mm) => (mm, MAP_BASE + i as u64 * stride),
            None => (w.mm_alloc()?, MAP_BASE),
        };
        w.add_vma(mm, start, size);
        let body = vec![
            UserOp::TouchRange {
                start,
                pages: pages as u32,
                write: true,
            },
            UserOp::MadviseDontneed { start, len: size },
        ];
        w.spawn(
            mm,
            i as u16,
            measured_loop(i, op, body, s.workload.iterations, UserOp::DoneSpin),
            true,
        );
    }
    Ok(())
}
