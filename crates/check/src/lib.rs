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
//! off.
//!
//! Partial-order reduction (`--reduction`, off by default): sleep sets
//! ([`por`], `sleep`) over the footprints each step records as it runs,
//! every state still reached by fewer transitions; or a stateful dynamic
//! partial-order reduction (`dpor`, depth-first, see its module), which
//! explores fewer states where steps of different CPUs commute
//! (docs/checker.md).
//!
//! Exploration: level-synchronous breadth-first search. The seen-set
//! holds 64-bit fingerprints only, and node `i` of the search tree keeps
//! only its parent and step (8 bytes: a base step's index, or a picked
//! variant's index in a table of the variants met, `Steps`); the
//! frontier is a list of node ids. A level's worlds are rebuilt on demand
//! by re-executing the steps from the initial world: its nodes are in
//! tree order (parent, then
//! choice), so a worker rebuilding a run of consecutive nodes keeps the
//! worlds along the last path on a stack and re-executes only the steps
//! below the common ancestor, mostly one step from the parent. Memory is
//! then a few dozen bytes per state and one path of worlds per worker,
//! not a level of whole worlds. Each level is expanded in chunks of 8192
//! nodes by a rayon pool (one thread per core; `tlblab check --threads 1`
//! or [`set_threads`] for one), each worker cloning and stepping a world
//! per enabled choice and fingerprinting the successor once (a world's
//! last successor reuses it instead of a clone); the results are then
//! merged into the seen-set on one thread in frontier order, which is the
//! order of the sequential FIFO search. So verdicts, state and transition
//! counts and the (shortest) counterexample are the same for any number of
//! threads: the first violation in that order wins. A world's CPUs, tasks,
//! mms, store buffers, configuration and memory ([`kernel::cow`]), and its
//! page-table pages and TLBs, are shared copy-on-write between a world and
//! its clones, each with its hash kept (tables) or cached until it is next
//! taken `&mut` (the others), so a clone copies pointers and a step pays,
//! in copying and rehashing, for what it changed.
//!
//! Why not stateright: its `Model` owns states and clones one per action,
//! which we also do, but its checkers want `actions`/`next_state` on a model
//! type separate from the state, and its fingerprinting and path storage
//! duplicate what is below in a few dozen lines. A thin adapter can come
//! later for its explorer UI; the core interface stays `enabled` + `step`.

pub mod configs;
pub mod dpor;
pub mod por;

use kernel::world::StepKind;
use kernel::{Effects, World};
use machine::footprint::Footprint;
use machine::CpuId;
use por::Sleeper;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use serde::Serialize;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Which partial-order reduction a search uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reduction {
    /// Every interleaving, breadth-first.
    Off,
    /// Sleep sets ([`por`]): the same states by fewer
    /// transitions, breadth-first.
    Sleep,
    /// Stateful dynamic partial-order reduction (docs/checker.md): fewer
    /// states, depth-first, every deadlock and every violation kept.
    Dpor,
}

impl Reduction {
    /// `off`, `sleep`, `dpor`, or `on` (the default: `dpor`).
    pub fn parse(s: &str) -> Result<Reduction, String> {
        match s {
            "off" => Ok(Reduction::Off),
            "sleep" => Ok(Reduction::Sleep),
            "dpor" | "on" => Ok(Reduction::Dpor),
            _ => Err(format!("--reduction {s:?} (off, sleep, dpor or on)")),
        }
    }
}

/// Exploration bounds, and whether the search is reduced.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub max_depth: usize,
    pub max_states: usize,
    /// The partial-order reduction ([`Reduction`]).
    pub reduction: Reduction,
    /// Stop once the search has run this long (checked after each block
    /// of states expanded): a check too large for the time it was given
    /// ends `bounded` with what it reached ([`Outcome::frontier`]) instead
    /// of running on blindly. The only bound whose verdict depends on the
    /// machine's speed; `None`: no limit.
    pub max_seconds: Option<f64>,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_depth: 400,
            max_states: 2_000_000,
            reduction: Reduction::Off,
            max_seconds: None,
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
    /// For a `bounded` verdict, the bound that stopped the search:
    /// `max_depth`, `max_states` or `max_seconds` (`None` otherwise).
    pub bound: Option<&'static str>,
    /// For a `bounded` verdict, the states reached but not all expanded:
    /// the next level found so far and the current one from the block
    /// under way (whose successors are partly recorded). The space holds
    /// at least `states`, and this many were still to be expanded.
    pub frontier: usize,
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
fn bad(w: &World) -> bool {
    !w.violations.is_empty() || (*w.measuring > 0 && !w.any_enabled())
}

