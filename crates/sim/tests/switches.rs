//! Switches that no other test varied, each run both ways on a small
//! scenario with its effect asserted from the mechanism: an exact count
//! where the mechanism fixes it, else the inequality it implies (derived
//! in each test's comment). Runs the world directly (workloads + sim), so
//! it builds without the CLI and serves as a fast target for cargo-mutants.
//!
//! Switches no test varied before (issue 21 item 5), and where each is now:
//!
//! | switch | test |
//! |---|---|
//! | machine.tlb_entries, tlb_ways, psc_entries | kernel/tests/tlb_geometry.rs |
//! | machine.nmi_hz | here: nmis_stall_but_count_nothing |
//! | machine.irqoff_hz, irqoff_long_pct | here: irqoff_windows_delay_but_count_nothing |
//! | machine.timeslice_us | here: timeslice_makes_the_switches_that_defer |
//! | machine.migrate_pct | here: migration_spreads_mm_cpumask |
//! | arm64.range_tlbi | here: arm64_range_tlbi_op_counts |
//! | arm64.asid_bits | here: arm64_asid_bits_force_rollovers |
//! | riscv.tlb_flush_all_threshold | here: riscv_flush_all_threshold; kernel/tests/riscv_flush.rs |
//! | riscv.flush_queue_depth (beyond 1) | kernel/tests/riscv_flush.rs: full_queue_keeps_the_ipi |
//! | workload.period_us | workloads/tests/workloads.rs: usemem_shape_and_fork_period |
//!
//! `machine.jitter_pct` is varied by cli/tests/properties.rs; the others by
//! the CLI tests and the checker's catalogue (`grep -rn KEY crates/*/tests`).

use machine::cost::CostProfile;
use machine::Scenario;
use sim::{Report, Sim, SimOptions};

/// A workload's bundled scenario with `--set` overrides (jitter off, so
/// two runs differ only by the switch under test).
fn scen(workload: &str, sets: &[&str]) -> Scenario {
    let mut s = workloads::defaults(workload).unwrap();
    s.machine.jitter_pct = 0;
    for kv in sets {
        s.set(kv).unwrap_or_else(|e| panic!("{kv}: {e}"));
    }
    s.validate().unwrap();
    s
}

/// Run as `tlblab run` does (tlblab::run_with_profile's options); also
/// returns the IRQ-off time, which the report does not carry.
fn run(s: &Scenario) -> (Report, u64) {
    let world = workloads::build(s).unwrap();
    let opts = SimOptions {
        max_time_ns: s.machine.max_sim_time_ms * 1_000_000,
        jitter_pct: s.machine.jitter_pct,
        seed: s.seed,
        nmi_hz: s.machine.nmi_hz,
        smi_hz: s.machine.smi_hz,
        smi_ns: s.machine.smi_us as u64 * 1000,
        vcpu_run_ns: s.x86.vcpu_run_us as u64 * 1000,
        vcpu_preempt_ns: s.x86.vcpu_preempt_us as u64 * 1000,
        timeslice_ns: s.machine.timeslice_us as u64 * 1000,
        migrate_pct: s.machine.migrate_pct,
        irqoff_hz: s.machine.irqoff_hz,
        irqoff_long_pct: s.machine.irqoff_long_pct,
        ..SimOptions::default()
    };
    let mut sim = Sim::new(world, CostProfile::default_for(s.machine.arch), opts);
    let end = sim.run(|_| {});
    (Report::build(&sim, s.to_json(), end), sim.irqoff_ns)
}

fn ops(r: &Report) -> u64 {
    r.main_op().expect("a measured op").count
}

/// madvise_dontneed: CPU0 madvises `pages` pages, `threads` busy threads
/// of the same mm spin on CPUs 1..=threads.
fn madvise(arch: &str, pages: u64, extra: &[&str]) -> Report {
    let mut sets = vec![
        format!("machine.arch={arch}"),
        "machine.cpus=4".into(),
        "workload.threads=2".into(),
        "workload.iterations=50".into(),
        format!("workload.size={}KiB", pages * 4),
    ];
    sets.extend(extra.iter().map(|s| s.to_string()));
    let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
    let r = run(&scen("madvise_dontneed", &sets)).0;
    assert_eq!(ops(&r), 50);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    r
}

