//! will-it-scale `tlb_flush2`, threads and processes: each pinned thread of
//! one process (or each pinned process) writes every page of its own region
//! and madvises it away, in a loop.

use crate::interrupts;
use crate::procs::{self, Children, Pipe};
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// Run `threads` threads (CPUs 0..threads) for `iterations` loops each over
/// `size` bytes.
pub fn run_threads(threads: u32, size: u64, iterations: u64) -> Result<HostReport, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if threads == 0 || threads as usize > ncpu {
        return Err(Error::Unsupported(format!(
            "tlb_flush_threads with {threads} threads needs as many CPUs, this host has {ncpu}"
        )));
    }
    if size == 0 || !size.is_multiple_of(4096) || size > 1 << 30 {
        return Err(Error::Range(format!(
            "size {size} (a multiple of 4KiB, at most 1GiB)"
        )));
    }
    let rows = ["TLB", "CAL", "RES"];
    let before = interrupts::read(&rows)?;
    let barrier = Arc::new(Barrier::new(threads as usize));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads as usize)
        .map(|cpu| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Result<(Histogram<u64>, f64, f64), Error> {
                crate::madvise::pin(cpu)?;
                let region = crate::madvise::Region::new(size)?;
                let mut hist =
                    Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
                let (mut sum, mut sq) = (0f64, 0f64);
                barrier.wait();
                for _ in 0..iterations {
                    let t = Instant::now();
                    region.touch_all();
                    region.dontneed()?;
                    let ns = t.elapsed().as_nanos() as u64;
                    hist.saturating_record(ns.max(1));
                    sum += ns as f64;
                    sq += (ns as f64) * (ns as f64);
                }
                Ok((hist, sum, sq))
            })
        })
        .collect();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq) = (0f64, 0f64);
    for h in handles {
        let (hh, s, q) = h
            .join()
            .map_err(|_| Error::Unsupported("a benchmark thread panicked".into()))??;
        hist.add(&hh)
            .map_err(|e| Error::Unsupported(e.to_string()))?;
        sum += s;
        sq += q;
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    let n = (threads as u64 * iterations) as f64;
    let mean = sum / n;
    Ok(crate::madvise::report(
        serde_json::json!({"workload": {"name": "tlb_flush_threads", "threads": threads, "size": size, "iterations": iterations}, "machine": {"cpus": ncpu}}),
        wall,
        interrupts::delta(&before, &after),
        serde_json::json!({
            "name": "tlb_flush_threads",
            "count": n as u64,
            "per_sec": n * 1e9 / wall.max(1) as f64,
            "latency_ns": {"mean": mean, "stddev": (sq / n - mean * mean).max(0.0).sqrt(),
                "p50": hist.value_at_quantile(0.5), "p99": hist.value_at_quantile(0.99),
                "p999": hist.value_at_quantile(0.999), "max": hist.max()},
        }),
    ))
}

