//! The symmetry reduction: CPU renaming is an involution up to its
//! inverse, commutes with `step` (the soundness argument), and changes no
//! verdict while it cuts the states of the declared-symmetric checks.
use check::configs::{build, groups, run, CATALOGUE};
use check::{fingerprint, group_perms, Bounds};
use kernel::world::StepKind;
use kernel::{Effects, World};
use machine::CpuId;

/// A fixed-seed linear congruential generator (Knuth's MMIX constants).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Up to `steps` random steps from `w`, every state on the way (`w` first).
/// Stops early where nothing is enabled or the monitor saw a violation.
fn walk(w: &World, seed: u64, steps: usize) -> Vec<World> {
    let mut rng = Lcg(seed);
    let mut w = w.clone();
    let mut out = vec![w.clone()];
    let mut en = Vec::new();
    let mut fx = Effects::default();
    for _ in 0..steps {
        w.enabled(&mut en);
        if en.is_empty() || !w.violations.is_empty() {
            break;
        }
        let (cpu, kind) = en[rng.below(en.len())];
        fx.clear();
        w.step(cpu, kind, &mut fx);
        out.push(w.clone());
    }
    out
}

/// Every permutation of all the world's CPUs but the identity: renaming
/// must commute with `step` for any of them, not only the declared groups.
fn all_perms(w: &World) -> Vec<Vec<CpuId>> {
    let n = w.cpus.len();
    group_perms(n, &[(0..n as CpuId).collect()])
}

fn inverse(p: &[CpuId]) -> Vec<CpuId> {
    let mut q = vec![0; p.len()];
    for (c, &to) in p.iter().enumerate() {
        q[to as usize] = c as CpuId;
    }
    q
}

/// The monitor's texts are free-form (they name CPUs as they were when
/// written) and simultaneous violations are recorded in CPU order: compare
/// violations as a multiset of (invariant, cpu, address).
fn normalized(w: &World) -> World {
    let mut w = w.clone();
    for v in w.violations.iter_mut() {
        v.what.clear();
    }
    w.violations.sort_by_key(|v| (v.invariant, v.cpu, v.addr));
    w
}

/// Which top-level part of two worlds differs, for failure messages.
fn diff(a: &World, b: &World) -> String {
    let mut d = Vec::new();
    for (i, (x, y)) in a.cpus.iter().zip(&b.cpus).enumerate() {
        if x != y {
            d.push(format!("cpus[{i}]:\n  {x:?}\n  {y:?}"));
        }
    }
    for (i, (x, y)) in a.tasks.iter().zip(&b.tasks).enumerate() {
        if x != y {
            d.push(format!("tasks[{i}]:\n  {x:?}\n  {y:?}"));
        }
    }
    for (i, (x, y)) in a.mms.iter().zip(&b.mms).enumerate() {
        if x != y {
            d.push(format!("mms[{i}]:\n  {x:?}\n  {y:?}"));
        }
    }
    if a.mem != b.mem {
        d.push("mem".into());
    }
    if a.violations != b.violations {
        d.push(format!("violations {:?} {:?}", a.violations, b.violations));
    }
    if a.rcu_batches != b.rcu_batches {
        d.push("rcu_batches".into());
    }
    if a.asids != b.asids {
        d.push(format!("asids {:?} {:?}", a.asids, b.asids));
    }
    if d.is_empty() {
        d.push("some other field".into());
    }
    d.join("\n")
}

fn rename_kind(kind: StepKind, p: &[CpuId]) -> StepKind {
    match kind {
        StepKind::Tick { migrate_to } => StepKind::Tick {
            migrate_to: migrate_to.map(|c| p[c as usize]),
        },
        k => k,
    }
}