/// Breadth-first exploration of every interleaving from `init`, without
/// symmetry reduction.
pub fn explore(init: &World, bounds: Bounds) -> Outcome {
    explore_with(init, bounds, &[])
}

/// The dynamic partial-order reduction's search from `init` ([`dpor`];
/// no symmetry reduction), and the fingerprint of every state it reached
/// where no step is enabled: the soundness tests compare those with the
/// full search's.
pub fn explore_dpor_terminals(init: &World, bounds: Bounds) -> (Outcome, Vec<u64>) {
    let mut ends = Vec::new();
    let o = dpor::explore_dpor(init, bounds, &[], Some(&mut ends));
    (o, ends)
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

/// Frontier nodes expanded in parallel between two merges into the seen-set.
const CHUNK: usize = 8192;

/// A node's step code at or above this is a [`StepKind::Picked`] variant
/// (the code less this: its index in [`Steps`]); below it, the step's
/// index among the base steps ([`World::enabled_base`]).
const PICKED: u32 = 1 << 31;

/// The picked variants ([`StepKind::Picked`]: a step with its loads'
/// older messages chosen) the search's nodes took, each stored once. A
/// picked variant's index among the enabled steps is known only by
/// running every pickable step for its variants; its code here lets a
/// rebuild run it directly, and the base steps need no table.
#[derive(Default)]
struct Steps {
    picked: Vec<(CpuId, StepKind)>,
    ids: FxHashMap<(CpuId, StepKind), u32>,
}

impl Steps {
    /// The code of `step`, at index `choice` among the enabled steps.
    fn code(&mut self, choice: u16, step: (CpuId, StepKind)) -> u32 {
        if !matches!(step.1, StepKind::Picked { .. }) {
            return u32::from(choice);
        }
        let next = PICKED + self.picked.len() as u32;
        *self.ids.entry(step).or_insert_with(|| {
            self.picked.push(step);
            next
        })
    }

    /// The step of code `code` from `w` (listing `w`'s base steps in `en`).
    fn step(&self, w: &World, code: u32, en: &mut Vec<(CpuId, StepKind)>) -> (CpuId, StepKind) {
        if code >= PICKED {
            return self.picked[(code - PICKED) as usize];
        }
        w.enabled_base(en);
        en[code as usize]
    }
}

/// One transition out of a frontier state, computed in parallel.
struct Succ {
    choice: u16,
    step: (CpuId, StepKind),
    key: u64,
    bad: bool,
    /// The steps its successor need not take ([`por::SleepSets`]).
    sleep: Vec<Sleeper>,
    /// The successor's own fingerprint (`key` is its canonical one under
    /// the symmetry reduction).
    concrete: u64,
}

/// Breadth-first exploration of every interleaving from `init`, storing
/// one state per renaming of the CPUs within each of `groups` (disjoint
/// sets of CPU ids; empty: no reduction).
pub fn explore_with(init: &World, bounds: Bounds, groups: &[Vec<CpuId>]) -> Outcome {
    if bounds.reduction == Reduction::Dpor {
        return dpor::explore_dpor(init, bounds, groups, None);
    }
    let threads = THREADS.load(Ordering::Relaxed);
    if threads == 0 {
        return explore_levels(init, bounds, groups);
    }
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| explore_levels(init, bounds, groups)),
        Err(_) => explore_levels(init, bounds, groups),
    }
}

/// The fingerprints a search stores: canonical under the symmetry
/// reduction (`perms` not empty), and the world's own.
struct Keys {
    perms: Vec<Vec<CpuId>>,
}

impl Keys {
    fn key(&self, w: &World) -> u64 {
        if self.perms.is_empty() {
            fingerprint(w)
        } else {
            kernel::symmetry::canonical_fingerprint::<FxHasher>(w, &self.perms)
        }
    }

    /// (key, own fingerprint; the key again unless `own` is wanted).
    fn both(&self, w: &World, own: bool) -> (u64, u64) {
        let key = self.key(w);
        match self.perms.is_empty() || !own {
            true => (key, key),
            false => (key, fingerprint(w)),
        }
    }
}

/// The breadth-first search's seen-set. Only the sleep sets need the
/// node a state was first reached as (to wake what it skipped); without
/// them the set holds fingerprints alone: 8 bytes and a control byte a
/// bucket instead of 16 and one, as in [`bare_search`].
enum Seen {
    Keys(FxHashSet<u64>),
    Nodes(FxHashMap<u64, u32>),
}

