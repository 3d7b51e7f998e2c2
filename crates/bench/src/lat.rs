//! lmbench-style `lat_pagefault` and `lat_mmap` on the host, as the model's
//! workloads of the same names run them: a shared mapping of a file whose
//! pages are already in the page cache (a `memfd`, so nothing touches a disk).

use crate::interrupts;
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::time::Instant;

const PAGE: usize = 4096;

/// A memfd of `len` bytes, every page written once (resident), closed on drop.
pub(crate) struct File(pub(crate) i32);

impl File {
    pub(crate) fn new(len: usize) -> Result<File, Error> {
        let name = b"tlblab-lat\0";
        // SAFETY: a NUL-terminated name; the fd is owned by the returned File.
        let fd = unsafe { libc::memfd_create(name.as_ptr() as *const libc::c_char, 0) };
        if fd < 0 {
            return Err(Error::Unsupported(format!(
                "memfd_create: {}",
                std::io::Error::last_os_error()
            )));
        }
        let f = File(fd);
        // SAFETY: fd is a valid memfd.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            return Err(Error::Io(format!(
                "ftruncate: {}",
                std::io::Error::last_os_error()
            )));
        }
        let m = Map::new(fd, len)?;
        for p in (0..len).step_by(PAGE) {
            // SAFETY: p < len, inside the mapping.
            unsafe { *m.0.add(p) = 1 };
        }
        Ok(f)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}

/// A `MAP_SHARED` mapping, unmapped on drop.
struct Map(*mut u8, usize);

impl Map {
    fn new(fd: i32, len: usize) -> Result<Map, Error> {
        // SAFETY: a fresh shared mapping of a valid fd; checked for failure.
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
            return Err(Error::Io(format!(
                "mmap: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Map(p as *mut u8, len))
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what Map::new mapped.
        unsafe { libc::munmap(self.0 as *mut libc::c_void, self.1) };
    }
}

/// The report's `ops` entry for `n` ops with this latency histogram.
pub(crate) fn op_json(
    name: &str,
    hist: &Histogram<u64>,
    n: u64,
    sum: f64,
    sq: f64,
    wall: u64,
) -> serde_json::Value {
    let n = n.max(1) as f64;
    let mean = sum / n;
    serde_json::json!({
        "name": name,
        "count": n as u64,
        "per_sec": n * 1e9 / wall.max(1) as f64,
        "latency_ns": {"mean": mean, "stddev": (sq / n - mean * mean).max(0.0).sqrt(),
            "p50": hist.value_at_quantile(0.5), "p99": hist.value_at_quantile(0.99),
            "p999": hist.value_at_quantile(0.999), "max": hist.max()},
    })
}

/// `lat_pagefault`: map a `size`-byte file, read one byte of each page (each
/// a fault), unmap; `iterations` rounds on CPU 0. The op is one fault.
pub fn lat_pagefault(size: u64, iterations: u64) -> Result<HostReport, Error> {
    on_cpu0(move || pagefault_pinned(size, iterations))
}

/// Run `f` on a thread of its own pinned to CPU 0 (the caller's affinity
/// is left as it was).
fn on_cpu0(
    f: impl FnOnce() -> Result<HostReport, Error> + Send + 'static,
) -> Result<HostReport, Error> {
    std::thread::spawn(move || {
        crate::madvise::pin(0)?;
        f()
    })
    .join()
    .map_err(|_| Error::Unsupported("the benchmark thread panicked".into()))?
}

fn pagefault_pinned(size: u64, iterations: u64) -> Result<HostReport, Error> {
    let len = check_size(size)?;
    let file = File::new(len)?;
    let rows = ["TLB", "CAL", "RES"];
    let before = interrupts::read(&rows)?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq, mut n) = (0f64, 0f64, 0u64);
    let t0 = Instant::now();
    for _ in 0..iterations {
        let m = Map::new(file.0, len)?;
        for p in (0..len).step_by(PAGE) {
            let t = Instant::now();
            // SAFETY: inside the mapping; volatile so the read is a real access.
            unsafe { std::ptr::read_volatile(m.0.add(p)) };
            let ns = t.elapsed().as_nanos() as u64;
            hist.saturating_record(ns.max(1));
            sum += ns as f64;
            sq += (ns as f64) * (ns as f64);
            n += 1;
        }
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    Ok(crate::madvise::report(
        serde_json::json!({"workload": {"name": "lat_pagefault", "threads": 1, "size": size, "iterations": iterations}}),
        wall,
        interrupts::delta(&before, &after),
        op_json("pagefault", &hist, n, sum, sq, wall),
    ))
}

/// `lat_mmap`: map a `size`-byte file, touch a quarter of its pages, unmap;
/// `iterations` times on CPU 0. The op is one mmap+touch+munmap.
pub fn lat_mmap(size: u64, iterations: u64) -> Result<HostReport, Error> {
    on_cpu0(move || mmap_pinned(size, iterations))
}

fn mmap_pinned(size: u64, iterations: u64) -> Result<HostReport, Error> {
    let len = check_size(size)?;
    let file = File::new(len)?;
    let rows = ["TLB", "CAL", "RES"];
    let before = interrupts::read(&rows)?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq) = (0f64, 0f64);
    let touched = len.div_ceil(4 * PAGE) * PAGE;
    let t0 = Instant::now();
    for _ in 0..iterations {
        let t = Instant::now();
        let m = Map::new(file.0, len)?;
        for p in (0..touched).step_by(PAGE) {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::read_volatile(m.0.add(p)) };
        }
        drop(m);
        let ns = t.elapsed().as_nanos() as u64;
        hist.saturating_record(ns.max(1));
        sum += ns as f64;
        sq += (ns as f64) * (ns as f64);
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    Ok(crate::madvise::report(
        serde_json::json!({"workload": {"name": "lat_mmap", "threads": 1, "size": size, "iterations": iterations}}),
        wall,
        interrupts::delta(&before, &after),
        op_json("mmap_munmap", &hist, iterations, sum, sq, wall),
    ))
}

fn check_size(size: u64) -> Result<usize, Error> {
    if size == 0 || !size.is_multiple_of(PAGE as u64) || size > 64 << 20 {
        return Err(Error::Range(format!(
            "size {size} (a multiple of 4KiB, at most 64MiB)"
        )));
    }
    Ok(size as usize)
}
