//! fork+exit with each child born on its own CPU: mmapstress01's child
//! (`bench::mmapstress`: 100 mmap/write/munmap rounds of a 4 KiB shared
//! file, one child alive at a time, child k on CPU 1 + k mod (cpus − 1)),
//! except that the parent, pinned to CPU0, widens its affinity to
//! {0, child's CPU} around each `fork`. The child inherits that mask, and
//! `wake_up_new_task` (`select_task_rq_fair`, SD_BALANCE_FORK: the idlest
//! allowed CPU) starts it on its own idle CPU rather than on the busy CPU0.
//! The child's mm is then never loaded on CPU0, which is how the model's
//! mmapstress01 places a child; `mmapstress` (born on CPU0, then pinned)
//! shows the difference. The guest agent's control row (`validate --guest
//! --arch`).

use crate::interrupts;
use crate::lat::File;
use crate::procs::Children;
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::time::Instant;

const ROUNDS: u64 = crate::mmapstress::CHILD_ROUNDS;
const LEN: usize = 4096;

/// `forks` children, one at a time, each born on its own CPU.
pub fn run(forks: u64) -> Result<HostReport, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if ncpu < 2 {
        return Err(Error::Unsupported("fork_placed needs 2 CPUs".into()));
    }
    std::thread::spawn(move || {
        crate::madvise::pin(0)?;
        parent(forks, ncpu)
    })
    .join()
    .map_err(|_| Error::Unsupported("the benchmark thread panicked".into()))?
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

fn parent(forks: u64, ncpu: usize) -> Result<HostReport, Error> {
    let file = File::new(LEN)?;
    let fd = file.0;
    let rows = ["TLB", "CAL", "RES"];
    let mut kids = Children::new();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq) = (0f64, 0f64);
    let before = interrupts::read(&rows)?;
    let t0 = Instant::now();
    for k in 0..forks {
        let cpu = 1 + k as usize % (ncpu - 1);
        // Allowed on CPU0 (where this thread runs, so it does not move) and
        // on the child's CPU: the child inherits both and starts on the idle one.
        affinity(&[0, cpu])?;
        let t = Instant::now();
        let spawned = kids.spawn(cpu, move || child(fd));
        let ns = t.elapsed().as_nanos() as u64;
        affinity(&[0])?;
        let pid = spawned?;
        hist.saturating_record(ns.max(1));
        sum += ns as f64;
        sq += (ns as f64) * (ns as f64);
        let code = kids.wait(pid)?;
        if code != 0 {
            return Err(Error::Unsupported(format!(
                "fork_placed: a child {}",
                crate::procs::describe(code)
            )));
        }
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    Ok(crate::madvise::report(
        serde_json::json!({"workload": {"name": "fork_placed", "threads": 1, "size": LEN, "iterations": forks, "child_rounds": ROUNDS}, "machine": {"cpus": ncpu}}),
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
