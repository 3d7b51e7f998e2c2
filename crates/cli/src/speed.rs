//! `tlblab speed`: the simulator's and the checker's throughput, each next
//! to a bare baseline measured in the same run, so that the model's cost
//! shows as a ratio that does not depend on the machine or its load.
//!
//! Times are CPU seconds of the measuring thread (the simulator) or of the
//! process (the checker, which uses every core): on a shared machine the
//! wall clock also counts other processes' time.

use crate::{load_scenario, run_scenario, RunOptions, BUNDLED};
use machine::{CpuId, Error};
use serde::Serialize;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The process allocator: mimalloc for blocks under `BIG`, the system
/// allocator for larger ones. The checker clones and drops a world per
/// transition on several threads, where glibc spent half the time; the
/// simulator's large arrays grow by `realloc`, which the system allocator
/// does in place (`mremap`) without holding old and new copies.
pub struct SplitAlloc;

/// Blocks of this size and more go to the system allocator.
const BIG: usize = 4096;

// SAFETY: every block is freed and resized by the allocator that made it,
// chosen by its size, which `dealloc` and `realloc` are given.
unsafe impl GlobalAlloc for SplitAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.size() < BIG {
            mimalloc::MiMalloc.alloc(l)
        } else {
            System.alloc(l)
        }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.size() < BIG {
            mimalloc::MiMalloc.alloc_zeroed(l)
        } else {
            System.alloc_zeroed(l)
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if l.size() < BIG {
            mimalloc::MiMalloc.dealloc(p, l)
        } else {
            System.dealloc(p, l)
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        match (l.size() < BIG, new < BIG) {
            (true, true) => mimalloc::MiMalloc.realloc(p, l, new),
            (false, false) => System.realloc(p, l, new),
            _ => {
                let nl = Layout::from_size_align_unchecked(new, l.align());
                let q = self.alloc(nl);
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, l.size().min(new));
                    self.dealloc(p, l);
                }
                q
            }
        }
    }
}

