//! The checker's memory model on the x86 flush paths: every named barrier
//! has a drop check, the ones the kernel calls necessary are caught with
//! the reordering visible, and sequential consistency alone catches none.
use check::configs::{build_with, CATALOGUE};
use check::{explore, Bounds};
use kernel::hw::memory_model::{MemoryModel, BARRIERS};

fn config(name: &str) -> &'static check::configs::Config {
    CATALOGUE.iter().find(|c| c.name == name).unwrap()
}

/// Explore catalogue check `name` under `model` (None: its architecture's).
fn run(name: &str, model: Option<MemoryModel>) -> check::Outcome {
    explore(
        &build_with(config(name), &[], model).unwrap(),
        Bounds::default(),
    )
}

fn drop_checks() -> Vec<&'static check::configs::Config> {
    CATALOGUE
        .iter()
        .filter(|c| c.sets.iter().any(|s| s.starts_with("inject.drop_barrier=")))
        .collect()
}

#[test]
fn every_named_barrier_has_a_drop_check() {
    for b in BARRIERS {
        let set = format!("inject.drop_barrier={}", b.name);
        assert!(
            CATALOGUE.iter().any(|c| c.sets.contains(&set.as_str())),
            "no catalogue check drops {}",
            b.name
        );
    }
}

#[test]
fn caught_drops_print_the_buffered_store_and_the_dropped_barrier() {
    for c in drop_checks().into_iter().filter(|c| !c.expect_safe) {
        let o = explore(&build_with(c, &[], None).unwrap(), Bounds::default());
        assert_eq!(o.verdict, "unsafe", "{}", c.name);
        let text = o.counterexample.join("\n");
        assert!(
            text.contains("DROPPED (inject.drop_barrier)"),
            "{}: {text}",
            c.name
        );
        assert!(text.contains("into its store buffer"), "{}: {text}", c.name);
        // The read that misses the other side's store: past a store
        // still buffered, or of an older message than memory holds.
        assert!(
            (text.contains("while CPU") && text.contains("still in its store buffer"))
                || text
                    .contains("is already in memory (nothing orders this read after that store)"),
            "{}: the read past the other side's store is shown: {text}",
            c.name
        );
    }
}

/// Under sequential consistency a dropped barrier changes nothing: the
/// drop checks that TSO catches are safe, so the store buffers are what
/// catch them.
#[test]
fn sequential_consistency_catches_no_dropped_barrier() {
    let caught: Vec<_> = drop_checks()
        .into_iter()
        .filter(|c| !c.expect_safe)
        .collect();
    assert!(caught.len() >= 3);
    for c in caught {
        let w = build_with(c, &[], Some(MemoryModel::Sc)).unwrap();
        assert_eq!(explore(&w, Bounds::default()).verdict, "safe", "{}", c.name);
    }
}

/// With every barrier in place each buffered store of the modelled
/// windows drains in the step that made it, so TSO adds no state to the
/// upstream checks; a dropped barrier leaves stores buffered across steps
/// and the drain choices add states.
#[test]
fn tso_adds_states_only_where_a_barrier_is_missing() {
    let states = |name: &str, model| {
        let o = run(name, model);
        (o.verdict, o.states)
    };
    for name in ["x86_switch_back_race", "x86_lazy_return_race"] {
        let (tso, sc) = (states(name, None), states(name, Some(MemoryModel::Sc)));
        assert_eq!(tso, sc, "{name}");
        assert_eq!(tso.0, "safe", "{name}");
    }
    let (tso, sc) = (
        states("drop_switch_mm_cpumask_set_cpu", None),
        states("drop_switch_mm_cpumask_set_cpu", Some(MemoryModel::Sc)),
    );
    assert_eq!((tso.0, sc.0), ("safe", "safe"));
    assert!(tso.1 > sc.1, "{tso:?} vs {sc:?}");
}

#[test]
fn unknown_barrier_names_are_refused() {
    let c = &CATALOGUE[0];
    let e = build_with(c, &["inject.drop_barrier=smp_mb".into()], None).unwrap_err();
    assert!(e.to_string().contains("unknown barrier 'smp_mb'"), "{e}");
}

