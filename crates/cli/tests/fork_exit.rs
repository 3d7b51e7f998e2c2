//! The guests' fork rows as the benchmark places its tasks
//! (`workloads::fork_exit`): counts derived from the mechanism, which the
//! riscv64 guest's fork+exit row (~105 CAL per fork, docs/guests.md) is
//! compared with by `validate --guest --arch riscv64`.
mod common;
use common::*;
use workloads::fork_exit::CHILD_ROUNDS;

fn fork_row(workload: &str, arch: &str, extra: &[&str]) -> sim::Report {
    let name = format!("workload.name={workload}");
    let arch = format!("machine.arch={arch}");
    let mut sets = vec![
        name.as_str(),
        arch.as_str(),
        "machine.cpus=4",
        "machine.topology=flat",
        "machine.migrate_pct=0",
        "workload.threads=1",
        "workload.iterations=30",
    ];
    sets.extend_from_slice(extra);
    let r = run(&scenario("mmapstress01", &sets));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.arch["forks"], 30);
    r
}

/// A child born on CPU0 (its parent's CPU, by the inherited affinity)
/// loads its mm there before it pins itself elsewhere. With ASIDs a RISC-V
/// hart never leaves an mm's `mm_cpumask`, so each of the child's munmaps
/// (one `flush_tlb_range`) and its exit (`flush_tlb_mm`) IPIs CPU0 and no
/// other hart: `CHILD_ROUNDS + 1` CAL per fork, all on CPU0. Without ASIDs
/// the same: the parent sleeps in `wait()`, so CPU0 idles lazily in the
/// child's mm (no `switch_mm`, whose clearing of the bit is the no-ASID
/// difference) until the child's exit wakes the parent. That wake-up is one
/// more: the parent sleeps on CPU0, which idles, so the exiting child's
/// `try_to_wake_up` from its own hart queues it on CPU0's wake list
/// (`ttwu_queue_cond`: an idle CPU) and sends a call-function IPI (the
/// SG2042 idles in WFI, not polling): `CHILD_ROUNDS + 2` per fork.
#[test]
fn a_child_born_on_cpu0_leaves_cpu0_in_its_mask_on_riscv() {
    let r = fork_row("fork_exit", "riscv", &[]);
    assert_eq!(r.arch["ttwu_wakelist"], 30, "one remote wake-up per fork");
    assert_eq!(r.arch["ttwu_ipis"], 30);
    assert_eq!(r.arch["wake_idle_without_ipi"], 0);
    let per_fork = CHILD_ROUNDS as u64 + 2;
    assert_eq!(total(&r, "CAL"), 30 * per_fork);
    assert_eq!(r.interrupts.cal[0], 30 * per_fork, "all on CPU0");
    // The move itself is the benchmark's sched_setaffinity, one per child.
    assert_eq!(r.arch["sched_migrations"], 30);
    let noasid = fork_row("fork_exit", "riscv", &["riscv.asid_bits=0"]);
    assert_eq!(noasid.interrupts.cal, r.interrupts.cal);
}

/// Born on its own CPU, the child's mm is loaded there only: its flushes
/// are local, no IPI, and nothing moves. Its exit still wakes the parent
/// on idle CPU0 through the wake list: one CAL per fork, on CPU0.
#[test]
fn a_child_born_on_its_own_cpu_flushes_locally() {
    let r = fork_row("fork_exit_placed", "riscv", &[]);
    assert_eq!(r.arch["csd_queued"], 0, "no flush request");
    assert_eq!(r.arch["ttwu_wakelist"], 30);
    assert_eq!(total(&r, "CAL"), 30);
    assert_eq!(r.interrupts.cal[0], 30);
    assert_eq!(r.arch["sched_migrations"], 0);
}

