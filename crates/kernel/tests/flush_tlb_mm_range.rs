//! x86 `flush_tlb_mm_range`'s exit: `put_flush_tlb_info()` and `put_cpu()`
//! run after a step boundary when this CPU still has stores in its store
//! buffer (a dropped barrier, `tlblab check` only), so other CPUs and the
//! drain can act before it goes on to free pages; with an empty buffer
//! (always, in the sequentially consistent simulator) it returns at once.

use kernel::arch::x86::tlb::{FlushTlbMmRange, Pc};
use kernel::hw::memory_model::Loc;
use kernel::world::Flow;
use kernel::{Effects, World};
use machine::Scenario;

fn finish(buffered: bool) -> (Flow, Pc, u32) {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, 0, vec![], false);
    if buffered {
        assert!(w.membufs[0].push(Loc::IsLazy(0), 0).is_none());
    }
    // As left by Start (get_cpu) and Dispatch.
    w.preempt_disable(0);
    let mut f = FlushTlbMmRange::new(mm, 0, 4096, 12, false);
    f.pc = Pc::Done;
    let flow = f.step(&mut w, 0, t, &mut Effects::default());
    (flow, f.pc, w.cpus[0].preempt_count)
}

#[test]
fn put_cpu_waits_a_step_for_buffered_stores() {
    let (flow, pc, preempt) = finish(false);
    assert!(matches!(flow, Flow::Return), "empty buffer: return now");
    assert_eq!(preempt, 0, "put_cpu");
    let (flow, pc_b, preempt_b) = finish(true);
    assert!(
        matches!(flow, Flow::Yield),
        "buffered stores: a step boundary first"
    );
    assert_eq!((pc_b, preempt_b), (Pc::Put, 1), "put_cpu not yet");
    assert_eq!(pc, Pc::Done);
}
