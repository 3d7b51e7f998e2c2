//! The fork rows of the riscv64 and arm64 guests: LTP mmapstress01's
//! shape as `bench::mmapstress` runs it (a parent on CPU0 keeps `children`
//! alive, child k pinned to CPU 1 + k mod (cpus − 1), 100
//! mmap/write/munmap rounds of a 4 KiB shared file, then exit), with two
//! differences that matter to RISC-V, where a hart stays in an mm's
//! `mm_cpumask` for good:
//! - the parent runs on the calling thread, which must already be on CPU0
//!   (the agent's fresh process): `mmapstress` spawns a thread that pins
//!   itself to CPU0, and a new thread starts on the idlest CPU, so the
//!   parent's mm was also loaded on that CPU, and each fork's
//!   `flush_tlb_mm` and the parent's copy-on-write faults after it sent it
//!   IPIs (6-11 per fork, measured) the model does not have;
//! - with `placed`, the parent widens its affinity to {0, child's CPU}
//!   around each `fork`: the child inherits that mask, and
//!   `wake_up_new_task` (`select_task_rq_fair`, SD_BALANCE_FORK: the idlest
//!   allowed CPU) starts it on its own idle CPU instead of the busy CPU0, so
//!   the child's mm is never loaded on CPU0, which is how the model's
//!   mmapstress01 places a child. Without it the child is born on CPU0 and
//!   pins itself there (`procs::child_start`), as in `mmapstress`.

use crate::interrupts;
use crate::lat::File;
use crate::procs::Children;
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::time::Instant;

const ROUNDS: u64 = crate::mmapstress::CHILD_ROUNDS;
const LEN: usize = 4096;

/// `forks` children in all, `children` alive at once (0: LTP's
/// min(cpus − 1, 20)), born on their own CPU with `placed`. Runs on the
/// calling thread, pinned to CPU0 for the run.
pub fn run(children: u32, forks: u64, placed: bool) -> Result<HostReport, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let n = match children {
        0 => crate::mmapstress::default_children(ncpu),
        n => n,
    };
    if ncpu < 2 || n as usize > 4 * ncpu {
        return Err(Error::Unsupported(format!(
            "the fork rows need 2 CPUs and at most 4 children per CPU ({ncpu} CPUs, {n} children)"
        )));
    }
    let _restore = crate::madvise::Affinity::save()?;
    crate::madvise::pin(0)?;
    parent(n, forks, ncpu, placed)
}

/// Set the calling thread's affinity to `cpus`.
fn affinity(cpus: &[usize]) -> Result<(), Error> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(Error::Unsupported(format!("cannot set affinity {cpus:?}")));
        }
    }
    Ok(())
}

fn parent(n: u32, forks: u64, ncpu: usize, placed: bool) -> Result<HostReport, Error> {
    let file = File::new(LEN)?;
    let fd = file.0;
    let rows = ["TLB", "CAL", "RES"];
    let mut kids = Children::new();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq) = (0f64, 0f64);
    let before = interrupts::read(&rows)?;
    let t0 = Instant::now();
    let reap = |kids: &mut Children, pid| -> Result<(), Error> {
        match kids.wait(pid)? {
            0 => Ok(()),
            code => Err(Error::Unsupported(format!(
                "fork rows: a child {}",
                crate::procs::describe(code)
            ))),
        }
    };
    for k in 0..forks {
        while kids.len() >= n as usize {
            let pid = kids.oldest().expect("n >= 1 children alive");
            reap(&mut kids, pid)?;
        }
        let cpu = 1 + k as usize % (ncpu - 1);
        // Allowed on CPU0 (where this thread runs, so it does not move) and
        // on the child's CPU: the child inherits both and starts on the idle one.
        if placed {
            affinity(&[0, cpu])?;
        }
        let t = Instant::now();
        let spawned = kids.spawn(cpu, move || child(fd));
        let ns = t.elapsed().as_nanos() as u64;
        if placed {
            affinity(&[0])?;
        }
        spawned?;
        hist.saturating_record(ns.max(1));
        sum += ns as f64;
        sq += (ns as f64) * (ns as f64);
    }
    while let Some(pid) = kids.oldest() {
        reap(&mut kids, pid)?;
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    Ok(crate::madvise::report(
        serde_json::json!({"workload": {"name": "mmapstress01", "threads": n, "size": LEN, "iterations": forks, "child_rounds": ROUNDS, "born_on_own_cpu": placed}, "machine": {"cpus": ncpu}}),
        wall,
        interrupts::delta(&before, &after),
        crate::lat::op_json("fork", &hist, forks, sum, sq, wall),
    ))
}

/// mmapstress01's child: map, write, unmap the shared page `ROUNDS` times.
/// Runs in a forked child: no allocation.
fn child(fd: libc::c_int) -> i32 {
    for _ in 0..ROUNDS {
        // SAFETY: a fresh shared mapping of the parent's memfd, checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return 2;
        }
        // SAFETY: inside the mapping; then unmapping exactly it.
        unsafe {
            std::ptr::write_volatile(p as *mut u8, 1);
            libc::munmap(p, LEN);
        }
    }
    0
}
