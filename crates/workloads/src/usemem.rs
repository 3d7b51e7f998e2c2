//! usemem (vm-scalability) with periodic fork/exec, as in seed
//! arm64-local-tlbi-wp-fault: writer threads sweep a large anonymous
//! region while the main thread forks a child that execs at once.
//!
//! ```text
//!   CPU 0..T-1 : writer threads, each memsets its own 1/T of the region, pass after pass
//!   CPU T      : main thread: every period_us, fork() -> child on CPU T+1: execve()
//!   fork       : copy_page_range write-protects every PTE, flush_tlb_mm(parent)
//!   child exec : exit_mmap drops the child's references: pages exclusive again
//!   next write : WP fault -> do_wp_page -> wp_page_reuse -> __ptep_set_access_flags
//!                arm64 upstream: flush_tlb_page = TLBI VALE1IS + DSB ISH (every core)
//!                seed:           local_flush_tlb_page = TLBI VALE1 + DSB NSH
//! ```
//!
//! `cow_reuse_race` is the small variant that makes stale read-only entries
//! on *other* CPUs: all threads read and then write one shared region, so
//! after a fork the first writer of a page upgrades it while the others
//! still cache it read-only (the case the seed's spurious-fault flush fixes).

use crate::{size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Cost, Error, Scenario, HPAGE_SIZE, PAGE_SIZE};

pub const USEMEM: WorkloadInfo = WorkloadInfo {
    name: "usemem_fork_exec",
    about: "usemem: threads memset their share of a region pass after pass while the main thread forks a child that execs every period (seed arm64-local-tlbi-wp-fault)",
    keys: "threads = writer threads (CPUs 0..T-1; main on CPU T, child on T+1); size = whole region; iterations = passes per thread; period_us = fork/exec interval (default 300000)",
    build: build_usemem,
    needs: needs_usemem,
};

pub const COW_RACE: WorkloadInfo = WorkloadInfo {
    name: "cow_reuse_race",
    about: "threads read, then write, one shared region in a loop while the main thread forks+execs: stale read-only entries on other CPUs after wp_page_reuse",
    keys: "threads = reader/writer threads (CPUs 0..T-1; main on CPU T, child on T+1); size = shared region; iterations = read+write rounds per thread; period_us = fork interval (default 200)",
    build: build_race,
    needs: needs_race,
};

/// Op name: usemem reports bytes written; one op is 2 MiB memset.
const OP_CHUNK: &str = "usemem_2mib";

fn needs_usemem(s: &Scenario) -> (u64, u64, u64) {
    let pages = s.workload.size.0 / PAGE_SIZE;
    // The child shares every page; wp_page_copy may add up to one copy each.
    (
        pages * 2 + 16,
        tables_for(s.workload.size.0) * 2,
        s.workload.threads as u64 + 64,
    )
}

fn needs_race(s: &Scenario) -> (u64, u64, u64) {
    needs_usemem(s)
}

fn check_cpus(s: &Scenario) -> Result<u32, Error> {
    let n = s.workload.threads;
    if n == 0 || n + 2 > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {n} (allowed 1..=machine.cpus - 2 = {}: the main thread and the child need a CPU each)",
            s.machine.cpus.saturating_sub(2)
        )));
    }
    Ok(n)
}

/// The main thread: every `period_us`, fork a child on CPU `child_cpu`
/// that execs at once (`fork(); if (!pid) execve(...)`). Between forks it
/// sleeps (`clock_nanosleep` to the next period), so its CPU idles and
/// counts no cycles, as in `perf record -a`.
fn main_thread(period_us: u64, start: u64, len: u64, child_cpu: u16) -> Vec<UserOp> {
    let child = vec![UserOp::Exec { start, len }, UserOp::Exit];
    // One sleep covers at most u32::MAX ns: split the period evenly.
    let ns = period_us * 1000;
    let parts = ns.div_ceil(u32::MAX as u64).max(1);
    let mut p: Vec<UserOp> = (0..parts)
        .map(|i| {
            let part = ns / parts + u64::from(i < ns % parts);
            UserOp::ClockNanosleep {
                period_ns: part as u32,
                op: kernel::user::NO_OP,
            }
        })
        .collect();
    p.push(UserOp::Fork {
        child_cpu,
        child: child.into(),
    });
    p.push(UserOp::Loop {
        to: 0,
        times: u64::MAX,
    });
    p
}

