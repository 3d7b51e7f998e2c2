//! x86 `flush_tlb_func` on a target CPU, one case per exit: wrong mm,
//! lazy, already up to date, caught up by a concurrent flush, partial
//! (exactly one generation behind on a range) and full.

use kernel::arch::x86::tlb::{
    enter_lazy_tlb, flush_tlb_func, get_flush_tlb_info, inc_mm_tlb_gen, switch_mm_irqs_off,
};
use kernel::{Effects, FlushReason, MmId, World, INIT_MM};
use machine::tlb::TlbHit;
use machine::Scenario;

const VA: u64 = 0x7f00_0000_0000;

/// CPU0 initiates; CPU1 runs `mm` (generation 1) with VA cached.
fn world() -> (World, MmId, u32) {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, 0, vec![], false);
    let mut fx = Effects::default();
    switch_mm_irqs_off(&mut w, 0, mm, &mut fx);
    switch_mm_irqs_off(&mut w, 1, mm, &mut fx);
    let asid = w.cpus[1].tlbstate.loaded_mm_asid;
    w.cpus[1].tlb.fill(
        asid,
        VA,
        TlbHit {
            pfn: 3,
            frame_gen: 0,
            writable: true,
            huge: false,
            owner: mm,
        },
    );
    (w, mm, t)
}

/// Ask CPU1 to flush one page of `mm` up to generation `gen`.
fn flush(w: &mut World, mm: MmId, t: u32, gen: u64) {
    let mut fx = Effects::default();
    let info = get_flush_tlb_info(w, 0, t, Some(mm), VA, VA + 4096, 12, false, gen, &mut fx);
    flush_tlb_func(w, 1, info, &mut fx);
    w.cpus[0].flush_info_busy = false;
}

fn cached(w: &mut World) -> bool {
    let asid = w.cpus[1].tlbstate.loaded_mm_asid;
    w.cpus[1].tlb.lookup(asid, VA).is_some()
}

fn reason(w: &World, r: FlushReason) -> u64 {
    w.counters.tlb_flush[r as usize]
}

fn local_gen(w: &World) -> u64 {
    let asid = w.cpus[1].tlbstate.loaded_mm_asid as usize;
    w.cpus[1].tlbstate.ctxs[asid].tlb_gen
}

/// One generation behind on a one-page range: one INVLPG, counted as a
/// remote shootdown, the CPU's generation caught up. Asked again for the
/// same generation: already up to date, nothing done or counted.
#[test]
fn partial_then_up_to_date() {
    let (mut w, mm, t) = world();
    let gen = inc_mm_tlb_gen(&mut w, mm, &mut Effects::default());
    assert_eq!(gen, 2);
    flush(&mut w, mm, t, gen);
    assert_eq!(w.counters.irq_tlb, [0, 1]);
    assert_eq!(w.counters.invlpg, 1);
    assert_eq!(reason(&w, FlushReason::RemoteShootdown), 1);
    assert!(!cached(&mut w));
    assert_eq!(local_gen(&w), 2);
    flush(&mut w, mm, t, gen);
    assert_eq!(w.counters.irq_tlb, [0, 2], "the IPI still counts");
    assert_eq!(w.counters.invlpg, 1);
    assert_eq!(reason(&w, FlushReason::RemoteShootdown), 1, "not counted");
}

/// Two generations behind: a range flush cannot cover the older request,
/// so the whole ASID is flushed.
#[test]
fn two_behind_is_a_full_flush() {
    let (mut w, mm, t) = world();
    let mut fx = Effects::default();
    inc_mm_tlb_gen(&mut w, mm, &mut fx);
    let gen = inc_mm_tlb_gen(&mut w, mm, &mut fx);
    let full = w.counters.full_flushes;
    flush(&mut w, mm, t, gen);
    assert_eq!(w.counters.invlpg, 0);
    assert_eq!(w.counters.full_flushes, full + 1);
    assert!(!cached(&mut w));
    assert_eq!(local_gen(&w), 3);
}

/// A request newer than the mm's generation while the CPU is at the mm's
/// generation: caught up by a concurrent flush, counted, no flush.
#[test]
fn caught_up_by_a_concurrent_flush() {
    let (mut w, mm, t) = world();
    flush(&mut w, mm, t, 5);
    assert_eq!(reason(&w, FlushReason::RemoteShootdown), 1);
    assert_eq!(
        w.counters.invlpg + w.counters.full_flushes,
        2,
        "the 2 switches only"
    );
    assert!(cached(&mut w));
}

/// CPU1 left for another mm: it clears itself from the old mm's
/// mm_cpumask (remote_wrong_cpu) and flushes nothing.
#[test]
fn wrong_mm_clears_the_cpumask_bit() {
    let (mut w, mm, t) = world();
    let other = w.mm_alloc().unwrap();
    switch_mm_irqs_off(&mut w, 1, other, &mut Effects::default());
    assert!(w.mms[mm as usize].cpumask.test(1));
    let gen = inc_mm_tlb_gen(&mut w, mm, &mut Effects::default());
    flush(&mut w, mm, t, gen);
    assert!(!w.mms[mm as usize].cpumask.test(1));
    assert_eq!(reason(&w, FlushReason::RemoteWrongCpu), 1);
    assert_eq!(reason(&w, FlushReason::RemoteShootdown), 0);
}

/// A lazy CPU switches to init_mm instead of flushing.
#[test]
fn lazy_cpu_switches_to_init_mm() {
    let (mut w, mm, t) = world();
    enter_lazy_tlb(&mut w, 1, &mut Effects::default());
    let gen = inc_mm_tlb_gen(&mut w, mm, &mut Effects::default());
    flush(&mut w, mm, t, gen);
    assert_eq!(w.cpus[1].tlbstate.loaded_mm, INIT_MM);
    assert_eq!(w.counters.invlpg, 0);
    assert_eq!(reason(&w, FlushReason::RemoteShootdown), 0);
}

/// Invariant 4: a CPU's generation can never be ahead of its mm's. A CPU
/// at 5 asked for 6 while the mm is at 1 reports it (a CPU *at* the mm's
/// generation returned earlier, as caught up, so the check is strict).
#[test]
fn generation_ahead_of_the_mm_is_a_violation() {
    let (mut w, mm, t) = world();
    let asid = w.cpus[1].tlbstate.loaded_mm_asid as usize;
    w.cpus[1].tlbstate.ctxs[asid].tlb_gen = 5;
    flush(&mut w, mm, t, 6);
    let v = w.violations.first().expect("invariant 4");
    assert_eq!((v.invariant, v.cpu), (4, 1), "{}", v.what);
    let (mut w, mm, t) = world();
    let gen = inc_mm_tlb_gen(&mut w, mm, &mut Effects::default());
    flush(&mut w, mm, t, gen);
    assert!(w.violations.is_empty());
}
