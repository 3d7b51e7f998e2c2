//! x86 flush paths (`flush_tlb_mm_range`, `native_flush_tlb_multi`,
//! `flush_tlb_func`, INVLPGB) as exact counts on small runs, built without
//! the CLI so that cargo-mutants can use them as a fast test target
//! (docs/mutants.md). CPU0 madvises `pages` pages 50 times while 2 threads
//! of its mm spin on CPUs 1-2 (mm_cpumask = {0,1,2}, none lazy).

use machine::cost::CostProfile;
use machine::Scenario;
use sim::{Report, Sim, SimOptions};

const N: u64 = 50;

fn madvise(pages: u64, extra: &[&str]) -> Report {
    let mut s = workloads::defaults("madvise_dontneed").unwrap();
    s.machine.jitter_pct = 0;
    let base = [
        "machine.cpus=4".to_string(),
        "workload.threads=2".into(),
        format!("workload.iterations={N}"),
        format!("workload.size={}KiB", pages * 4),
    ];
    for kv in base.iter().map(|s| s.as_str()).chain(extra.iter().copied()) {
        s.set(kv).unwrap();
    }
    run(&s)
}

fn run(s: &Scenario) -> Report {
    let world = workloads::build(s).unwrap();
    let opts = SimOptions {
        max_time_ns: s.machine.max_sim_time_ms * 1_000_000,
        seed: s.seed,
        ..SimOptions::default()
    };
    let mut sim = Sim::new(world, CostProfile::default_for(s.machine.arch), opts);
    let end = sim.run(|_| {});
    // Every flush returned: get_cpu() / put_cpu() balanced on every CPU.
    for c in &sim.world.cpus {
        assert_eq!(c.preempt_count, 0, "CPU{}", c.id);
    }
    let r = Report::build(&sim, s.to_json(), end);
    assert_eq!(r.main_op().unwrap().count, N);
    assert!(r.violations.is_empty(), "{:?}", r.violations.first());
    r
}

/// Each madvise: `flush_tlb_mm_range` bumps tlb_gen once, sends one
/// multi-CPU flush (remote_send_ipi), which `should_flush_tlb` sends to
/// the 2 non-lazy CPUs (TLB = CAL = 2: one initiator never coalesces), and
/// flushes locally (local_mm_shootdown). Every CPU is exactly one
/// generation behind with a range, so each flushes partially: one INVLPG
/// per page on each of the 3 CPUs, no full flush from the flush path.
#[test]
fn partial_flush_counts() {
    let r = madvise(4, &[]);
    assert_eq!(r.tlb_flush["remote_send_ipi"], N);
    assert_eq!(r.tlb_flush["remote_shootdown"], 2 * N);
    assert_eq!(r.tlb_flush["local_mm_shootdown"], N);
    assert_eq!(r.tlb_flush["remote_wrong_cpu"], 0);
    assert_eq!(r.interrupt_totals["TLB"], 2 * N);
    assert_eq!(r.interrupt_totals["CAL"], 2 * N);
    assert_eq!(r.interrupts.tlb, [0, N, N, 0], "only CPUs 1-2 take IPIs");
    assert_eq!(r.arch["invlpg"], 3 * 4 * N);
}

/// `tlb_single_page_flush_ceiling` (33): 33 pages are still INVLPG'd one
/// by one; 34 become one full flush per CPU per madvise, so full_flushes
/// grows by exactly 3 * N over the partial run (the switches at start are
/// the same in both), and no INVLPG is issued. A raised ceiling (64) makes
/// 40 pages partial again.
#[test]
fn ceiling_switches_partial_to_full() {
    let at = madvise(33, &[]);
    let over = madvise(34, &[]);
    assert_eq!(at.arch["invlpg"], 3 * 33 * N);
    assert_eq!(over.arch["invlpg"], 0);
    assert_eq!(over.arch["full_flushes"], at.arch["full_flushes"] + 3 * N);
    let raised = madvise(40, &["x86.tlb_single_page_flush_ceiling=64"]);
    assert_eq!(raised.arch["invlpg"], 3 * 40 * N);
    assert_eq!(raised.arch["full_flushes"], at.arch["full_flushes"]);
}

/// `x86.invlpgb`: only an mm with a global ASID is flushed by broadcast,
/// and `consider_global_asid` gives one only to an mm active on more than
/// 3 CPUs. This mm runs on 3, so INVLPGB changes nothing: the same IPIs
/// and INVLPGs as without it, and no INVLPGB or TLBSYNC (the 4-CPU case is
/// in crates/cli/tests/x86_global_asid.rs).
#[test]
fn invlpgb_needs_a_global_asid() {
    let r = madvise(4, &["x86.invlpgb=true"]);
    let plain = madvise(4, &[]);
    assert_eq!(r.arch["invlpgb"] + r.arch["tlbsync"], 0);
    assert_eq!(plain.arch["invlpgb"] + plain.arch["tlbsync"], 0);
    assert_eq!(r.interrupt_totals, plain.interrupt_totals);
    assert_eq!(r.interrupt_totals["TLB"], 2 * N);
    assert_eq!(r.arch["invlpg"], plain.arch["invlpg"]);
}

