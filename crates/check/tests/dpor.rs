//! The dynamic partial-order reduction keeps every verdict and every end
//! state: on the whole catalogue it gives the full search's verdict (with
//! a counterexample as short), and on the small safe checks it reaches
//! every state where no step is enabled that an independent breadth-first
//! search (written here, sharing no code with either engine) reaches.
use check::configs::{build, run_with, CATALOGUE};
use check::{Bounds, Reduction};
use kernel::{Effects, World};
use rustc_hash::FxHashSet;

fn bounds(reduction: Reduction) -> Bounds {
    Bounds {
        reduction,
        ..Bounds::default()
    }
}

#[test]
fn dpor_gives_every_verdict_of_the_full_search() {
    for c in CATALOGUE {
        let full = run_with(c, &[], bounds(Reduction::Off), true, None).expect("builds");
        let dpor = run_with(c, &[], bounds(Reduction::Dpor), true, None).expect("builds");
        assert_eq!(dpor.verdict, full.verdict, "{}", c.name);
        if full.verdict == "unsafe" {
            // The printed counterexample is a shortest one.
            assert_eq!(dpor.depth, full.depth, "{}", c.name);
            assert_eq!(dpor.counterexample.len(), full.depth + 1, "{}", c.name);
        }
    }
}

/// Every state of `init`'s space, breadth-first, and those where no step
/// is enabled; `None` past `limit` states or at a violation.
fn ends_by_bfs(init: &World, limit: usize) -> Option<(usize, FxHashSet<u64>)> {
    let mut seen = FxHashSet::default();
    let mut ends = FxHashSet::default();
    let mut queue = std::collections::VecDeque::from([init.clone()]);
    seen.insert(check::fingerprint(init));
    let mut en = Vec::new();
    while let Some(w) = queue.pop_front() {
        w.enabled(&mut en);
        if en.is_empty() {
            ends.insert(check::fingerprint(&w));
        }
        for &(cpu, kind) in &en {
            let mut next = w.clone();
            next.step(cpu, kind, &mut Effects::default());
            if !next.violations.is_empty() || seen.len() > limit {
                return None;
            }
            if seen.insert(check::fingerprint(&next)) {
                queue.push_back(next);
            }
        }
    }
    Some((seen.len(), ends))
}

#[test]
fn dpor_reaches_every_end_state() {
    let mut compared = 0;
    for c in CATALOGUE {
        let w = build(c, &[]).expect("builds");
        let Some((states, want)) = ends_by_bfs(&w, 5_000) else {
            continue;
        };
        let (o, got) = check::explore_dpor_terminals(&w, bounds(Reduction::Dpor));
        assert_eq!(o.verdict, "safe", "{}", c.name);
        assert!(o.states <= states, "{}: {} > {states}", c.name, o.states);
        let got: FxHashSet<u64> = got.into_iter().collect();
        let missed = want.difference(&got).count();
        assert_eq!(missed, 0, "{}: {missed} end states never reached", c.name);
        compared += usize::from(!want.is_empty());
    }
    // (A check whose vCPUs the host may preempt forever has no end.)
    assert!(
        compared >= 43,
        "only {compared} checks with end states compared"
    );
}

/// Where steps of different CPUs commute the reduction explores fewer
/// states than the full search (the madvise race at 3 CPUs: the two
/// threads' accesses to different pages while CPU0 is elsewhere).
#[test]
fn dpor_explores_fewer_states_where_steps_commute() {
    let c = check::configs::find("x86_madvise_race_3cpu").expect("in the catalogue");
    // With and without the symmetry reduction (whose renamed copies the
    // reduction takes as unknown below).
    for symmetry in [false, true] {
        let full = run_with(c, &[], bounds(Reduction::Off), symmetry, None).expect("builds");
        let dpor = run_with(c, &[], bounds(Reduction::Dpor), symmetry, None).expect("builds");
        assert_eq!((full.verdict, dpor.verdict), ("safe", "safe"));
        assert!(
            dpor.states < full.states,
            "{} vs {}",
            dpor.states,
            full.states
        );
        assert!(dpor.transitions < full.transitions);
        assert_eq!(dpor.symmetry.is_empty(), !symmetry);
    }
}

/// A bounded search names its bound and keeps what it reached, as the
/// breadth-first search does: the state bound stops it at that many
/// states; the depth bound leaves states unexpanded at that depth (the
/// deepest state explored is one step above it).
#[test]
fn dpor_names_the_bound_that_stopped_it() {
    let c = check::configs::find("x86_madvise_race").expect("in the catalogue");
    let run = |max_states, max_depth| {
        let b = Bounds {
            max_states,
            max_depth,
            ..bounds(Reduction::Dpor)
        };
        run_with(c, &[], b, true, None).expect("builds")
    };
    let o = run(100, 400);
    assert_eq!(
        (o.verdict, o.bound, o.states),
        ("bounded", Some("max_states"), 100)
    );
    assert!(o.frontier > 0);
    let o = run(2_000_000, 10);
    assert_eq!((o.verdict, o.bound), ("bounded", Some("max_depth")));
    assert_eq!(o.depth, 9);
    let o = run(2_000_000, 400);
    assert_eq!((o.verdict, o.bound, o.frontier), ("safe", None, 0));
}
