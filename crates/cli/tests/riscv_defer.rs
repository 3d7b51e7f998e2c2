//! Seed riscv-defer-flush-to-context-switch: remote flushes by IPI or SBI,
//! the `mm_cpumask` that only grows, deferral to `switch_mm`, the
//! mask-clearing threshold, and the two unsafe variants the review found.
mod common;
use common::*;

const DEFER: &str = "riscv.defer_flush_to_context_switch=true";

/// Every madvise of the 3-thread benchmark reaches the 3 other harts:
/// by IPI (the CAL row) or, with SBI, by one firmware call and no Linux IPI.
#[test]
fn remote_flush_by_ipi_or_sbi() {
    let base = ["machine.arch=riscv", "workload.iterations=500"];
    let r = run(&scenario("default", &base));
    assert_eq!(total(&r, "CAL"), 3 * ops(&r));
    assert_eq!(r.arch["sbi_rfence"], 0);
    let mut sets = base.to_vec();
    sets.push("riscv.rfence=sbi");
    let s = run(&scenario("default", &sets));
    assert_eq!(total(&s, "CAL"), 0);
    assert_eq!(s.arch["sbi_rfence"], ops(&s));
    assert!(r.violations.is_empty() && s.violations.is_empty());
}

/// Every remote target a flush kept is IPI'd: it had the ASID loaded
/// (running or idle after the mm) or its queue was full. Counted as the
/// modelled path does it:
/// - each kept target gets exactly one csd (`FlushTlbRange::step`'s
///   `count_kept`, then `smp_call_function_many_cond` in kernel_smp.rs
///   queues one per target of the mask): `csd_queued == kept`;
/// - a csd sends an IPI only when the target's `call_single_queue` was
///   empty, and only the interrupt that IPI raises empties it
///   (`sysvec_call_function`), so every call-function IPI sent is taken
///   once, in the CAL row; the other IPIs sent are reschedules (RES:
///   `resched_curr` of an idle hart a forked child or a moved task was put
///   on, at most one per such placement): `CAL + RES == ipis_sent`; the
///   rest of the csds, `kept - CAL`, were coalesced into an interrupt
///   already pending.
///
/// How many coalesce is not derived: it needs two initiators' csds on one
/// hart within one `ipi_delivery`, a matter of timing (mmapstress01's mms
/// are single-threaded, so only overflowing queues and a switch between
/// two enqueues make it possible; runs at seeds 1-3 coalesced none). The
/// 1 % bound this replaces was read off a run. What must hold is asserted
/// instead: a lost IPI leaves its initiator in `csd_lock_wait` for good,
/// so every measured task finishing (`End::Done`, every fork counted)
/// shows that no kept target was left without its interrupt.
fn assert_accounted(d: &sim::Report) {
    let a = &d.arch;
    let kept = a["defer_ipi_running"] + a["defer_ipi_loaded"] + a["deferred_overflows"];
    let cal = total(d, "CAL");
    assert_eq!(a["csd_queued"], kept, "one csd per kept target: {a:?}");
    let res = total(d, "RES");
    assert_eq!(cal + res, a["ipis_sent"], "every IPI taken once: {a:?}");
    assert!(
        res <= a["sched_fork_remote"] + a["sched_migrations"],
        "RES {res}: one per remote placement at most: {a:?}"
    );
    assert!(cal <= kept && cal > 0, "CAL {cal}: {a:?}");
    assert_eq!(d.end, sim::End::Done, "a flush never completed: {a:?}");
    let forks = d.scenario["workload"]["iterations"].as_u64().unwrap();
    assert_eq!(ops(d), forks, "every fork of the run completed");
}

/// The noise knob `machine.migrate_pct` (random moves at 30 % of the
/// ticks, no kernel mechanism): the fair class's placement moves nothing
/// in the bundled mmapstress01 (docs/placement.md), so its masks stay one
/// hart wide; these tests exercise the flush paths on masks that migrations
/// widened, which the knob provides.
const NOISE: &str = "machine.migrate_pct=30";

/// The bundled mmapstress01 (64 harts, 2000 children forked) with [`NOISE`].
fn stress(extra: &[&str]) -> sim::Report {
    let mut sets = vec![NOISE];
    sets.extend_from_slice(extra);
    run(&scenario("mmapstress01", &sets))
}