impl Seen {
    fn new(nodes: bool) -> Seen {
        match nodes {
            true => Seen::Nodes(FxHashMap::default()),
            false => Seen::Keys(FxHashSet::default()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Seen::Keys(s) => s.len(),
            Seen::Nodes(m) => m.len(),
        }
    }

    /// Add `key`, first reached as node `id`; if it was there already,
    /// `Err` with the node it was first reached as (`None` when not kept).
    fn insert(&mut self, key: u64, id: u32) -> Result<(), Option<u32>> {
        match self {
            Seen::Keys(s) => s.insert(key).then_some(()).ok_or(None),
            Seen::Nodes(m) => match m.entry(key) {
                std::collections::hash_map::Entry::Occupied(o) => Err(Some(*o.get())),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(id);
                    Ok(())
                }
            },
        }
    }
}

/// The level-synchronous search behind [`explore_with`]: each level's
/// nodes are rebuilt and expanded in chunks, in parallel, then merged in
/// frontier order (parent, then choice), which is the order of a
/// sequential FIFO search, so counts, verdicts and counterexamples do not
/// depend on the threads. The frontier is node ids only (4 bytes each).
fn explore_levels(init: &World, bounds: Bounds, groups: &[Vec<CpuId>]) -> Outcome {
    let sleep_sets = bounds.reduction == Reduction::Sleep;
    let t0 = Instant::now();
    let mut tracked = init.clone();
    tracked.track_footprints(sleep_sets);
    let init = &tracked;
    let keys = Keys {
        perms: group_perms(init.cpus.len(), groups),
    };
    // Node i: (parent, step code); the root is its own parent.
    let mut nodes: Vec<(u32, u32)> = vec![(0, 0)];
    let mut steps = Steps::default();
    let mut seen = Seen::new(sleep_sets);
    let _ = seen.insert(keys.key(init), 0);
    let mut sleep = por::SleepSets::default();
    let mut level: Vec<u32> = vec![0];
    let (mut transitions, mut depth, mut bounded) = (0usize, 0usize, false);
    let done = |verdict, transitions, depth, states: usize, cx| Outcome {
        verdict,
        states,
        transitions,
        depth,
        seconds: t0.elapsed().as_secs_f64(),
        counterexample: cx,
        symmetry: groups.to_vec(),
        bound: None,
        frontier: 0,
    };
    let mut d = 0;
    while !level.is_empty() {
        depth = d;
        if d >= bounds.max_depth {
            bounded |= par_rebuild(init, &nodes, &steps, &level, |_, w, _| w.any_enabled())
                .into_iter()
                .any(|more| more);
            break;
        }
        let mut next = Vec::new();
        for (b, block) in level.chunks(CHUNK).enumerate() {
            if bounds
                .max_seconds
                .is_some_and(|s| t0.elapsed().as_secs_f64() >= s)
            {
                return Outcome {
                    bound: Some("max_seconds"),
                    frontier: level.len() - b * CHUNK + next.len(),
                    ..done("bounded", transitions, depth, seen.len(), Vec::new())
                };
            }
            let succs = par_rebuild(init, &nodes, &steps, block, |node, w, sc| {
                let how = sleep.how(node);
                (node, successors(w, &keys, sc, how, sleep_sets))
            });
            for (node, (_, skipped)) in &succs {
                sleep.expanded(*node, skipped.clone());
            }
            for (node, (list, _)) in succs {
                for s in list {
                    transitions += 1;
                    nodes.push((node, steps.code(s.choice, s.step)));
                    let id = (nodes.len() - 1) as u32;
                    if s.bad {
                        let path = path_to(&nodes, id);
                        let cx = replay_codes(init, &steps, &path);
                        return done("unsafe", transitions, path.len(), seen.len(), cx);
                    }
                    if let Err(old) = seen.insert(s.key, id) {
                        nodes.pop();
                        if old.is_some_and(|o| sleep.reached_again(o, &s.sleep, s.concrete)) {
                            next.extend(old);
                        }
                        continue;
                    }
                    sleep.reached(id, s.sleep, s.concrete);
                    next.push(id);
                    if seen.len() >= bounds.max_states {
                        let o = done("bounded", transitions, depth, seen.len(), Vec::new());
                        return Outcome {
                            bound: Some("max_states"),
                            frontier: next.len() + level.len() - b * CHUNK,
                            ..o
                        };
                    }
                }
            }
        }
        level = next;
        sleep.next_level();
        d += 1;
    }
    let verdict = if bounded { "bounded" } else { "safe" };
    Outcome {
        bound: bounded.then_some("max_depth"),
        frontier: if bounded { level.len() } else { 0 },
        ..done(verdict, transitions, depth, seen.len(), Vec::new())
    }
}

