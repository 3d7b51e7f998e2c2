//! The write-permission upgrade after `wp_page_reuse` and the spurious-fault
//! fix-up (seed arm64-local-tlbi-wp-fault), per architecture:
//! `ptep_set_access_flags` → arm64 `__ptep_set_access_flags` (broadcast
//! `flush_tlb_page` upstream, `local_flush_tlb_page` with the seed), and
//! `flush_tlb_fix_spurious_fault` (arm64: nothing upstream, a local TLBI
//! with the seed; x86: nothing, the #PF dropped the entry; RISC-V: local
//! sfence.vma).

use kernel::arch::{flush_tlb_fix_spurious_fault, ptep_set_access_flags};
use kernel::{Effects, MmId, World};
use machine::mem::{pte, FrameUse};
use machine::tlb::TlbHit;
use machine::{Pfn, Scenario};

const VA: u64 = 0x7f00_0000_0000;

/// A 3-CPU world whose mm runs on CPUs 0 and 1, both caching VA read-only.
fn world(sets: &[&str]) -> (World, MmId, Pfn, u16) {
    let mut s = Scenario::default();
    s.machine.cpus = 3;
    for kv in sets {
        s.set(kv).unwrap();
    }
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    let mut fx = Effects::default();
    kernel::arch::switch_mm(&mut w, 0, mm, &mut fx);
    kernel::arch::switch_mm(&mut w, 1, mm, &mut fx);
    let asid = w.cpus[0].tlbstate.loaded_mm_asid;
    assert_eq!(w.cpus[1].tlbstate.loaded_mm_asid, asid);
    let table = w.mem.alloc(FrameUse::Table(1)).unwrap();
    w.mem.write(table, 0, pte::make(5, pte::PRESENT));
    for c in 0..2 {
        w.cpus[c].tlb.fill(asid, VA, ro());
    }
    (w, mm, table, asid)
}

fn ro() -> TlbHit {
    TlbHit {
        pfn: 5,
        frame_gen: 0,
        writable: false,
        huge: false,
        owner: 1,
    }
}

fn cached(w: &mut World, cpu: usize, asid: u16) -> bool {
    w.cpus[cpu].tlb.lookup(asid, VA).is_some()
}

fn writable(w: &World, table: Pfn) -> u64 {
    pte::make(5, pte::WRITE) | w.mem.read(table, 0).unwrap()
}

/// Upstream arm64: the upgrade is one `TLBI VALE1IS` + `DSB ISH`, which
/// drops the stale entry on every core.
#[test]
fn arm64_broadcast_reuse_flush() {
    let (mut w, mm, table, asid) = world(&["machine.arch=arm64"]);
    let e = writable(&w, table);
    ptep_set_access_flags(&mut w, 0, mm, table, 0, VA, e, &mut Effects::default());
    assert_eq!(w.mem.read(table, 0), Some(e));
    let c = &w.counters;
    assert_eq!((c.tlbi_is, c.dsb_ish, c.tlbi_local), (1, 1, 0));
    assert!(!cached(&mut w, 0, asid) && !cached(&mut w, 1, asid));
    // The same entry again changes nothing and flushes nothing.
    ptep_set_access_flags(&mut w, 0, mm, table, 0, VA, e, &mut Effects::default());
    assert_eq!(w.counters.tlbi_is, 1);
}

/// The seed: `TLBI VALE1` on this core only; CPU1 keeps its read-only
/// entry, and its spurious fault drops it only with the seed's
/// `spurious_fault_flush = local` (upstream's no-op leaves it: the livelock
/// the checker finds).
#[test]
fn arm64_local_reuse_flush_and_spurious_fix() {
    let (mut w, mm, table, asid) = world(&["machine.arch=arm64", "arm64.wp_reuse_flush=local"]);
    let e = writable(&w, table);
    let mut fx = Effects::default();
    ptep_set_access_flags(&mut w, 0, mm, table, 0, VA, e, &mut fx);
    assert_eq!((w.counters.tlbi_is, w.counters.tlbi_local), (0, 1));
    assert!(!cached(&mut w, 0, asid), "this core flushed");
    assert!(
        cached(&mut w, 1, asid),
        "CPU1 still has the read-only entry"
    );
    flush_tlb_fix_spurious_fault(&mut w, 1, mm, VA, true, &mut fx);
    assert!(cached(&mut w, 1, asid), "upstream: no-op");
    assert_eq!(w.counters.tlbi_local, 1);
    w.cfg.arm64.spurious_fault_flush = machine::scenario::SpuriousFaultFlush::Local;
    flush_tlb_fix_spurious_fault(&mut w, 1, mm, VA, true, &mut fx);
    assert!(!cached(&mut w, 1, asid), "seed: local TLBI drops it");
    assert_eq!(w.counters.tlbi_local, 2);
}

/// x86 writes the PTE and flushes nothing at the upgrade. A write through
/// the stale read-only entry faults, and the #PF itself drops the entry
/// (SDM 4.10.4.1), so `flush_tlb_fix_spurious_fault` is a no-op on x86
/// (arch/x86/include/asm/pgtable.h); the model INVLPGed there until issue
/// 35. RISC-V flushes the page locally at both (`update_mmu_cache`).
#[test]
fn x86_and_riscv_upgrade_and_spurious_fix() {
    let (mut w, mm, table, asid) = world(&[]);
    let e = writable(&w, table);
    let mut fx = Effects::default();
    ptep_set_access_flags(&mut w, 0, mm, table, 0, VA, e, &mut fx);
    assert_eq!(w.mem.read(table, 0), Some(e));
    assert!(cached(&mut w, 0, asid) && cached(&mut w, 1, asid));
    flush_tlb_fix_spurious_fault(&mut w, 1, mm, VA, true, &mut fx);
    assert!(cached(&mut w, 1, asid), "no INVLPG in the handler");
    assert_eq!(w.counters.invlpg, 0);
    w.cpus[1].tlbstate.loaded_mm = mm;
    w.cpus[1].tlbstate.loaded_mm_asid = asid;
    let a = kernel::hw::mmu::user_access(&mut w, 1, VA, true, &mut fx);
    assert_eq!(a, kernel::hw::mmu::Access::Fault);
    assert!(!cached(&mut w, 1, asid), "the #PF dropped the stale entry");
    assert_eq!(w.counters.invlpg, 0);
    let (mut w, mm, table, asid) = world(&["machine.arch=riscv"]);
    let e = writable(&w, table);
    ptep_set_access_flags(&mut w, 0, mm, table, 0, VA, e, &mut fx);
    assert_eq!(w.counters.sfence_vma, 1);
    assert!(!cached(&mut w, 0, asid) && cached(&mut w, 1, asid));
    flush_tlb_fix_spurious_fault(&mut w, 1, mm, VA, false, &mut fx);
    assert_eq!(w.counters.sfence_vma, 2);
    assert!(!cached(&mut w, 1, asid));
}
