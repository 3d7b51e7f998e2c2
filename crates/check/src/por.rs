//! Partial-order reduction, its footing: which steps commute.
//!
//! Two steps of different CPUs are *independent* in a state when neither
//! writes what the other reads or writes, as recorded while each runs
//! from that state ([`World::step_footprint`], [`machine::footprint`]):
//! then either order reaches the same state and neither step disables the
//! other. That claim is what a reduction rests on, so it is tested here
//! rather than assumed: [`audit`] takes every pair of enabled steps of
//! different CPUs in the first states of a breadth-first search, and for
//! each pair judged independent runs both orders and compares the
//! resulting worlds. A recorder that missed an access shows up as a pair
//! judged independent whose orders differ.

use crate::fingerprint;
use kernel::world::StepKind;
use kernel::{Effects, World};
use machine::footprint::Footprint;
use machine::CpuId;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;

/// What [`audit`] found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Audit {
    /// States whose enabled steps were paired.
    pub states: usize,
    /// Pairs of enabled steps of different CPUs.
    pub pairs: usize,
    /// Of those, judged independent by their footprints.
    pub independent: usize,
    /// Independent pairs whose two orders did not reach the same world
    /// (or where one step disabled the other): one line each, at most 10.
    pub failures: Vec<String>,
    /// How many independent pairs failed in all.
    pub failed: usize,
    /// For the dependent pairs, how often each object kind was the
    /// conflict (an object one step writes and the other touches), by
    /// kind name: what a finer footprint would have to split.
    pub conflicts: std::collections::BTreeMap<String, usize>,
}

/// Pair the enabled steps of the first `max_states` states reached
/// breadth-first from `init` (violating states are not expanded).
pub fn audit(init: &World, max_states: usize) -> Audit {
    let mut out = Audit::default();
    let mut seen = FxHashSet::default();
    let mut init = init.clone();
    init.track_footprints(true);
    let mut queue = VecDeque::from([init.clone()]);
    seen.insert(fingerprint(&init));
    let mut en = Vec::new();
    while let Some(w) = queue.pop_front() {
        if out.states >= max_states {
            break;
        }
        out.states += 1;
        w.enabled(&mut en);
        let steps: Vec<_> = en.clone();
        let runs: Vec<(World, Footprint)> = steps.iter().map(|&s| run(&w, s)).collect();
        for (i, &a) in steps.iter().enumerate() {
            for (j, &b) in steps.iter().enumerate().skip(i + 1) {
                if a.0 == b.0 {
                    continue;
                }
                out.pairs += 1;
                if !runs[i].1.independent(&runs[j].1) {
                    let cs = runs[i].1.conflicts(&runs[j].1);
                    for o in cs {
                        *out.conflicts.entry(kind_name(o)).or_default() += 1;
                    }
                    continue;
                }
                out.independent += 1;
                if let Err(why) = commutes(&runs[i].0, &runs[j].0, a, b) {
                    out.failed += 1;
                    if out.failures.len() < 10 {
                        out.failures.push(format!("{a:?} / {b:?}: {why}"));
                    }
                }
            }
        }
        for (next, _) in runs {
            if next.violations.is_empty() && seen.insert(fingerprint(&next)) {
                queue.push_back(next);
            }
        }
    }
    out
}

/// An object's kind, as the audit counts conflicts (a field of the world
/// by its index, a field of an mm by its name; a CPU, task, mm, store
/// buffer or frame by its kind).
fn kind_name(o: machine::footprint::Obj) -> String {
    use machine::footprint::kind;
    let i = o.0 & 0x00ff_ffff;
    match o.kind() {
        kind::CPU => "cpu".into(),
        kind::TASK => "task".into(),
        kind::MM => "mm".into(),
        kind::MEMBUF => "membuf".into(),
        kind::FRAME => "frame".into(),
        kind::FRAME_ALLOC => "frame_alloc".into(),
        kind::FIELD => format!("field{i}"),
        kind::WEAK_LOC => "weak_loc".into(),
        kind::WEAK_VIEW => "weak_view".into(),
        kind::LEN => format!("len{i}"),
        kind::MM_FIELD => {
            let f = i as usize % 32;
            let name = kernel::world::mm_field::NAMES.get(f).unwrap_or(&"?");
            format!("mm.{name}")
        }
        k => format!("kind{k}"),
    }
}

/// `w` after step `s`, and the step's footprint.
fn run(w: &World, s: (CpuId, StepKind)) -> (World, Footprint) {
    let mut next = w.clone();
    let f = next.step_footprint(s.0, s.1, &mut Effects::default());
    (next, f)
}