/// `inject.skip_flush_in_flush_tlb_func`: targets catch tlb_gen up without
/// touching their TLBs: the initiator's INVLPGs remain (1 per page per
/// madvise), the remote ones vanish; IPIs are unchanged.
#[test]
fn injected_skip_drops_remote_invalidations() {
    let r = madvise(4, &["inject.skip_flush_in_flush_tlb_func=true"]);
    assert_eq!(r.arch["invlpg"], 4 * N);
    assert_eq!(r.interrupt_totals["TLB"], 2 * N);
}

/// `machine.pcid = false`: the same flush counts (the flush path does not
/// depend on PCID).
#[test]
fn pcid_off_keeps_flush_counts() {
    let r = madvise(4, &["machine.pcid=false"]);
    assert_eq!(r.arch["invlpg"], 3 * 4 * N);
    assert_eq!(r.interrupt_totals["TLB"], 2 * N);
}

/// Lazy TLB and freed page tables (`native_flush_tlb_multi`'s condition,
/// `flush_tlb_func`'s lazy and wrong-mm exits): CPU1 runs a thread of the
/// mm that touches a page and exits, leaving CPU1 lazy in the mm. CPU0 then
/// madvises once (pages only: `should_flush_tlb` skips the lazy CPU, so no
/// IPI) and munmaps + remaps 3 times (tables freed: the whole mask is
/// IPI'd). munmap 1: CPU1 is lazy, switches to init_mm instead of
/// flushing. munmap 2: CPU1 is still in mm_cpumask, is IPI'd, finds the mm
/// not loaded and clears its bit (remote_wrong_cpu). munmap 3: not in the
/// mask: local only. So CPU1's TLB row is exactly 2, CPU2's 0, and 3 of
/// the 4 flushes are multi-CPU sends (madvise and munmaps 1-2).
#[test]
fn lazy_cpu_skipped_for_pages_ipid_for_freed_tables() {
    use kernel::user::UserOp;
    use machine::{Cost, HPAGE_SIZE, PAGE_SIZE};
    const R: u64 = 0x7f00_0000_0000;
    let run = |lazy_skip: bool| {
        let mut s = Scenario::default();
        s.machine.cpus = 3;
        s.inject.lazy_skip_on_freed_tables = lazy_skip;
        let mut w = kernel::World::new(&s).unwrap();
        let mm = w.mm_alloc().unwrap();
        w.add_vma(mm, R, HPAGE_SIZE);
        let touch = |addr| UserOp::Touch { addr, write: true };
        w.spawn(mm, 1, vec![touch(R + PAGE_SIZE), UserOp::Exit], false);
        let mut a = vec![
            UserOp::Charge {
                cost: Cost::TaskCreate,
                n: 1,
            },
            touch(R),
            UserOp::MadviseDontneed {
                start: R,
                len: PAGE_SIZE,
            },
        ];
        for _ in 0..3 {
            a.push(UserOp::Munmap {
                start: R,
                len: HPAGE_SIZE,
            });
            a.push(UserOp::Mmap {
                start: R,
                len: HPAGE_SIZE,
            });
            a.push(touch(R));
        }
        a.push(UserOp::Exit);
        w.spawn(mm, 0, a, true);
        let mut sim = Sim::new(w, CostProfile::default_x86(), SimOptions::default());
        sim.run(|_| {});
        sim
    };
    let sim = run(false);
    assert!(sim.violations.is_empty(), "{:?}", sim.violations.first());
    assert!(sim.world.cpus.iter().all(|c| c.preempt_count == 0));
    let c = &sim.world.counters;
    assert_eq!(c.irq_tlb, [0, 2, 0]);
    assert_eq!(c.irq_cal, [0, 2, 0]);
    assert_eq!(c.tlb_flush[kernel::FlushReason::RemoteWrongCpu as usize], 1);
    assert_eq!(c.tlb_flush[kernel::FlushReason::RemoteSendIpi as usize], 3);
    assert_eq!(
        c.tlb_flush[kernel::FlushReason::RemoteShootdown as usize],
        0
    );
    assert_eq!(sim.world.cpus[1].tlbstate.loaded_mm, kernel::INIT_MM);
    assert!(!sim.world.mms[1].cpumask.test(1));
    // The injected bug skips the lazy CPU on freed tables too: its
    // paging-structure cache still points at the freed PTE table.
    let bad = run(true);
    let v = bad.violations.first().expect("caught");
    assert_eq!(v.invariant, 3, "{}", v.what);
}