/// `riscv.tlb_flush_all_threshold`: `local_flush_tlb_range_asid` issues
/// one `sfence.vma` per page up to the threshold, else one whole-ASID
/// `sfence.vma` (counted in full_flushes too). Each madvise flushes on the
/// 3 harts of mm_cpumask (CPU0 locally, CPUs 1-2 by IPI), so for 8 pages
/// and 50 madvises: 3 * 50 * 8 = 1200 with threshold >= 8, and 3 * 50 = 150
/// (plus 150 full flushes) with threshold 7. No other path counts sfence.vma
/// here: the switches at start take a fresh ASID (a full flush, no sfence).
#[test]
fn riscv_flush_all_threshold() {
    let per_page = madvise("riscv", 8, &["riscv.tlb_flush_all_threshold=8"]);
    assert_eq!(per_page.arch["sfence_vma"], 3 * 50 * 8);
    let default = madvise("riscv", 8, &[]);
    assert_eq!(default.arch["sfence_vma"], 3 * 50 * 8, "default 64 >= 8");
    let whole = madvise("riscv", 8, &["riscv.tlb_flush_all_threshold=7"]);
    assert_eq!(whole.arch["sfence_vma"], 3 * 50);
    assert_eq!(
        whole.arch["full_flushes"],
        per_page.arch["full_flushes"] + 3 * 50
    );
    // The IPI count does not depend on how each hart flushes: 2 per madvise.
    for r in [&per_page, &whole] {
        assert_eq!(r.interrupt_totals["CAL"], 2 * 50);
        assert_eq!(r.arch["sbi_rfence"], 0);
    }
}

/// `riscv.rfence = sbi`: one SBI ecall per madvise instead of 2 IPIs; the
/// harts flush the same pages (the firmware runs sfence.vma on each), so
/// sfence_vma is unchanged and the kernel's CAL row stays 0.
#[test]
fn riscv_sbi_rfence_replaces_ipis() {
    let r = madvise("riscv", 8, &["riscv.rfence=sbi"]);
    assert_eq!(r.arch["sbi_rfence"], 50);
    assert_eq!(r.interrupt_totals["CAL"], 0);
    assert_eq!(r.arch["sfence_vma"], 3 * 50 * 8);
}

/// `arm64.range_tlbi`: without FEAT_TLBIRANGE `__flush_tlb_range` issues
/// one TLBI VALE1IS per page (32 pages < MAX_DVM_OPS = 512): 50 * 32 = 1600
/// ops. With it, `__flush_tlb_range_op` covers 32 pages with one range op
/// (scale 0, num 15: (15 + 1) << 1 = 32 pages): 50 ops; 33 pages need that
/// op plus a single-page op for the odd page: 100. One DSB ISH per flush
/// either way: 50.
#[test]
fn arm64_range_tlbi_op_counts() {
    for (pages, range, ops) in [
        (32u64, false, 32u64),
        (32, true, 1),
        (33, true, 2),
        (1, true, 1),
    ] {
        let r = madvise("arm64", pages, &[&format!("arm64.range_tlbi={range}")]);
        assert_eq!(r.arch["tlbi_is"], 50 * ops, "{pages} pages, range {range}");
        assert_eq!(r.arch["dsb_ish"], 50, "{pages} pages, range {range}");
        assert_eq!(r.interrupt_totals["TLB"] + r.interrupt_totals["CAL"], 0);
    }
}

