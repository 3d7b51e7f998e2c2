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

/// `--max-states`, `--max-seconds` and `--max-depth` give `bounded` with
/// the bound named and states left to expand; a search that finishes
/// names none and leaves none.
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
    // Some of the 10 were reached and not expanded: the space goes on.
    assert!(o.frontier > 0 && o.frontier < 10, "{}", o.frontier);
    // A time bound of 0 stops before the first block: only the root.
    let by_time = Bounds {
        max_seconds: Some(0.0),
        ..Bounds::default()
    };
    let o = run_with(c, &[], by_time, true, None).unwrap();
    assert_eq!(
        (o.verdict, o.bound, o.states, o.frontier),
        ("bounded", Some("max_seconds"), 1, 1)
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
    assert!(o.frontier > 0);
    let o = run_with(c, &[], Bounds::default(), true, None).unwrap();
    assert_eq!((o.verdict, o.bound, o.frontier), ("safe", None, 0));
}
