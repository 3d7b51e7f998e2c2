//! will-it-scale `tlb_flush2`, threads: each pinned thread of one process
//! writes every page of its own region and madvises it away, in a loop.

use crate::interrupts;
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