/// The main thread on CPU `n`, forking children onto CPU `n + 1` every
/// `workload.period_us` (or `default_period_us`).
fn spawn_main_thread(
    s: &Scenario,
    w: &mut World,
    mm: kernel::MmId,
    n: u32,
    default_period_us: u64,
) {
    let period = match s.workload.period_us {
        0 => default_period_us,
        p => p,
    };
    w.spawn(
        mm,
        n as u16,
        main_thread(period, MAP_BASE, s.workload.size.0, n as u16 + 1),
        false,
    );
}

fn build_usemem(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let n = check_cpus(s)?;
    let pages = size_pages(s)?;
    if !pages.is_multiple_of(n as u64 * 512) {
        return Err(Error::Range(format!(
            "workload.size = {} must split into {n} whole 2MiB chunks per thread",
            s.workload.size
        )));
    }
    let per = pages / n as u64;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, MAP_BASE, s.workload.size.0);
    // usemem touches the region once before its timed passes (its first pass).
    kernel::mm::memory::populate_range(w, mm, MAP_BASE, MAP_BASE + s.workload.size.0)?;
    let op = w.op_id(OP_CHUNK);
    for i in 0..n {
        let base = MAP_BASE + i as u64 * per * PAGE_SIZE;
        let chunks = per / 512;
        let mut p = vec![UserOp::Charge {
            cost: Cost::TaskCreate,
            n: i,
        }];
        // for pass in 0..iterations { for chunk in 0..chunks { memset(2 MiB) } }
        // Loops do not nest, so unroll the chunks of a pass.
        let top = p.len() as u16;
        for c in 0..chunks {
            p.push(UserOp::OpBegin(op));
            p.push(UserOp::Memset {
                start: base + c * HPAGE_SIZE,
                pages: 512,
            });
            p.push(UserOp::OpEnd(op));
        }
        p.push(UserOp::Loop {
            to: top,
            times: s.workload.iterations,
        });
        p.push(UserOp::DoneSpin);
        w.spawn(mm, i as u16, p, true);
    }
    spawn_main_thread(s, w, mm, n, 300_000);
    Ok(())
}

fn build_race(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let n = check_cpus(s)?;
    let pages = size_pages(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, MAP_BASE, s.workload.size.0);
    kernel::mm::memory::populate_range(w, mm, MAP_BASE, MAP_BASE + s.workload.size.0)?;
    let op = w.op_id("read_then_write");
    for i in 0..n {
        let body = vec![
            UserOp::TouchRange {
                start: MAP_BASE,
                pages: pages as u32,
                write: false,
            },
            UserOp::Memset {
                start: MAP_BASE,
                pages: pages as u32,
            },
        ];
        w.spawn(
            mm,
            i as u16,
            crate::measured_loop(i, op, body, s.workload.iterations, UserOp::DoneSpin),
            true,
        );
    }
    spawn_main_thread(s, w, mm, n, 200);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The main thread's sleeps add up to the period exactly, however long
    /// (the seed forks every 40 s, past one `clock_nanosleep`'s u32 ns),
    /// and then it forks.
    #[test]
    fn main_thread_sleeps_one_period_then_forks() {
        for period_us in [200, 900_000, 40_000_000, 3_600_000_000] {
            let p = main_thread(period_us, MAP_BASE, 1 << 20, 5);
            let slept: u64 = p
                .iter()
                .map(|op| match op {
                    UserOp::ClockNanosleep { period_ns, .. } => *period_ns as u64,
                    _ => 0,
                })
                .sum();
            assert_eq!(slept, period_us * 1000, "{period_us}");
            let fork = p.iter().position(|op| matches!(op, UserOp::Fork { .. }));
            assert_eq!(fork, Some(p.len() - 2), "{period_us}");
        }
    }
}
