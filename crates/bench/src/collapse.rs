//! `MADV_COLLAPSE` (Linux 6.1+) on the host: the khugepaged path of seed
//! (b) on demand. A single pinned thread faults a 2 MiB-aligned range in as
//! 4 KiB pages, then collapses it with one `madvise`; each
//! 2 MiB collapse ends with `tlb_remove_table_sync_one()`, an IPI to every
//! other CPU, which the CAL row counts. The op is one 2 MiB collapse (the
//! call's time divided by the extents).

use crate::interrupts;
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::time::Instant;

const HPAGE: usize = 2 << 20;

/// Turn tracefs's `tracing_on` on around each `MADV_COLLAPSE` call only
/// (not the populate, nor the munmap after it): the guest agent's traced
/// collapse round (`bench::guest`).
pub static TRACE_AROUND_COLLAPSE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Calls to leave untraced first (the unrecorded round's).
pub static TRACE_SKIP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn tracing_on(on: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    if on && TRACE_SKIP.load(Relaxed) > 0 {
        TRACE_SKIP.fetch_sub(1, Relaxed);
        return;
    }
    if TRACE_AROUND_COLLAPSE.load(Relaxed) {
        let _ = std::fs::write("/sys/kernel/tracing/tracing_on", if on { "1" } else { "0" });
    }
}
/// `MADV_COLLAPSE` (include/uapi/asm-generic/mman-common.h).
const MADV_COLLAPSE: libc::c_int = 25;

/// An anonymous mapping with a 2 MiB-aligned window of `len` bytes, unmapped on drop.
struct Aligned {
    base: *mut u8,
    map_len: usize,
    p: *mut u8,
}

impl Aligned {
    fn new(len: usize) -> Result<Aligned, Error> {
        let map_len = len + HPAGE;
        // SAFETY: a fresh anonymous private mapping; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::Unsupported(format!(
                "mmap of {map_len} bytes failed"
            )));
        }
        let base = base as *mut u8;
        let p = ((base as usize).div_ceil(HPAGE) * HPAGE) as *mut u8;
        Ok(Aligned { base, map_len, p })
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}

/// Is transparent_hugepage/enabled "[always]"?
fn thp_always() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|t| t.contains("[always]"))
}

/// Collapse `size` bytes (a multiple of 2 MiB), `rounds` times.
pub fn run(size: u64, rounds: u64) -> Result<HostReport, Error> {
    run_strided(size, rounds, 1)
}

/// Collapse `size` bytes, `rounds` times, having faulted in only every
/// `stride`-th 4 KiB page (`MADV_COLLAPSE` ignores `max_ptes_none`: the
/// collapse copies the present pages and zero-fills the others).
pub fn run_strided(size: u64, rounds: u64, stride: u32) -> Result<HostReport, Error> {
    check_args(size, stride)?;
    std::thread::spawn(move || {
        crate::madvise::pin(0)?;
        pinned(size as usize, rounds, stride as usize)
    })
    .join()
    .map_err(|_| Error::Unsupported("the benchmark thread panicked".into()))?
}

/// Median µs per 2 MiB of `rounds` rounds at each population (every
/// `strides[i]`-th page present), the populations taken in turn (round r
/// of each before round r + 1) after one unrecorded round: this host's
/// collapse time drifts within minutes, and populations measured one
/// after the other would differ by the drift; measured in turn, they
/// share it.
pub fn medians_in_turn(size: u64, rounds: u64, strides: &[u32]) -> Result<Vec<f64>, Error> {
    if rounds == 0 || strides.is_empty() {
        return Err(Error::Range(
            "collapse medians need at least one round and one population".into(),
        ));
    }
    for &stride in strides {
        check_args(size, stride)?;
    }
    let strides = strides.to_vec();
    std::thread::spawn(move || {
        crate::madvise::pin(0)?;
        let (len, always, rows) = (size as usize, thp_always(), ["TLB", "CAL", "RES"]);
        let extents = (len / HPAGE) as f64;
        // The unrecorded first round, as in `pinned`.
        round(len, strides[0] as usize, always, &rows)?;
        let mut us = vec![Vec::new(); strides.len()];
        for _ in 0..rounds {
            for (u, &stride) in us.iter_mut().zip(&strides) {
                let (ns, ..) = round(len, stride as usize, always, &rows)?;
                u.push(ns as f64 / extents / 1000.0);
            }
        }
        Ok(us
            .into_iter()
            .map(|mut u| {
                u.sort_by(f64::total_cmp);
                u[u.len() / 2]
            })
            .collect())
    })
    .join()
    .map_err(|_| Error::Unsupported("the benchmark thread panicked".into()))?
}

