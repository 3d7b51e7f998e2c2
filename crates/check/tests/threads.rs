//! The exploration's results do not depend on its worker threads, and a
//! bounded search says which bound stopped it. One test per binary: the
//! thread count is process-wide (`check::set_threads`).
use check::configs::{run_with, CATALOGUE};
use check::Bounds;

/// Every catalogue check at 1, 2 and 3 threads: the same verdict, states,
/// transitions, depth and counterexample, step for step.
#[test]
fn results_do_not_depend_on_the_thread_count() {
    let run = |c, threads| {
        check::set_threads(threads);
        run_with(c, &[], Bounds::default(), true, None).expect("builds")
    };
    for c in CATALOGUE {
        let one = run(c, 1);
        for threads in [2, 3] {
            let o = run(c, threads);
            let key = |o: &check::Outcome| {
                (
                    o.verdict,
                    o.states,
                    o.transitions,
                    o.depth,
                    o.counterexample.clone(),
                )
            };
            assert_eq!(key(&o), key(&one), "{} at {threads} threads", c.name);
        }
    }
    check::set_threads(0);
}

/// `--max-states` and `--max-depth` give `bounded` with the bound named;
/// a search that finishes names none.
#[test]
fn a_bounded_verdict_names_its_bound() {
    let c = CATALOGUE
        .iter()
        .find(|c| c.name == "x86_madvise_race")
        .expect("in the catalogue");
    let by_states = Bounds {
        max_states: 10,
        ..Bounds::default()
    };
    let o = run_with(c, &[], by_states, true, None).unwrap();
    assert_eq!(
        (o.verdict, o.bound, o.states),
        ("bounded", Some("max_states"), 10)
    );
    let by_depth = Bounds {
        max_depth: 3,
        ..Bounds::default()
    };
    let o = run_with(c, &[], by_depth, true, None).unwrap();
    assert_eq!(
        (o.verdict, o.bound, o.depth),
        ("bounded", Some("max_depth"), 3)
    );
    let o = run_with(c, &[], Bounds::default(), true, None).unwrap();
    assert_eq!((o.verdict, o.bound), ("safe", None));
}