/// will-it-scale `tlb_flush2`, processes (its `*_processes` runner): `threads`
/// forked children, child i pinned to CPU i with a private `size`-byte region
/// it writes and madvises away `iterations` times. Each mm runs on one CPU
/// only, so the flushes stay local: ~0 TLB IPIs per op (contrast
/// [`run_threads`]). Children send their latencies back through a pipe.
pub fn run_processes(threads: u32, size: u64, iterations: u64) -> Result<HostReport, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if threads == 0 || threads as usize > ncpu {
        return Err(Error::Unsupported(format!(
            "tlb_flush_processes with {threads} processes needs as many CPUs, this host has {ncpu}"
        )));
    }
    if size == 0 || !size.is_multiple_of(4096) || size > 1 << 30 {
        return Err(Error::Range(format!(
            "size {size} (a multiple of 4KiB, at most 1GiB)"
        )));
    }
    let rows = ["TLB", "CAL", "RES"];
    interrupts::read(&rows)?;
    let mut go = Pipe::new()?;
    let mut kids = Children::new();
    let mut results = Vec::new();
    // Allocated before fork: a child only records into its copy.
    let empty = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    for cpu in 0..threads as usize {
        let mut res = Pipe::new()?;
        let go_r = go.r.0;
        let go_w = go.w.0;
        let mut hist = empty.clone();
        let out = &res.w;
        kids.spawn(cpu, move || {
            // SAFETY: closing the child's copy of the start pipe's write end,
            // so the parent's close is the end of file every child waits for.
            unsafe { libc::close(go_w) };
            process_child(go_r, out, &mut hist, size, iterations)
        })?;
        res.w.close();
        results.push(res.r);
    }
    let before = interrupts::read(&rows)?;
    go.w.close();
    let mut merged = empty.clone();
    let (mut sum, mut sq) = (0f64, 0f64);
    let (mut start, mut end) = (u64::MAX, 0u64);
    for (cpu, r) in results.iter().enumerate() {
        let mut head = [0u8; 8 * HEAD];
        if !r.read_exact(&mut head)? {
            // The child exited before reporting: say why.
            let pid = kids.oldest().expect("a child per pipe");
            let code = kids.wait(pid)?;
            return Err(Error::Unsupported(format!(
                "tlb_flush_processes: the child on CPU{cpu} {}",
                procs::describe(code)
            )));
        }
        let h: Vec<u64> = head
            .chunks(8)
            .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect();
        sum += f64::from_bits(h[1]);
        sq += f64::from_bits(h[2]);
        start = start.min(h[3]);
        end = end.max(h[4]);
        let mut pairs = vec![0u8; 16 * h[5] as usize];
        if !pairs.is_empty() && !r.read_exact(&mut pairs)? {
            return Err(Error::Unsupported(
                "tlb_flush_processes: a child's histogram was cut short".into(),
            ));
        }
        for p in pairs.chunks(16) {
            let v = u64::from_ne_bytes(p[..8].try_into().expect("8 bytes"));
            let c = u64::from_ne_bytes(p[8..].try_into().expect("8 bytes"));
            merged
                .record_n(v, c)
                .map_err(|e| Error::Unsupported(format!("histogram: {e:?}")))?;
        }
    }
    let after = interrupts::read(&rows)?;
    kids.wait_all("tlb_flush_processes")?;
    let wall = end.saturating_sub(start);
    let n = (threads as u64 * iterations) as f64;
    let mean = sum / n;
    Ok(crate::madvise::report(
        serde_json::json!({"workload": {"name": "tlb_flush_processes", "threads": threads, "size": size, "iterations": iterations}, "machine": {"cpus": ncpu}}),
        wall,
        interrupts::delta(&before, &after),
        serde_json::json!({
            "name": "tlb_flush_processes",
            "count": n as u64,
            "per_sec": n * 1e9 / wall.max(1) as f64,
            "latency_ns": {"mean": mean, "stddev": (sq / n - mean * mean).max(0.0).sqrt(),
                "p50": merged.value_at_quantile(0.5), "p99": merged.value_at_quantile(0.99),
                "p999": merged.value_at_quantile(0.999), "max": merged.max()},
        }),
    ))
}

/// u64 words of a child's report header: count, sum and sum of squares (f64
/// bits), loop start and end (CLOCK_MONOTONIC ns), histogram pairs that follow.
const HEAD: usize = 6;
const CHILD_MMAP: i32 = 2;
const CHILD_MADVISE: i32 = 4;
const CHILD_WRITE: i32 = 5;

/// One tlb_flush2 process (will-it-scale `tlb_flush2.c`'s `testcase`): wait
/// for the start pipe to close, loop write-all + MADV_DONTNEED, report.
/// Runs in a forked child: no allocation.
fn process_child(
    go: libc::c_int,
    out: &procs::Fd,
    hist: &mut Histogram<u64>,
    size: u64,
    iterations: u64,
) -> i32 {
    let Ok(region) = crate::madvise::Region::new(size) else {
        return CHILD_MMAP;
    };
    let mut b = [0u8; 1];
    // SAFETY: reading one byte into a valid buffer; returns 0 at end of file.
    while unsafe { libc::read(go, b.as_mut_ptr() as *mut libc::c_void, 1) } > 0 {}
    let (mut sum, mut sq) = (0f64, 0f64);
    let start = procs::monotonic_ns();
    for _ in 0..iterations {
        let t = procs::monotonic_ns();
        region.touch_all();
        if region.dontneed().is_err() {
            return CHILD_MADVISE;
        }
        let ns = procs::monotonic_ns() - t;
        hist.saturating_record(ns.max(1));
        sum += ns as f64;
        sq += (ns as f64) * (ns as f64);
    }
    let end = procs::monotonic_ns();
    let pairs = hist.iter_recorded().count() as u64;
    let head: [u64; HEAD] = [iterations, sum.to_bits(), sq.to_bits(), start, end, pairs];
    let mut buf = [0u8; 8 * HEAD];
    for (c, v) in buf.chunks_mut(8).zip(head) {
        c.copy_from_slice(&v.to_ne_bytes());
    }
    if !out.write_all(&buf) {
        return CHILD_WRITE;
    }
    for v in hist.iter_recorded() {
        let mut p = [0u8; 16];
        p[..8].copy_from_slice(&v.value_iterated_to().to_ne_bytes());
        p[8..].copy_from_slice(&v.count_at_value().to_ne_bytes());
        if !out.write_all(&p) {
            return CHILD_WRITE;
        }
    }
    0
}
