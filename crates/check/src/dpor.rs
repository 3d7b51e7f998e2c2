//! Stateful dynamic partial-order reduction: fewer *states*, every verdict.
//!
//! Flanagan and Godefroid's DPOR (POPL 2005) over the footprints each step
//! records as it runs ([`machine::footprint`]), made stateful with
//! summaries of the states already explored, after Yang, Chen,
//! Gopalakrishnan and Kirby (SPIN 2008). A depth-first search keeps the
//! path from the initial world on a stack. In each state it runs every
//! enabled step once, for its footprint, but explores only the steps of
//! the CPUs in the state's *backtrack set*: one CPU at first. Whenever a
//! step that a CPU could take next (an enabled step, or for a CPU with
//! none the reads that decide its steps: [`World::guard_footprint`]) is
//! dependent on an earlier step of the path by another CPU that does not
//! happen before it (vector clocks over the path's dependences), the
//! other order may lead elsewhere: that CPU (or, where it could not run
//! then, every CPU that could) joins the backtrack set of the state
//! before the earlier step. The CPUs explored from each state then form a
//! persistent set, and every state where no step is enabled (every
//! deadlock and every end) is reached, with every step whose monitor
//! check could fail: a violation is recorded by the step that makes the
//! bad access, from what it read, and a reordering of independent steps
//! before it reads the same.
//!
//! With a seen-set the search stops at a state met before, and the steps
//! below it were raced only against the path that first reached it. So
//! each explored state keeps a *summary*: per CPU, the union of the
//! footprints of the steps that CPU could take anywhere below it. Meeting
//! the state again races that summary against the new path, against every
//! earlier dependent step of another CPU not ordered before it rather
//! than the last one only (the summary forgets the order within the
//! subtree, so this over-approximates what a stateless search would
//! find). A step that closes a cycle (its state is on the path) expands
//! every state of the cycle fully, and the states inside it get an
//! unknown summary (every CPU, everything) since theirs is incomplete.
//!
//! The search is sequential and depth-first, so it does not depend on the
//! thread count. Its own path to a violation is not shortest: the
//! counterexample printed is a breadth-first search's bounded by that
//! path's length (the unreduced level search), which finds a
//! shortest one (the full search's) when it fits in the state bound.
//!
//! Under the symmetry reduction the seen-set holds canonical keys, as in
//! the breadth-first search. A state met again as a renamed copy (same
//! key, another world) would need its summary renamed with the CPUs
//! (footprints name CPUs, tasks and per-CPU locations): it is taken as
//! unknown instead, every CPU touching everything, which backtracks the
//! whole path. Sound, and it keeps the symmetry's savings of states, but
//! most of the reduction's where renamed copies are common.

use crate::{bad, Bounds, Keys, Outcome};
use kernel::world::StepKind;
use kernel::{Effects, World};
use machine::footprint::Footprint;
use machine::CpuId;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::Instant;

type Step = (CpuId, StepKind);

/// A step taken on the path: its CPU, footprint and vector clock (entry
/// `c`: one past the stack index of the last step of CPU `c` that happens
/// before it, itself included).
struct Event {
    cpu: CpuId,
    fp: Arc<Footprint>,
    clock: Vec<u32>,
}

/// A state on the path.
struct Frame {
    /// Its key in the seen-set and its own fingerprint.
    key: (u64, u64),
    /// Its enabled steps, in [`World::enabled`] order (choice indices).
    steps: Vec<Step>,
    /// The world after each step (taken when explored).
    succ: Vec<Option<World>>,
    fps: Vec<Arc<Footprint>>,
    /// The machine's CPUs (a clock's length).
    steps_cpus: usize,
    /// CPUs with a step enabled, to explore, explored.
    enabled: u64,
    backtrack: u64,
    done: u64,
    /// Steps of the CPU being explored not yet taken.
    todo: Vec<usize>,
    /// What may run from here (per CPU), found so far.
    summary: Summary,
    /// The step taken from here to the next frame, and its choice index.
    event: Option<Event>,
    taken: usize,
    /// The lowest stack index a cycle below here returned to.
    open: usize,
}

/// Per CPU, the union of the footprints of the steps it may take below a
/// state; `None`: unknown (every CPU may touch everything).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Summary(Option<Vec<Footprint>>);

impl Summary {
    fn empty(cpus: usize) -> Summary {
        Summary(Some(vec![Footprint::default(); cpus]))
    }