/// Worlds outside the catalogue whose CPUs hold as many tasks each, so that
/// renamings apply to paths the catalogue only runs asymmetrically: on
/// each of 2 CPUs a real-time sleeper and a madvising thread of one mm
/// (hrtimer wake-ups, preemption of a flush, per-CPU and on-stack
/// `flush_tlb_info`), under the three placements the catalogue checks.
fn extra_worlds() -> Vec<(String, World)> {
    use kernel::user::UserOp;
    const P: u64 = 0x7f00_0000_0000;
    const PAGE: u64 = machine::PAGE_SIZE;
    let variants: [&[&str]; 3] = [
        &["machine.preemption=full"],
        &[
            "machine.preemption=full",
            "x86.flush_tlb_info=stack_aligned",
            "x86.preemptible_flush=true",
        ],
        &[
            "machine.preemption=full",
            "x86.preemptible_flush=true",
            "inject.preemptible_percpu_flush=true",
        ],
    ];
    variants
        .iter()
        .map(|sets| {
            let mut s = check::configs::base();
            for kv in *sets {
                s.set(kv).unwrap();
            }
            let mut w = World::new(&s).unwrap();
            let mm = w.mm_alloc().unwrap();
            w.add_vma(mm, P, 4 * PAGE);
            kernel::mm::memory::populate_range(&mut w, mm, P, P + 4 * PAGE).unwrap();
            for cpu in 0..2u16 {
                let own = P + 2 * cpu as u64 * PAGE;
                let rt = w.spawn(
                    mm,
                    cpu,
                    vec![
                        UserOp::ClockNanosleep {
                            period_ns: 1000,
                            op: 0,
                        },
                        UserOp::MadviseDontneed {
                            start: own + PAGE,
                            len: PAGE,
                        },
                        UserOp::Exit,
                    ],
                    true,
                );
                w.tasks[rt as usize].rt = true;
                w.spawn(
                    mm,
                    cpu,
                    vec![
                        UserOp::Touch {
                            addr: P + 2 * (1 - cpu as u64) * PAGE,
                            write: false,
                        },
                        UserOp::MadviseDontneed {
                            start: own,
                            len: PAGE,
                        },
                        UserOp::Exit,
                    ],
                    true,
                );
            }
            (format!("preempting flushes on 2 CPUs {sets:?}"), w)
        })
        .collect()
}

/// What every walk of `w0` must exercise at its first state (each walk
/// starts at `w0` itself): the permutations that apply to `w0` (a renaming
/// applies where each CPU and its image hold as many tasks,
/// `World::task_perm`), and the (permutation, enabled step) pairs whose
/// successor it still renames. The coverage floors of the tests below are
/// these counts times the walks, where they were numbers read off runs.
fn at_start(w0: &World) -> (usize, usize) {
    let (mut perms, mut pairs) = (0, 0);
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    w0.enabled(&mut en);
    for p in all_perms(w0) {
        if w0.try_permute_cpus(&p).is_none() {
            continue;
        }
        perms += 1;
        for &(cpu, kind) in &en {
            let mut a = w0.clone();
            fx.clear();
            a.step(cpu, kind, &mut fx);
            pairs += usize::from(a.try_permute_cpus(&p).is_some());
        }
    }
    (perms, pairs)
}

/// A catalogue world that declares a symmetry group starts with its group
/// CPUs in identical roles, so some renaming applies to it.
fn assert_declared_groups_apply(name: &str, perms_at_start: usize) {
    if let Some(c) = CATALOGUE.iter().find(|c| c.name == name) {
        assert!(
            c.sym.is_empty() || perms_at_start > 0,
            "{name}: declares {:?} but no renaming applies to its initial state",
            c.sym
        );
    }
}

/// Every catalogue world and the extra ones, by name.
fn worlds() -> Vec<(String, World)> {
    let mut v: Vec<(String, World)> = CATALOGUE
        .iter()
        .map(|c| (c.name.to_string(), build(c, &[]).unwrap()))
        .collect();
    v.extend(extra_worlds());
    v
}

