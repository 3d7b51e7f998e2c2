//! Fingerprints with copy-on-write worlds: the checker clones a world per
//! transition, its CPUs, tasks and mms shared until a step takes them
//! `&mut`, their hashes cached in the shared slots. A cached hash must
//! never go stale and a step of a clone must never reach the original.
use check::configs::{build, CATALOGUE};
use check::fingerprint;
use kernel::{Effects, World};

/// Every state of a walk that clones and fingerprints at each step (as
/// the checker does, so elements are shared and their hashes cached) has
/// the fingerprint of the same path replayed on a world that was never
/// cloned or hashed before (every hash computed afresh), and stepping a
/// clone leaves the original's fingerprint and contents as they were.
/// Before the copy-on-write world there was no cache to go stale; a
/// `&mut` path that kept a cached hash would fail the first assertion.
#[test]
fn cached_hashes_match_fresh_ones_on_every_check() {
    let mut fx = Effects::default();
    let mut en = Vec::new();
    for c in CATALOGUE {
        let init = build(c, &[]).expect("the catalogue builds");
        let mut w = init.clone();
        let mut path = Vec::new();
        for n in 0..40usize {
            w.enabled(&mut en);
            if en.is_empty() || !w.violations.is_empty() {
                break;
            }
            let before = fingerprint(&w);
            let parent = w.clone();
            // Varied choices: the last enabled, then the first, ...
            let i = if n % 2 == 0 { en.len() - 1 } else { 0 };
            let (cpu, kind) = en[i];
            fx.clear();
            w.step(cpu, kind, &mut fx);
            path.push((cpu, kind));
            assert_eq!(
                fingerprint(&parent),
                before,
                "{}: a clone's step reached its parent",
                c.name
            );
            let fresh = replay(&init, &path);
            assert_eq!(
                fingerprint(&w),
                fingerprint(&fresh),
                "{}: stale cached hash after {path:?}",
                c.name
            );
            assert_eq!(w, fresh, "{}", c.name);
        }
    }
}

/// `path` from a deep copy of `init` never hashed: built again element by element.
fn replay(init: &World, path: &[(machine::CpuId, kernel::world::StepKind)]) -> World {
    let mut w = init.clone();
    w.cpus = init.cpus.iter().cloned().collect();
    w.tasks = init.tasks.iter().cloned().collect();
    w.mms = init.mms.iter().cloned().collect();
    w.membufs = init.membufs.iter().cloned().collect();
    w.cfg = kernel::cow::CowBox::new((*init.cfg).clone());
    w.mem = kernel::cow::CowBox::new((*init.mem).clone());
    let mut fx = Effects::default();
    for &(cpu, kind) in path {
        fx.clear();
        w.step(cpu, kind, &mut fx);
    }
    w
}
