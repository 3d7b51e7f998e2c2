//! The invariant monitor in `hw/mmu.rs` (the oracle of the simulator and
//! the checker), driven directly: worlds in which invariant I1, I3 or I7
//! must fire, and the same worlds with the flush done, in which it must
//! not; what a walk caches (TLB, PTE-table and PUD-entry caches, the
//! filled-TLB index); the hit/miss accounting. Issue 34 item 4: the
//! cargo-mutants survivors of `hw/mmu.rs` and the tests that kill them
//! are listed in docs/mutants.md.

use kernel::hw::mmu::{kernel_access, user_access, Access, KERNEL_TLB_TAG};
use kernel::mm::memory::{populate_range, pte_alloc_walk};
use kernel::{Effects, MmId, World, INIT_MM};
use machine::mem::{pte, table_index, FrameUse};
use machine::{Pfn, Scenario, PAGE_SIZE};

const VA: u64 = 0x7f00_0000_0000;
const KVA: u64 = 0x0000_c000_0000_0000;

fn world(sets: &[&str]) -> World {
    let mut s = Scenario::default();
    for kv in sets {
        s.set(kv).unwrap();
    }
    s.validate().unwrap();
    World::new(&s).unwrap()
}

/// A world whose CPU 0 runs a new mm with one page populated at `VA`.
fn running(sets: &[&str]) -> (World, MmId) {
    let mut w = world(sets);
    let mm = w.mm_alloc().unwrap();
    kernel::arch::switch_mm(&mut w, 0, mm, &mut Effects::default());
    populate_range(&mut w, mm, VA, VA + PAGE_SIZE).unwrap();
    (w, mm)
}

fn access(w: &mut World, cpu: u16, va: u64, write: bool) -> Access {
    user_access(w, cpu, va, write, &mut Effects::default())
}

fn asid(w: &World, cpu: u16) -> u16 {
    w.cpus[cpu as usize].tlbstate.loaded_mm_asid
}

/// The PTE table and the PTE of `va` in `mm`.
fn pte_of(w: &World, mm: MmId, va: u64) -> (Pfn, u64) {
    let t = kernel::mm::memory::pte_table(w, mm, va).unwrap();
    (t, w.mem.read(t, table_index(va, 1)).unwrap())
}

/// The PMD table of `va` in `mm` (the one its PUD entry points to).
fn pmd_table_of(w: &World, mm: MmId, va: u64) -> Pfn {
    let pgd = *w.mms[mm as usize].pgd;
    let pud = pte::pfn(w.mem.read(pgd, table_index(va, 4)).unwrap());
    pte::pfn(w.mem.read(pud, table_index(va, 3)).unwrap())
}

/// Every access is a TLB hit or a miss (a walk), counted once: a walk
/// fills the TLB, so a second access to the page hits.
#[test]
fn a_walk_fills_the_tlb_and_the_next_access_hits() {
    let (mut w, _) = running(&[]);
    assert_eq!(access(&mut w, 0, VA, false), Access::Done);
    assert_eq!((w.counters.tlb_hits, w.counters.tlb_misses), (0, 1));
    assert_eq!(w.cpus[0].tlb.count(asid(&w, 0)), 1, "the walk filled it");
    assert_eq!(access(&mut w, 0, VA, true), Access::Done);
    assert_eq!(access(&mut w, 0, VA, false), Access::Done);
    assert_eq!((w.counters.tlb_hits, w.counters.tlb_misses), (2, 1));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// A page that is not mapped faults; a read-only PTE faults a write (and
/// the walk caches nothing for it), not a read.
#[test]
fn not_present_and_read_only_fault() {
    let (mut w, mm) = running(&[]);
    assert_eq!(access(&mut w, 0, VA + PAGE_SIZE, false), Access::Fault);
    let (t, e) = pte_of(&w, mm, VA);
    w.mem.write(t, table_index(VA, 1), e & !pte::WRITE);
    assert_eq!(access(&mut w, 0, VA, true), Access::Fault);
    assert_eq!(w.cpus[0].tlb.count(asid(&w, 0)), 0, "no fill for a #PF");
    assert_eq!(access(&mut w, 0, VA, false), Access::Done);
    assert_eq!(w.cpus[0].tlb.count(asid(&w, 0)), 1);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// Invariant 1: the page behind a cached translation is freed with no
/// flush; the next access hits the stale entry and is reported, naming
/// the frame, what it is now and the generations. With the flush, the
/// access walks, faults, and nothing is reported.
#[test]
fn i1_a_hit_on_a_freed_page() {
    for flushed in [false, true] {
        let (mut w, mm) = running(&[]);
        assert_eq!(access(&mut w, 0, VA, false), Access::Done);
        let (t, e) = pte_of(&w, mm, VA);
        let pfn = pte::pfn(e);
        w.mem.write(t, table_index(VA, 1), 0);
        let g = w.mem.gen(pfn);
        w.mem.free(pfn);
        if flushed {
            let a = asid(&w, 0);
            w.cpus[0].tlb.flush_one(a, VA);
        }
        let got = access(&mut w, 0, VA, false);
        if flushed {
            assert_eq!(got, Access::Fault);
            assert!(w.violations.is_empty(), "{:?}", w.violations);
            continue;
        }
        assert_eq!(got, Access::Done, "the stale entry answers");
        let v = &w.violations;
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].invariant, v[0].cpu, v[0].addr), (1, 0, VA));
        let want = format!(
            "CPU0 accessed {VA:#x} via TLB hit to frame {pfn} which is free (generation {g} -> {})",
            g + 1
        );
        assert_eq!(v[0].what, want);
    }
}

