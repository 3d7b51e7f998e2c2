//! mmapstress01 under the fair class's placement (no noise knob): where
//! tasks move, why, and what that does to the RISC-V flush paths.
//!
//! ```text
//!   64 harts, 20 children: every child forked onto an idle hart, nothing
//!                          queued, nothing moved, no remote flush
//!   4 harts, 6 children:   more tasks than harts, so forks land on busy
//!                          harts (the parent's among them) and idle harts
//!                          pull queued tasks (new-idle), the parent too;
//!                          every later flush of its mm (flush_tlb_mm at
//!                          fork, its copy-on-write faults) reaches the
//!                          harts it left
//! ```

use machine::cost::CostProfile;
use machine::Scenario;
use sim::{Report, Sim, SimOptions};

fn scen(sets: &[&str]) -> Scenario {
    let mut s = workloads::defaults("mmapstress01").unwrap();
    s.machine.jitter_pct = 0;
    for kv in sets {
        s.set(kv).unwrap_or_else(|e| panic!("{kv}: {e}"));
    }
    s.validate().unwrap();
    assert_eq!(s.machine.migrate_pct, 0, "no noise knob");
    s
}

/// The run's report and the parent's `mm_cpumask` weight (the parent is
/// task 0).
fn run(s: &Scenario) -> (Report, u32) {
    let world = workloads::build(s).unwrap();
    let mut sim = Sim::new(
        world,
        CostProfile::default_for(s.machine.arch),
        SimOptions::for_scenario(s),
    );
    let end = sim.run(|_| {});
    let parent_mm = sim.world.tasks[0].mm;
    let weight = sim.world.mms[parent_mm as usize].cpumask.weight();
    (Report::build(&sim, s.to_json(), end), weight)
}

const CROWDED: [&str; 3] = [
    "machine.cpus=4",
    "workload.threads=6",
    "workload.iterations=500",
];

/// Every move is one the fair class made: a new-idle pull, a tick's
/// balance pull or a wake-up placement.
fn moves_are_placement(r: &Report) {
    let a = &r.arch;
    assert_eq!(
        a["sched_migrations"],
        a["sched_newidle_pulls"] + a["sched_balance_pulls"] + a["sched_wake_migrations"],
        "{a:?}"
    );
}

/// 64 harts: the parent's hart is busy at each fork and the others mostly
/// idle, so `sched_balance_fork` sends every child elsewhere; no runqueue
/// ever holds two tasks, so nothing is pulled; the parent's mask stays its
/// one hart and no flush is remote.
#[test]
fn uncrowded_nothing_moves_and_nothing_is_remote() {
    let s = scen(&["workload.iterations=300"]);
    let (r, parent_mask) = run(&s);
    assert_eq!(r.arch["sched_fork_remote"], 300);
    assert_eq!(r.arch["sched_migrations"], 0);
    assert_eq!(parent_mask, 1);
    assert_eq!(r.interrupt_totals["CAL"], 0);
}

/// 4 harts, 6 children (LTP's `-p 6`): placement moves tasks
/// (all by its own rules), the parent among them, so its mask spans
/// several harts and forks IPI them. Deferral queues for every target not
/// running the parent's ASID and IPIs only loaded targets and full queues;
/// the mask-clearing patch drops each left hart at the first whole-ASID
/// flush (`flush_tlb_mm` at fork) after it moved on.
#[test]
fn crowded_placement_moves_the_parent_and_the_patches_cut_its_ipis() {
    let (base, parent_mask) = run(&scen(&CROWDED));
    moves_are_placement(&base);
    assert!(base.arch["sched_migrations"] > 0, "{:?}", base.arch);
    assert!(parent_mask > 1, "the parent moved: {parent_mask}");
    assert!(base.interrupt_totals["CAL"] > 0);

    let mut d = CROWDED.to_vec();
    d.push("riscv.defer_flush_to_context_switch=true");
    let (d, _) = run(&scen(&d));
    moves_are_placement(&d);
    let a = &d.arch;
    let kept = a["defer_ipi_running"] + a["defer_ipi_loaded"] + a["deferred_overflows"];
    assert_eq!(a["csd_queued"], kept, "{a:?}");
    assert!(a["deferred_flushes"] > 0);
    assert!(d.interrupt_totals["CAL"] < base.interrupt_totals["CAL"]);

    let mut c = CROWDED.to_vec();
    c.push("riscv.cpumask_clear_on_flush_all=true");
    let (c, _) = run(&scen(&c));
    moves_are_placement(&c);
    assert!(c.arch["cpumask_cleared"] > 0);
    assert!(c.interrupt_totals["CAL"] < base.interrupt_totals["CAL"]);
    for r in [&base, &d, &c] {
        assert!(r.violations.is_empty(), "{:?}", r.violations);
    }
}

/// Placement draws nothing: the crowded run twice gives the same report.
#[test]
fn placement_is_deterministic() {
    let s = scen(&CROWDED);
    let (a, _) = run(&s);
    let (b, _) = run(&s);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}
