//! `tlblab check`: explore every interleaving of a small configuration.
//!
//! The checker drives the same `World::step` as the simulator. Instead of
//! time, it chooses which enabled step runs next (which CPU advances, when a
//! pending IPI is taken) and explores every order breadth-first, so the first
//! violation found has a shortest path. States are deduplicated by a 64-bit
//! fingerprint of the whole world (`World: Hash`; observation counters hash to
//! nothing). A path is the list of choice indices into `World::enabled`,
//! which replays exactly; the counterexample printer replays it with tracing
//! on and prints one line per step in kernel terms.
//!
//! Symmetry reduction: a configuration may declare groups of
//! interchangeable CPUs ([`configs::Config::sym`]). The seen-set then holds
//! the canonical fingerprint ([`kernel::symmetry::canonical_fingerprint`]):
//! the least fingerprint over every permutation of each group, with the
//! tasks following their CPUs. Two states that differ only by such a
//! renaming are explored once. This is sound for safety and deadlock
//! because renaming commutes with `step` (tested: stepping CPU `c` then
//! renaming equals renaming then stepping `perm[c]`) and the monitor's
//! verdict does not depend on ids: every reachable state has a renamed
//! copy among the explored ones, bad exactly when it is. The queue keeps
//! the real successor states, not canonical ones, so paths of choice
//! indices still replay from the initial world. `--symmetry off` turns it
//! off. No partial-order reduction is done.
//!
//! Exploration: level-synchronous breadth-first search. Each level's
//! states are expanded in chunks of 2048 parents by a rayon pool (one
//! thread per core; `tlblab check --threads 1` or [`set_threads`] for one),
//! each worker cloning and stepping a parent per enabled choice and
//! fingerprinting the successor once; the results are then merged into the
//! seen-set on one thread in frontier order (parent, then choice), which
//! is the order of the sequential FIFO search. So verdicts, state and
//! transition counts and the (shortest) counterexample are the same for
//! any number of threads: the first violation in that order wins. The
//! seen-set holds 64-bit fingerprints only; node `i` of the search tree
//! keeps its parent and choice (8 bytes) for the counterexample path.
//! Worlds are kept for the frontier only; successors already seen are
//! dropped by the worker that made them, and a parent's last successor
//! reuses the parent instead of a clone. Page-table pages and TLBs are
//! shared copy-on-write between a world and its clones, with their hashes
//! kept (tables) or cached (TLBs), so a step pays for what it changed.
//!
//! Why not stateright: its `Model` owns states and clones one per action,
//! which we also do, but its checkers want `actions`/`next_state` on a model
//! type separate from the state, and its fingerprinting and path storage
//! duplicate what is below in a few dozen lines. A thin adapter can come
//! later for its explorer UI; the core interface stays `enabled` + `step`.

pub mod configs;

use kernel::world::StepKind;
use kernel::{Effects, World};
use machine::CpuId;
use rayon::prelude::*;
use rustc_hash::{FxHashSet, FxHasher};
use serde::Serialize;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Exploration bounds.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub max_depth: usize,
    pub max_states: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_depth: 400,
            max_states: 2_000_000,
        }
    }
}

/// The result of one check.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// `safe`, `unsafe` or `bounded` (a bound was hit before the space was exhausted).
    pub verdict: &'static str,
    pub states: usize,
    pub transitions: usize,
    pub depth: usize,
    pub seconds: f64,
    /// Numbered steps of the counterexample, the violation last.
    pub counterexample: Vec<String>,
    /// The CPU groups the symmetry reduction used (empty: none).
    pub symmetry: Vec<Vec<CpuId>>,
}

/// The 64-bit fingerprint of a whole world.
pub fn fingerprint(w: &World) -> u64 {
    let mut h = FxHasher::default();
    w.hash(&mut h);
    h.finish()
}

