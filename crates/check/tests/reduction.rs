//! The sleep-set reduction keeps every verdict: on the whole catalogue it
//! reaches exactly the states the full search reaches, at the same depth,
//! with the same verdict, by fewer transitions.
use check::configs::{run_with, CATALOGUE};
use check::Bounds;

#[test]
fn the_reduction_reaches_every_state_of_the_full_search() {
    let (mut full_total, mut reduced_total) = (0, 0);
    for c in CATALOGUE {
        let run = |reduction| {
            let b = Bounds {
                reduction,
                ..Bounds::default()
            };
            run_with(c, &[], b, true, None).expect("builds")
        };
        let (full, reduced) = (run(check::Reduction::Off), run(check::Reduction::Sleep));
        let key = |o: &check::Outcome| (o.verdict, o.states, o.depth);
        assert_eq!(key(&reduced), key(&full), "{}", c.name);
        assert!(reduced.transitions <= full.transitions, "{}", c.name);
        if reduced.verdict == "unsafe" {
            let last = reduced.counterexample.last().expect("a counterexample");
            assert!(last.starts_with("violation") || last.starts_with("deadlock"));
            assert_eq!(
                reduced.counterexample.len(),
                reduced.depth + 1,
                "{}",
                c.name
            );
        }
        full_total += full.transitions;
        reduced_total += reduced.transitions;
    }
    // Steps of different CPUs that commute exist in the catalogue (the
    // footprint audit finds them): sleep sets must skip some orders.
    assert!(
        reduced_total < full_total,
        "{reduced_total} vs {full_total}"
    );
}
