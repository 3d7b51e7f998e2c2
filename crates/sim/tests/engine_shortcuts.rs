//! The engine's shortcuts (wake-ups kept out of the heap while their CPU
//! has a step pending or is the one waking itself; plain charges summed by `Effects` as they come
//! instead of recorded and priced after the step) change nothing: every
//! workload, run from its bundled scenario made small, gives the same
//! report with and without them, event count included.

use machine::cost::CostProfile;
use sim::{Report, Sim, SimOptions};

fn report(s: &machine::Scenario, reference: bool) -> String {
    let world = workloads::build(s).unwrap();
    let opts = SimOptions {
        reference,
        ..SimOptions::for_scenario(s)
    };
    let mut sim = Sim::new(world, CostProfile::default_for(s.machine.arch), opts);
    let end = sim.run(|_| {});
    serde_json::to_string(&Report::build(&sim, s.to_json(), end)).unwrap()
}

#[test]
fn shortcuts_change_no_result() {
    for w in workloads::catalogue() {
        let mut s = workloads::defaults(w.name).unwrap();
        s.workload.iterations = s.workload.iterations.min(30);
        if s.workload.size.0 > 64 << 20 {
            s.set("workload.size=64MiB").unwrap();
        }
        let (fast, slow) = (report(&s, false), report(&s, true));
        assert_eq!(fast, slow, "{}", w.name);
    }
}

/// The shortcut is taken where wake-ups are many: the lock-release storm
/// of rt_latency (every VMA read unlock wakes the mm's 16 CPUs).
#[test]
fn rt_latency_wakes_are_mostly_lazy() {
    let mut s = workloads::defaults("rt_latency").unwrap();
    s.workload.iterations = 20;
    let world = workloads::build(&s).unwrap();
    let mut sim = Sim::new(
        world,
        CostProfile::default_for(s.machine.arch),
        SimOptions::for_scenario(&s),
    );
    sim.run(|_| {});
    assert!(
        sim.lazy_wakes_settled * 2 > sim.events,
        "{} of {} events settled outside the heap",
        sim.lazy_wakes_settled,
        sim.events
    );
}

/// A CPU's wake-ups of itself (a single-threaded process's unlocks wake
/// its own CPU, mid-step, before the step is rescheduled) stay out of the
/// heap too: a third of tlb_flush_processes' events.
#[test]
fn self_wakes_are_lazy() {
    let mut s = workloads::defaults("tlb_flush_processes").unwrap();
    s.workload.iterations = 20;
    let run = |reference: bool| {
        let world = workloads::build(&s).unwrap();
        let opts = SimOptions {
            reference,
            ..SimOptions::for_scenario(&s)
        };
        let mut sim = Sim::new(world, CostProfile::default_for(s.machine.arch), opts);
        sim.run(|_| {});
        (sim.lazy_wakes_settled, sim.events)
    };
    let (lazy, events) = run(false);
    assert!(
        lazy * 4 > events,
        "{lazy} of {events} events settled outside the heap"
    );
    assert_eq!(
        run(true),
        (0, events),
        "the reference engine takes no shortcut"
    );
}
