//! Every workload on every architecture from its defaults alone (its bundled
//! scenario, as `tlblab run --workload NAME --set machine.arch=A` starts
//! from): it runs and makes progress, or it refuses in one line saying why.
use machine::Scenario;
use rayon::prelude::*;
use sim::Report;
use tlblab::{run_scenario, RunOptions};

/// Simulated time each run of the matrix gets: enough for every workload's
/// first measured ops, short enough for the whole matrix to take seconds.
const BOUND_MS: u64 = 4;

/// The pairs that refuse, and a word their one-line reason must contain.
const REFUSED: &[(&str, &str, &str)] = &[
    // Kernel-range flushes (vmalloc/vfree, global entries) are modelled on
    // x86 and RISC-V (issue 15 item 12 added x86's flush_tlb_kernel_range).
    ("vmalloc_race", "arm64", "RISC-V"),
    // Its defaults are a KVM guest (x86.paravirt = kvm): the race needs a
    // preempted vCPU inside GUP-fast, which only the x86 guest model has.
    ("collapse_race", "arm64", "x86"),
    ("collapse_race", "riscv", "x86"),
    // Page migration needs two NUMA nodes; the Neoverse N2 topology has
    // one (`machine.topology = two_nodes` gives it two).
    ("migrate_pages", "arm64", "two_nodes"),
];

fn with(workload: &str, sets: &[&str]) -> Scenario {
    let mut s = workloads::defaults(workload).expect("every workload has defaults");
    for kv in sets {
        s.set(kv).expect("valid override");
    }
    s
}

fn run(s: &Scenario) -> Result<Report, String> {
    run_scenario(s, &RunOptions::default())
        .map(|(r, _)| r)
        .map_err(|e| e.to_string())
}

#[test]
fn every_workload_has_its_bundled_scenario_as_defaults() {
    for w in workloads::catalogue() {
        let s = workloads::defaults(w.name).unwrap();
        assert_eq!(s.workload.name, w.name);
        let file = workloads::defaults_source(w.name).unwrap();
        let bundled = tlblab::load_scenario(file).unwrap();
        // Everything but the workload's name comes from the file.
        let mut again = s.clone();
        again.name = bundled.name.clone();
        again.workload.name = bundled.workload.name.clone();
        assert_eq!(again, bundled, "{} != scenarios/{file}.toml", w.name);
        s.validate().unwrap();
    }
}

#[test]
fn every_workload_on_every_arch_runs_or_refuses_in_one_line() {
    let pairs: Vec<(&str, &str)> = workloads::catalogue()
        .iter()
        .flat_map(|w| ["x86", "arm64", "riscv"].map(|a| (w.name, a)))
        .collect();
    let bound = format!("machine.max_sim_time_ms={BOUND_MS}");
    let outcomes: Vec<_> = pairs
        .par_iter()
        .map(|&(w, a)| {
            let arch = format!("machine.arch={a}");
            (w, a, run(&with(w, &[&arch, &bound])))
        })
        .collect();
    let mut wrong = Vec::new();
    for (w, a, outcome) in outcomes {
        let refusal = REFUSED.iter().find(|(rw, ra, _)| *rw == w && *ra == a);
        match (outcome, refusal) {
            (Err(e), Some((_, _, why))) if !e.contains('\n') && e.contains(why) => {}
            (Err(e), _) => wrong.push(format!("{w} on {a} refused: {e}")),
            (Ok(_), Some(_)) => wrong.push(format!("{w} on {a} ran, but should refuse")),
            (Ok(r), None) => {
                wrong.extend(progress_problem(w, &r).map(|p| format!("{w} on {a}: {p}")))
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Why a bounded run did not do what its workload is for, if it did not:
/// measured ops completed, TLB maintenance done, no invariant violated.
fn progress_problem(w: &str, r: &Report) -> Option<String> {
    let Some(op) = r.main_op() else {
        return Some("no measured op".into());
    };
    if !r.violations.is_empty() {
        return Some(format!("{} violations upstream", r.violations.len()));
    }
    if op.count == 0 {
        return Some(format!("no {} in {BOUND_MS} ms", op.name));
    }
    // usemem's first fork (and so its first flush) comes one period_us
    // (400 ms) in: its first passes only fault pages in. vmalloc_race's
    // vfree flushes only at the lazy purge (mm/vmalloc.c, past
    // lazy_max_pages(): the 96th 1 MiB vfree on 4 CPUs, ~18 ms in).
    let late = ["usemem_fork_exec", "vmalloc_race"];
    if r.cycles.tlb_maintenance_ns == 0 && !late.contains(&w) {
        return Some("no TLB maintenance at all".into());
    }
    None
}

/// The first failure a new user met: `--workload` started from generic
/// defaults, whose 4 KiB size cannot split into usemem's 2 MiB chunks.
#[test]
fn usemem_runs_on_a_small_arm64_machine_from_its_defaults() {
    let s = with(
        "usemem_fork_exec",
        &[
            "machine.arch=arm64",
            "machine.cpus=8",
            "machine.max_sim_time_ms=3",
        ],
    );
    let r = run(&s).expect("runs");
    assert!(r.main_op().unwrap().count > 0);
}

/// The same through the command line, which is where `--workload` picks
/// the defaults; `tlblab list` shows them.
#[test]
fn run_workload_on_the_command_line_starts_from_its_bundled_scenario() {
    let tlblab = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tlblab"))
            .args(args)
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = tlblab(&[
        "run",
        "--workload",
        "usemem_fork_exec",
        "--set",
        "machine.arch=arm64",
        "--set",
        "machine.cpus=8",
        "--set",
        "machine.max_sim_time_ms=3",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{out}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["scenario"]["workload"]["size"], "1GiB");
    assert_eq!(r["scenario"]["machine"]["cpus"], 8);
    let (code, out) = tlblab(&["list"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("defaults (scenarios/mmapstress01.toml): machine.arch=riscv"),
        "{out}"
    );
    assert!(out.contains("machine.timeslice_us=3000"), "{out}");
}

/// The second, placed by the fair class (no noise knob): each child is
/// forked while the parent runs on its hart, so `sched_balance_fork` puts
/// it on an idle hart elsewhere; no task is ever queued behind another, so
/// nothing is pulled or moved, no mm_cpumask holds a second hart, and no
/// flush IPIs anyone: the only IPIs are `wake_up_new_task`'s reschedules
/// of the idle harts the children start on (RES, one per remote fork).
#[test]
fn mmapstress01_places_children_on_idle_harts_on_a_16_hart_riscv_from_its_defaults() {
    let s = with(
        "mmapstress01",
        &[
            "machine.arch=riscv",
            "machine.cpus=16",
            "machine.max_sim_time_ms=20",
        ],
    );
    assert!(s.machine.timeslice_us > 0 && s.machine.migrate_pct == 0);
    let r = run(&s).expect("runs");
    let forks = r.ops.iter().find(|o| o.name == "fork").unwrap().count;
    let remote = r.arch["sched_fork_remote"];
    assert!(
        forks > 0 && (forks..=forks + 1).contains(&remote),
        "{forks} {remote}"
    );
    assert_eq!(r.arch["sched_migrations"], 0, "{:?}", r.arch);
    assert_eq!(r.arch["ipis_sent"], remote, "{:?}", r.arch);
    assert_eq!(r.interrupt_totals["RES"], remote);
    assert_eq!(r.interrupt_totals["CAL"], 0);
}
