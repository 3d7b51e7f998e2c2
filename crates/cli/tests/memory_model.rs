//! `tlblab check --memory-model`, `inject.drop_barrier` and the barrier list.

mod common;
use common::tlblab;

#[test]
fn a_dropped_barrier_is_caught_under_tso_and_not_under_sc() {
    let (code, out, _) = tlblab(&["check", "drop_switch_mm_smp_mb"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("switch_mm_irqs_off.smp_mb DROPPED"), "{out}");
    assert!(
        out.contains("reads CPU1's cpu_tlbstate.loaded_mm from memory while CPU1's store to it is still in its store buffer"),
        "{out}"
    );
    let (code, out, _) = tlblab(&["check", "drop_switch_mm_smp_mb", "--memory-model", "sc"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("safe: "), "{out}");
    let (code, _, err) = tlblab(&["check", "x86_madvise_race", "--memory-model", "psc"]);
    // clap refuses it (exit 2, naming the value and the known ones).
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'psc'") && err.contains("arch, sc, tso, weak"),
        "{err}"
    );
}

#[test]
fn the_simulator_refuses_drop_barrier_and_list_names_the_barriers() {
    let (code, _, err) = tlblab(&[
        "run",
        "--set",
        "inject.drop_barrier=switch_mm_irqs_off.smp_mb",
    ]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("only `tlblab check` sees barriers"), "{err}");
    let (code, out, _) = tlblab(&["list"]);
    assert_eq!(code, 0);
    for b in kernel::hw::memory_model::BARRIERS {
        assert!(out.contains(b.name), "{} missing from list", b.name);
    }
}

/// `tlblab run cow-reuse-race --set KV` is refused in one line containing `why`.
fn simulator_refuses(kv: &str, why: &str) {
    let (code, _, err) = tlblab(&["run", "cow-reuse-race", "--set", kv]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(why), "{err}");
}

#[test]
fn the_simulator_refuses_the_checker_only_dsb_switch() {
    simulator_refuses("inject.arm64_broadcast_dsb_nsh=true", "only `tlblab check`");
}

#[test]
fn the_simulator_refuses_speculative_walks() {
    simulator_refuses(
        "machine.speculative_walks=true",
        "machine.speculative_walks: only `tlblab check`",
    );
}
