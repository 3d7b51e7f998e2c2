//! ASID rollover on arm64 (arch/arm64/mm/context.c): after `flush_context`
//! every CPU must flush its TLB before its next switch, or a reused ASID
//! hits the translations another mm cached under it (invariant 5).
//! `inject.skip_rollover_flush` removes that flush; the monitor catches it.

use kernel::hw::mmu::{user_access, Access};
use kernel::{Effects, World};
use machine::mem::FrameUse;
use machine::tlb::TlbHit;
use machine::Scenario;

const VA: u64 = 0x7f00_0000_0000;

/// CPU0 runs mms A, B, C (ASIDs 1, 2, 3 of the 2-bit space) after A cached
/// VA, then D: no ASID is free, so D's switch rolls the generation over
/// and D gets A's old ASID 1. Returns the world after D's read of VA.
fn run(sets: &[&str]) -> (World, Access) {
    let mut s = Scenario::default();
    for kv in ["machine.arch=arm64", "machine.cpus=2", "arm64.asid_bits=2"]
        .iter()
        .chain(sets)
    {
        s.set(kv).unwrap();
    }
    s.validate().unwrap();
    let mut w = World::new(&s).unwrap();
    let mut fx = Effects::default();
    let mms: Vec<_> = (0..4).map(|_| w.mm_alloc().unwrap()).collect();
    kernel::arch::switch_mm(&mut w, 0, mms[0], &mut fx);
    let asid_a = w.cpus[0].tlbstate.loaded_mm_asid;
    let pfn = w.mem.alloc(FrameUse::Anon).unwrap();
    let hit = TlbHit {
        owner: mms[0],
        pfn,
        frame_gen: w.mem.gen(pfn),
        writable: false,
        huge: false,
    };
    w.cpus[0].tlb.fill(asid_a, VA, hit);
    for &mm in &mms[1..] {
        kernel::arch::switch_mm(&mut w, 0, mm, &mut fx);
    }
    assert_eq!(w.asids.rollovers, 1, "D's switch rolled the ASIDs over");
    assert_eq!(
        w.cpus[0].tlbstate.loaded_mm_asid, asid_a,
        "D reuses A's ASID number"
    );
    let a = user_access(&mut w, 0, VA, false, &mut fx);
    (w, a)
}

#[test]
fn rollover_flush_keeps_a_reused_asid_clean() {
    let (w, a) = run(&[]);
    assert_eq!(a, Access::Fault, "D has no mapping: a walk, then a fault");
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn skipping_the_rollover_flush_is_caught_as_i5() {
    let (w, a) = run(&["inject.skip_rollover_flush=true"]);
    assert_eq!(a, Access::Done, "A's stale translation answers D's read");
    let v = &w.violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].invariant, 5, "{v:?}");
    assert!(v[0]
        .what
        .contains("the ASID was reused without a TLB flush"));
}

#[test]
fn the_switch_is_refused_on_x86() {
    let mut s = Scenario::default();
    s.set("inject.skip_rollover_flush=true").unwrap();
    let e = s.validate().unwrap_err().to_string();
    assert!(
        e.contains("inject.skip_rollover_flush needs machine.arch=arm64 or riscv"),
        "{e}"
    );
}
