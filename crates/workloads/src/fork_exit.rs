//! The guests' fork rows (`bench::guest_fork`, run by `tlblab validate
//! --guest --arch riscv64|arm64`): mmapstress01's shape as the benchmark
//! runs it, where it places its tasks itself.
//!
//! ```text
//!   fork_exit:         parent pinned to CPU0 keeps `threads` children alive:
//!                      fork() (the op), wait() for one when that many live;
//!                      child k is born on CPU0 (it inherits the parent's
//!                      affinity, so wake_up_new_task places it there), runs
//!                      there until it pins itself to CPU 1 + k mod (cpus - 1)
//!                      (sched_setaffinity), then 100 x { mmap a shared 4 KiB
//!                      file, write it, munmap } and exit
//!   fork_exit_placed:  the same, the child born on its own CPU (the parent
//!                      widened its affinity to {0, that CPU} around fork())
//! ```
//! On RISC-V a hart stays in an mm's `mm_cpumask` once the mm ran there:
//! a child born on CPU0 leaves CPU0 in its mask, and each of its munmaps
//! and its exit's flush IPI CPU0. Nothing here is fitted to the guests:
//! the placement is the benchmark's own, the flushes the model's.

use crate::{size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{CpuId, Error, Scenario, PAGE_SIZE};

pub const FORK_EXIT: WorkloadInfo = WorkloadInfo {
    name: "fork_exit",
    about: "the guests' fork row: a parent pinned to CPU0 forks children that are born on CPU0, pin themselves to their own CPU, mmap/write/munmap a shared 4 KiB file 100 times and exit (bench::guest_fork)",
    keys: "threads = children alive at once (0 = min(cpus-1, 20)); size = the shared file; iterations = children forked in all (the op is the parent's fork)",
    build: build_born_on_cpu0,
    needs,
};

pub const FORK_EXIT_PLACED: WorkloadInfo = WorkloadInfo {
    name: "fork_exit_placed",
    about: "the guests' control fork row: as fork_exit, each child born on its own CPU (bench::guest_fork with placed)",
    keys: "threads = children alive at once (0 = min(cpus-1, 20)); size = the shared file; iterations = children forked in all (the op is the parent's fork)",
    build: build_placed,
    needs,
};

/// `bench::mmapstress::CHILD_ROUNDS`: each child's mmap/write/munmap rounds.
pub const CHILD_ROUNDS: usize = 100;

/// The most forks the unrolled parent program holds.
const MAX_FORKS: u64 = 100_000;

fn needs(s: &Scenario) -> (u64, u64, u64) {
    let n = crate::mmapstress::children(s) as u64;
    let pages = s.workload.size.0 / PAGE_SIZE;
    (
        pages + 16 + 2 * (n + 1),
        (n + 1) * (tables_for(s.workload.size.0) + 4),
        n + 1,
    )
}

fn build_born_on_cpu0(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build(s, w, false)
}

fn build_placed(s: &Scenario, w: &mut World) -> Result<(), Error> {
    build(s, w, true)
}

fn build(s: &Scenario, w: &mut World, placed: bool) -> Result<(), Error> {
    let n = crate::mmapstress::children(s) as u64;
    let cpus = s.machine.cpus;
    let forks = s.workload.iterations;
    if cpus < 2 || n > 4 * cpus as u64 || forks > MAX_FORKS {
        return Err(Error::Range(format!(
            "fork_exit needs machine.cpus >= 2, workload.threads <= 4 x cpus and workload.iterations <= {MAX_FORKS} (got {cpus} CPUs, {n} children, {forks} forks)"
        )));
    }
    let file = w.create_file(size_pages(s)? as u32)?;
    let op = w.op_id("fork");
    // One program per CPU a child pins itself to, shared by its children.
    let progs: Vec<std::sync::Arc<[UserOp]>> = (1..cpus as CpuId)
        .map(|c| child(s, file, c).map(Into::into))
        .collect::<Result<_, _>>()?;
    let mut parent = Vec::new();
    for k in 0..forks {
        // The benchmark reaps its oldest child once `n` are alive.
        if k >= n {
            parent.push(UserOp::Wait);
        }
        let cpu = (1 + k % (cpus as u64 - 1)) as CpuId;
        parent.push(UserOp::OpBegin(op));
        parent.push(UserOp::Fork {
            child_cpu: if placed { cpu } else { 0 },
            child: progs[cpu as usize - 1].clone(),
        });
        parent.push(UserOp::OpEnd(op));
    }
    parent.extend((0..forks.min(n)).map(|_| UserOp::Wait));
    parent.push(UserOp::Exit);
    let mm = w.mm_alloc()?;
    // Pinned: not placed by the fair class (`cpus_allowed_all` stays off).
    w.spawn(mm, 0, parent, true);
    Ok(())
}

/// `bench::guest_fork`'s child: pinned to `cpu` (a no-op where it was
/// born there), then `CHILD_ROUNDS` rounds of map, write, unmap.
fn child(s: &Scenario, file: u32, cpu: CpuId) -> Result<Vec<UserOp>, Error> {
    let len = s.workload.size.0;
    let pages = size_pages(s)? as u32;
    let mut p = vec![UserOp::SchedSetaffinity { cpu }];
    for _ in 0..CHILD_ROUNDS {
        p.push(UserOp::MmapFile {
            start: MAP_BASE,
            len,
            file,
        });
        p.push(UserOp::TouchRange {
            start: MAP_BASE,
            pages,
            write: true,
        });
        p.push(UserOp::Munmap {
            start: MAP_BASE,
            len,
        });
    }
    p.push(UserOp::Exit);
    Ok(p)
}