/// With ASIDs a hart never leaves an mm's `mm_cpumask`: flushes keep
/// reaching harts the task left long ago. Without ASIDs `switch_mm` clears
/// the bit (the TLB is flushed on every switch anyway), so fewer IPIs:
/// without ASIDs a flush reaches only harts that idle lazily after the
/// task; with them, every hart it visited since it was created. (Seed 1,
/// with [`NOISE`]: 35,565 vs 17,886 IPIs.)
#[test]
fn cpumask_only_grows_with_asids() {
    let asid = stress(&[]);
    let noasid = stress(&["riscv.asid_bits=0"]);
    assert!(
        total(&asid, "CAL") > total(&noasid, "CAL"),
        "ASIDs {} vs none {}",
        total(&asid, "CAL"),
        total(&noasid, "CAL")
    );
}

/// Deferral: every remote target of a flush is either queued or IPI'd, and
/// IPIs go only to harts that have the ASID loaded; the IPI total falls.
#[test]
fn deferral_accounts_for_every_target() {
    let base = stress(&[]);
    let d = stress(&[DEFER]);
    let a = &d.arch;
    assert_accounted(&d);
    assert!(
        a["deferred_flushes"] > 0 && a["deferred_applied"] > 0,
        "{a:?}"
    );
    // Where the IPIs go, exactly. Each remote target of a flush is kept (it
    // has the ASID loaded, or its queue is full: it gets a csd) or queued
    // (no csd, no IPI). Upstream every remote target gets a csd, and an IPI
    // unless its call_single_queue already held one.
    let kept = a["defer_ipi_running"] + a["defer_ipi_loaded"] + a["deferred_overflows"];
    let targets = kept + a["deferred_flushes"];
    assert_eq!(a["csd_queued"], kept, "{a:?}");
    assert!(total(&base, "CAL") <= base.arch["csd_queued"]);
    // So for the flushes of this run the deferral sends kept / targets of
    // the IPIs upstream would. Across the two runs (with [`NOISE`]: 35,565
    // -> 18,398 at seed 1) the runs also differ in where the knob moves the
    // forking parent, whose mask every fork's flush reaches (upstream
    // 39,727 / 33,197 at seeds 2-3, deferral 13,883 / 15,865), so only the
    // direction is asserted across runs.
    assert!(total(&d, "CAL") <= kept && kept < targets);
    assert!(
        total(&d, "CAL") < total(&base, "CAL"),
        "IPIs {} -> {}",
        total(&base, "CAL"),
        total(&d, "CAL")
    );
    // The threshold clears harts from masks, so fewer flushes are even queued.
    let t = stress(&[DEFER, "riscv.cpumask_clear_threshold=2"]);
    assert!(t.arch["cpumask_cleared"] > 0);
    assert!(
        t.arch["deferred_flushes"] < a["deferred_flushes"],
        "{:?}",
        t.arch
    );
    for r in [&base, &d, &t] {
        assert!(r.violations.is_empty(), "{:?}", r.violations);
    }
}

/// The safe variants stay safe across seeds on the workloads built to break them.
#[test]
fn safe_variants_have_no_violations_across_seeds() {
    for seed in 1..=4u64 {
        let sd = format!("seed={seed}");
        for (sc, extra) in [
            ("defer-race", vec![]),
            (
                "defer-race",
                vec!["riscv.defer_flush_to_context_switch=false"],
            ),
            ("defer-race", vec!["riscv.cpumask_clear_threshold=2"]),
            ("vmalloc-race", vec![]),
        ] {
            let mut sets = vec![sd.as_str(), "workload.iterations=10000"];
            sets.extend(extra.iter().copied());
            let r = run(&scenario(sc, &sets));
            assert!(
                r.violations.is_empty(),
                "{sc} {sets:?}: {:?}",
                r.violations[0]
            );
        }
    }
}