/// Permuting and then permuting back gives the original world, on states
/// reached by random walks of every check.
#[test]
fn permute_then_inverse_is_the_identity() {
    for (name, w0) in worlds() {
        let (start, _) = at_start(&w0);
        assert_declared_groups_apply(&name, start);
        let mut applied = 0;
        for seed in 1..=3u64 {
            let states = walk(&w0, seed, 50);
            for w in [states.first().unwrap(), states.last().unwrap()] {
                for p in all_perms(w) {
                    let Some(x) = w.try_permute_cpus(&p) else {
                        continue;
                    };
                    applied += 1;
                    let back = x.permute_cpus(&inverse(&p));
                    assert_eq!(
                        fingerprint(&back),
                        fingerprint(w),
                        "{} seed {seed} perm {p:?}:\n{}",
                        name,
                        diff(&back, w)
                    );
                    assert!(back == *w, "{}", name);
                }
            }
        }
        // Each of the 3 walks starts at w0: at least its renamings.
        assert!(applied >= 3 * start, "{name}: {applied} renamings applied");
    }
}

/// The canonical fingerprint is the same for every renaming of a world by
/// the group, on random reachable states of every check; it is not the
/// same for the successors of one state that are no renamings of each
/// other (spot check: it still tells states apart).
#[test]
fn canonical_fingerprint_is_constant_on_orbits() {
    use kernel::symmetry::canonical_fingerprint;
    use rustc_hash::FxHasher;
    for (name, w0) in worlds() {
        let (start, _) = at_start(&w0);
        let mut checked = 0;
        for seed in 1..=4u64 {
            for (i, w) in walk(&w0, seed, 50).iter().enumerate() {
                let perms = all_perms(w);
                let canon = canonical_fingerprint::<FxHasher>(w, &perms);
                for p in &perms {
                    let Some(x) = w.try_permute_cpus(p) else {
                        continue;
                    };
                    assert_eq!(
                        canonical_fingerprint::<FxHasher>(&x, &perms),
                        canon,
                        "{name} seed {seed} state {i} perm {p:?}"
                    );
                    checked += 1;
                }
            }
        }
        // Two different states on one walk are told apart.
        let states = walk(&w0, 1, 50);
        let perms = all_perms(&w0);
        let (a, b) = (&states[0], &states[states.len() / 2]);
        assert_ne!(
            canonical_fingerprint::<FxHasher>(a, &perms),
            canonical_fingerprint::<FxHasher>(b, &perms),
            "{name}"
        );
        // Each of the 4 walks starts at w0 (state 0): at least its renamings.
        assert!(checked >= 4 * start, "{name}: {checked} renamings compared");
    }
}