/// From `after_a` (the world after `a`) and `after_b`, does `b` then `a`
/// reach the world `a` then `b` reaches, each still enabled?
fn commutes(
    after_a: &World,
    after_b: &World,
    a: (CpuId, StepKind),
    b: (CpuId, StepKind),
) -> Result<(), String> {
    let then = |w: &World, s: (CpuId, StepKind), other: &str| {
        let mut en = Vec::new();
        w.enabled(&mut en);
        if !en.contains(&s) {
            return Err(format!("{other} disables {s:?}"));
        }
        let mut next = w.clone();
        next.step(s.0, s.1, &mut Effects::default());
        Ok(next)
    };
    let ab = then(after_a, b, "a")?;
    let ba = then(after_b, a, "b")?;
    if fingerprint(&ab) != fingerprint(&ba) {
        return Err("the two orders reach different worlds".into());
    }
    Ok(())
}

/// A step a search may skip from a state: an earlier order of
/// independent steps already took it ([`SleepSets`]). Its footprint is
/// the one it had when it ran; it stays valid while the steps taken since
/// are independent of it (they wrote nothing it reads).
#[derive(Clone, Debug)]
pub(crate) struct Sleeper {
    pub step: (CpuId, StepKind),
    pub fp: Arc<Footprint>,
}

/// How the search expands one frontier node.
pub(crate) enum Expand<'a> {
    /// Every enabled step but the sleeping ones.
    Sleep(&'a [Sleeper]),
    /// Only these steps (a node reached again with fewer steps asleep
    /// than when it was expanded), their successors with none asleep.
    Only(&'a [(CpuId, StepKind)]),
}

/// Sleep sets (Godefroid) for the breadth-first search with a seen-set.
///
/// Exploring the steps of a state in order, the successor by step `t`
/// need not take any step `u` that is independent of `t` and was taken
/// from that state before `t` (or was already asleep there): `u` then `t`
/// reached the same state as `t` then `u`. So every state is still
/// reached, only transitions are saved. With a seen-set, a state reached
/// again with fewer steps asleep than it was expanded with is expanded
/// again by the steps it skipped ([`SleepSets::reached_again`]), at the
/// next level; its successors there may be reached one level later than
/// without the reduction, so a counterexample is the shortest the reduced
/// search finds, which the tests compare with the full search's.
///
/// Under the symmetry reduction a state is reached again as a renamed
/// copy: the sleeping steps would need renaming, so a copy that is not
/// the same world wakes all of them (`concrete` fingerprints differ).
#[derive(Default)]
pub(crate) struct SleepSets {
    /// Nodes not yet expanded with a non-empty sleep set, and the
    /// fingerprint of their (unrenamed) world.
    pending: FxHashMap<u32, (Vec<Sleeper>, u64)>,
    /// Expanded nodes that skipped steps: those steps, and the world's
    /// fingerprint.
    slept: FxHashMap<u32, (Vec<(CpuId, StepKind)>, u64)>,
    /// Expanded nodes to expand again at this level / the next, by which
    /// steps only.
    redo_now: FxHashMap<u32, Vec<(CpuId, StepKind)>>,
    redo_next: FxHashMap<u32, Vec<(CpuId, StepKind)>>,
}

impl SleepSets {
    /// How to expand `node` at this level.
    pub fn how(&self, node: u32) -> Expand<'_> {
        if let Some(only) = self.redo_now.get(&node) {
            return Expand::Only(only);
        }
        Expand::Sleep(self.pending.get(&node).map_or(&[], |p| &p.0))
    }

    /// `node` was expanded (skipping `skipped`).
    pub fn expanded(&mut self, node: u32, skipped: Vec<(CpuId, StepKind)>) {
        if self.redo_now.remove(&node).is_some() {
            return;
        }
        if let Some((_, concrete)) = self.pending.remove(&node) {
            if !skipped.is_empty() {
                self.slept.insert(node, (skipped, concrete));
            }
        }
    }

    /// A new node, not yet expanded, with `sleep` asleep.
    pub fn reached(&mut self, node: u32, sleep: Vec<Sleeper>, concrete: u64) {
        if !sleep.is_empty() {
            self.pending.insert(node, (sleep, concrete));
        }
    }

    /// Node `old` is reached again, by a world of fingerprint `concrete`
    /// with `sleep` asleep: what it keeps asleep is what both have asleep.
    /// Returns whether `old` must be expanded again at the next level.
    pub fn reached_again(&mut self, old: u32, sleep: &[Sleeper], concrete: u64) -> bool {
        let asleep = |s: &(CpuId, StepKind)| sleep.iter().any(|z| z.step == *s);
        if let Some((z, c)) = self.pending.get_mut(&old) {
            if *c == concrete {
                z.retain(|x| asleep(&x.step));
            } else {
                z.clear();
            }
            return false;
        }
        let Some((skipped, c)) = self.slept.get_mut(&old) else {
            return false;
        };
        let same = *c == concrete;
        let (woken, kept): (Vec<_>, Vec<_>) = skipped.iter().partition(|s| !same || !asleep(s));
        if woken.is_empty() {
            return false;
        }
        *skipped = kept;
        let redo = self.redo_next.entry(old).or_default();
        let first = redo.is_empty();
        redo.extend(woken);
        first
    }

    /// The next level begins.
    pub fn next_level(&mut self) {
        self.redo_now = std::mem::take(&mut self.redo_next);
    }
}