/// Symmetry groups as text: `1,2,3` (groups separated by ` + `).
pub fn groups_text(groups: &[Vec<CpuId>]) -> String {
    groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Every permutation of `n` CPUs that permutes each group within itself
/// and fixes the other CPUs, the identity left out. `perm[c]` is the new
/// id of CPU `c`. Panics unless the groups are disjoint and below `n`.
pub fn group_perms(n: usize, groups: &[Vec<CpuId>]) -> Vec<Vec<CpuId>> {
    let mut used = vec![false; n];
    for &c in groups.iter().flatten() {
        assert!(
            (c as usize) < n && !std::mem::replace(&mut used[c as usize], true),
            "symmetry groups must be disjoint CPUs of the machine: {groups:?}"
        );
    }
    let mut all: Vec<Vec<CpuId>> = vec![(0..n as CpuId).collect()];
    for g in groups {
        let mut next = Vec::new();
        for order in permutations(g) {
            for p in &all {
                let mut q = p.clone();
                for (&from, &to) in g.iter().zip(&order) {
                    q[from as usize] = to;
                }
                next.push(q);
            }
        }
        all = next;
    }
    all.retain(|p| p.iter().enumerate().any(|(c, &to)| c as CpuId != to));
    all
}

/// Every ordering of `xs` (Heap's algorithm would do; groups are tiny).
fn permutations(xs: &[CpuId]) -> Vec<Vec<CpuId>> {
    if xs.len() <= 1 {
        return vec![xs.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..xs.len() {
        let mut rest = xs.to_vec();
        let x = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, x);
            out.push(p);
        }
    }
    out
}

/// A state is bad when the monitor recorded a violation, or when nothing can
/// run while a measured task has not finished (deadlock).
fn bad(w: &World, enabled: &[(CpuId, StepKind)]) -> bool {
    !w.violations.is_empty() || (enabled.is_empty() && w.measuring > 0)
}

/// Breadth-first exploration of every interleaving from `init`, without
/// symmetry reduction.
pub fn explore(init: &World, bounds: Bounds) -> Outcome {
    explore_with(init, bounds, &[])
}

/// Worker threads of the exploration (0: one per core).
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Explore with `n` worker threads (0: one per core; 1: no parallelism).
/// Results do not depend on it.
pub fn set_threads(n: usize) {
    THREADS.store(n, Ordering::Relaxed);
}

/// The worker threads an exploration uses now.
pub fn threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => rayon::current_num_threads(),
        n => n,
    }
}

/// Parent states expanded in parallel between two merges into the seen-set.
const CHUNK: usize = 2048;

/// One transition out of a frontier state, computed in parallel.
struct Succ {
    choice: u16,
    key: u64,
    bad: bool,
    /// `None` when the state was already seen before its chunk started.
    world: Option<World>,
}

/// Breadth-first exploration of every interleaving from `init`, storing
/// one state per renaming of the CPUs within each of `groups` (disjoint
/// sets of CPU ids; empty: no reduction).
pub fn explore_with(init: &World, bounds: Bounds, groups: &[Vec<CpuId>]) -> Outcome {
    let threads = THREADS.load(Ordering::Relaxed);
    if threads == 0 {
        return explore_levels(init, bounds, groups);
    }
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| explore_levels(init, bounds, groups)),
        Err(_) => explore_levels(init, bounds, groups),
    }
}

