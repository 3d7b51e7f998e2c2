//! `switch_mm_irqs_off` / `choose_new_asid`: six dynamic ASIDs per CPU,
//! handed out round-robin; a switch flushes only a slot that is new or behind.

use kernel::arch::x86::tlb::{inc_mm_tlb_gen, switch_mm_irqs_off, TLB_NR_DYN_ASIDS};
use kernel::{Effects, World};
use machine::Scenario;

fn world(pcid: bool) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = 1;
    s.machine.pcid = pcid;
    World::new(&s).unwrap()
}

#[test]
fn asid_slots_round_robin_and_generation_checks() {
    let mut w = world(true);
    let mut fx = Effects::default();
    let mms: Vec<_> = (0..7).map(|_| w.mm_alloc().unwrap()).collect();
    for &mm in &mms {
        assert!(
            switch_mm_irqs_off(&mut w, 0, mm, &mut fx),
            "a new mm needs a flushed slot"
        );
    }
    assert_eq!(TLB_NR_DYN_ASIDS, 6);
    // Slots went 1,2,3,4,5,0 and then 1 again: the 7th mm evicted the 1st.
    assert!(
        !switch_mm_irqs_off(&mut w, 0, mms[2], &mut fx),
        "mm3 still owns an up-to-date slot"
    );
    assert!(
        switch_mm_irqs_off(&mut w, 0, mms[0], &mut fx),
        "mm1 lost its slot to mm7"
    );
    inc_mm_tlb_gen(&mut w, mms[3], &mut fx);
    assert!(
        switch_mm_irqs_off(&mut w, 0, mms[3], &mut fx),
        "a slot behind mm->context.tlb_gen is flushed"
    );
    assert!(
        !switch_mm_irqs_off(&mut w, 0, mms[3], &mut fx),
        "same mm, not lazy: nothing to do"
    );
}

#[test]
fn without_pcid_every_switch_flushes() {
    let mut w = world(false);
    let mut fx = Effects::default();
    let a = w.mm_alloc().unwrap();
    let b = w.mm_alloc().unwrap();
    for _ in 0..3 {
        assert!(switch_mm_irqs_off(&mut w, 0, a, &mut fx));
        assert!(switch_mm_irqs_off(&mut w, 0, b, &mut fx));
    }
}