    fn add(&mut self, cpu: CpuId, fp: &Footprint) {
        if let Some(v) = &mut self.0 {
            v[cpu as usize].union_with(fp);
        }
    }

    fn union_with(&mut self, other: &Summary) {
        match (&mut self.0, &other.0) {
            (Some(v), Some(o)) => v.iter_mut().zip(o).for_each(|(a, b)| a.union_with(b)),
            (s, None) => *s = None,
            (None, _) => {}
        }
    }
}

/// What the seen-set holds of a state (with the fingerprint of the world
/// stored, which differs from a renamed copy's under the symmetry
/// reduction).
#[derive(Clone, Copy)]
enum Seen {
    /// On the path, at this stack index.
    OnStack(u32),
    /// Explored: its summary's index.
    Done(u32, u64),
}

/// The search's state besides the path.
struct Search {
    t0: Instant,
    bounds: Bounds,
    keys: Keys,
    cpus: usize,
    seen: FxHashMap<u64, Seen>,
    summaries: Vec<Arc<Summary>>,
    interned: FxHashMap<Arc<Summary>, u32>,
    transitions: usize,
    depth: usize,
    bounded: Option<&'static str>,
    fx: Effects,
}

fn bit(c: CpuId) -> u64 {
    1u64 << c
}

/// Depth-first stateful DPOR from `init` (module doc). `terminals`, when
/// given, collects the fingerprint of every state reached where no step
/// is enabled (the soundness tests compare them with the full search's).
pub(crate) fn explore_dpor(
    init: &World,
    bounds: Bounds,
    groups: &[Vec<CpuId>],
    mut terminals: Option<&mut Vec<u64>>,
) -> Outcome {
    let mut init = init.clone();
    init.track_footprints(true);
    assert!(init.cpus.len() <= 64, "a backtrack set is a 64-bit mask");
    let mut s = Search {
        t0: Instant::now(),
        bounds,
        keys: Keys {
            perms: crate::group_perms(init.cpus.len(), groups),
        },
        cpus: init.cpus.len(),
        seen: FxHashMap::default(),
        summaries: Vec::new(),
        interned: FxHashMap::default(),
        transitions: 0,
        depth: 0,
        bounded: None,
        fx: Effects::default(),
    };
    let mut stack: Vec<Frame> = Vec::new();
    let key = s.keys.key(&init);
    s.seen.insert(key, Seen::OnStack(0));
    let root = s.frame(
        &init,
        (key, crate::fingerprint(&init)),
        &mut stack,
        &mut terminals,
    );
    stack.push(root);
    while let Some(top) = stack.last_mut() {
        let Some(j) = next_choice(top) else {
            s.finish(&mut stack);
            continue;
        };
        let n = stack.len() - 1;
        let (cpu, _) = stack[n].steps[j];
        let fp = stack[n].fps[j].clone();
        let clock = clock_of(&stack, cpu, &fp);
        let next = stack[n].succ[j].take().expect("each step is taken once");
        stack[n].event = Some(Event { cpu, fp, clock });
        stack[n].taken = j;
        s.transitions += 1;
        if bad(&next) {
            return s.violation(&init, &stack, (j, n), groups);
        }
        let (key, concrete) = s.keys.both(&next, true);
        match s.seen.get(&key).copied() {
            Some(Seen::OnStack(m)) => close_cycle(&mut stack, m as usize),
            Some(Seen::Done(id, own)) => {
                // A renamed copy's summary would need renaming: unknown.
                let sum = match own == concrete {
                    true => s.summaries[id as usize].clone(),
                    false => Arc::new(Summary(None)),
                };
                apply_summary(&mut stack, &sum, s.cpus);
                stack[n].summary.union_with(&sum);
            }
            None if n + 1 >= bounds.max_depth => {
                // Reached, not expanded: unknown below.
                let top = s.intern(Summary(None));
                s.seen.insert(key, Seen::Done(top, concrete));
                apply_summary(&mut stack, &Summary(None), s.cpus);
                if next.any_enabled() {
                    s.bounded = Some("max_depth");
                }
            }
            None => {
                if let Some(b) = s.bound() {
                    s.bounded = Some(b);
                    break;
                }
                s.seen.insert(key, Seen::OnStack((n + 1) as u32));
                let f = s.frame(&next, (key, concrete), &mut stack, &mut terminals);
                stack.push(f);
                s.depth = s.depth.max(n + 1);
            }
        }
    }
    let frontier = stack.len();
    Outcome {
        verdict: if s.bounded.is_some() {
            "bounded"
        } else {
            "safe"
        },
        states: s.seen.len(),
        transitions: s.transitions,
        depth: s.depth,
        seconds: s.t0.elapsed().as_secs_f64(),
        counterexample: Vec::new(),
        bound: s.bounded,
        frontier: if s.bounded.is_some() { frontier } else { 0 },
        symmetry: groups.to_vec(),
    }
}

