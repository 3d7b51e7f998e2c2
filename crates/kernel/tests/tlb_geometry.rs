//! `machine.tlb_entries`, `machine.tlb_ways` and `machine.psc_entries`
//! reach every CPU's TLB, and the capacity they set is what evicts.
//!
//! The set of a 4 KiB page is `(vpn ^ (vpn >> 17)) & (sets - 1)`: for
//! vpn < 2^17 that is vpn mod sets, so page k shares a set with k + sets.
//! Replacement within a set is LRU.

mod common;

use kernel::World;
use machine::tlb::TlbHit;
use machine::Scenario;

fn world(entries: u32, ways: u32, psc: u32) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    s.set(&format!("machine.tlb_entries={entries}")).unwrap();
    s.set(&format!("machine.tlb_ways={ways}")).unwrap();
    s.set(&format!("machine.psc_entries={psc}")).unwrap();
    World::new(&s).unwrap()
}

fn hit(pfn: u32) -> TlbHit {
    common::tlb_hit(1, pfn, true)
}

/// Fill pages `fill` (vpns) on CPU 1, then report which of `probe` still hit.
fn resident(w: &mut World, fill: &[u64], probe: &[u64]) -> Vec<bool> {
    let t = &mut w.cpus[1].tlb;
    for &vpn in fill {
        t.fill(1, vpn << 12, hit(vpn as u32 + 1));
    }
    probe
        .iter()
        .map(|&v| t.lookup(1, v << 12).is_some())
        .collect()
}

/// Fully associative (ways = entries): E + 1 distinct pages evict exactly
/// the least recently used one, the first; with 2E entries all fit.
#[test]
fn tlb_entries_is_the_capacity() {
    let pages: Vec<u64> = (0..=16).collect();
    let r = resident(&mut world(16, 16, 32), &pages, &pages);
    assert!(!r[0], "17 pages in 16 entries: the coldest is gone");
    assert!(r[1..].iter().all(|&h| h), "the other 16 stay");
    assert_eq!(world(16, 16, 32).cpus[0].tlb.count(1), 0);
    let r = resident(&mut world(32, 32, 32), &pages, &pages);
    assert!(r.iter().all(|&h| h), "32 entries hold 17 pages");
}

/// 16 entries: direct-mapped (16 sets) page 0 and page 16 collide; 2-way
/// (8 sets) pages 0, 8, 16 share set 0 and the third evicts the first,
/// while two of them fit.
#[test]
fn tlb_ways_set_the_conflicts() {
    let r = resident(&mut world(16, 1, 32), &[0, 16], &[0, 16]);
    assert_eq!(r, [false, true], "1-way: same set, one survives");
    let r = resident(&mut world(16, 2, 32), &[0, 16], &[0, 16]);
    assert_eq!(r, [true, true], "2-way: both fit in set 0");
    let r = resident(&mut world(16, 2, 32), &[0, 8, 16], &[0, 8, 16]);
    assert_eq!(r, [false, true, true], "three in a 2-way set");
    // 16 consecutive pages fill every set of a direct-mapped TLB once.
    let pages: Vec<u64> = (0..16).collect();
    let r = resident(&mut world(16, 1, 32), &pages, &pages);
    assert!(r.iter().all(|&h| h));
}

/// The paging-structure cache keeps `psc_entries` PTE-table pointers and
/// replaces round-robin: a third region in two entries evicts the first.
#[test]
fn psc_entries_is_the_walk_cache_capacity() {
    for (psc, first_kept) in [(2u32, false), (3, true)] {
        let mut w = world(16, 16, psc);
        let t = &mut w.cpus[1].tlb;
        for r in 0..3u64 {
            t.psc_fill(1, r << 21, 100 + r as u32, 0);
        }
        assert_eq!(
            t.psc_lookup(1, 0).is_some(),
            first_kept,
            "psc_entries={psc}"
        );
        assert!(t.psc_lookup(1, 2 << 21).is_some());
        assert_eq!(t.psc_holds(1, 100), first_kept);
    }
}
