//! The flush_tlb_info seed's program, natively: one thread writes a page and
//! madvises it away in a loop while `threads` busy-waiting threads of the
//! same process spin on other CPUs. Each thread is pinned.

use crate::interrupts;
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Pin the calling thread to `cpu`.
pub(crate) fn pin(cpu: usize) -> Result<(), Error> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(Error::Unsupported(format!(
                "cannot pin a thread to CPU{cpu}"
            )));
        }
    }
    Ok(())
}

/// Restores the calling thread's CPU affinity on drop.
pub(crate) struct Affinity(libc::cpu_set_t);

impl Affinity {
    pub(crate) fn save() -> Result<Affinity, Error> {
        // SAFETY: sched_getaffinity fills a zeroed cpu_set_t of the right size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Err(Error::Unsupported(
                    "cannot read this thread's CPU affinity".into(),
                ));
            }
            Ok(Affinity(set))
        }
    }
}

impl Drop for Affinity {
    fn drop(&mut self) {
        // SAFETY: restoring a set previously read by sched_getaffinity.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0);
        }
    }
}

/// An anonymous private region, unmapped on drop.
pub(crate) struct Region {
    p: *mut u8,
    len: usize,
}

// SAFETY: the region is owned by one thread at a time.
unsafe impl Send for Region {}

impl Region {
    pub(crate) fn new(len: u64) -> Result<Region, Error> {
        // SAFETY: anonymous private mapping; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Unsupported(format!("mmap of {len} bytes failed")));
        }
        Ok(Region {
            p: p as *mut u8,
            len: len as usize,
        })
    }

    /// Write one byte of every page (faults them in).
    pub(crate) fn touch_all(&self) {
        for off in (0..self.len).step_by(4096) {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile(self.p.add(off), 1) };
        }
    }

    /// `madvise(MADV_DONTNEED)` of the whole region.
    pub(crate) fn dontneed(&self) -> Result<(), Error> {
        // SAFETY: our own mapping.
        if unsafe { libc::madvise(self.p as *mut libc::c_void, self.len, libc::MADV_DONTNEED) } != 0
        {
            return Err(Error::Unsupported("madvise(MADV_DONTNEED) failed".into()));
        }
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe {
            libc::munmap(self.p as *mut libc::c_void, self.len);
        }
    }
}

/// Assemble a report with the simulator's keys.
pub(crate) fn report(
    scenario: serde_json::Value,
    wall: u64,
    d: std::collections::BTreeMap<String, Vec<u64>>,
    op: serde_json::Value,
) -> HostReport {
    let totals = d.iter().map(|(k, v)| (k.clone(), v.iter().sum())).collect();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    // Online CPUs (not this thread's affinity, which may be pinned).
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
    HostReport {
        scenario,
        sim_time_ns: wall,
        events: 0,
        interrupts: d,
        interrupt_totals: totals,
        tlb_flush: Default::default(),
        ops: vec![op],
        spurious_faults: 0,
        violations: Vec::new(),
        arch: Default::default(),
        host: serde_json::json!({
            "kernel": kernel,
            "cpus": cpus,
            "tracefs": "tlb:tlb_flush not read (run through bench::run)",
        }),
    }
}

/// One anonymous page, unmapped on drop (also on error paths).
struct Page(*mut u8);

impl Page {
    fn new() -> Result<Page, Error> {
        // SAFETY: anonymous private mapping of one page; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Unsupported("mmap of one page failed".into()));
        }
        Ok(Page(p as *mut u8))
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmapping the page this struct mapped.
        unsafe {
            libc::munmap(self.0 as *mut libc::c_void, 4096);
        }
    }
}

/// Stops and joins the spinning threads, also when the benchmark fails.
struct Spinners {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Run `iterations` write+madvise operations with `threads` spinners.
pub fn run(threads: u32, iterations: u64) -> Result<HostReport, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if threads as usize + 1 > ncpu {
        return Err(Error::Unsupported(format!(
            "madvise_dontneed with {threads} busy threads needs {} CPUs, this host has {ncpu}",
            threads + 1
        )));
    }
    let rows = ["TLB", "CAL", "RES"];
    interrupts::read(&rows)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut sp = Spinners {
        stop: stop.clone(),
        handles: Vec::new(),
    };
    for i in 0..threads as usize {
        let stop = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        sp.handles.push(std::thread::spawn(move || {
            let ok = pin(i + 1).is_ok();
            let _ = tx.send(ok);
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        }));
        if !rx.recv().unwrap_or(false) {
            return Err(Error::Unsupported(format!(
                "cannot pin a thread to CPU{}",
                i + 1
            )));
        }
    }
    let _restore = Affinity::save()?;
    pin(0)?;
    let page = Page::new()?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sum_sq) = (0f64, 0f64);
    let before = interrupts::read(&rows)?;
    let t0 = Instant::now();
    for _ in 0..iterations {
        let t = Instant::now();
        // SAFETY: the page is mapped; madvise(DONTNEED) of our own page.
        unsafe {
            std::ptr::write_volatile(page.0, 1);
            if libc::madvise(page.0 as *mut libc::c_void, 4096, libc::MADV_DONTNEED) != 0 {
                return Err(Error::Unsupported("madvise(MADV_DONTNEED) failed".into()));
            }
        }
        let ns = t.elapsed().as_nanos() as u64;
        hist.saturating_record(ns.max(1));
        sum += ns as f64;
        sum_sq += (ns as f64) * (ns as f64);
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    drop(sp);
    drop(page);
    let d = interrupts::delta(&before, &after);
    let n = iterations as f64;
    let mean = sum / n;
    let op = serde_json::json!({
        "name": "madvise_dontneed",
        "count": iterations,
        "per_sec": n * 1e9 / wall.max(1) as f64,
        "latency_ns": {
            "mean": mean,
            "stddev": (sum_sq / n - mean * mean).max(0.0).sqrt(),
            "p50": hist.value_at_quantile(0.5),
            "p99": hist.value_at_quantile(0.99),
            "p999": hist.value_at_quantile(0.999),
            "max": hist.max(),
        }
    });
    Ok(report(
        serde_json::json!({"workload": {"name": "madvise_dontneed", "threads": threads, "iterations": iterations}, "machine": {"cpus": ncpu}}),
        wall,
        d,
        op,
    ))
}
