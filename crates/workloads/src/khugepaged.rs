//! khugepaged / `MADV_COLLAPSE` workloads (seed skip-redundant-sync-ipis).
//!
//! ```text
//!   khugepaged_collapse:  CPU0: madvise(base, size, MADV_COLLAPSE) once over a
//!                         populated region (one collapse_huge_page per 2 MiB);
//!                         CPU1..=threads: threads of the same process doing
//!                         GUP-fast of 16-page buffers across the region;
//!                         every other CPU idle.
//!   collapse_race:        CPU0 loops { fault in 2 MiB; MADV_COLLAPSE it
//!                         (again while it fails with EAGAIN: a GUP pin);
//!                         MADV_DONTNEED it } while CPU1..=threads GUP-fast
//!                         the same 2 MiB: a stress test for the lockless walker.
//! ```

use crate::{tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Cost, Error, Scenario, HPAGE_SIZE, PAGE_SIZE};

pub const COLLAPSE: WorkloadInfo = WorkloadInfo {
    name: "khugepaged_collapse",
    about: "MADV_COLLAPSE over a populated region, one collapse_huge_page per 2 MiB; optional GUP-fast threads (seed skip-redundant-sync-ipis)",
    keys: "size = region collapsed (multiple of 2MiB, e.g. 20GiB); threads = extra threads doing GUP-fast (0 = the seed's setup); populate_stride = fault in every Nth page before collapsing (1 = all); pin_ios = direct_io latencies each GUP-fast pin is held (0 = unpinned in the next step); period_us = one GUP-fast call per period (0 = back to back); iterations unused",
    build: build_collapse,
    needs,
};

pub const RACE: WorkloadInfo = WorkloadInfo {
    name: "collapse_race",
    about: "loop: fault in 2 MiB, MADV_COLLAPSE it, MADV_DONTNEED it, while other threads GUP-fast the same range",
    keys: "threads = GUP-fast threads; size = region (2MiB); iterations = collapse cycles; pin_ios = direct_io latencies each GUP-fast pin is held (0 = unpinned in the next step); period_us = one GUP-fast call per period (0 = back to back)",
    build: build_race,
    needs,
};

/// Pages in one GUP-fast call (a 64 KiB `O_DIRECT` buffer).
const GUP_PAGES: u32 = 16;
/// Window stride in pages between a thread's calls (prime, so windows spread).
const GUP_STRIDE: u32 = 37;
/// Iterations of its own loop a GUP thread runs between calls (I/O submission).
const GUP_THINK: u32 = 200;

fn needs(s: &Scenario) -> (u64, u64, u64) {
    let sz = s.workload.size.0;
    (
        sz / PAGE_SIZE + sz / HPAGE_SIZE + 8,
        tables_for(sz),
        s.workload.threads as u64 + 1,
    )
}

fn check(s: &Scenario) -> Result<(), Error> {
    if !s.workload.size.0.is_multiple_of(HPAGE_SIZE) {
        return Err(Error::Range(format!(
            "workload.size = {} is not a multiple of 2MiB",
            s.workload.size
        )));
    }
    if s.workload.threads + 1 > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {} GUP threads plus the collapsing thread need {} CPUs, machine.cpus = {}",
            s.workload.threads,
            s.workload.threads + 1,
            s.machine.cpus
        )));
    }
    Ok(())
}

/// Threads 1..=`workload.threads` of `mm`, each on its own CPU, doing
/// GUP-fast (FOLL_PIN) of 16-page buffers at windows moving across the
/// region, holding the pins for `workload.pin_ios` I/Os before unpinning.
pub fn gup_threads(s: &Scenario, w: &mut World, mm: kernel::MmId) {
    let span = (s.workload.size.0 / PAGE_SIZE).min(u32::MAX as u64) as u32;
    for i in 1..=s.workload.threads {
        let mut prog = vec![
            UserOp::Charge {
                cost: Cost::TaskCreate,
                n: i,
            },
            UserOp::GupFast {
                base: MAP_BASE,
                span,
                pages: GUP_PAGES,
                stride: GUP_STRIDE + i,
            },
        ];
        if s.workload.pin_ios > 0 {
            // The I/O into the pinned buffer: the thread sleeps.
            prog.push(UserOp::IoWait {
                cost: Cost::DirectIo,
                n: s.workload.pin_ios,
            });
        }
        prog.push(UserOp::UnpinUserPages);
        if s.workload.period_us > 0 {
            // One read per period: sleep until the next one is due.
            prog.push(UserOp::ClockNanosleep {
                period_ns: (s.workload.period_us * 1000).min(u32::MAX as u64) as u32,
                op: kernel::user::NO_OP,
            });
        }
        prog.extend([
            UserOp::Charge {
                cost: Cost::UserLoop,
                n: GUP_THINK,
            },
            UserOp::Loop {
                to: 1,
                times: u64::MAX,
            },
        ]);
        w.spawn(mm, i as u16, prog, false);
    }
}

fn build_collapse(s: &Scenario, w: &mut World) -> Result<(), Error> {
    check(s)?;
    let mm = w.mm_alloc()?;
    let size = s.workload.size.0;
    w.add_vma(mm, MAP_BASE, size);
    let stride = PAGE_SIZE * s.workload.populate_stride as u64;
    if stride == PAGE_SIZE {
        kernel::mm::memory::populate_range(w, mm, MAP_BASE, MAP_BASE + size)?;
    } else {
        for va in (MAP_BASE..MAP_BASE + size).step_by(stride as usize) {
            kernel::mm::memory::populate_range(w, mm, va, va + PAGE_SIZE)?;
        }
    }
    let op = w.op_id("madvise_collapse");
    w.spawn(
        mm,
        0,
        vec![
            UserOp::OpBegin(op),
            UserOp::MadviseCollapse {
                start: MAP_BASE,
                len: size,
            },
            UserOp::OpEnd(op),
            UserOp::Exit,
        ],
        true,
    );
    gup_threads(s, w, mm);
    Ok(())
}

fn build_race(s: &Scenario, w: &mut World) -> Result<(), Error> {
    check(s)?;
    let mm = w.mm_alloc()?;
    let size = s.workload.size.0;
    w.add_vma(mm, MAP_BASE, size);
    let op = w.op_id("collapse_cycle");
    let body = vec![
        UserOp::TouchRange {
            start: MAP_BASE,
            pages: (size / PAGE_SIZE) as u32,
            write: true,
        },
        UserOp::MadviseCollapse {
            start: MAP_BASE,
            len: size,
        },
        // MADV_COLLAPSE fails with EAGAIN while a GUP pin is held: retry
        // (op 3: after measured_loop's Charge and OpBegin, and the touch).
        UserOp::RetryOnEagain { to: 3 },
        UserOp::MadviseDontneed {
            start: MAP_BASE,
            len: size,
        },
    ];
    w.spawn(
        mm,
        0,
        crate::measured_loop(0, op, body, s.workload.iterations, UserOp::Exit),
        true,
    );
    gup_threads(s, w, mm);
    Ok(())
}