/// Reading `loaded_asid` before publishing the queued flush loses the
/// race with `switch_mm`: the hart applies an empty queue and keeps a stale
/// entry to a page that is then freed.
///
/// Two runs whose difference the mechanism dictates, on the same seeds: the
/// seed's order (`Pc::Enqueue`, `smp_mb`, `Pc::CheckLoaded` in
/// arch/riscv/tlbflush.rs) cannot lose the race, so it must show no
/// violation; the unordered one (`Pc::ReadLoadedFirst`, then
/// `Pc::EnqueueLate`) can, and every violation it shows must be this race
/// (invariant 1 after an unordered read). How often a seed's run hits the
/// window is timing (a hart must switch into the mm between two steps of
/// the flusher) and is not derived: the former "at least 2 of 4 seeds" was
/// read off runs (seeds 1-8 now all hit it, 1 to 64 violations each). That
/// the window is reachable at all is proved by the exhaustive check
/// `unsafe_riscv_unordered_enqueue`; here the simulator must reach it in
/// at least one seed.
#[test]
fn unordered_enqueue_is_caught() {
    let mut hits = 0;
    for seed in 1..=4u64 {
        let sd = format!("seed={seed}");
        let ordered = run(&scenario("defer-race", &[&sd]));
        assert!(
            ordered.violations.is_empty(),
            "seed {seed}, ordered: {:?}",
            ordered.violations[0]
        );
        let r = run(&scenario(
            "defer-race",
            &[&sd, "riscv.unordered_enqueue=true"],
        ));
        for v in &r.violations {
            assert_eq!(v.invariant, 1, "seed {seed}: {}", v.what);
        }
        if let Some(v) = r.violations.first() {
            hits += 1;
            assert!(
                v.trace.iter().any(|l| l.contains("BEFORE enqueueing")),
                "{:#?}",
                v.trace
            );
        }
    }
    assert!(hits >= 1, "the race showed in none of 4 seeds");
}

/// The v1 bug: a deferred kernel-range flush leaves global entries behind.
#[test]
fn deferred_kernel_flush_is_caught() {
    for seed in 1..=4u64 {
        let sd = format!("seed={seed}");
        let r = run(&scenario(
            "vmalloc-race",
            &[&sd, "riscv.defer_kernel_flush=true"],
        ));
        let v = r
            .violations
            .iter()
            .find(|v| v.invariant == 7)
            .unwrap_or_else(|| panic!("seed {seed}: no invariant-7 violation"));
        assert!(v.what.contains("stale global TLB entry"), "{}", v.what);
        assert!(
            r.arch["deferred_flushes"] > 0,
            "kernel flushes were deferred"
        );
    }
}

/// The reviewers' question: do lmbench's latencies regress? Not at all,
/// by the mechanism: each benchmark is one process that the fair class
/// never moves off its hart (docs/placement.md), so its `mm_cpumask` holds
/// that hart alone and `__flush_tlb_range` (`FlushTlbRange::step`,
/// `Pc::Start`) takes the local-only branch before the seed's deferral is
/// reached (`may_defer`); nothing is sent, queued or read remotely, so the
/// op latencies are the same to the nanosecond. (The bounds this replaces,
/// 1.001x and 1.05x of the mean, were read off runs; the harts a migrated
/// process leaves keep its ASID loaded and are IPI'd, not queued:
/// [`loaded_targets_are_not_enqueued`].)
#[test]
fn lmbench_latencies_do_not_regress() {
    for (sc, iters) in [
        ("lat-pagefault", "workload.iterations=40"),
        ("lat-mmap", "workload.iterations=3000"),
    ] {
        let base = run(&scenario(sc, &[iters]));
        let d = run(&scenario(sc, &[iters, DEFER]));
        for r in [&base, &d] {
            assert_eq!(total(r, "CAL"), 0, "{sc}: a remote flush");
            assert_eq!(r.arch["defer_enqueues"], 0, "{sc}");
            assert_eq!(r.arch["csd_queued"], 0, "{sc}");
        }
        let (b, n) = (
            &base.main_op().unwrap().latency_ns,
            &d.main_op().unwrap().latency_ns,
        );
        assert_eq!(ops(&base), ops(&d), "{sc}");
        assert_eq!(
            (b.mean, b.p99, b.max),
            (n.mean, n.p99, n.max),
            "{sc}: mean, p99, max"
        );
        assert!(d.violations.is_empty());
    }
}

