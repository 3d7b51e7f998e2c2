//! LTP mmapstress01 as LTP runs it, for the riscv64 and arm64 guests and
//! the host bench (`tlblab bench mmapstress01`): no task pinned, the
//! parent forking a replacement each time `wait()` returns.
//!
//! From LTP's testcases/kernel/mem/mmapstress/mmapstress01.c (the LTP
//! framework version, 10/2022 rewrite; `nprocs = MAX(MIN(tst_ncpus() - 1,
//! 20), 1)` by default, `filesize = 4096`, `.runtime = 12`):
//! ```text
//!   parent: fork nprocs children; loop { pid = wait(&st); find its slot i;
//!           pidarray[i] = fork() }                      (until SIGALRM)
//!   child:  stat, open, mmap(filesize, MAP_SHARED), close;
//!           500 times: for (i = procno; i < pagesize; i += nprocs)
//!                        check byte i, write it;      (one page: filesize 4096)
//!           munmap; exit(0)
//! ```
//! Here the run ends after `forks` children instead of 12 s, and the file
//! is a memfd (its page resident, as LTP's freshly written file is). The
//! op is the parent's `fork()`. When tracefs is there, the run is traced
//! (`ltp_traced`): which call-function requests are flushes, and which
//! tasks moved.

use crate::interrupts;
use crate::lat::File;
use crate::HostReport;
use hdrhistogram::Histogram;
use machine::Error;
use std::collections::BTreeMap;
use std::time::Instant;

/// LTP's `MAXLOOPS`: accesses each child makes before it unmaps.
pub const MAXLOOPS: u32 = 500;
const PAGE: usize = 4096;

/// mmapstress01's `child_mapper` on the one-page file, then `_exit`.
/// Runs in a forked child: no allocation.
fn child_mapper(fd: libc::c_int, procno: usize, nprocs: usize) -> ! {
    // SAFETY: a fresh shared mapping of the parent's memfd, checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        // SAFETY: leaving the forked child.
        unsafe { libc::_exit(2) };
    }
    let page = p as *mut u8;
    let want = procno as u8;
    for _ in 0..MAXLOOPS {
        let mut i = procno;
        while i < PAGE {
            // SAFETY: i < PAGE, inside the mapping.
            unsafe {
                if std::ptr::read_volatile(page.add(i)) != want {
                    libc::_exit(4);
                }
                std::ptr::write_volatile(page.add(i), want);
            }
            i += nprocs;
        }
    }
    // SAFETY: unmapping exactly the mapping above; then leaving the child.
    unsafe {
        libc::munmap(p, PAGE);
        libc::_exit(0)
    }
}

/// Fork one mapper child; the parent gets its pid.
fn fork_mapper(fd: libc::c_int, procno: usize, nprocs: usize) -> Result<libc::pid_t, Error> {
    // SAFETY: the agent's process is single-threaded here; the child only
    // runs `child_mapper` (no allocation, no locks) and `_exit`s.
    match unsafe { crate::procs::fork()? } {
        0 => child_mapper(fd, procno, nprocs),
        pid => Ok(pid),
    }
}

/// `wait(&st)` for any child: its pid, or an error if it failed.
fn wait_any() -> Result<libc::pid_t, Error> {
    let mut st = 0;
    // SAFETY: waiting for our own children.
    let pid = unsafe { libc::wait(&mut st) };
    if pid < 0 {
        return Err(Error::Unsupported(format!(
            "wait: {}",
            std::io::Error::last_os_error()
        )));
    }
    if !libc::WIFEXITED(st) || libc::WEXITSTATUS(st) != 0 {
        return Err(Error::Unsupported(format!(
            "mmapstress01: a child ended with wait status {st:#x}"
        )));
    }
    Ok(pid)
}

/// mmapstress01 with `children` alive (0: LTP's default), `forks` forks
/// in all, on the calling thread (in a process that may run on every CPU).
pub fn run(children: u32, forks: u64) -> Result<HostReport, Error> {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let nprocs = match children {
        0 => crate::mmapstress::default_children(ncpu) as usize,
        n => n as usize,
    };
    if nprocs > 255 {
        return Err(Error::Range(format!(
            "mmapstress01: {nprocs} children (LTP allows 0-255)"
        )));
    }
    if ncpu < 2 || forks < nprocs as u64 {
        return Err(Error::Range(format!(
            "mmapstress01 (LTP) needs 2 CPUs and at least {nprocs} forks ({ncpu} CPUs, {forks} forks)"
        )));
    }
    let file = ltp_file(nprocs)?;
    let rows = ["TLB", "CAL", "RES"];
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("bounds");
    let (mut sum, mut sq) = (0f64, 0f64);
    let before = interrupts::read(&rows)?;
    let t0 = Instant::now();
    fork_and_wait(file.0, nprocs, forks, &mut |ns| {
        hist.saturating_record(ns.max(1));
        sum += ns as f64;
        sq += (ns as f64) * (ns as f64);
    })?;
    let wall = t0.elapsed().as_nanos() as u64;
    let after = interrupts::read(&rows)?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() } as u64;
    let mut r = crate::madvise::report(
        serde_json::json!({"workload": {"name": "mmapstress01", "shape": "ltp", "threads": nprocs, "size": PAGE, "iterations": forks, "maxloops": MAXLOOPS}, "machine": {"cpus": ncpu}}),
        wall,
        interrupts::delta(&before, &after),
        crate::lat::op_json("fork", &hist, forks, sum, sq, wall),
    );
    r.arch.insert("parent_pid".into(), parent);
    r.arch.insert("child_mmap_munmap".into(), forks);
    Ok(r)
}