/// RISC-V seed (d) under the weak model: with both fences the buffered
/// RVWMO: the flusher's `need_tlb_flush` store and the hart's
/// `loaded_asid` store drain at their fences, but each side's later loads
/// may still return older messages until a fence or their own access
/// orders them ([`kernel::hw::weak_mem`]): the seed's correct code
/// explores more states than under SC, with the same verdict; dropping
/// either fence is caught as the store-buffering shape, with the read
/// that misses the other side's store printed.
#[test]
fn riscv_seed_fences_are_the_store_buffering_shape() {
    for n in [
        "riscv_defer_vs_switch",
        "riscv_defer_vs_switch_mask_clearing",
    ] {
        let (weak, sc) = (run(n, None), run(n, Some(MemoryModel::Sc)));
        assert_eq!((weak.verdict, sc.verdict), ("safe", "safe"), "{n}");
        assert!(
            weak.states > sc.states,
            "{n}: {} vs {}",
            weak.states,
            sc.states
        );
    }
    // Without set_mm_asid's fence the hart's need_tlb_flush test may pass
    // the flusher's enqueue, or (had switch_mm_cid's smp_mb not published
    // it at the end of the switch) the flusher's re-read of loaded_asid
    // may pass the hart's store: either read of the shape is the miss.
    for (n, missed) in [
        (
            "drop_set_mm_asid_fence",
            &["CPU1's loaded_asid", "CPU1's need_tlb_flush"][..],
        ),
        (
            "drop_should_ipi_flush_smp_mb",
            &["CPU1's need_tlb_flush"][..],
        ),
    ] {
        let o = run(n, None);
        assert_eq!(o.verdict, "unsafe", "{n}");
        let text = o.counterexample.join("\n");
        assert!(
            missed.iter().any(|m| {
                text.contains(&format!("reads {m} from memory while CPU"))
                    || text.contains(&format!("reads {m} = "))
            }),
            "{n}: {text}"
        );
    }
}

/// arm64 under the weak model: with every barrier the TLBIs complete at
/// their DSB in the step that issued them (the seed's checks explore more
/// states than SC only through the ASID allocator's relaxed fast-path
/// reads of the two CPUs' first switches); without the dsb(ishst) the
/// printed counterexample shows the
/// TLBI completing before the PTE store and a walker reading past it;
/// a broadcast TLBI is not completed by a dsb(nsh).
#[test]
fn arm64_tlbis_are_in_flight_until_their_dsb() {
    for name in ["arm64_wp_reuse_broadcast", "arm64_wp_reuse_local_seed"] {
        let (weak, sc) = (run(name, None), run(name, Some(MemoryModel::Sc)));
        assert_eq!((weak.verdict, sc.verdict), ("safe", "safe"), "{name}");
        assert!(weak.states > sc.states, "{name}");
        // Without the allocator's messages (one CPU switching) the TLBIs
        // add nothing. What the weak model still adds is the last exit's
        // teardown: `exit_mmap`'s PTE clear reaches the page walkers at its
        // `flush_tlb_mm` DSB, or earlier when the hardware gets to it, in
        // either of the two steps between the zap and that DSB
        // (`free_pgtables`, `tlb_finish_mmu`): two states more than SC,
        // each with one drain into it and one step out of it.
        let one = |m| {
            explore(
                &build_with(config(name), &["machine.cpus=1".into()], m).unwrap(),
                Bounds::default(),
            )
        };
        let (weak1, sc1) = (one(None), one(Some(MemoryModel::Sc)));
        assert_eq!(weak1.states, sc1.states + 2, "{name}");
        assert_eq!(weak1.transitions, sc1.transitions + 4, "{name}");
    }
    // The unmap path's PTE clear reaches the page walkers only at the
    // flusher's DSB (or whenever the hardware gets to it), so walkers may
    // still read the old PTE between the zap and the flush: more states
    // than SC, the same verdict.
    let (weak, sc) = (
        run("arm64_madvise_race", None),
        run("arm64_madvise_race", Some(MemoryModel::Sc)),
    );
    assert_eq!((weak.verdict, sc.verdict), ("safe", "safe"));
    assert!(weak.states > sc.states, "{} vs {}", weak.states, sc.states);
    let o = run("drop_flush_tlb_range_dsb_ishst_unmap", None);
    assert_eq!(o.verdict, "unsafe");
    let text = o.counterexample.join("\n");
    let completes = text
        .find("the hardware completes TLBI VALE1IS")
        .expect(&text);
    let walk = text.find("walks through the old entry").expect(&text);
    assert!(completes < walk, "{text}");
    assert!(text.contains("violation I1"), "{text}");
    assert_eq!(
        run(
            "drop_flush_tlb_range_dsb_ishst_unmap",
            Some(MemoryModel::Sc)
        )
        .verdict,
        "safe"
    );
    let o = run("drop_flush_tlb_range_dsb_ishst", None);
    assert_eq!(o.verdict, "unsafe");
    let text = o.counterexample.join("\n");
    let completes = text
        .find("the hardware completes TLBI VALE1IS")
        .expect(&text);
    let walk = text
        .find("from memory while CPU0's store to it is still in its store buffer")
        .expect(&text);
    assert!(completes < walk, "{text}");
    assert!(text.contains("violation I6"), "{text}");
    let o = run("unsafe_arm64_broadcast_dsb_nsh", None);
    assert_eq!(o.verdict, "unsafe");
    assert!(o.counterexample.join("\n").contains("dsb(nsh)"));
    assert_eq!(
        run("unsafe_arm64_broadcast_dsb_nsh", Some(MemoryModel::Sc)).verdict,
        "safe"
    );
}