/// The same wake-ups on x86 at the Ice Lake profile, whose idle polls
/// (MWAIT): queued on CPU0's wake list, no IPI (`set_nr_if_polling`); and
/// with a non-polling idle (a QEMU guest's HLT) one CAL each.
#[test]
fn x86_wakeups_of_a_polling_idle_cpu_send_no_ipi() {
    let r = fork_row("fork_exit_placed", "x86", &[]);
    assert_eq!(r.arch["ttwu_wakelist"], 30);
    // The parent's 30 wake-ups, and the 30 children's `wake_up_new_task`
    // → `resched_curr` of their idle CPUs: the same tracepoint
    // (`sched_wake_idle_without_ipi`), no IPI of either kind.
    assert_eq!(r.arch["wake_idle_without_ipi"], 60);
    assert_eq!(total(&r, "CAL"), 0);
    assert_eq!(total(&r, "RES"), 0);
    let s = scenario(
        "mmapstress01",
        &[
            "workload.name=fork_exit_placed",
            "machine.arch=x86",
            "machine.cpus=4",
            "machine.topology=flat",
            "machine.migrate_pct=0",
            "workload.threads=1",
            "workload.iterations=30",
        ],
    );
    s.validate().unwrap();
    let mut p = machine::CostProfile::default_x86();
    p.idle_polls = false;
    let (h, _) = tlblab::run_with_profile(&s, p, &tlblab::RunOptions::default()).unwrap();
    assert_eq!(h.arch["wake_idle_without_ipi"], 0);
    assert_eq!(total(&h, "CAL"), 30);
    assert_eq!(h.interrupts.cal[0], 30);
    assert_eq!(total(&h, "RES"), 30, "one reschedule IPI per child");
}

/// On arm64 the same flushes are broadcast TLBIs, no IPI, wherever the
/// child was born: per fork one `TLBI ASIDE1IS` for `dup_mmap`'s
/// `flush_tlb_mm` of the parent, one `TLBI ..IS` per munmap of the one
/// page, and one `TLBI ASIDE1IS` for the child's `exit_mmap` (its
/// `free_pgtables` freed the tables the munmaps left). The parent touches
/// no memory, so its own exit frees no table and flushes nothing.
/// The CAL left is the parent's wake-up (WFI idle: one IPI per fork).
#[test]
fn arm64_broadcasts_the_same_flushes() {
    for workload in ["fork_exit", "fork_exit_placed"] {
        let r = fork_row(workload, "arm64", &[]);
        assert_eq!(r.arch["csd_queued"], 0, "{workload}");
        assert_eq!(total(&r, "CAL"), 30, "{workload}");
        assert_eq!(
            r.arch["tlbi_is"],
            30 * (1 + CHILD_ROUNDS as u64 + 1),
            "{workload}"
        );
    }
}

/// With several children alive, each still sends `CHILD_ROUNDS + 1`
/// call-function requests to CPU0 (`csd_queued`, derived as above), but
/// CPU0 takes fewer interrupts than requests: `__smp_call_single_queue`
/// sends an IPI only when its `llist_add` finds CPU0's
/// `call_single_queue` empty, and one interrupt runs every request queued
/// by then (`__flush_smp_call_function_queue`). One child at a time never
/// finds the queue busy: one IPI per request.
#[test]
fn concurrent_children_coalesce_their_requests_to_cpu0() {
    let one = fork_row("fork_exit", "riscv", &[]);
    // Every IPI sent is a request's or a reschedule (the child's
    // sched_setaffinity to an idle CPU: one per fork).
    assert_eq!(total(&one, "RES"), 30);
    assert_eq!(
        one.arch["csd_queued"] + one.arch["ttwu_wakelist"] + total(&one, "RES"),
        one.arch["ipis_sent"]
    );
    let r = fork_row("fork_exit", "riscv", &["workload.threads=3"]);
    let per_fork = CHILD_ROUNDS as u64 + 1;
    assert_eq!(r.arch["csd_queued"], 30 * per_fork);
    assert_eq!(total(&r, "CAL") + total(&r, "RES"), r.arch["ipis_sent"]);
    assert_eq!(r.interrupts.cal[0], total(&r, "CAL"), "all on CPU0");
    assert!(
        r.arch["ipis_sent"] < r.arch["csd_queued"],
        "{} IPIs for {} requests",
        r.arch["ipis_sent"],
        r.arch["csd_queued"]
    );
}