/// The next step to take from `top`: the next of the CPU being explored,
/// else the first of the next CPU of the backtrack set not yet explored.
fn next_choice(top: &mut Frame) -> Option<usize> {
    loop {
        if let Some(j) = top.todo.pop() {
            return Some(j);
        }
        let pending = top.backtrack & !top.done;
        if pending == 0 {
            return None;
        }
        let c = pending.trailing_zeros() as CpuId;
        top.done |= bit(c);
        // Popped from the end: pushed in reverse, taken in choice order.
        let steps = &top.steps;
        top.todo = (0..steps.len())
            .rev()
            .filter(|&j| steps[j].0 == c)
            .collect();
    }
}

/// The vector clock of a step of `cpu` with footprint `fp` taken after
/// the path's steps: its CPU's last step, joined with every earlier step
/// of another CPU it depends on.
fn clock_of(stack: &[Frame], cpu: CpuId, fp: &Footprint) -> Vec<u32> {
    let n = stack.len() - 1;
    let mut clock = last_clock(stack, n, cpu);
    for e in stack[..n].iter().filter_map(|f| f.event.as_ref()) {
        if e.cpu != cpu && !e.fp.independent(fp) {
            clock
                .iter_mut()
                .zip(&e.clock)
                .for_each(|(a, &b)| *a = (*a).max(b));
        }
    }
    clock[cpu as usize] = n as u32 + 1;
    clock
}

/// The clock of `cpu`'s last step among the first `len` steps of the path
/// (zero if it took none).
fn last_clock(stack: &[Frame], len: usize, cpu: CpuId) -> Vec<u32> {
    let cpus = stack.first().map_or(64, |f| f.steps_cpus);
    stack[..len]
        .iter()
        .rev()
        .filter_map(|f| f.event.as_ref())
        .find(|e| e.cpu == cpu)
        .map_or_else(|| vec![0; cpus], |e| e.clock.clone())
}

/// A step of `cpu` with footprint `fp`, possible after the path's first
/// `len` steps, races with an earlier step of another CPU that it depends
/// on and that does not happen before it: put `cpu` (or, where it could
/// not run, every CPU that could) in the backtrack set of the state
/// before that step. `all`: every such step, not only the last.
fn race(stack: &mut [Frame], len: usize, cpu: CpuId, fp: &Footprint, all: bool) {
    let before = last_clock(stack, len, cpu);
    for i in (0..len).rev() {
        let Some(e) = stack[i].event.as_ref() else {
            continue;
        };
        let hb = e.cpu == cpu || before[e.cpu as usize] > i as u32;
        if hb || e.fp.independent(fp) {
            continue;
        }
        let f = &mut stack[i];
        f.backtrack |= match f.enabled & bit(cpu) {
            0 => f.enabled,
            _ => bit(cpu),
        };
        if !all {
            return;
        }
    }
}

/// The path reached a state explored before: what may run from it races
/// with every step of the path (including the one just taken).
fn apply_summary(stack: &mut [Frame], sum: &Summary, cpus: usize) {
    let len = stack.len();
    match &sum.0 {
        Some(per_cpu) => {
            for (c, fp) in per_cpu.iter().enumerate() {
                if !fp.reads.is_empty() || !fp.writes.is_empty() {
                    race(stack, len, c as CpuId, fp, true);
                }
            }
        }
        None => {
            let all = Footprint::everything();
            for c in 0..cpus {
                race(stack, len, c as CpuId, &all, true);
            }
        }
    }
}

/// The step just taken returns to the path's state at index `m`: expand
/// every state of the cycle fully (no step postponed around it forever)
/// and mark the ones above `m` as having an incomplete summary.
fn close_cycle(stack: &mut [Frame], m: usize) {
    for (k, f) in stack.iter_mut().enumerate().skip(m) {
        f.backtrack = f.enabled;
        if k > m {
            f.open = f.open.min(m);
        }
    }
}