/// `f` of every node of `ids` (one level, in frontier order) and its
/// world, in that order, rebuilt by [`rebuild`] on every thread, each
/// taking a run of consecutive nodes.
fn par_rebuild<T: Send>(
    init: &World,
    nodes: &[(u32, u32)],
    steps: &Steps,
    ids: &[u32],
    f: impl Fn(u32, World, &mut Scratch) -> T + Sync,
) -> Vec<T> {
    // Four runs per thread balance the load; a run re-executes at most
    // its first node's path from the root that its neighbours share.
    let run = (ids.len() / (4 * rayon::current_num_threads())).clamp(32, 1024);
    ids.par_chunks(run)
        .flat_map_iter(|run| rebuild(init, nodes, steps, run, &f))
        .collect()
}

/// `f` of every node of `ids` and its world, re-executed from `init`
/// along the choices from the root to it. Consecutive nodes of a level
/// share most of their path (the frontier is in tree order: parent, then
/// choice), so the worlds along the last path are kept on a stack and only
/// the steps below the common ancestor are re-executed; a parent's last
/// child here takes the parent's world instead of a clone. `step` is
/// deterministic, so each rebuilt world is the one first reached.
fn rebuild<T>(
    init: &World,
    nodes: &[(u32, u32)],
    steps: &Steps,
    ids: &[u32],
    f: impl Fn(u32, World, &mut Scratch) -> T,
) -> Vec<T> {
    let sc = &mut Scratch::default();
    // stack[i]: the node at depth i on the last path and its world.
    let mut stack: Vec<(u32, World)> = vec![(0, init.clone())];
    let mut chain = Vec::new();
    let mut out = Vec::with_capacity(ids.len());
    for (k, &id) in ids.iter().enumerate() {
        chain.clear();
        let mut n = id;
        while n != 0 {
            chain.push(n);
            n = nodes[n as usize].0;
        }
        chain.reverse();
        // chain[i] is the node at depth i + 1; keep the shared prefix.
        let keep = 1 + stack[1..]
            .iter()
            .zip(&chain)
            .take_while(|((a, _), b)| a == *b)
            .count();
        stack.truncate(keep);
        let Some((_, above)) = chain[keep - 1..].split_last() else {
            out.push(f(id, init.clone(), sc));
            continue;
        };
        for &n in above {
            let w = replay_one(
                stack[stack.len() - 1].1.clone(),
                steps,
                nodes[n as usize].1,
                sc,
            );
            stack.push((n, w));
        }
        let parent = nodes[id as usize].0;
        let last_child = ids
            .get(k + 1)
            .is_none_or(|&nx| nodes[nx as usize].0 != parent);
        let from = match stack.len() {
            2.. if last_child => stack.pop().expect("the parent is on the stack").1,
            _ => stack[stack.len() - 1].1.clone(),
        };
        let w = replay_one(from, steps, nodes[id as usize].1, sc);
        out.push(f(id, w, sc));
    }
    out
}

/// Buffers a worker reuses from one step to the next (a fresh `Effects`
/// and list of enabled steps per step were two allocations or more each).
#[derive(Default)]
struct Scratch {
    en: Vec<(CpuId, StepKind)>,
    choices: Vec<(CpuId, StepKind)>,
    /// The worlds `World::enabled_with_trials` ran to find the picks.
    trials: Vec<Option<World>>,
    fx: Effects,
}

/// `w` after the step of code `code` ([`Steps`]).
fn replay_one(mut w: World, steps: &Steps, code: u32, sc: &mut Scratch) -> World {
    // The base steps cost no step to list, and a picked variant is run
    // as it is: no pickable step is run to find the variants.
    let (cpu, kind) = steps.step(&w, code, &mut sc.en);
    sc.fx.clear();
    w.step(cpu, kind, &mut sc.fx);
    w
}

