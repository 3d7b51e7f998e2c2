//! `INIT_MM_CONTEXT`: `init_mm` has `ctx_id` 1 and user mms start at 2, so
//! an ASID slot never used (ctx_id 0) matches no mm.
use kernel::arch::x86::tlb::{INIT_MM_CTX_ID, TLB_NR_DYN_ASIDS};
use kernel::{World, INIT_MM};
use machine::Scenario;

#[test]
fn init_mm_is_ctx_id_1_and_user_mms_start_at_2() {
    let mut w = World::new(&Scenario::default()).unwrap();
    assert_eq!(INIT_MM_CTX_ID, 1);
    assert_eq!(*w.mms[INIT_MM as usize].ctx_id, 1);
    let a = w.mm_alloc().unwrap();
    let b = w.mm_alloc().unwrap();
    assert_eq!(
        (*w.mms[a as usize].ctx_id, *w.mms[b as usize].ctx_id),
        (2, 3)
    );
    // Boot state: slot 0 holds init_mm, the unused slots hold ctx_id 0.
    let ts = &w.cpus[0].tlbstate;
    assert_eq!(ts.ctxs[0].ctx_id, 1);
    for asid in 1..TLB_NR_DYN_ASIDS {
        assert_ne!(ts.ctxs[asid].ctx_id, *w.mms[INIT_MM as usize].ctx_id);
    }
}

#[test]
fn unknown_drop_barrier_names_are_refused() {
    let mut s = Scenario::default();
    s.set("inject.drop_barrier=switch_mm_irqs_off.smp_mb")
        .unwrap();
    // The world accepts a known name (the checker uses it) ...
    assert!(World::new(&s).is_ok());
    // ... an unknown one is refused in one line.
    s.set("inject.drop_barrier=nonsense").unwrap();
    let e = World::new(&s).unwrap_err().to_string();
    assert!(
        e.contains("unknown barrier 'nonsense'") && !e.contains('\n'),
        "{e}"
    );
}