/// `arm64.asid_bits`: every forked and exec'd child is a new mm that needs
/// an ASID when it runs. With 3 bits there are 8 ASIDs (ASID 0 reserved):
/// once more than 7 distinct mms have run, the allocator must start a new
/// generation (pigeonhole), so rollovers >= 1; with 16 bits (65535 usable)
/// and far fewer mms, none.
#[test]
fn arm64_asid_bits_force_rollovers() {
    let base = [
        "workload.iterations=40",
        "machine.cpus=5",
        "workload.threads=2",
        "workload.period_us=5",
    ];
    let (wide, _) = run(&scen("cow_reuse_race", &base));
    let mut narrow = base.to_vec();
    narrow.push("arm64.asid_bits=3");
    let (small, _) = run(&scen("cow_reuse_race", &narrow));
    assert!(small.arch["forks"] > 8, "forks {}", small.arch["forks"]);
    assert_eq!(wide.arch["asid_rollovers"], 0);
    assert!(small.arch["asid_rollovers"] >= 1);
    assert!(small.violations.is_empty() && wide.violations.is_empty());
}

/// `machine.timeslice_us`: defer_race's readers never block, so without a
/// tick the neighbour process on their hart never runs after the reader
/// starts: every target of a flush is running the mm and is IPI'd
/// (`defer_ipi_running`), nothing is deferred. With a 5 µs tick the harts
/// switch away from the mm and flushes are queued for them.
#[test]
fn timeslice_makes_the_switches_that_defer() {
    let base = ["workload.iterations=300"];
    let (tick, _) = run(&scen("defer_race", &base));
    let mut no_tick = base.to_vec();
    no_tick.push("machine.timeslice_us=0");
    let (none, _) = run(&scen("defer_race", &no_tick));
    assert!(tick.arch["deferred_flushes"] > 0);
    assert!(tick.interrupt_totals["RES"] + tick.arch["defer_drains"] > 0);
    assert_eq!(none.arch["deferred_flushes"], 0, "{:?}", none.arch);
    assert_eq!(none.arch["defer_ipi_running"], 3 * 300);
    assert_eq!(none.interrupt_totals["CAL"], 3 * 300);
}

fn x86_madvise(extra: &[&str]) -> (Report, u64) {
    let mut sets = vec![
        "machine.cpus=4",
        "workload.threads=2",
        "workload.iterations=300",
    ];
    sets.extend_from_slice(extra);
    run(&scen("madvise_dontneed", &sets))
}

/// `machine.nmi_hz`: NMIs only stall CPUs; they neither send nor take
/// flush IPIs, so the counts the mechanism fixes (TLB = CAL = 2 per
/// madvise) are unchanged, while the serial madvise loop, stalled whenever
/// an NMI lands on a CPU it waits for, can only take longer.
#[test]
fn nmis_stall_but_count_nothing() {
    let (quiet, _) = x86_madvise(&[]);
    let (nmi, _) = x86_madvise(&["machine.nmi_hz=100000"]);
    for r in [&quiet, &nmi] {
        assert_eq!(r.interrupt_totals["TLB"], 2 * 300);
        assert_eq!(r.interrupt_totals["CAL"], 2 * 300);
    }
    assert!(nmi.sim_time_ns > quiet.sim_time_ns);
    assert!(nmi.ops[0].latency_ns.max > quiet.ops[0].latency_ns.max);
}

/// `machine.irqoff_hz` / `irqoff_long_pct`: an IPI target inside an
/// IRQ-off window takes the flush only when it ends, so the initiator's
/// wait (and the op) grows, the counts do not; a window drawn from the
/// long tail is longer (profile irqoff_long > irqoff_short), so at one
/// rate 100 % long windows take more IRQ-off time than 0 %.
#[test]
fn irqoff_windows_delay_but_count_nothing() {
    let (quiet, q_off) = x86_madvise(&[]);
    let (short, s_off) = x86_madvise(&["machine.irqoff_hz=20000", "machine.irqoff_long_pct=0"]);
    // At 300 windows/s of 1 ms each the CPUs are off ~30 % of the time;
    // 3000 madvises (~9 ms) see a few dozen windows over the 4 CPUs.
    let long_run = ["machine.irqoff_hz=300", "workload.iterations=3000"];
    let (rare, r_off) = x86_madvise(&[long_run[0], long_run[1], "machine.irqoff_long_pct=0"]);
    let (long, l_off) = x86_madvise(&[long_run[0], long_run[1], "machine.irqoff_long_pct=100"]);
    let p = CostProfile::default_x86();
    assert!(p.ns(machine::Cost::IrqOffLong) > p.ns(machine::Cost::IrqOffShort));
    assert_eq!(q_off, 0);
    assert!(s_off > 0 && l_off > r_off, "{s_off} {r_off} {l_off}");
    for r in [&quiet, &short, &rare, &long] {
        assert_eq!(r.interrupt_totals["TLB"], 2 * ops(r));
    }
    assert_eq!((ops(&short), ops(&long)), (300, 3000));
    assert!(short.ops[0].latency_ns.mean > quiet.ops[0].latency_ns.mean);
    assert!(long.ops[0].latency_ns.max > rare.ops[0].latency_ns.max);
}