/// The successors of `w` that `how` asks for, in choice order, stepping
/// `w` itself for the last one: each one's choice, key, whether it is bad
/// and (with the reduction) what it keeps asleep; and the steps skipped.
fn successors(
    w: World,
    keys: &Keys,
    sc: &mut Scratch,
    how: por::Expand<'_>,
    reduction: bool,
) -> (Vec<Succ>, Vec<(CpuId, StepKind)>) {
    let Scratch {
        choices,
        fx,
        trials,
        ..
    } = sc;
    // Without the reduction the worlds run to find the picks are the
    // successors; with it each step is run again for its footprint.
    if reduction {
        w.enabled(choices);
        trials.clear();
    } else {
        w.enabled_with_trials(choices, trials);
    }
    let (asleep, only): (&[Sleeper], _) = match how {
        por::Expand::Sleep(z) => (z, None),
        por::Expand::Only(o) => (&[], Some(o)),
    };
    let mut skipped = Vec::new();
    let mut take = Vec::with_capacity(choices.len());
    for (i, step) in choices.iter().enumerate() {
        if asleep.iter().any(|z| z.step == *step) || only.is_some_and(|o| !o.contains(step)) {
            skipped.extend(only.is_none().then_some(*step));
        } else {
            take.push(i);
        }
    }
    let choices = &*choices;
    let mut out = Vec::with_capacity(take.len());
    let mut taken: Vec<Sleeper> = Vec::new();
    let mut one = |i: usize, mut next: World, stepped: bool| {
        let (cpu, kind) = choices[i];
        fx.clear();
        let fp = if reduction && only.is_none() {
            next.step_footprint(cpu, kind, fx)
        } else {
            if !stepped {
                next.step(cpu, kind, fx);
            }
            Footprint::default()
        };
        let (key, concrete) = keys.both(&next, reduction);
        // Asleep after this step: what was asleep or taken before it
        // from here, of another CPU and independent of it.
        let sleep = (asleep.iter().chain(&taken))
            .filter(|z| z.step.0 != cpu && z.fp.independent(&fp))
            .cloned()
            .collect();
        out.push(Succ {
            choice: i as u16,
            step: (cpu, kind),
            key,
            bad: bad(&next),
            sleep,
            concrete,
        });
        if reduction && only.is_none() {
            taken.push(Sleeper {
                step: (cpu, kind),
                fp: std::sync::Arc::new(fp),
            });
        }
    };
    let mut trial = |i: usize| trials.get_mut(i).and_then(Option::take);
    if let Some((&last, rest)) = take.split_last() {
        for &i in rest {
            match trial(i) {
                Some(next) => one(i, next, true),
                None => one(i, w.clone(), false),
            }
        }
        match trial(last) {
            Some(next) => one(last, next, true),
            None => one(last, w, false),
        }
    }
    (out, skipped)
}

fn path_to(nodes: &[(u32, u32)], mut id: u32) -> Vec<u32> {
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
    let mut en = Vec::new();
    replay_with(init, path.len(), |w, n| {
        w.enabled(&mut en);
        en[path[n] as usize]
    })
}

/// Replay a path of step codes ([`Steps`]), describing each step.
fn replay_codes(init: &World, steps: &Steps, path: &[u32]) -> Vec<String> {
    let mut en = Vec::new();
    replay_with(init, path.len(), |w, n| steps.step(w, path[n], &mut en))
}

/// Replay the `len` steps `step(world, n)` names, describing each.
fn replay_with(
    init: &World,
    len: usize,
    mut step: impl FnMut(&World, usize) -> (CpuId, StepKind),
) -> Vec<String> {
    let mut w = init.clone();
    let mut fx = Effects {
        tracing: true,
        ..Effects::default()
    };
    let mut en = Vec::new();
    let mut lines = Vec::new();
    for n in 0..len {
        let (cpu, kind) = step(&w, n);
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
        None if en.is_empty() && *w.measuring > 0 => lines.push("deadlock: no step enabled".into()),
        None => {}
    }
    lines
}

/// The bare baseline of a search's bookkeeping: `transitions` inserts of
/// 64-bit keys into a seen-set, `states` of them distinct, each new one
/// also getting a (parent, choice) node, as [`explore_with`] does, with no
/// world at all. Returns the bytes the set and the nodes hold at the end.
pub fn bare_search(states: usize, transitions: usize) -> usize {
    let states = states.max(1);
    let mut seen = FxHashSet::default();
    let mut nodes: Vec<(u32, u32)> = vec![(0, 0)];
    for i in 0..transitions.max(states) {
        // A splitmix64 finaliser spreads the keys like fingerprints.
        let mut k = (i % states) as u64 ^ 0x9e37_79b9_7f4a_7c15;
        k = (k ^ (k >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        k = (k ^ (k >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        if seen.insert(k ^ (k >> 31)) {
            nodes.push(((i / 3) as u32, (i % 3) as u32));
        }
    }
    std::hint::black_box(&nodes);
    // hashbrown: a power of two of buckets, 8 bytes and a control byte each.
    let buckets = (seen.capacity() * 8 / 7).next_power_of_two();
    buckets * 9 + nodes.capacity() * std::mem::size_of::<(u32, u32)>()
}
