//! Issue 15 item 8: the csds of `smp_call_function_many_cond` are per CPU
//! (`cfd_data`), also with seed (a)'s `flush_tlb_info` on the stack. A
//! second call from the same CPU, made while the first one waits with
//! preemption on (`x86.preemptible_flush`), spins in `csd_lock()` until
//! the targets have run the first call's csds; it does not queue a second
//! csd behind the first (the model did, before).

use kernel::kernel_smp::{sysvec_call_function, CallFunc, Cond, Pc, SmpCallFunctionManyCond};
use kernel::world::Flow;
use kernel::{Effects, World};
use machine::{CpuMask, Scenario};

fn call(mask: &CpuMask) -> SmpCallFunctionManyCond {
    SmpCallFunctionManyCond::new(mask.clone(), CallFunc::TlbRemoveTableSmpSync, Cond::Always)
}

#[test]
fn a_second_call_from_the_same_cpu_waits_in_csd_lock() {
    let mut s = Scenario::default();
    s.machine.cpus = 3;
    let mut w = World::new(&s).unwrap();
    let mut fx = Effects::default();
    let mut mask = CpuMask::new(3);
    mask.set(1);
    mask.set(2);
    let mut first = call(&mask);
    assert!(matches!(first.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(first.pc, Pc::Wait);
    // The first caller is preempted in its wait; CPU2 ran its csd, CPU1
    // (IRQs off) has not yet.
    sysvec_call_function(&mut w, 2, &mut fx);
    let mut second = call(&mask);
    assert!(matches!(second.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(second.pc, Pc::CsdLock, "CPU1's csd is still locked");
    assert_eq!(w.cpus[1].call_single_queue.len(), 1, "nothing queued twice");
    assert_eq!(w.cpus[2].call_single_queue.len(), 0);
    assert!(!second.can_run(&w, 0));
    assert_eq!(
        w.cpus[0].preempt_count, 1,
        "csd_lock spins with preemption off"
    );
    let mut wake = Effects::default();
    sysvec_call_function(&mut w, 1, &mut wake);
    assert!(second.can_run(&w, 0));
    assert!(
        !wake.wakes.is_empty(),
        "CPU1's unlock wakes the spinning CPU0"
    );
    // csd_lock() returns; the same step goes on to queue.
    assert!(matches!(second.step(&mut w, 0, &mut fx), Flow::Continue));
    assert!(matches!(second.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(second.pc, Pc::Wait);
    assert_eq!(w.cpus[0].preempt_count, 0);
    assert_eq!(w.cpus[1].call_single_queue.len(), 1);
    assert_eq!(w.cpus[2].call_single_queue.len(), 1);
}