/// The soundness test: on random reachable states of every check, running
/// step `(c, kind)` and then renaming by `p` gives the same world as
/// renaming first and then running `(p[c], kind)`; and the enabled steps of
/// the renamed world are the renamed enabled steps.
#[test]
fn renaming_commutes_with_step() {
    let mut checked = 0;
    let mut fx = Effects::default();
    let (mut en, mut en_p) = (Vec::new(), Vec::new());
    let mut per_world = Vec::new();
    for (name, w0) in worlds() {
        let before = checked;
        let (start, pairs) = at_start(&w0);
        assert_declared_groups_apply(&name, start);
        for seed in 1..=8u64 {
            for (i, w) in walk(&w0, seed, 50).iter().enumerate() {
                if !w.violations.is_empty() {
                    continue;
                }
                for p in all_perms(w) {
                    let Some(wp) = w.try_permute_cpus(&p) else {
                        continue;
                    };
                    let p = &p;
                    w.enabled(&mut en);
                    wp.enabled(&mut en_p);
                    let mut want: Vec<(CpuId, StepKind)> = en
                        .iter()
                        .map(|&(cpu, k)| (p[cpu as usize], rename_kind(k, p)))
                        .collect();
                    let mut got = en_p.clone();
                    want.sort_by_key(|e| format!("{e:?}"));
                    got.sort_by_key(|e| format!("{e:?}"));
                    assert_eq!(got, want, "{}: enabled steps of the renamed world", name);
                    for &(cpu, kind) in &en {
                        let mut a = w.clone();
                        fx.clear();
                        a.step(cpu, kind, &mut fx);
                        let Some(a) = a.try_permute_cpus(p) else {
                            continue; // a task changed CPU: another renaming applies
                        };
                        let mut b = wp.clone();
                        fx.clear();
                        b.step(p[cpu as usize], rename_kind(kind, p), &mut fx);
                        let (a, b) = (normalized(&a), normalized(&b));
                        assert_eq!(
                            fingerprint(&a),
                            fingerprint(&b),
                            "{} seed {seed} state {i}: step CPU{cpu} {kind:?}, perm {p:?}:\n{}",
                            name,
                            diff(&a, &b)
                        );
                        checked += 1;
                    }
                }
            }
        }
        // Each of the 8 walks starts at w0: at least its renamed steps.
        assert!(
            checked - before >= 8 * pairs,
            "{name}: {} steps compared, {pairs} at the start",
            checked - before
        );
        per_world.push((name, checked - before));
    }
    eprintln!("{checked} steps compared: {per_world:?}");
    // Only worlds whose CPUs all hold one task each (or two) are renamed.
    for (name, n) in &per_world {
        let asymmetric = name.starts_with("x86_preempt")
            || name.starts_with("unsafe_preemptible")
            || name == "riscv_defer_vs_switch"
            || name == "unsafe_riscv_unordered_enqueue"
            || name == "riscv_defer_vs_switch_mask_clearing"
            || name == "drop_set_mm_asid_fence"
            || name == "drop_should_ipi_flush_smp_mb"
            || name == "riscv_switch_vs_flush"
            || name == "drop_switch_mm_cid_smp_mb"
            || name == "riscv_defer_without_switch_mm_cid_smp_mb"
            // CPU1 holds two tasks (mm A and mm B), CPU0 one.
            || name == "drop_switch_mm_cid_smp_mb_late_reader"
            || name == "drop_switch_mm_cid_smp_mb_speculative"
            || name == "riscv_switch_vs_flush_speculative"
            // CPU1 holds two tasks (mm A and mm B), CPU0 one.
            || name.ends_with("switch_back_race")
            || name == "drop_switch_mm_smp_mb"
            || name == "drop_should_flush_tlb_smp_rmb"
            // CPU0 holds four tasks, CPU1 none.
            || name == "arm64_asid_rollover"
            || name == "unsafe_arm64_skip_rollover_flush"
            // CPU1 holds three tasks, CPU0 two.
            || name == "arm64_asid_fastpath_vs_rollover"
            || name == "unsafe_arm64_asid_fastpath_blind_store";
        assert!(asymmetric || *n > 0, "{name}: no renaming applied");
    }
}

/// The full space of `w0` by breadth-first search (`World::enabled`,
/// `World::step`, deduplicated by `fingerprint`, violations not expanded,
/// as `explore` does), and per state its key with no renaming
/// (`canonical_fingerprint` with the identity alone: the reduction's own
/// equality, which leaves out `pid` where it is not read), its canonical
/// key under `perms`, and how many of `perms` fix it. Returns (states,
/// distinct keys, distinct canonical keys, sum over `perms` of |Fix|).
fn orbit_census(w0: &World, perms: &[Vec<CpuId>]) -> (usize, usize, usize, usize) {
    use kernel::symmetry::canonical_fingerprint;
    use rustc_hash::{FxHashSet, FxHasher};
    let key = |w: &World| canonical_fingerprint::<FxHasher>(w, &[]);
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    let (mut keys, mut canon) = (FxHashSet::default(), FxHashSet::default());
    let mut fixed = 0;
    seen.insert(fingerprint(w0));
    let mut level = vec![w0.clone()];
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    while !level.is_empty() {
        let mut next = Vec::new();
        for w in &level {
            let k = key(w);
            keys.insert(k);
            canon.insert(canonical_fingerprint::<FxHasher>(w, perms));
            for p in perms {
                let x = w
                    .try_permute_cpus(p)
                    .expect("the group renames every state");
                fixed += usize::from(key(&x) == k);
            }
            if !w.violations.is_empty() {
                continue;
            }
            w.enabled(&mut en);
            for &(cpu, kind) in &en {
                let mut s = w.clone();
                fx.clear();
                s.step(cpu, kind, &mut fx);
                if seen.insert(fingerprint(&s)) {
                    next.push(s);
                }
            }
        }
        level = next;
    }
    (seen.len(), keys.len(), canon.len(), fixed)
}

