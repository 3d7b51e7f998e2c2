//! cyclictest next to a TLB-flush storm (seed x86-flush-tlb-info-on-stack
//! v7: why the flush should be preemptible).
//!
//! ```text
//!   CPU i < T : a SCHED_FIFO cyclictest thread: clock_nanosleep(next += period),
//!               wake-up latency = when it runs - when its timer expired
//!             + a thread of the flushing process: touch a page, madvise it away,
//!               again: each madvise IPIs the other T-1 CPUs and waits
//!   every CPU : IRQ-off windows (machine.irqoff_hz): an IPI target in one
//!               holds the initiator's csd_lock_wait for its whole length
//! ```
//! Upstream the waiting initiator has preemption off (`get_cpu()`), so the
//! cyclictest thread on its CPU waits for the slowest target; with
//! `x86.preemptible_flush` it preempts the wait.

use crate::{WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

pub const RT_LATENCY: WorkloadInfo = WorkloadInfo {
    name: "rt_latency",
    about: "cyclictest (a SCHED_FIFO thread per CPU waking every period) next to threads of one process madvising pages in a loop (a flush storm); the op is the wake-up latency",
    keys: "threads = CPUs with a flusher and a cyclictest thread; iterations = wake-ups per cyclictest thread; period_us = cyclictest interval (default 1000)",
    build,
    needs,
};

pub const RT_FLUSH_RACE: WorkloadInfo = WorkloadInfo {
    name: "rt_flush_race",
    about: "like rt_latency, but each SCHED_FIFO thread belongs to the flushing process and madvises its own page when it wakes: a flush that preempts another flush on the same CPU",
    keys: "threads = CPUs; iterations = wake-ups per RT thread; period_us = wake-up interval (default 1000)",
    build: build_race,
    needs,
};

fn needs(s: &Scenario) -> (u64, u64, u64) {
    let n = s.workload.threads as u64;
    (4 * n + 16, 2 * n + 8, 2 * n)
}

fn build(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build_with(s, w, false)
}

fn build_race(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build_with(s, w, true)
}

/// `rt_flushes`: the RT threads are threads of the flushing process and
/// madvise a page of their own after each wake-up.
fn build_with(s: &Scenario, w: &mut World, rt_flushes: bool) -> Result<(), Error> {
    let n = s.workload.threads;
    if n == 0 || n > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {n} (allowed 1..=machine.cpus = {})",
            s.machine.cpus
        )));
    }
    let period_us = if s.workload.period_us == 0 {
        1000
    } else {
        s.workload.period_us
    };
    if period_us > 4_000_000 {
        return Err(Error::Range(format!(
            "workload.period_us = {period_us} (at most 4000000 for rt_latency)"
        )));
    }
    let lat = w.op_id("rt_wakeup_latency");
    let op = w.op_id("madvise");
    let mm = w.mm_alloc()?;
    let rt_mm = if rt_flushes { mm } else { w.mm_alloc()? };
    for i in 0..n {
        let mut prog = vec![
            UserOp::ClockNanosleep {
                period_ns: (period_us * 1000) as u32,
                op: lat,
            },
            UserOp::OpEnd(lat),
        ];
        if rt_flushes {
            let page = MAP_BASE + (n + i) as u64 * PAGE_SIZE;
            w.add_vma(mm, page, PAGE_SIZE);
            let rt_op = w.op_id("rt_madvise");
            prog.push(UserOp::OpBegin(rt_op));
            prog.push(UserOp::Touch {
                addr: page,
                write: true,
            });
            prog.push(UserOp::MadviseDontneed {
                start: page,
                len: PAGE_SIZE,
            });
            prog.push(UserOp::OpEnd(rt_op));
        }
        prog.push(UserOp::Loop {
            to: 0,
            times: s.workload.iterations,
        });
        prog.push(UserOp::Exit);
        let rt = w.spawn(rt_mm, i as u16, prog, true);
        w.tasks[rt as usize].rt = true;
        let page = MAP_BASE + i as u64 * PAGE_SIZE;
        w.add_vma(mm, page, PAGE_SIZE);
        w.spawn(
            mm,
            i as u16,
            vec![
                UserOp::OpBegin(op),
                UserOp::Touch {
                    addr: page,
                    write: true,
                },
                UserOp::MadviseDontneed {
                    start: page,
                    len: PAGE_SIZE,
                },
                UserOp::OpEnd(op),
                UserOp::Loop {
                    to: 0,
                    times: u64::MAX,
                },
            ],
            false,
        );
    }
    Ok(())
}