/// `machine.migrate_pct`: tlb_flush_processes gives each process one CPU,
/// so without migration every flush is local (no IPI). A tick that moves
/// a task leaves its mm's bit in the old CPU's mm_cpumask... and the task
/// runs elsewhere, so the mm's mask spans two CPUs: flushes must now look
/// beyond the local CPU, and each migration is a context switch (RES or a
/// switch_mm). Without it: zero remote flushes exactly.
#[test]
fn migration_spreads_mm_cpumask() {
    let base = [
        "machine.cpus=4",
        "workload.threads=4",
        "workload.iterations=200",
        "machine.timeslice_us=20",
    ];
    let (still, _) = run(&scen("tlb_flush_processes", &base));
    let mut m = base.to_vec();
    m.push("machine.migrate_pct=100");
    let (moving, _) = run(&scen("tlb_flush_processes", &m));
    assert_eq!(still.tlb_flush["remote_send_ipi"], 0);
    assert_eq!(still.interrupt_totals["TLB"], 0);
    assert_eq!(still.tlb_flush["local_mm_shootdown"], 4 * 200);
    assert!(moving.arch["cr3_writes"] > still.arch["cr3_writes"]);
    assert!(moving.violations.is_empty());
    // Moved tasks leave their mm's bit behind (x86 trims mm_cpumask only
    // lazily): flushes find other CPUs in the mask (flush_tlb_multi runs)...
    let remote = moving.tlb_flush["remote_send_ipi"];
    assert!(remote > 0 && remote <= 4 * 200, "{remote}");
    assert_eq!(moving.tlb_flush["local_mm_shootdown"], 4 * 200);
    // ...but none of those CPUs runs the mm at the flush (each process is
    // single-threaded), so should_flush_tlb sends no IPI and nothing is
    // flushed remotely.
    assert_eq!(moving.interrupt_totals["TLB"], 0);
    assert_eq!(moving.tlb_flush["remote_shootdown"], 0);
}

/// `machine.timeslice_us` with `migrate_pct = 100`: a tick sets
/// `need_resched` and the task is moved at its next preemption point, even
/// when the tick lands inside a flush's IPI wait with preemption off (the
/// model used to drop such ticks: 178 migrations here instead of ~620).
/// Each CPU's tick has its own phase, uniform over the slice `T`, so a task
/// that has just moved waits U(0, T) for its new CPU's tick: T/2 on
/// average, so 2S/T migrations over a run of S (±2.4 % at one sigma for
/// ~600 draws; the window below is four sigma).
#[test]
fn a_tick_is_not_lost_in_a_preempt_off_section() {
    let s = scen("lat_mmap", &["machine.migrate_pct=100"]);
    assert!(s.machine.timeslice_us > 0);
    let (r, _) = run(&s);
    let expected = 2.0 * r.sim_time_ns as f64 / (s.machine.timeslice_us as f64 * 1000.0);
    let got = r.arch["sched_migrations"] as f64;
    assert!(
        (got / expected - 1.0).abs() < 0.1,
        "{got} migrations, 2S/T = {expected}"
    );
    assert!(r.violations.is_empty());
}
