//! Issue 15 item 3: INVLPGB as arch/x86/mm/tlb.c uses it. Only an mm with
//! a global ASID is flushed by broadcast (`consider_global_asid`: active on
//! more than 3 CPUs), IPIs continue while the mm is in its ASID transition,
//! and each INVLPGB covers at most `invlpgb_count_max` pages. Each test
//! fails on the model before the change (every multi-CPU flush was a
//! broadcast, one INVLPGB per page).

use kernel::arch::x86::tlb::{INVLPGB_COUNT_MAX, TLB_NR_DYN_ASIDS};
use kernel::user::UserOp;
use kernel::World;
use machine::{CostProfile, Scenario, PAGE_SIZE};
use sim::{Sim, SimOptions};

const R: u64 = 0x7f00_0000_0000;

/// CPU0 touches and zaps one page `zaps` times, then touches and zaps
/// `last` pages; CPUs 1.. spin in the same mm (running it, not lazy).
fn spinners(cpus: u32, zaps: u64, last: u32) -> Sim {
    let mut s = Scenario::default();
    s.machine.cpus = cpus;
    s.x86.invlpgb = true;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, R, 64 * PAGE_SIZE);
    let prog = vec![
        UserOp::Touch {
            addr: R,
            write: true,
        },
        UserOp::MadviseDontneed {
            start: R,
            len: PAGE_SIZE,
        },
        UserOp::Loop { to: 0, times: zaps },
        UserOp::TouchRange {
            start: R,
            pages: last,
            write: true,
        },
        UserOp::MadviseDontneed {
            start: R,
            len: u64::from(last) * PAGE_SIZE,
        },
        UserOp::Exit,
    ];
    // pid 0: `consider_global_asid` samples it at jiffies 0 (the run is
    // far shorter than the 32 jiffies to the next sample).
    w.spawn(mm, 0, prog, true);
    for cpu in 1..cpus as u16 {
        w.spawn(mm, cpu, vec![UserOp::Spin], false);
    }
    let mut sim = Sim::new(w, CostProfile::default_x86(), SimOptions::default());
    sim.run(|_| {});
    assert!(sim.violations.is_empty(), "{:?}", sim.violations.first());
    sim
}

/// Two CPUs: never more than 3 active, so no global ASID: every flush
/// IPIs the other CPU and no INVLPGB is issued.
#[test]
fn two_cpus_never_get_a_global_asid() {
    let sim = spinners(2, 10, 20);
    let c = &sim.world.counters;
    assert_eq!(*sim.world.mms[1].global_asid, 0);
    assert_eq!(c.invlpgb, 0);
    assert_eq!(c.tlbsync, 0);
    assert_eq!(c.irq_tlb[1], 11, "one TLB IPI per flush");
}

/// Four CPUs running the mm: the first flush IPIs, then (pid 0 sampled
/// at jiffies 0) gives the mm the first global ASID. The second flush is
/// a broadcast whose transition IPIs move CPUs 1-3 to it; from the third
/// on, broadcasts only. The last zap of 20 pages is ceil(20 / 8) = 3
/// INVLPGBs, not 20. The first global ASID ever handed out runs
/// `reset_global_asid_space` (`last_global_asid` starts at
/// `MAX_ASID_AVAILABLE`): one more INVLPGB of every non-global entry and
/// its TLBSYNC.
#[test]
fn four_active_cpus_get_a_global_asid_and_the_ipis_stop() {
    let (zaps, last) = (10u64, 20u64);
    let sim = spinners(4, zaps, last as u32);
    let (w, c) = (&sim.world, &sim.world.counters);
    assert_eq!(*w.mms[1].global_asid as usize, TLB_NR_DYN_ASIDS);
    assert!(!*w.mms[1].asid_transition, "every CPU moved over");
    for cpu in 1..4 {
        assert_eq!(
            c.irq_tlb[cpu], 2,
            "CPU{cpu}: the first flush, the transition"
        );
        assert_eq!(
            w.cpus[cpu].tlbstate.loaded_mm_asid as usize,
            TLB_NR_DYN_ASIDS
        );
    }
    assert_eq!(INVLPGB_COUNT_MAX, 8);
    let broadcasts = zaps; // every flush but the first, the last zap included
    let reset = 1; // reset_global_asid_space at the first allocation
    assert_eq!(c.tlbsync, broadcasts + reset);
    assert_eq!(
        c.invlpgb,
        (broadcasts - 1) + last.div_ceil(INVLPGB_COUNT_MAX) + reset
    );
}

/// Three CPUs are not enough (`mm_active_cpus_exceeds(mm, 3)`).
#[test]
fn three_cpus_are_not_enough() {
    let sim = spinners(3, 10, 20);
    assert_eq!(*sim.world.mms[1].global_asid, 0);
    assert_eq!(sim.world.counters.invlpgb, 0);
}