/// The level-synchronous search behind [`explore_with`]: each level's
/// states are expanded in chunks, in parallel, then merged in frontier
/// order (parent, then choice), which is the order of a sequential FIFO
/// search, so counts, verdicts and counterexamples do not depend on the
/// threads.
fn explore_levels(init: &World, bounds: Bounds, groups: &[Vec<CpuId>]) -> Outcome {
    let t0 = Instant::now();
    let perms = group_perms(init.cpus.len(), groups);
    let key = |w: &World| {
        if perms.is_empty() {
            fingerprint(w)
        } else {
            kernel::symmetry::canonical_fingerprint::<FxHasher>(w, &perms)
        }
    };
    // Node i: (parent, choice index); the root is its own parent.
    let mut nodes: Vec<(u32, u16)> = vec![(0, 0)];
    let mut seen = FxHashSet::default();
    seen.insert(key(init));
    let mut level: Vec<(World, u32)> = vec![(init.clone(), 0)];
    let (mut transitions, mut depth, mut bounded) = (0usize, 0usize, false);
    let done = |verdict, transitions, depth, seen: &FxHashSet<u64>, cx| Outcome {
        verdict,
        states: seen.len(),
        transitions,
        depth,
        seconds: t0.elapsed().as_secs_f64(),
        counterexample: cx,
        symmetry: groups.to_vec(),
    };
    let mut d = 0;
    while !level.is_empty() {
        depth = d;
        if d >= bounds.max_depth {
            bounded |= level.par_iter().any(|(w, _)| {
                let mut en = Vec::new();
                w.enabled(&mut en);
                !en.is_empty()
            });
            break;
        }
        let mut next = Vec::new();
        while !level.is_empty() {
            let chunk: Vec<(World, u32)> = level.drain(..CHUNK.min(level.len())).collect();
            let succs: Vec<(u32, Vec<Succ>)> = chunk
                .into_par_iter()
                .map(|(w, node)| (node, successors(w, &key, &seen)))
                .collect();
            for (node, list) in succs {
                for s in list {
                    transitions += 1;
                    nodes.push((node, s.choice));
                    let id = (nodes.len() - 1) as u32;
                    if s.bad {
                        let path = path_to(&nodes, id);
                        let cx = replay(init, &path);
                        return done("unsafe", transitions, path.len(), &seen, cx);
                    }
                    if !seen.insert(s.key) {
                        nodes.pop();
                        continue;
                    }
                    let w = s
                        .world
                        .expect("a state unseen at its chunk's start was kept");
                    next.push((w, id));
                    if seen.len() >= bounds.max_states {
                        return done("bounded", transitions, depth, &seen, Vec::new());
                    }
                }
            }
        }
        level = next;
        d += 1;
    }
    let verdict = if bounded { "bounded" } else { "safe" };
    done(verdict, transitions, depth, &seen, Vec::new())
}

/// Every successor of `w` in choice order, stepping `w` itself for the
/// last one. A successor already in `seen` keeps only its key.
fn successors(w: World, key: &(impl Fn(&World) -> u64 + Sync), seen: &FxHashSet<u64>) -> Vec<Succ> {
    let mut en = Vec::new();
    w.enabled(&mut en);
    let choices = en.clone();
    let mut fx = Effects::default();
    let mut out = Vec::with_capacity(choices.len());
    let mut one = |i: usize, mut next: World| {
        let (cpu, kind) = choices[i];
        fx.clear();
        next.step(cpu, kind, &mut fx);
        next.enabled(&mut en);
        let k = key(&next);
        out.push(Succ {
            choice: i as u16,
            key: k,
            bad: bad(&next, &en),
            world: (!seen.contains(&k)).then_some(next),
        });
    };
    if let Some(last) = choices.len().checked_sub(1) {
        for i in 0..last {
            one(i, w.clone());
        }
        one(last, w);
    }
    out
}

fn path_to(nodes: &[(u32, u16)], mut id: u32) -> Vec<u16> {
    let mut path = Vec::new();
    while id != 0 {
        let (parent, choice) = nodes[id as usize];
        path.push(choice);
        id = parent;
    }
    path.reverse();
    path
}

/// Replay a path of choice indices, describing each step.
pub fn replay(init: &World, path: &[u16]) -> Vec<String> {
    let mut w = init.clone();
    let mut fx = Effects {
        tracing: true,
        ..Effects::default()
    };
    let mut en = Vec::new();
    let mut lines = Vec::new();
    for (n, &c) in path.iter().enumerate() {
        w.enabled(&mut en);
        let (cpu, kind) = en[c as usize];
        fx.clear();
        fx.tracing = true;
        w.step(cpu, kind, &mut fx);
        let what: Vec<String> = fx.labels.iter().map(|l| l.to_string()).collect();
        let what = if what.is_empty() {
            format!("{kind:?}")
        } else {
            what.join("; ")
        };
        lines.push(format!("{}. CPU{cpu}: {what}", n + 1));
    }
    w.enabled(&mut en);
    match w.violations.first() {
        Some(v) => lines.push(format!("violation I{}: {}", v.invariant, v.what)),
        None if en.is_empty() && w.measuring > 0 => lines.push("deadlock: no step enabled".into()),
        None => {}
    }
    lines
}