fn check_args(size: u64, stride: u32) -> Result<(), Error> {
    if size == 0 || !size.is_multiple_of(HPAGE as u64) || size > 1 << 30 {
        return Err(Error::Range(format!(
            "collapse size {size} (a multiple of 2MiB, at most 1GiB)"
        )));
    }
    if !(1..=512).contains(&stride) {
        return Err(Error::Range(format!(
            "collapse populate stride {stride} (allowed 1..=512 pages)"
        )));
    }
    Ok(())
}

fn pinned(len: usize, rounds: u64, stride: usize) -> Result<HostReport, Error> {
    let rows = ["TLB", "CAL", "RES"];
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq, mut n) = (0f64, 0f64, 0u64);
    let mut d_total: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    let always = thp_always();
    // One unrecorded round first: a process's first MADV_COLLAPSE takes ~10x
    // a later one on this project's VMs (5.2 ms against 0.5 ms per 2 MiB;
    // first huge-page allocations, presumably compaction), a cost the model
    // does not have. Later rounds agree within a few percent.
    round(len, stride, always, &rows)?;
    let t0 = Instant::now();
    let mut collapses = Some(0u64);
    for _ in 0..rounds {
        let (elapsed, before, after, allocs) = round(len, stride, always, &rows)?;
        collapses = collapses.zip(allocs).map(|(a, b)| a + b);
        let extents = (len / HPAGE) as u64;
        let ns = elapsed / extents;
        for _ in 0..extents {
            hist.saturating_record(ns.max(1));
            sum += ns as f64;
            sq += (ns as f64) * (ns as f64);
        }
        n += extents;
        for (k, v) in interrupts::delta(&before, &after) {
            let e = d_total.entry(k).or_insert_with(|| vec![0; v.len()]);
            for (a, b) in e.iter_mut().zip(v) {
                *a += b;
            }
        }
    }
    let wall = t0.elapsed().as_nanos() as u64;
    // The host's own interrupt traffic: count the rows again over an idle
    // period as long as the collapses took (at most 1 s, scaled).
    let busy: u64 = (sum as u64).max(1);
    let idle = busy.min(1_000_000_000);
    let b0 = interrupts::read(&rows)?;
    std::thread::sleep(std::time::Duration::from_nanos(idle));
    let b1 = interrupts::read(&rows)?;
    let background: std::collections::BTreeMap<String, u64> = interrupts::delta(&b0, &b1)
        .into_iter()
        .map(|(k, v)| (k, v.iter().sum::<u64>() * busy / idle))
        .collect();
    let nn = n.max(1) as f64;
    let mean = sum / nn;
    let mut rep = crate::madvise::report(
        serde_json::json!({"workload": {"name": "khugepaged_collapse", "threads": 1, "size": len, "iterations": rounds, "populate_stride": stride}}),
        wall,
        d_total,
        serde_json::json!({
            "name": "collapse_huge_page",
            "count": n,
            "per_sec": nn * 1e9 / wall.max(1) as f64,
            "latency_ns": {"mean": mean, "stddev": (sq / nn - mean * mean).max(0.0).sqrt(),
                "p50": hist.value_at_quantile(0.5), "p99": hist.value_at_quantile(0.99),
                "p999": hist.value_at_quantile(0.999), "max": hist.max()},
        }),
    );
    for (k, v) in background {
        rep.arch.insert(format!("background_{k}"), v);
    }
    if let Some(c) = collapses {
        rep.arch.insert("thp_collapse_alloc".into(), c);
    }
    Ok(rep)
}

type Rows = std::collections::BTreeMap<String, Vec<u64>>;