/// Symmetry changes no verdict (nor the length of a counterexample, which
/// still replays), and cuts the states of every check that declares a
/// group `G` by exactly what the group dictates.
///
/// The reduced search stores one state per orbit of the full reachable
/// set, so by Burnside's lemma it holds `(1/|G|) x sum over g in G of
/// |Fix(g)|` states, `Fix(g)` being the full space's states that renaming
/// by `g` leaves unchanged (the identity fixes all). That is checked
/// exactly on the safe checks with a group whose full space is small
/// (up to 70,000 states: walked again here in about 3 s in all, by
/// [`orbit_census`]). On every check with a group, the bounds that follow
/// from orbit sizes: an orbit holds at most `|G|` states, so
/// `off <= |G| x on`; and a group CPU with a step enabled in the
/// group-invariant initial state has a renamed twin step, so `on < off`.
/// (This replaces "at most 0.6 of the states", read off the runs.)
#[test]
fn symmetry_keeps_verdicts_and_cuts_states() {
    let mut censused = 0;
    for c in CATALOGUE {
        let off = run(c, &[], Bounds::default(), false).unwrap();
        let on = run(c, &[], Bounds::default(), true).unwrap();
        assert_eq!(on.verdict, off.verdict, "{}", c.name);
        assert!(on.states <= off.states, "{}", c.name);
        let w = build(c, &[]).unwrap();
        assert_eq!(on.symmetry, groups(c, &w), "{}", c.name);
        if !c.expect_safe {
            // Breadth-first either way: a shortest counterexample, replayed.
            assert_eq!(on.depth, off.depth, "{}", c.name);
            assert!(on.counterexample.last().unwrap().starts_with("violation I"));
        }
        eprintln!("{}: {} -> {} states", c.name, off.states, on.states);
        if c.sym.is_empty() {
            assert_eq!(on.states, off.states, "{}", c.name);
            continue;
        }
        let perms = group_perms(w.cpus.len(), &on.symmetry);
        let order = perms.len() + 1;
        assert!(off.states <= order * on.states, "{}", c.name);
        let mut en = Vec::new();
        w.enabled(&mut en);
        if en
            .iter()
            .any(|(cpu, _)| on.symmetry.iter().flatten().any(|g| g == cpu))
        {
            assert!(on.states < off.states, "{}", c.name);
        }
        if c.expect_safe && off.states <= 70_000 {
            let (states, keys, canon, fixed) = orbit_census(&w, &perms);
            assert_eq!(states, off.states, "{}: the full space", c.name);
            // No two states of the full space differ only where the
            // reduction does not look (`pid`), so |Fix(id)| = off.states.
            assert_eq!(keys, off.states, "{}", c.name);
            assert_eq!(canon, on.states, "{}: one state per orbit", c.name);
            assert_eq!(
                order * on.states,
                off.states + fixed,
                "{}: Burnside, |G| = {order}, {fixed} fixed points",
                c.name
            );
            censused += 1;
        }
    }
    // The checks small enough for the census: x86 collapse-vs-GUP and its
    // skip variant, madvise and munmap races at 3 CPUs, arm64 wp-reuse at
    // 2 and 3 CPUs, and two arm64 dropped-barrier checks.
    assert!(censused >= 9, "{censused} checks censused");
}