/// arm64 `check_and_switch_context`: the fast path's relaxed reads may
/// return older values (another CPU's rollover zeroed `active_asids` and
/// moved the generation on); its `cmpxchg` against the value read is what
/// sends it to the slow path then. Without it (a blind store) Arm's model
/// reaches a reused ASID over stale entries (I5) through such a read; SC
/// cannot (the fast path would need B's new-generation id and CPU1's
/// pre-rollover `active_asids` at once).
#[test]
fn arm64_asid_fast_path_needs_its_cmpxchg_under_arms_model() {
    for m in [None, Some(MemoryModel::Sc)] {
        assert_eq!(run("arm64_asid_fastpath_vs_rollover", m).verdict, "safe");
    }
    let o = run("unsafe_arm64_asid_fastpath_blind_store", None);
    assert_eq!(o.verdict, "unsafe");
    let text = o.counterexample.join("\n");
    assert!(text.contains("violation I5"), "{text}");
    assert!(text.contains("ASID rollover"), "{text}");
    assert!(
        text.contains("active_asids = ") && text.contains("although 0 is already in memory"),
        "the stale fast-path read is shown: {text}"
    );
    // Under SC the fast path cannot see the other mm's new-generation id
    // and its CPU's pre-rollover `active_asids` at once (no I5), but the
    // lost zeroing still leaves CPU0 running an mm under an ASID number the
    // allocator no longer gives it: when that mm's last task exits on CPU1,
    // `exit_mmap`'s `flush_tlb_mm` invalidates the mm's new ASID only, and
    // the tables it frees stay in CPU0's walk cache (I3; 20 steps, 10 under
    // Arm's model).
    let sc = run(
        "unsafe_arm64_asid_fastpath_blind_store",
        Some(MemoryModel::Sc),
    );
    assert_eq!(sc.verdict, "unsafe");
    let text = sc.counterexample.join("\n");
    assert!(text.contains("violation I3"), "{text}");
    assert!(text.contains("ASID rollover"), "{text}");
    assert!(sc.counterexample.len() > o.counterexample.len(), "{text}");
}

/// RISC-V upstream: `set_mm`'s `cpumask_set_cpu` is a relaxed AMO, so the
/// only thing ordering a hart's `mm_cpumask` bit before its first walk of
/// the new mm is `switch_mm_cid`'s `smp_mb()`. Without it the flusher
/// (whose PTE clear is a fully ordered `xchg`) reads the mask past the
/// bit still in the switching hart's buffer and flushes only itself; the
/// hart that walked before the clear keeps its entry (I1). SC cannot show
/// it; the seed's `set_mm_asid` fence closes it on its own.
#[test]
fn riscv_mm_cpumask_bit_is_ordered_only_by_switch_mm_cid() {
    let o = run("drop_switch_mm_cid_smp_mb", None);
    assert_eq!(o.verdict, "unsafe");
    let text = o.counterexample.join("\n");
    let buffered = text
        .find("stores mm1's mm_cpumask bit 1 = 1 into its store buffer")
        .expect(&text);
    let walk = text.find("CPU1: user read").expect(&text);
    let missed = text
        .find("CPU0: reads mm1's mm_cpumask bit 1 from memory while CPU1's store to it is still in its store buffer")
        .expect(&text);
    let freed = text.find("pages freed").expect(&text);
    assert!(buffered < walk && walk < missed && missed < freed, "{text}");
    assert!(text.contains("violation I1"), "{text}");
    assert_eq!(
        run("drop_switch_mm_cid_smp_mb", Some(MemoryModel::Sc)).verdict,
        "safe"
    );
    for n in [
        "riscv_switch_vs_flush",
        "riscv_defer_without_switch_mm_cid_smp_mb",
    ] {
        assert_eq!(run(n, None).verdict, "safe", "{n}");
    }
}

/// Speculative walks (`machine.speculative_walks`): a walker may cache a
/// translation with no access. In `switch_then_read` hart 1 makes no
/// access between its first switch into the mm and the madvise, so
/// without them dropping switch_mm_cid's smp_mb is safe; with them the
/// walker caches P in that window (the step is printed as such, before
/// the flusher's read that misses the buffered bit) and the page is used
/// after it is freed. The upstream barrier keeps it safe either way.
#[test]
fn speculative_walks_cache_translations_no_access_asked_for() {
    let run = |n: &str| run(n, None);
    assert_eq!(run("drop_switch_mm_cid_smp_mb_late_reader").verdict, "safe");
    let o = run("drop_switch_mm_cid_smp_mb_speculative");
    assert_eq!(o.verdict, "unsafe");
    let text = o.counterexample.join("\n");
    let walk = text
        .find("CPU1: the hardware walker speculatively walks 0x7f0000000000 (no access)")
        .expect(&text);
    let missed = text
        .find("reads mm1's mm_cpumask bit 1 from memory while CPU1's store to it is still in its store buffer")
        .expect(&text);
    assert!(walk < missed, "{text}");
    assert!(text.contains("violation I1"), "{text}");
    assert_eq!(run("riscv_switch_vs_flush_speculative").verdict, "safe");
}