/// CPU time of the calling thread (`who = CLOCK_THREAD_CPUTIME_ID`) or of
/// the process (`CLOCK_PROCESS_CPUTIME_ID`), seconds.
fn cpu_seconds(who: libc::clockid_t) -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(who, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

pub fn thread_cpu() -> f64 {
    cpu_seconds(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A value from /proc/self/status in KiB (`VmRSS`, `VmHWM`).
fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The bare baseline: a discrete-event loop with nothing but a binary heap
/// of (time, sequence, CPU) events, `cpus` of them pending, each popped
/// event pushing the CPU's next one. Returns events per CPU second.
pub fn bare_heap_rate(events: u64, cpus: usize) -> f64 {
    let t0 = thread_cpu();
    let mut heap = BinaryHeap::with_capacity(cpus + 1);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for c in 0..cpus.max(1) {
        heap.push(Reverse((c as u64, c as u64, c as CpuId)));
    }
    let mut seq = cpus as u64;
    for _ in 0..events {
        let Some(Reverse((t, _, c))) = heap.pop() else {
            break;
        };
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        seq += 1;
        heap.push(Reverse((t + 1 + (x & 1023), seq, c)));
    }
    std::hint::black_box(&heap);
    events as f64 / (thread_cpu() - t0).max(1e-9)
}

/// One scenario's row: medians over `runs` runs, each followed by the
/// bare loop over as many events (measured in turn, so that the machine's
/// drift and load fall on both alike).
#[derive(Clone, Debug, Serialize)]
pub struct SimRow {
    pub scenario: String,
    pub cpus: u32,
    pub events: u64,
    /// Events that ran model code (world steps); the rest are IPI
    /// arrivals, wake-ups, timers and ticks.
    pub steps: u64,
    pub runs: usize,
    /// CPU seconds of the whole run: build the world, simulate, report.
    pub cpu_seconds: f64,
    /// CPU seconds of the event loop alone.
    pub loop_cpu_seconds: f64,
    /// Events per CPU second of the event loop.
    pub events_per_s: f64,
    /// Events per CPU second of the whole run.
    pub run_events_per_s: f64,
    pub steps_per_s: f64,
    pub bare_events_per_s: f64,
    /// Model cost per event in bare-heap events (event loop).
    pub ratio: f64,
}

/// Runs of one scenario: until this much CPU time is spent, at least
/// [`MIN_RUNS`] and at most [`MAX_RUNS`].
const MIN_CPU_SECONDS: f64 = 1.0;
const MIN_RUNS: usize = 3;
const MAX_RUNS: usize = 25;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Simulate `name` (repeatedly) and the bare loop over as many events.
pub fn sim_row(name: &str) -> Result<SimRow, Error> {
    let s = load_scenario(name)?;
    let (mut whole, mut inner, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    let (mut events, mut steps, mut spent) = (0, 0, 0.0);
    while whole.len() < MIN_RUNS || (spent < MIN_CPU_SECONDS && whole.len() < MAX_RUNS) {
        let t0 = thread_cpu();
        let (r, wall) = run_scenario(&s, &RunOptions::default())?;
        let secs = (thread_cpu() - t0).max(1e-9);
        (events, steps) = (r.events, wall.steps);
        whole.push(secs);
        inner.push(wall.cpu_seconds.max(1e-9));
        bare.push(bare_heap_rate(r.events, s.machine.cpus as usize));
        spent += secs;
    }
    let runs = whole.len();
    let (cpu, looped, bare) = (median(whole), median(inner), median(bare));
    let rate = events as f64 / looped;
    Ok(SimRow {
        scenario: name.to_string(),
        cpus: s.machine.cpus,
        events,
        steps,
        runs,
        cpu_seconds: cpu,
        loop_cpu_seconds: looped,
        events_per_s: rate,
        run_events_per_s: events as f64 / cpu,
        steps_per_s: steps as f64 / looped,
        bare_events_per_s: bare,
        ratio: bare / rate,
    })
}

/// The checker's row.
#[derive(Clone, Debug, Serialize)]
pub struct CheckRow {
    pub check: String,
    pub symmetry: bool,
    /// The partial-order reduction ([`check::Bounds::reduction`]).
    pub reduction: check::Reduction,
    pub threads: usize,
    pub states: usize,
    pub transitions: usize,
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    pub states_per_s: f64,
    pub states_per_cpu_s: f64,
    /// Growth of the peak resident set over the run, per distinct state;
    /// `None` when the peak did not grow: the run reused memory an earlier
    /// run of this process freed (the peak is the process's, not the
    /// run's), so its memory is not measured.
    pub bytes_per_state: Option<f64>,
    /// The bare baseline ([`check::bare_search`]): seen-set inserts and
    /// node pushes for as many states and transitions, per CPU second.
    pub bare_states_per_cpu_s: f64,
    /// The bytes the bare baseline's set and nodes hold per state.
    pub bare_bytes_per_state: f64,
    /// Model cost per state in bare-baseline states.
    pub ratio: f64,
}

/// Check `name` (exhaustively, default bounds) and measure it.
pub fn check_row(
    name: &str,
    symmetry: bool,
    reduction: check::Reduction,
) -> Result<CheckRow, Error> {
    let c = check::configs::find(name)?;
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss0 = status_kib("VmRSS:");
    let c0 = cpu_seconds(libc::CLOCK_PROCESS_CPUTIME_ID);
    let bounds = check::Bounds {
        reduction,
        ..check::Bounds::default()
    };
    let o = check::configs::run(c, &[], bounds, symmetry)?;
    let cpu = cpu_seconds(libc::CLOCK_PROCESS_CPUTIME_ID) - c0;
    let grew = status_kib("VmHWM:").saturating_sub(rss0) * 1024;
    let b0 = thread_cpu();
    let bare_bytes = check::bare_search(o.states, o.transitions);
    let bare = o.states as f64 / (thread_cpu() - b0).max(1e-9);
    let states_per_cpu_s = o.states as f64 / cpu.max(1e-9);
    Ok(CheckRow {
        check: name.to_string(),
        symmetry,
        reduction,
        threads: check::threads(),
        states: o.states,
        transitions: o.transitions,
        wall_seconds: o.seconds,
        cpu_seconds: cpu,
        states_per_s: o.states as f64 / o.seconds.max(1e-9),
        states_per_cpu_s,
        bytes_per_state: (grew > 0).then(|| grew as f64 / o.states.max(1) as f64),
        bare_states_per_cpu_s: bare,
        bare_bytes_per_state: bare_bytes as f64 / o.states.max(1) as f64,
        ratio: bare / states_per_cpu_s.max(1e-9),
    })
}

/// `tlblab speed`: the checker on `checks` (symmetry off), without and
/// with each partial-order reduction, then every scenario of `names` (empty: every
/// bundled one), as tables or JSON.
pub fn speed(names: &[String], checks: &[String], json: bool) -> Result<(), Error> {
    let mut crow = Vec::new();
    for c in checks {
        for r in [
            check::Reduction::Off,
            check::Reduction::Sleep,
            check::Reduction::Dpor,
        ] {
            crow.push(check_row(c, false, r)?);
        }
    }
    let all: Vec<String> = BUNDLED.iter().map(|(n, _)| n.to_string()).collect();
    let names = if names.is_empty() { &all } else { names };
    let mut srow = Vec::new();
    for n in names {
        srow.push(sim_row(n)?);
    }
    if json {
        let v = serde_json::json!({"check": crow, "sim": srow, "goals": goals(&crow, &srow)});
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return Ok(());
    }
    print_tables(&crow, &srow);
    for line in goals(&crow, &srow) {
        println!("{line}");
    }
    Ok(())
}

/// Issue 19's goals: simulator events per CPU second of the event loop.
const GOAL_EVENTS_PER_S: f64 = 10e6;
/// usemem-fork-exec at 128 CPUs, CPU seconds of the whole run.
const GOAL_USEMEM_SECONDS: f64 = 2.0;
/// Checker: distinct states per wall second, and bytes per state.
const GOAL_STATES_PER_S: f64 = 250e3;
const GOAL_BYTES_PER_STATE: f64 = 100.0;

fn reduction_name(r: check::Reduction) -> &'static str {
    match r {
        check::Reduction::Off => "off",
        check::Reduction::Sleep => "sleep",
        check::Reduction::Dpor => "dpor",
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// One line per goal of issue 19 that the measured rows speak to.
pub fn goals(crow: &[CheckRow], srow: &[SimRow]) -> Vec<String> {
    let mut out = Vec::new();
    if !srow.is_empty() {
        let below: Vec<String> = srow
            .iter()
            .filter(|r| r.events_per_s < GOAL_EVENTS_PER_S)
            .map(|r| format!("{} {:.1}M", r.scenario, r.events_per_s / 1e6))
            .collect();
        out.push(format!(
            "goal: >= {:.0}M events/cpu-s (event loop): {} of {} scenarios: {}{}",
            GOAL_EVENTS_PER_S / 1e6,
            srow.len() - below.len(),
            srow.len(),
            verdict(below.is_empty()),
            if below.is_empty() {
                String::new()
            } else {
                format!(" (below: {})", below.join(", "))
            }
        ));
    }
    if let Some(r) = srow.iter().find(|r| r.scenario == "usemem-fork-exec") {
        out.push(format!(
            "goal: usemem-fork-exec ({} CPUs) whole run < {GOAL_USEMEM_SECONDS} s: {:.2} s: {}",
            r.cpus,
            r.cpu_seconds,
            verdict(r.cpu_seconds < GOAL_USEMEM_SECONDS)
        ));
    }
    for off in crow.iter().filter(|r| r.reduction == check::Reduction::Off) {
        let reduced = crow
            .iter()
            .filter(|r| r.check == off.check && r.reduction != check::Reduction::Off);
        for on in reduced {
            out.push(format!(
                "reduction {}: {}: states {} -> {} ({:.3}x fewer), transitions {} -> {} ({:.2}x fewer); cpu time {:.2}x",
                reduction_name(on.reduction),
                on.check,
                off.states,
                on.states,
                off.states as f64 / on.states.max(1) as f64,
                off.transitions,
                on.transitions,
                off.transitions as f64 / on.transitions.max(1) as f64,
                on.cpu_seconds / off.cpu_seconds.max(1e-9)
            ));
        }
    }
    for r in crow {
        out.push(format!(
            "goal: {} (reduction {}) >= {:.0}k states/s on {} threads: {:.0}k: {}; <= {GOAL_BYTES_PER_STATE} B/state: {}: {}",
            r.check,
            reduction_name(r.reduction),
            GOAL_STATES_PER_S / 1e3,
            r.threads,
            r.states_per_s / 1e3,
            verdict(r.states_per_s >= GOAL_STATES_PER_S),
            r.bytes_per_state.map_or("-".to_string(), |b| format!("{b:.0}")),
            r.bytes_per_state.map_or(
                "not measured (the peak resident set did not grow: memory an earlier run freed)",
                |b| verdict(b <= GOAL_BYTES_PER_STATE)
            )
        ));
    }
    out
}

fn print_tables(crow: &[CheckRow], srow: &[SimRow]) {
    if !crow.is_empty() {
        println!(
            "{:<28} {:>9} {:>7} {:>9} {:>11} {:>8} {:>8} {:>11} {:>12} {:>11} {:>13} {:>10} {:>7}",
            "check (symmetry off)",
            "reduction",
            "threads",
            "states",
            "transitions",
            "wall s",
            "cpu s",
            "states/s",
            "states/cpu-s",
            "bytes/state",
            "bare st/cpu-s",
            "bare B/st",
            "ratio"
        );
        for r in crow {
            println!(
                "{:<28} {:>9} {:>7} {:>9} {:>11} {:>8.2} {:>8.2} {:>11.0} {:>12.0} {:>11} {:>13.0} {:>10.0} {:>7.1}",
                r.check,
                reduction_name(r.reduction),
                r.threads,
                r.states,
                r.transitions,
                r.wall_seconds,
                r.cpu_seconds,
                r.states_per_s,
                r.states_per_cpu_s,
                r.bytes_per_state
                    .map_or("-".to_string(), |b| format!("{b:.0}")),
                r.bare_states_per_cpu_s,
                r.bare_bytes_per_state,
                r.ratio
            );
        }
        println!();
    }
    println!(
        "{:<24} {:>5} {:>10} {:>9} {:>4} {:>7} {:>7} {:>9} {:>9} {:>8} {:>9} {:>6}",
        "scenario",
        "cpus",
        "events",
        "steps",
        "runs",
        "run s",
        "loop s",
        "ev/cpu-s",
        "run ev/s",
        "steps/s",
        "bare ev/s",
        "ratio"
    );
    for r in srow {
        println!(
            "{:<24} {:>5} {:>10} {:>9} {:>4} {:>7.3} {:>7.3} {:>8.2}M {:>8.2}M {:>7.2}M {:>8.1}M {:>6.2}",
            r.scenario,
            r.cpus,
            r.events,
            r.steps,
            r.runs,
            r.cpu_seconds,
            r.loop_cpu_seconds,
            r.events_per_s / 1e6,
            r.run_events_per_s / 1e6,
            r.steps_per_s / 1e6,
            r.bare_events_per_s / 1e6,
            r.ratio
        );
    }
    println!(
        "(medians of `runs` runs; ev/cpu-s and ratio: the event loop; run s and run ev/s: \
         the whole run, world build and report included)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(name: &str, rate: f64, secs: f64) -> SimRow {
        SimRow {
            scenario: name.into(),
            cpus: 128,
            events: 1,
            steps: 1,
            runs: 3,
            cpu_seconds: secs,
            loop_cpu_seconds: secs,
            events_per_s: rate,
            run_events_per_s: rate,
            steps_per_s: rate,
            bare_events_per_s: 3e7,
            ratio: 3e7 / rate,
        }
    }

    #[test]
    fn goals_name_what_is_below_and_judge_each_bound() {
        let srow = [sim("a", 12e6, 1.0), sim("usemem-fork-exec", 9e6, 2.5)];
        let g = goals(&[], &srow);
        assert_eq!(g.len(), 2);
        assert!(
            g[0].contains("1 of 2") && g[0].contains("NOT met (below: usemem-fork-exec 9.0M)"),
            "{}",
            g[0]
        );
        assert!(g[1].ends_with("2.50 s: NOT met"), "{}", g[1]);
        let g = goals(&[], &[sim("usemem-fork-exec", 10e6, 1.9)]);
        assert!(
            g[0].ends_with("1 of 1 scenarios: met") && g[1].ends_with(": met"),
            "{g:?}"
        );
    }

    fn chk(bytes: Option<f64>) -> CheckRow {
        CheckRow {
            check: "c".into(),
            symmetry: false,
            reduction: check::Reduction::Off,
            threads: 1,
            states: 1000,
            transitions: 2000,
            wall_seconds: 1.0,
            cpu_seconds: 1.0,
            states_per_s: 300e3,
            states_per_cpu_s: 300e3,
            bytes_per_state: bytes,
            bare_states_per_cpu_s: 3e7,
            bare_bytes_per_state: 27.0,
            ratio: 100.0,
        }
    }

    /// A run whose memory was not measured is not judged within bound.
    #[test]
    fn an_unmeasured_memory_is_no_goal_met() {
        let g = goals(&[chk(Some(120.0)), chk(Some(40.0)), chk(None)], &[]);
        assert_eq!(g.len(), 3, "{g:?}");
        assert!(g[0].ends_with("B/state: 120: NOT met"), "{}", g[0]);
        assert!(g[1].ends_with("B/state: 40: met"), "{}", g[1]);
        assert!(g[2].contains("B/state: -: not measured"), "{}", g[2]);
        assert!(g
            .iter()
            .all(|l| l.contains(">= 250k states/s on 1 threads: 300k: met")));
    }
}
