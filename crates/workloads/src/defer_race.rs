//! Workloads that exercise the ordering and scope rules of seed (d)
//! (riscv-defer-flush-to-context-switch): the flusher must publish its
//! queued flush before it reads a target's `loaded_asid`, and kernel
//! flushes must never be deferred.
//!
//! ```text
//!   defer_race:   hart 0: thread A0 touches a page and madvise(DONTNEED)s it
//!                 harts 1..T: thread Ai of the same mm reads that page, and
//!                 a process Bi (its own mm) shares the hart: the scheduler
//!                 switches between Ai and Bi every tick, so flushes for A
//!                 meet harts that are about to switch into A
//!   vmalloc_race: hart 0: vmalloc `size` bytes, vfree them, again; vfree
//!                 unmaps without a flush and frees the area lazily; once
//!                 vmap_lazy_nr > lazy_max_pages() the purge flushes the
//!                 merged range (flush_tlb_kernel_range; x86:
//!                 on_each_cpu(do_flush_tlb_all), every other CPU IPI'd)
//!                 and the lowest addresses are handed out again
//!                 harts 1..T: user processes that, in a system call, read the
//!                 vmalloc'd object when it exists: their TLBs cache the global
//!                 kernel translation while they run their own ASID
//! ```

use crate::{WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Cost, Error, Scenario, PAGE_SIZE};

pub const DEFER_RACE: WorkloadInfo = WorkloadInfo {
    name: "defer_race",
    about: "one thread madvises a page other threads of its mm read, while each reader time-shares its hart with another process (deferred flushes meet switch_mm)",
    keys: "threads = reader harts (1..=cpus-1); iterations = madvise calls; set machine.timeslice_us to make the switches",
    build: build_defer_race,
    needs,
};

pub const VMALLOC_RACE: WorkloadInfo = WorkloadInfo {
    name: "vmalloc_race",
    about: "one task vmallocs and vfrees a kernel page in a loop while processes on other harts read it in system calls (kernel-range flushes)",
    keys: "threads = reader harts (1..=cpus-1); iterations = vmalloc/vfree pairs; size = bytes per vmalloc (a guard page is added)",
    build: build_vmalloc_race,
    needs,
};

/// The vmalloc'd object's number (the vmap allocator picks its address).
pub const VMALLOC_OBJ: u8 = 0;

fn needs(s: &Scenario) -> (u64, u64, u64) {
    let n = s.workload.threads as u64 + 1;
    (n * 4 + 16, n * 8 + 8, 2 * n)
}

fn readers(s: &Scenario) -> Result<u32, Error> {
    let n = s.workload.threads;
    if n == 0 || n + 1 > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {n} reader harts (allowed 1..=machine.cpus - 1 = {})",
            s.machine.cpus.saturating_sub(1)
        )));
    }
    Ok(n)
}

/// A process of its own that runs briefly and yields the hart back (an
/// I/O-bound neighbour): the hart switches away from the reader's mm and
/// straight back, over and over.
fn spinner(w: &mut World, cpu: u16) -> Result<(), Error> {
    let mm = w.mm_alloc()?;
    let base = MAP_BASE + (1 << 30);
    w.add_vma(mm, base, PAGE_SIZE);
    w.spawn(
        mm,
        cpu,
        vec![
            UserOp::Touch {
                addr: base,
                write: true,
            },
            UserOp::Charge {
                cost: Cost::UserLoop,
                n: 200,
            },
            UserOp::Yield,
            UserOp::Loop {
                to: 0,
                times: u64::MAX,
            },
        ],
        false,
    );
    Ok(())
}

fn build_defer_race(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let n = readers(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, MAP_BASE, PAGE_SIZE);
    let op = w.op_id("madvise");
    let body = vec![
        UserOp::Touch {
            addr: MAP_BASE,
            write: true,
        },
        UserOp::MadviseDontneed {
            start: MAP_BASE,
            len: PAGE_SIZE,
        },
    ];
    w.spawn(
        mm,
        0,
        crate::measured_loop(0, op, body, s.workload.iterations, UserOp::Exit),
        true,
    );
    for i in 1..=n {
        w.spawn(
            mm,
            i as u16,
            vec![
                UserOp::Touch {
                    addr: MAP_BASE,
                    write: false,
                },
                UserOp::Charge {
                    cost: Cost::UserLoop,
                    n: 50,
                },
                UserOp::Loop {
                    to: 0,
                    times: u64::MAX,
                },
            ],
            false,
        );
        spinner(w, i as u16)?;
    }
    Ok(())
}

fn build_vmalloc_race(s: &Scenario, w: &mut World) -> Result<(), Error> {
    if s.machine.arch == machine::scenario::Arch::Arm64 {
        return Err(Error::Unsupported(format!(
            "vmalloc_race: kernel-range flushes are modelled on x86 and RISC-V only (machine.arch = \"{}\")",
            s.machine.arch.name()
        )));
    }
    let n = readers(s)?;
    let mm = w.mm_alloc()?;
    let op = w.op_id("vmalloc_vfree");
    let pages = (s.workload.size.0 / PAGE_SIZE).clamp(1, u32::MAX as u64) as u32;
    let body = vec![
        UserOp::Vmalloc {
            obj: VMALLOC_OBJ,
            pages,
            reset_perms: false,
        },
        UserOp::Charge {
            cost: Cost::UserLoop,
            n: 300,
        },
        UserOp::Vfree { obj: VMALLOC_OBJ },
    ];
    w.spawn(
        mm,
        0,
        crate::measured_loop(0, op, body, s.workload.iterations, UserOp::Exit),
        true,
    );
    for i in 1..=n {
        let rmm = w.mm_alloc()?;
        let base = MAP_BASE;
        w.add_vma(rmm, base, PAGE_SIZE);
        w.spawn(
            rmm,
            i as u16,
            vec![
                UserOp::Touch {
                    addr: base,
                    write: true,
                },
                UserOp::KernelRead { obj: VMALLOC_OBJ },
                UserOp::Charge {
                    cost: Cost::UserLoop,
                    n: 100,
                },
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