impl Search {
    /// A new frame for `w` on top of `stack`: every enabled step run for
    /// its footprint and raced against the path, with the reads that
    /// decide the steps of CPUs that have none.
    fn frame(
        &mut self,
        w: &World,
        key: (u64, u64),
        stack: &mut [Frame],
        terminals: &mut Option<&mut Vec<u64>>,
    ) -> Frame {
        let mut steps = Vec::new();
        w.enabled(&mut steps);
        let mut succ = Vec::with_capacity(steps.len());
        let mut fps = Vec::with_capacity(steps.len());
        let mut summary = Summary::empty(self.cpus);
        let mut enabled = 0u64;
        let len = stack.len();
        for &(cpu, kind) in &steps {
            let mut next = w.clone();
            self.fx.clear();
            let fp = next.step_footprint(cpu, kind, &mut self.fx);
            race(stack, len, cpu, &fp, false);
            summary.add(cpu, &fp);
            enabled |= bit(cpu);
            succ.push(Some(next));
            fps.push(Arc::new(fp));
        }
        for c in (0..self.cpus as CpuId).filter(|&c| enabled & bit(c) == 0) {
            let g = w.guard_footprint(c);
            race(stack, len, c, &g, false);
            summary.add(c, &g);
        }
        if steps.is_empty() {
            if let Some(t) = terminals {
                t.push(key.0);
            }
        }
        Frame {
            key,
            steps_cpus: self.cpus,
            backtrack: enabled & enabled.wrapping_neg(),
            steps,
            succ,
            fps,
            enabled,
            done: 0,
            todo: Vec::new(),
            summary,
            event: None,
            taken: 0,
            open: usize::MAX,
        }
    }

    /// The top frame is explored: store its summary (unknown if a cycle
    /// below it returned above it) and hand it to its parent.
    fn finish(&mut self, stack: &mut Vec<Frame>) {
        let f = stack.pop().expect("a frame to finish");
        let k = stack.len();
        let mut summary = f.summary;
        if f.open < k {
            summary = Summary(None);
        }
        let id = self.intern(summary);
        self.seen.insert(f.key.0, Seen::Done(id, f.key.1));
        if let Some(parent) = stack.last_mut() {
            parent.summary.union_with(&self.summaries[id as usize]);
            parent.open = parent.open.min(f.open);
        }
    }

    fn intern(&mut self, s: Summary) -> u32 {
        if let Some(&id) = self.interned.get(&s) {
            return id;
        }
        let s = Arc::new(s);
        let id = self.summaries.len() as u32;
        self.summaries.push(s.clone());
        self.interned.insert(s, id);
        id
    }

    /// The bound that stops the search before a new state, if any.
    fn bound(&self) -> Option<&'static str> {
        if self.seen.len() >= self.bounds.max_states {
            return Some("max_states");
        }
        let late = |s: f64| self.t0.elapsed().as_secs_f64() >= s;
        if self.seen.len().is_multiple_of(1024) && self.bounds.max_seconds.is_some_and(late) {
            return Some("max_seconds");
        }
        None
    }

    /// Step `j` of the top frame (index `n`) was bad: the verdict, with a
    /// shortest counterexample where the unreduced breadth-first search
    /// bounded by this path's length finds one, else this path.
    fn violation(
        &self,
        init: &World,
        stack: &[Frame],
        (j, n): (usize, usize),
        groups: &[Vec<CpuId>],
    ) -> Outcome {
        let mut path: Vec<u16> = stack[..n].iter().map(|f| f.taken as u16).collect();
        path.push(j as u16);
        let shortest = crate::explore_levels(
            init,
            Bounds {
                max_depth: path.len(),
                reduction: crate::Reduction::Off,
                ..self.bounds
            },
            groups,
        );
        let (depth, cx) = match shortest.verdict {
            "unsafe" => (shortest.depth, shortest.counterexample),
            _ => (path.len(), crate::replay(init, &path)),
        };
        Outcome {
            verdict: "unsafe",
            states: self.seen.len(),
            transitions: self.transitions,
            depth,
            seconds: self.t0.elapsed().as_secs_f64(),
            counterexample: cx,
            bound: None,
            frontier: 0,
            symmetry: groups.to_vec(),
        }
    }
}