/// Invariant 3 when the freed PTE table is reused as a PTE table: the
/// paging-structure cache still points at frame `t`, which is a PTE table
/// again (of the same level), but not the one cached: its generation
/// moved on. The walk through the cached pointer is reported, then the
/// walker walks from the PGD instead.
#[test]
fn i3_a_cached_pte_table_freed_and_reused_as_a_pte_table() {
    for freed in [false, true] {
        let (mut w, mm) = running(&[]);
        assert_eq!(access(&mut w, 0, VA, false), Access::Done);
        let (t, _) = pte_of(&w, mm, VA);
        let a = asid(&w, 0);
        assert!(
            w.cpus[0].tlb.psc_holds(a, t),
            "the walk cached its PTE table"
        );
        // Drop the leaf only: the next access walks, through the cache.
        w.cpus[0].tlb.flush_one_leaf(a, VA);
        if freed {
            // free_pte_range with no flush: the PMD entry goes, the
            // table is freed, and the next page table allocated is it.
            let pmd = pmd_table_of(&w, mm, VA);
            w.mem.write(pmd, table_index(VA, 2), 0);
            w.mem.free(t);
            assert_eq!(w.mem.alloc(FrameUse::Table(1)).unwrap(), t);
            assert_eq!(w.mem.usage(t), FrameUse::Table(1));
        }
        let misses = w.counters.tlb_misses;
        let got = access(&mut w, 0, VA, false);
        assert_eq!(w.counters.tlb_misses, misses + 1, "a walk");
        if !freed {
            assert_eq!(got, Access::Done, "through the live cached table");
            assert!(w.violations.is_empty(), "{:?}", w.violations);
            continue;
        }
        // The walk from the PGD finds no PMD entry: #PF.
        assert_eq!(got, Access::Fault);
        let v = &w.violations;
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].invariant, v[0].cpu, v[0].addr), (3, 0, VA));
        assert_eq!(
            v[0].what,
            format!("CPU0 walked {VA:#x} through a cached pointer to page-table frame {t} freed since it was cached")
        );
    }
}

/// Invariant 3 for a PTE table retagged as deposited (khugepaged's
/// collapse unhooks it and keeps it for the huge PMD) with no flush.
#[test]
fn i3_a_cached_pte_table_that_was_deposited() {
    let (mut w, mm) = running(&[]);
    assert_eq!(access(&mut w, 0, VA, false), Access::Done);
    let (t, _) = pte_of(&w, mm, VA);
    let a = asid(&w, 0);
    w.cpus[0].tlb.flush_one_leaf(a, VA);
    w.mem.retag(t, FrameUse::Deposited);
    access(&mut w, 0, VA, false);
    let v = &w.violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].invariant, 3, "{v:?}");
}

/// A full walk caches the PUD entry it read: the PMD table (how a hugetlb
/// PMD table stays reachable after unshare); the PGD, PUD and PTE tables
/// are not in that cache; the PTE table is in the PTE-table cache.
#[test]
fn a_full_walk_caches_the_pmd_table_behind_the_pud_entry() {
    let (mut w, mm) = running(&[]);
    assert_eq!(access(&mut w, 0, VA, false), Access::Done);
    let a = asid(&w, 0);
    let pmd = pmd_table_of(&w, mm, VA);
    let pgd = *w.mms[mm as usize].pgd;
    let pud = pte::pfn(w.mem.read(pgd, table_index(VA, 4)).unwrap());
    let tlb = &w.cpus[0].tlb;
    assert!(tlb.psc_holds(a, pmd), "the PMD table is cached");
    assert!(!tlb.psc_holds(a, pgd) && !tlb.psc_holds(a, pud));
}