/// Attempts per round: `MADV_COLLAPSE` fails with `EAGAIN` when a page is
/// transiently busy (`SCAN_PAGE_COUNT`, `SCAN_PAGE_LOCK`, `SCAN_PAGE_LRU`:
/// a reference held elsewhere for a moment); the round is then redone on a
/// fresh mapping, since a partly collapsed range would time less work.
const ATTEMPTS: usize = 5;

/// One measured round: populate, then time one `MADV_COLLAPSE` call with
/// the interrupt rows and `/proc/vmstat`'s `thp_collapse_alloc` read around
/// it. Returns (ns, rows before, rows after, huge pages allocated by the
/// successful call, or None where `/proc/vmstat` has no such counter): the
/// warm-up round and failed attempts allocate too, and are not counted.
fn round(
    len: usize,
    stride: usize,
    always: bool,
    rows: &[&str],
) -> Result<(u64, Rows, Rows, Option<u64>), Error> {
    let mut attempt = 1;
    loop {
        let r = populate(len, stride, always)?;
        let before = interrupts::read(rows)?;
        let a0 = thp_collapse_alloc();
        tracing_on(true);
        let ran = collapse(&r, len);
        tracing_on(false);
        match ran {
            // Read the rows before `r` is unmapped: munmap's flush is not the collapse's.
            Ok(ns) => {
                let allocs = thp_collapse_alloc()
                    .zip(a0)
                    .map(|(a1, a0)| a1.saturating_sub(a0));
                return Ok((ns, before, interrupts::read(rows)?, allocs));
            }
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && attempt < ATTEMPTS => {
                attempt += 1
            }
            Err(e) => {
                return Err(Error::Unsupported(format!(
                    "MADV_COLLAPSE refused on this host: {e} (needs Linux 6.1+ with transparent hugepages)"
                )))
            }
        }
    }
}

/// A fresh 2 MiB-aligned mapping of `len` bytes with every `stride`-th
/// 4 KiB page faulted in.
fn populate(len: usize, stride: usize, always: bool) -> Result<Aligned, Error> {
    let r = Aligned::new(len)?;
    // With THP "always", faults would map huge pages: fault the range
    // in under MADV_NOHUGEPAGE, then allow THP again (MADV_COLLAPSE
    // refuses VM_NOHUGEPAGE); khugepaged may then also collapse parts
    // of it, each with its own sync IPI. Under "madvise" or "never" no
    // madvise is needed and khugepaged never registers this mm.
    // SAFETY: inside the mapping; 4 KiB faults.
    unsafe {
        if always {
            libc::madvise(r.p as *mut libc::c_void, len, libc::MADV_NOHUGEPAGE);
        }
        for off in (0..len).step_by(4096 * stride) {
            *r.p.add(off) = 1;
        }
        if always {
            libc::madvise(r.p as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    Ok(r)
}

/// One `MADV_COLLAPSE` call over the whole range, as the model's workload
/// does (one `lru_add_drain_all` per call); returns its time in ns.
fn collapse(r: &Aligned, len: usize) -> std::io::Result<u64> {
    let t = Instant::now();
    // SAFETY: a 2 MiB-aligned range inside the mapping.
    let rc = unsafe { libc::madvise(r.p as *mut libc::c_void, len, MADV_COLLAPSE) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(t.elapsed().as_nanos() as u64)
}

/// `thp_collapse_alloc` of `/proc/vmstat`: huge pages allocated by
/// khugepaged and `MADV_COLLAPSE` (mm/khugepaged.c, `alloc_charge_folio`).
fn thp_collapse_alloc() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    vmstat(&text, "thp_collapse_alloc")
}

/// One counter of `/proc/vmstat` text.
fn vmstat(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn vmstat_reads_one_counter_by_its_whole_name() {
        let t = "thp_collapse_alloc_failed 7\nthp_collapse_alloc 42\nnr_free_pages 9\n";
        assert_eq!(super::vmstat(t, "thp_collapse_alloc"), Some(42));
        assert_eq!(super::vmstat(t, "thp_collapse_alloc_failed"), Some(7));
        assert_eq!(super::vmstat(t, "thp_fault_alloc"), None);
    }
}