/// The shared file, one page of the parent's pattern: byte i belongs to
/// child i mod nprocs.
fn ltp_file(nprocs: usize) -> Result<File, Error> {
    let file = File::new(PAGE)?;
    let pattern: Vec<u8> = (0..PAGE).map(|i| (i % nprocs) as u8).collect();
    // SAFETY: writing our buffer into our memfd.
    if unsafe { libc::pwrite(file.0, pattern.as_ptr().cast(), PAGE, 0) } != PAGE as isize {
        return Err(Error::Unsupported(
            "mmapstress01: cannot write the file".into(),
        ));
    }
    Ok(file)
}

/// LTP's `run()`: fork `nprocs` mappers, then `wait()` and fork a
/// replacement in the exited one's slot until `forks` were forked; then
/// reap them all (killing them first on an error). `record` gets each
/// `fork()`'s time in ns.
fn fork_and_wait(
    fd: libc::c_int,
    nprocs: usize,
    forks: u64,
    record: &mut dyn FnMut(u64),
) -> Result<(), Error> {
    let mut pidarray = vec![0 as libc::pid_t; nprocs];
    let mut fork = |i: usize, pids: &mut Vec<libc::pid_t>| -> Result<(), Error> {
        let t = Instant::now();
        pids[i] = fork_mapper(fd, i, nprocs)?;
        record(t.elapsed().as_nanos() as u64);
        Ok(())
    };
    let mut result = (0..nprocs).try_for_each(|i| fork(i, &mut pidarray));
    let mut forked = nprocs as u64;
    while result.is_ok() && forked < forks {
        result = wait_any().and_then(|pid| {
            let i = pidarray
                .iter()
                .position(|&p| p == pid)
                .ok_or_else(|| Error::Unsupported(format!("mmapstress01: unknown child {pid}")))?;
            fork(i, &mut pidarray)
        });
        forked += 1;
    }
    if result.is_err() {
        for &p in pidarray.iter().filter(|&&p| p > 0) {
            // SAFETY: killing our own children on the way out.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    // Reap the rest (all of them on an error).
    // SAFETY: waiting for our own children until none is left.
    while unsafe { libc::wait(std::ptr::null_mut()) } > 0 {}
    result
}

/// Counts from a trace of the run (`csd:csd_queue_cpu`,
/// `sched:sched_migrate_task`, `sched:sched_wakeup_new`), into the report's
/// `arch` map: `flush_ipis` (requests running `__ipi_flush_tlb_range_asid`,
/// RISC-V's flush of a user ASID, queued by the workload's own tasks: the
/// parent `parent_pid` and its children, the pids after it;
/// `flush_ipis_cpuN` by target), `flush_ipis_other` and
/// `flush_ipis_other_<comm>-<pid>` for those queued by any other task (the
/// agent, PID 1, whose threads have run on every CPU; kernel threads),
/// `csd_<func>` for the others, `parent_migrations`, `child_migrations`,
/// `children_born_on_forking_cpu`.
pub fn count_trace(text: &str, parent_pid: u64, into: &mut BTreeMap<String, u64>) {
    // The task a trace line ran in: `comm-pid` before the `[cpu]` field.
    let task = |l: &str| -> Option<(String, u64)> {
        let head = l[..l.find('[')?].trim();
        let (comm, pid) = head.rsplit_once('-')?;
        Some((comm.to_string(), pid.parse().ok()?))
    };
    let field = |l: &str, k: &str| -> Option<String> {
        l.split_whitespace()
            .find_map(|x| x.strip_prefix(k))
            .map(|v| v.split('+').next().unwrap_or(v).to_string())
    };
    let on_cpu = |l: &str| -> Option<u64> {
        let a = l.find('[')?;
        let b = l[a..].find(']')? + a;
        l[a + 1..b].trim().parse().ok()
    };
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let mut bump = |k: String| *into.entry(k).or_insert(0) += 1;
        if l.contains("csd_queue_cpu:") {
            let func = field(l, "func=").unwrap_or_default();
            let workload = task(l).is_some_and(|(_, pid)| parent_pid > 0 && pid >= parent_pid);
            if func.contains("flush_tlb_range") && !workload {
                bump("flush_ipis_other".into());
                let (comm, pid) = task(l).unwrap_or_default();
                bump(format!("flush_ipis_other_{comm}-{pid}"));
            } else if func.contains("flush_tlb_range") {
                bump("flush_ipis".into());
                bump(format!(
                    "flush_ipis_cpu{}",
                    field(l, "cpu=").unwrap_or_default()
                ));
            } else {
                bump(format!("csd_{func}"));
            }
        } else if l.contains("sched_migrate_task:") {
            let pid: Option<u64> = field(l, "pid=").and_then(|p| p.parse().ok());
            if pid == Some(parent_pid) {
                bump("parent_migrations".into());
            } else if field(l, "comm=").is_some_and(|c| c.starts_with("tlblab")) {
                bump("child_migrations".into());
            }
        } else if l.contains("sched_wakeup_new:") {
            let target: Option<u64> = field(l, "target_cpu=").and_then(|c| c.parse().ok());
            bump("children_born".into());
            if target.is_some() && target == on_cpu(l) {
                bump("children_born_on_forking_cpu".into());
            }
        }
    }
}

/// Each migration of the parent in the trace, with the trace lines of the
/// same CPU just before it (what moved it: a wake-up or a balance).
pub fn parent_moves(text: &str, parent_pid: u64) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    fn cpu_of(l: &str) -> Option<&str> {
        l.find('[').map(|a| &l[a..(a + 5).min(l.len())])
    }
    let pid = format!("pid={parent_pid} ");
    let mut out = Vec::new();
    for (k, l) in lines.iter().enumerate() {
        if !(l.contains("sched_migrate_task:") && l.contains(&pid)) {
            continue;
        }
        let cpu = cpu_of(l);
        let before: Vec<&str> = lines[..k]
            .iter()
            .rev()
            .filter(|b| cpu_of(b) == cpu)
            .take(6)
            .copied()
            .collect();
        for b in before.iter().rev() {
            out.push(format!("  {}", b.trim()));
        }
        out.push(format!("> {}", l.trim()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tracepoints' own formats (kernel/smp.c csd_queue_cpu,
    /// include/trace/events/sched.h): flush requests by target, the
    /// parent's moves apart from its children's, children born where
    /// they were forked; other callbacks by name.
    #[test]
    fn trace_counts_by_kind() {
        let t = "\
# tracer: nop
 tlblab-460 [002] ..... 85.22: csd_queue_cpu: cpu=3 callsite=on_each_cpu_cond_mask+0x20/0x28 func=__ipi_flush_tlb_range_asid csd=0000
 tlblab-460 [002] ..... 85.23: csd_queue_cpu: cpu=0 callsite=on_each_cpu_cond_mask+0x20/0x28 func=__ipi_flush_tlb_range_asid csd=0000
 tlblab-636 [000] dn... 34.57: csd_queue_cpu: cpu=1 callsite=ttwu_queue_wakelist+0x120/0x134 func=sched_ttwu_pending csd=0000
 tlblab-1 [000] ..... 85.24: csd_queue_cpu: cpu=5 callsite=on_each_cpu_cond_mask+0x20/0x28 func=__ipi_flush_tlb_range_asid csd=0000
 kcompactd0-30 [001] ..... 85.25: csd_queue_cpu: cpu=2 callsite=on_each_cpu_cond_mask+0x20/0x28 func=__ipi_flush_tlb_range_asid csd=0000
 <idle>-0 [001] d.s.. 33.15: sched_migrate_task: comm=tlblab pid=460 prio=120 orig_cpu=0 dest_cpu=1
 <idle>-0 [001] d.s.. 33.14: sched_migrate_task: comm=tlblab pid=497 prio=120 orig_cpu=0 dest_cpu=1
 <idle>-0 [001] d.s.. 33.14: sched_migrate_task: comm=rcu_sched pid=17 prio=120 orig_cpu=0 dest_cpu=1
 tlblab-460 [002] d.... 35.00: sched_wakeup_new: comm=tlblab pid=700 prio=120 target_cpu=002
 tlblab-460 [002] d.... 35.10: sched_wakeup_new: comm=tlblab pid=701 prio=120 target_cpu=005
";
        let mut m = BTreeMap::new();
        count_trace(t, 460, &mut m);
        let get = |k: &str| m.get(k).copied().unwrap_or(0);
        assert_eq!(get("flush_ipis"), 2);
        assert_eq!((get("flush_ipis_cpu3"), get("flush_ipis_cpu0")), (1, 1));
        // The agent's (PID 1) and a kernel thread's flushes are not the workload's.
        assert_eq!(get("flush_ipis_other"), 2);
        assert_eq!(get("flush_ipis_other_tlblab-1"), 1);
        assert_eq!(get("flush_ipis_other_kcompactd0-30"), 1);
        assert_eq!(get("flush_ipis_cpu5"), 0);
        assert_eq!(get("csd_sched_ttwu_pending"), 1);
        assert_eq!((get("parent_migrations"), get("child_migrations")), (1, 1));
        assert_eq!(get("children_born"), 2);
        assert_eq!(get("children_born_on_forking_cpu"), 1);
        let moves = parent_moves(t, 460);
        assert_eq!(moves.last().map(|l| l.starts_with("> ")), Some(true));
        assert!(moves.iter().all(|l| !l.contains("pid=497 ")));
    }
}