/// 8-bit ASIDs (256 > 2 x 64 harts, so the allocator is on): 2000 forked
/// children roll the generation over; rollover flushes and deferred queues
/// keyed by reused ASIDs stay safe. With 6 bits (64 ASIDs, not more than
/// 2 x 64 harts) `asids_init` leaves the allocator off: no ASIDs, and the
/// seed's deferral is refused.
#[test]
fn asid_rollover_with_deferral_is_safe() {
    let r = stress(&["riscv.asid_bits=8", DEFER]);
    assert!(r.arch["asid_rollovers"] > 0, "{:?}", r.arch);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let s = scenario("mmapstress01", &["riscv.asid_bits=6", DEFER]);
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("ASID allocator"));
    let noasid = stress(&["riscv.asid_bits=6"]);
    assert_eq!(noasid.arch["asid_rollovers"], 0);
}

/// `should_ipi_flush` reads `loaded_asid` before it enqueues: a hart with
/// the ASID loaded is IPI'd and gets no queue entry. lat_mmap's one process
/// leaves every hart it ran on with its ASID loaded, so nothing is queued,
/// nothing overflows, and every target is IPI'd. (Before: every target was
/// enqueued first; 4,053 overflows in this run.) The process moves only by
/// [`NOISE`]: alone on 64 harts, the fair class never moves it.
#[test]
fn loaded_targets_are_not_enqueued() {
    let d = run(&scenario(
        "lat-mmap",
        &["workload.iterations=3000", DEFER, NOISE],
    ));
    let a = &d.arch;
    assert_eq!(a["deferred_overflows"], 0, "{a:?}");
    assert_eq!(a["deferred_applied"], 0, "{a:?}");
    assert!(total(&d, "CAL") > 0);
    assert_eq!(
        total(&d, "CAL"),
        a["defer_ipi_loaded"] + a["defer_ipi_running"]
    );
}

/// `TLB_FLUSH_QUEUE_SIZE` = 16; a full queue sends the IPI now (no silent
/// whole-ASID flush), and that IPI drains the target's whole queue: every
/// queued entry is applied by a drain, at a switch or in an IPI.
#[test]
fn full_queue_sends_the_ipi_and_the_ipi_drains() {
    assert_eq!(machine::Scenario::default().riscv.flush_queue_depth, 16);
    let d = stress(&[DEFER, "riscv.flush_queue_depth=1"]);
    let a = &d.arch;
    assert!(a["deferred_overflows"] > 0, "{a:?}");
    assert_accounted(&d);
    assert!(a["defer_drains"] > 0 && a["deferred_applied"] >= a["defer_drains"]);
    assert!(a["deferred_applied"] <= a["defer_enqueues"], "{a:?}");
    assert!(d.violations.is_empty(), "{:?}", d.violations);
}

/// The SBI remote-fence branch of `__flush_tlb_range` comes before the
/// seed's deferral and is unchanged by it: with `riscv.rfence=sbi` nothing
/// is queued, every remote flush is one SBI call, and there are no IPIs.
/// (Before: targets were enqueued and only the rest got the SBI fence.)
#[test]
fn sbi_rfence_defers_nothing() {
    let r = stress(&[DEFER, "riscv.rfence=sbi"]);
    let a = &r.arch;
    assert_eq!(a["defer_enqueues"] + a["deferred_flushes"], 0, "{a:?}");
    assert!(a["sbi_rfence"] > 0);
    assert_eq!(total(&r, "CAL"), 0);
    assert!(r.violations.is_empty());
}

/// The mask-clearing patch from the same thread (its own switch, on
/// upstream without deferral): a hart that flushes an mm's whole ASID while
/// the mm is not its `active_mm` leaves `mm_cpumask`, so later flushes of
/// that mm skip it. mmapstress01's IPIs fall; harts that
/// idle after a child keep it as `active_mm` and stay in its mask.
/// Seed 1 with [`NOISE`]: 35,565 -> 17,532 IPIs from only 81 clears,
/// hundreds of IPIs per clear, so the clears must be from a long-lived
/// mask: the forking parent's (its 2,000 forks each flush it) rather than
/// a child's; only the direction is asserted.
#[test]
fn mask_clearing_patch_cuts_ipis() {
    let base = stress(&[]);
    let c = stress(&["riscv.cpumask_clear_on_flush_all=true"]);
    assert!(c.arch["cpumask_cleared"] > 0, "{:?}", c.arch);
    assert!(
        total(&c, "CAL") < total(&base, "CAL"),
        "IPIs {} -> {}",
        total(&base, "CAL"),
        total(&c, "CAL")
    );
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}
