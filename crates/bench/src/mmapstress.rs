//! LTP `mmapstress01` on the host, shaped as the model's workload of the
//! same name (crates/workloads/src/mmapstress.rs): a parent pinned to CPU 0
//! keeps `threads` children alive, forking a new one as the oldest finishes;
//! child k, pinned to CPU 1 + k mod (cpus - 1), loops mmap(shared file) ->
//! write every page (fault) -> munmap, `CHILD_ROUNDS` times, then exits. The
//! file is a memfd whose pages are already resident. fork = flush_tlb_mm of
//! the parent, munmap = flush_tlb_range of the child. The op is the parent's
//! `fork()` (as in the model).

use crate::interrupts;
use crate::lat::File;
use crate::procs::Children;
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::time::Instant;

/// mmap/write/munmap rounds per child (`workloads::mmapstress::CHILD_ROUNDS`).
pub const CHILD_ROUNDS: u64 = 100;
const PAGE: usize = 4096;
const CHILD_MMAP: i32 = 2;

/// LTP's default child count: `min(cpus - 1, 20)` (the model's `children()`).
pub fn default_children(cpus: usize) -> u32 {
    (cpus.saturating_sub(1)).clamp(1, 20) as u32
}

/// Run mmapstress01: `children` alive at once (0 = LTP's default), `forks`
/// children in all, each mapping a shared `size`-byte file.
pub fn run(children: u32, size: u64, forks: u64) -> Result<HostReport, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let n = match children {
        0 => default_children(ncpu),
        n => n,
    };
    if ncpu < 2 || n as usize > 4 * ncpu {
        return Err(Error::Unsupported(format!(
            "mmapstress01 needs 2 CPUs and at most 4 children per CPU (host has {ncpu} CPUs, asked for {n} children)"
        )));
    }
    if size == 0 || !size.is_multiple_of(PAGE as u64) || size > 64 << 20 {
        return Err(Error::Range(format!(
            "size {size} (a multiple of 4KiB, at most 64MiB)"
        )));
    }
    // The parent runs on a thread of its own pinned to CPU 0; its children
    // die with that thread (PR_SET_PDEATHSIG), and are reaped before it ends.
    std::thread::spawn(move || {
        crate::madvise::pin(0)?;
        parent(n, size as usize, forks, ncpu)
    })
    .join()
    .map_err(|_| Error::Unsupported("the benchmark thread panicked".into()))?
}

/// The mmapstress01 parent (LTP `mmapstress01.c` main loop): fork, and wait
/// for the oldest child whenever `n` are alive.
fn parent(n: u32, len: usize, forks: u64, ncpu: usize) -> Result<HostReport, Error> {
    let file = File::new(len)?;
    let fd = file.0;
    let rows = ["TLB", "CAL", "RES"];
    let mut kids = Children::new();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq) = (0f64, 0f64);
    let harts = ncpu - 1;
    let before = interrupts::read(&rows)?;
    let t0 = Instant::now();
    for k in 0..forks {
        while kids.len() >= n as usize {
            let pid = kids.oldest().expect("n >= 1 children alive");
            check(kids.wait(pid)?)?;
        }
        let t = Instant::now();
        kids.spawn(1 + k as usize % harts, move || child(fd, len))?;
        let ns = t.elapsed().as_nanos() as u64;
        hist.saturating_record(ns.max(1));
        sum += ns as f64;
        sq += (ns as f64) * (ns as f64);
    }
    while let Some(pid) = kids.oldest() {
        check(kids.wait(pid)?)?;
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    let mut rep = crate::madvise::report(
        serde_json::json!({"workload": {"name": "mmapstress01", "threads": n, "size": len, "iterations": forks, "child_rounds": CHILD_ROUNDS}, "machine": {"cpus": ncpu}}),
        wall,
        interrupts::delta(&before, &after),
        crate::lat::op_json("fork", &hist, forks, sum, sq, wall),
    );
    rep.arch
        .insert("child_mmap_munmap".into(), forks * CHILD_ROUNDS);
    Ok(rep)
}

/// A child's exit code as a result.
fn check(code: i32) -> Result<(), Error> {
    match code {
        0 => Ok(()),
        CHILD_MMAP => Err(Error::Unsupported(
            "mmapstress01: a child's mmap of the shared file failed".into(),
        )),
        c => Err(Error::Unsupported(format!(
            "mmapstress01: a child {}",
            crate::procs::describe(c)
        ))),
    }
}

/// One mmapstress01 child: map the shared file, write each page, unmap,
/// `CHILD_ROUNDS` times. Runs in a forked child: no allocation.
fn child(fd: libc::c_int, len: usize) -> i32 {
    for _ in 0..CHILD_ROUNDS {
        // SAFETY: a fresh shared mapping of the parent's memfd, checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return CHILD_MMAP;
        }
        let p = p as *mut u8;
        for off in (0..len).step_by(PAGE) {
            // SAFETY: off < len, inside the mapping.
            unsafe { std::ptr::write_volatile(p.add(off), 1) };
        }
        // SAFETY: unmapping exactly what was mapped above.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }
    0
}