/// A huge PMD maps 2 MiB: the walk stops at it (a huge TLB entry, no PTE
/// table cached); every 4 KiB page of the region hits that entry.
#[test]
fn a_huge_pmd_ends_the_walk() {
    let mut w = world(&[]);
    let mm = w.mm_alloc().unwrap();
    kernel::arch::switch_mm(&mut w, 0, mm, &mut Effects::default());
    let pte_t = pte_alloc_walk(&mut w, 0, mm, VA).unwrap();
    let pmd = pmd_table_of(&w, mm, VA);
    let page = w.mem.alloc(FrameUse::Anon).unwrap();
    w.mem.write(
        pmd,
        table_index(VA, 2),
        pte::make(page, pte::WRITE | pte::USER | pte::HUGE),
    );
    assert_eq!(access(&mut w, 0, VA + 5 * PAGE_SIZE, true), Access::Done);
    let a = asid(&w, 0);
    assert!(!w.cpus[0].tlb.psc_holds(a, pte_t), "no PTE table walked");
    assert_eq!(access(&mut w, 0, VA + 300 * PAGE_SIZE, false), Access::Done);
    assert_eq!((w.counters.tlb_hits, w.counters.tlb_misses), (1, 1));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// Kernel accesses: an unmapped kernel address has no translation; a
/// mapped one walks `init_mm`'s tables, then hits its global entry under
/// any ASID. Invariant 7: the frame is freed with no flush, and the next
/// access through the global entry is reported.
#[test]
fn kernel_access_and_i7() {
    let mut w = world(&[]);
    let mut fx = Effects::default();
    assert!(!kernel_access(&mut w, 1, KVA, &mut fx), "nothing mapped");
    assert_eq!(w.counters.tlb_misses, 1);
    populate_range(&mut w, INIT_MM, KVA, KVA + PAGE_SIZE).unwrap();
    assert!(kernel_access(&mut w, 1, KVA, &mut fx), "walks, fills");
    assert_eq!((w.counters.tlb_hits, w.counters.tlb_misses), (0, 2));
    assert_eq!(w.cpus[1].tlb.count(KERNEL_TLB_TAG), 1);
    assert!(kernel_access(&mut w, 1, KVA, &mut fx), "hits");
    assert_eq!((w.counters.tlb_hits, w.counters.tlb_misses), (1, 2));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
    let (t, e) = pte_of(&w, INIT_MM, KVA);
    let pfn = pte::pfn(e);
    w.mem.write(t, table_index(KVA, 1), 0);
    w.mem.free(pfn);
    assert!(kernel_access(&mut w, 1, KVA, &mut fx), "the stale entry");
    let v = &w.violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!((v[0].invariant, v[0].cpu, v[0].addr), (7, 1, KVA));
    assert!(
        v[0].what
            .contains(&format!("to frame {pfn} freed since it was cached")),
        "{v:?}"
    );
    // With the flush (vfree's flush_tlb_kernel_range) the entry is gone.
    w.cpus[1].tlb.flush_va(KVA);
    assert!(!kernel_access(&mut w, 1, KVA, &mut fx));
    assert_eq!(w.violations.len(), 1);
}

/// On a machine big enough to keep the filled-TLB index (16 CPUs), the
/// first fill of an ASID's bucket by a CPU enters it there, so that a
/// broadcast `TLBI VALE1IS` reaches that CPU's TLB and a later access
/// walks (and faults) instead of hitting a freed page.
#[test]
fn arm64_16_cpus_a_walk_fill_enters_the_filled_index() {
    let mut w = world(&["machine.arch=arm64", "machine.cpus=16"]);
    let mm = w.mm_alloc().unwrap();
    let mut fx = Effects::default();
    for cpu in [3, 11] {
        kernel::arch::switch_mm(&mut w, cpu, mm, &mut fx);
    }
    populate_range(&mut w, mm, VA, VA + PAGE_SIZE).unwrap();
    let a = asid(&w, 11);
    assert_eq!(w.tlb_filled.0.cpus(a).map(|m| m.iter().count()), Some(0));
    assert_eq!(access(&mut w, 11, VA, false), Access::Done);
    let cpus: Vec<u16> = w.tlb_filled.0.cpus(a).unwrap().iter().collect();
    assert_eq!(cpus, [11], "CPU 11's first fill of the ASID");
    assert_eq!(access(&mut w, 3, VA, false), Access::Done);
    let cpus: Vec<u16> = w.tlb_filled.0.cpus(a).unwrap().iter().collect();
    assert_eq!(cpus, [3, 11]);
    // zap + flush_tlb_page + free: both TLBs drop the entry.
    let (t, e) = pte_of(&w, mm, VA);
    w.mem.write(t, table_index(VA, 1), 0);
    kernel::arch::arm64::tlbflush::flush_tlb_page(&mut w, mm, VA, &mut fx);
    w.mem.free(pte::pfn(e));
    for cpu in [3, 11] {
        assert_eq!(access(&mut w, cpu, VA, false), Access::Fault);
    }
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}
