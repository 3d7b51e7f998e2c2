//! The x86 flush races: the madvise and munmap races of one mm's threads
//! (also the worlds of the arm64 and RISC-V madvise and munmap checks), a
//! flush preempted by an RT thread of the mm, and a CPU switching back to
//! the mm (from another mm, or from lazy TLB mode) during a flush.

use super::P;
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

/// Two threads of one mm: CPU0 writes the page and madvises it away, twice;
/// CPU1 reads it three times.
pub(super) fn madvise_race(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    w.spawn(
        mm,
        0,
        vec![
            UserOp::Touch {
                addr: P,
                write: true,
            },
            UserOp::MadviseDontneed {
                start: P,
                len: PAGE_SIZE,
            },
            UserOp::Touch {
                addr: P,
                write: true,
            },
            UserOp::MadviseDontneed {
                start: P,
                len: PAGE_SIZE,
            },
            UserOp::Exit,
        ],
        true,
    );
    w.spawn(
        mm,
        1,
        vec![
            UserOp::Touch {
                addr: P,
                write: false,
            },
            UserOp::Touch {
                addr: P,
                write: false,
            },
            UserOp::Touch {
                addr: P,
                write: false,
            },
            UserOp::Exit,
        ],
        true,
    );
    Ok(w)
}

/// Writers on CPUs 0.. touch the page then madvise (or munmap + mmap) it,
/// `iterations` times; readers on the next CPUs read it `reads` times, then spin.
/// (Configurations contributed by the checker helper's branch.)
pub(super) fn race(
    s: &Scenario,
    writers: u16,
    readers: u16,
    munmap: bool,
    iterations: u64,
) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    let op = w.op_id("race");
    let writer = vec![
        UserOp::OpBegin(op),
        UserOp::Touch {
            addr: P,
            write: true,
        },
        if munmap {
            UserOp::Munmap {
                start: P,
                len: PAGE_SIZE,
            }
        } else {
            UserOp::MadviseDontneed {
                start: P,
                len: PAGE_SIZE,
            }
        },
        UserOp::Mmap {
            start: P,
            len: PAGE_SIZE,
        },
        UserOp::OpEnd(op),
        UserOp::Loop {
            to: 0,
            times: iterations,
        },
        UserOp::Exit,
    ];
    for c in 0..writers {
        w.spawn(mm, c, writer.clone(), true);
    }
    let reader = vec![
        UserOp::Touch {
            addr: P,
            write: false,
        },
        UserOp::Touch {
            addr: P,
            write: false,
        },
        UserOp::DoneSpin,
    ];
    for c in writers..writers + readers {
        w.spawn(mm, c, reader.clone(), true);
    }
    Ok(w)
}

pub(super) fn race_1w_2r(s: &Scenario) -> Result<World, Error> {
    race(s, 1, 2, false, 2)
}

pub(super) fn race_1w_3r(s: &Scenario) -> Result<World, Error> {
    race(s, 1, 3, false, 1)
}

pub(super) fn race_1w_3r_2rounds(s: &Scenario) -> Result<World, Error> {
    race(s, 1, 3, false, 2)
}

pub(super) fn race_1w_3r_3rounds(s: &Scenario) -> Result<World, Error> {
    race(s, 1, 3, false, 3)
}

pub(super) fn race_2w_1r(s: &Scenario) -> Result<World, Error> {
    race(s, 2, 1, false, 1)
}

pub(super) fn munmap_1w_1r(s: &Scenario) -> Result<World, Error> {
    race(s, 1, 1, true, 2)
}

pub(super) fn munmap_1w_2r(s: &Scenario) -> Result<World, Error> {
    race(s, 1, 2, true, 2)
}

/// x86: on CPU0 a thread madvises its page (a flush that IPIs every other
/// CPU, where threads of the mm read) and an RT thread of the same mm
/// sleeps; its timer may fire at any moment, preempt the flush where
/// preemption is on, and madvise a page of its own.
pub(super) fn preempting_flush(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    let q = P + PAGE_SIZE;
    w.add_vma(mm, P, 2 * PAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + 2 * PAGE_SIZE)?;
    let rt = w.spawn(
        mm,
        0,
        vec![
            UserOp::ClockNanosleep {
                period_ns: 1000,
                op: 0,
            },
            UserOp::MadviseDontneed {
                start: q,
                len: PAGE_SIZE,
            },
            UserOp::Exit,
        ],
        true,
    );
    w.tasks[rt as usize].rt = true;
    w.spawn(
        mm,
        0,
        vec![
            UserOp::MadviseDontneed {
                start: P,
                len: PAGE_SIZE,
            },
            UserOp::Exit,
        ],
        true,
    );
    for cpu in 1..s.machine.cpus as u16 {
        w.spawn(
            mm,
            cpu,
            vec![
                UserOp::Touch {
                    addr: P,
                    write: false,
                },
                UserOp::Touch {
                    addr: q,
                    write: false,
                },
                UserOp::Exit,
            ],
            true,
        );
    }
    Ok(w)
}

/// CPU0 madvises a page of mm A away; CPU1 reads it, sleeps, and reads it
/// twice more. With `other`, a task of mm B runs on CPU1 while it sleeps, so
/// CPU1 switches B -> A with A's `mm_cpumask` bit still set (the
/// `smp_mb()` path of `switch_mm_irqs_off`); without, CPU1 idles lazily
/// in A and returns to it (the lazy path).
pub(super) fn switch_back_world(s: &Scenario, other: bool) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let a = w.mm_alloc()?;
    w.add_vma(a, P, PAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, a, P, P + PAGE_SIZE)?;
    let read = UserOp::Touch {
        addr: P,
        write: false,
    };
    w.spawn(
        a,
        0,
        vec![
            UserOp::MadviseDontneed {
                start: P,
                len: PAGE_SIZE,
            },
            UserOp::Exit,
        ],
        true,
    );
    let nap = UserOp::ClockNanosleep {
        period_ns: 1000,
        op: 0,
    };
    // Two reads after the nap: the lazy return ends in the step that reads
    // tlb_gen, so only a later read can see a page freed after that.
    let prog = vec![read.clone(), nap, read.clone(), read, UserOp::Exit];
    w.spawn(a, 1, prog, true);
    if other {
        let b = w.mm_alloc()?;
        w.spawn(b, 1, vec![UserOp::Exit], true);
    }
    Ok(w)
}

pub(super) fn switch_back(s: &Scenario) -> Result<World, Error> {
    switch_back_world(s, true)
}

pub(super) fn lazy_return(s: &Scenario) -> Result<World, Error> {
    switch_back_world(s, false)
}
