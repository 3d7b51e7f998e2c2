//! A per-CPU TLB and paging-structure cache.
//!
//! Set-associative with LRU replacement like a second-level TLB (x86 STLB,
//! arm64 L2 TLB), tagged by the hardware ASID (x86 PCID slot, arm64/RISC-V
//! ASID). Flushing a whole ASID, or everything, is O(1): each entry remembers
//! the epoch of its ASID and the global epoch when it was filled, and a flush
//! bumps the epoch, which makes every older entry invalid at once.
//!
//! The paging-structure cache (Intel SDM vol. 3 §4.10.3, "PDE cache") keeps
//! the PTE-table frame that a 2 MiB-aligned region resolved to, so a later walk
//! reads that table frame directly without re-reading the upper levels: this is
//! why freeing a page-table page needs a flush even on CPUs whose TLB holds no
//! leaf entry for the range (`freed_tables`). A smaller cache one level up
//! (the "PDPTE cache") keeps the PMD table a 1 GiB region resolved to through
//! its PUD entry: a hugetlb PMD table shared between mms stays reachable from
//! a CPU that cached it until that CPU flushes, even after `huge_pmd_unshare`
//! cleared the PUD entry.

use crate::Pfn;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const VALID: u8 = 1;
/// Entries of the PUD-entry cache (a few, as in Intel's PDPTE cache).
const UPPER_ENTRIES: usize = 4;
/// 1 GiB regions: what one PUD entry maps.
const PUD_SHIFT: u32 = 30;
const WRITE: u8 = 2;
const HUGE: u8 = 4;
/// Marks a tag as a 2 MiB translation so it never aliases a 4 KiB one.
const HUGE_TAG: u64 = 1 << 63;

/// Packed to 4-byte alignment: 36 bytes instead of 40 (4 bytes of padding
/// per entry were 6 MB of TLBs at 1024 CPUs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C, packed(4))]
struct Entry {
    tag: u64,
    pfn: Pfn,
    /// Monitor-only: the address space the translation was filled for.
    owner: u32,
    frame_gen: u32,
    epoch: u32,
    gepoch: u32,
    lru: u32,
    asid: u16,
    flags: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct PscEntry {
    region: u64,
    table: Pfn,
    table_gen: u32,
    epoch: u32,
    pepoch: u32,
    gepoch: u32,
    asid: u16,
    valid: bool,
}

/// Every field, packed into five words (the checker hashes a TLB whenever
/// a step changed it; one hasher round per word, not per field).
impl Hash for Entry {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.tag);
        h.write_u64(u64::from(self.pfn) | u64::from(self.owner) << 32);
        h.write_u64(u64::from(self.frame_gen) | u64::from(self.epoch) << 32);
        h.write_u64(u64::from(self.gepoch) | u64::from(self.lru) << 32);
        h.write_u64(u64::from(self.asid) | u64::from(self.flags) << 16);
    }
}

/// Every field, packed into four words (as [`Entry`]'s).
impl Hash for PscEntry {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.region);
        h.write_u64(u64::from(self.table) | u64::from(self.table_gen) << 32);
        h.write_u64(u64::from(self.epoch) | u64::from(self.pepoch) << 32);
        h.write_u64(
            u64::from(self.gepoch) | u64::from(self.asid) << 32 | u64::from(self.valid) << 48,
        );
    }
}

/// A translation found in the TLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbHit {
    pub pfn: Pfn,
    /// Generation of the frame when the translation was cached.
    pub frame_gen: u32,
    pub writable: bool,
    pub huge: bool,
    /// Monitor-only (no hardware keeps it): the address space (mm id) that
    /// the walk which filled this translation ran in. A hit for another mm
    /// means an ASID was reused without a flush.
    pub owner: u32,
}

/// A PTE table found in the paging-structure cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PscHit {
    pub table: Pfn,
    pub table_gen: u32,
}

/// One CPU's TLB.
///
/// The contents are shared copy-on-write between clones (the checker clones
/// the world per transition and a step changes one CPU's TLB at most), and
/// their hash is cached until the next change, so a clone's unchanged TLBs
/// cost neither a copy nor a rehash.
#[derive(Clone, Debug)]
pub struct Tlb {
    s: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    data: TlbData,
    /// Hash of `data` (never 0), or 0 until computed since the last change.
    digest: AtomicU64,
    /// Bit `asid % 64` is set once a translation of `asid` was filled: a
    /// flush of one address in an ASID whose bit is clear has no entry to
    /// drop (a broadcast TLBI reaches every CPU, most of which never ran
    /// the mm). A hint about the past, not part of the state: not compared
    /// or hashed.
    filled: u64,
    /// `tables[t % 256]`: how many entries of the paging-structure caches
    /// hold a table `t` of that bucket, live or stale (255 sticks: never
    /// decremented again). `psc_holds` of a table in an empty bucket is
    /// false without a scan (the monitor asks it of every CPU for every
    /// freed table). Kept on insert, the only change to the entries. A
    /// hint, not state: not compared or hashed.
    tables: [u8; 256],
}

impl Clone for Shared {
    fn clone(&self) -> Self {
        Shared {
            data: self.data.clone(),
            digest: AtomicU64::new(self.digest.load(Ordering::Relaxed)),
            filled: self.filled,
            tables: self.tables,
        }
    }
}

impl Shared {
    /// `table` was just cached in place of an entry of `gone` (if valid).
    fn note_table(&mut self, table: Pfn, gone: Option<Pfn>) {
        let n = &mut self.tables[table as usize % 256];
        *n = n.saturating_add(1);
        if let Some(g) = gone {
            let n = &mut self.tables[g as usize % 256];
            if *n != u8::MAX {
                *n -= 1;
            }
        }
    }
}

impl PartialEq for Tlb {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.s, &o.s) || self.s.data == o.s.data
    }
}
impl Eq for Tlb {}

impl Hash for Tlb {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let mut d = self.s.digest.load(Ordering::Relaxed);
        if d == 0 {
            let mut fx = rustc_hash::FxHasher::default();
            self.s.data.hash(&mut fx);
            d = fx.finish() | 1;
            self.s.digest.store(d, Ordering::Relaxed);
        }
        h.write_u64(d);
    }
}

impl Tlb {
    /// A TLB of `entries` translations in `ways`-way sets, and a
    /// paging-structure cache of `psc_entries` PTE-table pointers.
    pub fn new(entries: u32, ways: u32, psc_entries: u32) -> Self {
        Tlb {
            s: Arc::new(Shared {
                data: TlbData::new(entries, ways, psc_entries),
                digest: AtomicU64::new(0),
                filled: 0,
                tables: [0; 256],
            }),
        }
    }

    #[inline]
    fn d(&self) -> &TlbData {
        &self.s.data
    }

    /// The shared part, unshared first if a clone shares it; its digest
    /// is dropped (the caller changes the contents).
    #[inline]
    fn shared_mut(&mut self) -> &mut Shared {
        let s = if Arc::strong_count(&self.s) == 1 && Arc::weak_count(&self.s) == 0 {
            // SAFETY: this is the only Arc and no Weak exists (none is
            // ever made), and `&mut self` keeps it so while the borrow
            // lives: nothing else can reach the value. (`Arc::make_mut`
            // would do the same after an atomic compare-exchange, which
            // the simulator paid on every TLB access.) The fence orders
            // this after the last use by a clone dropped on another thread.
            std::sync::atomic::fence(Ordering::Acquire);
            unsafe { &mut *(Arc::as_ptr(&self.s) as *mut Shared) }
        } else {
            Arc::make_mut(&mut self.s)
        };
        *s.digest.get_mut() = 0;
        s
    }

    /// The contents, unshared first if a clone shares them.
    #[inline]
    fn m(&mut self) -> &mut TlbData {
        &mut self.shared_mut().data
    }

    /// Look `va` up for `asid`, 4 KiB first, then 2 MiB. Updates LRU.
    #[inline]
    pub fn lookup(&mut self, asid: u16, va: u64) -> Option<TlbHit> {
        let i = self.d().find(asid, va)?;
        Some(self.m().touch(i))
    }

    /// Cache a translation (a TLB fill after a page walk).
    pub fn fill(&mut self, asid: u16, va: u64, hit: TlbHit) {
        let s = self.shared_mut();
        s.filled |= 1 << (asid % 64);
        s.data.fill(asid, va, hit)
    }

    /// Look up the PTE table that maps `va`'s 2 MiB region.
    pub fn psc_lookup(&self, asid: u16, va: u64) -> Option<PscHit> {
        self.d().psc_lookup(asid, va)
    }

    /// Does the paging-structure cache hold a live pointer to `table` for `asid`?
    pub fn psc_holds(&self, asid: u16, table: Pfn) -> bool {
        self.s.tables[table as usize % 256] != 0 && self.d().psc_holds(asid, table)
    }

    /// Remember the PTE table a walk went through.
    pub fn psc_fill(&mut self, asid: u16, va: u64, table: Pfn, table_gen: u32) {
        let s = self.shared_mut();
        let gone = s.data.psc_fill(asid, va, table, table_gen);
        s.note_table(table, gone);
    }

    /// Remember the PMD table a walk reached through the PUD entry of `va`.
    pub fn pud_psc_fill(&mut self, asid: u16, va: u64, table: Pfn, table_gen: u32) {
        let s = self.shared_mut();
        let gone = s.data.pud_psc_fill(asid, va, table, table_gen);
        s.note_table(table, gone);
    }

    /// `INVLPG` / `TLBI VAE1` / `sfence.vma va, asid`: drop the translations
    /// of `va` in `asid`, and (as INVLPG does) every paging-structure-cache
    /// entry of that ASID.
    pub fn flush_one(&mut self, asid: u16, va: u64) {
        if self.s.filled & (1 << (asid % 64)) == 0 {
            TlbData::bump(&mut self.m().psc_epochs, asid);
        } else {
            self.m().flush_one(asid, va)
        }
    }

    /// RISC-V `sfence.vma va, asid` / arm64 `TLBI VALE1`: drop the leaf
    /// translations of `va` in `asid` only; walk-cache entries survive.
    pub fn flush_one_leaf(&mut self, asid: u16, va: u64) {
        // A TLB that never filled this ASID has no leaf entry to drop.
        if self.s.filled & (1 << (asid % 64)) != 0 {
            self.m().flush_one_leaf(asid, va)
        }
    }

    /// Drop the translations of `va` under every ASID, global ones included
    /// (RISC-V `sfence.vma va, x0`; kernel mappings are global).
    pub fn flush_va(&mut self, va: u64) {
        self.m().flush_va(va)
    }

    /// Drop every translation of `asid` (CR3 write with flush, INVPCID
    /// single-context, `TLBI ASIDE1`, `sfence.vma zero, asid`).
    pub fn flush_asid(&mut self, asid: u16) {
        self.m().flush_asid(asid)
    }

    /// Drop every translation (`__flush_tlb_all`, `TLBI VMALLE1`).
    pub fn flush_all(&mut self) {
        self.m().flush_all()
    }

    /// Number of live translations of `asid` (for tests and reports).
    pub fn count(&self, asid: u16) -> usize {
        self.d().count(asid)
    }
}

/// The contents of a TLB.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TlbData {
    /// `sets - 1`; the number of sets is a power of two, as in hardware.
    set_mask: u64,
    ways: u32,
    /// Has any 2 MiB translation ever been cached? (Skips that probe if not.)
    any_huge: bool,
    entries: Vec<Entry>,
    psc: Vec<PscEntry>,
    psc_next: u32,
    /// PUD-entry cache: PMD tables per 1 GiB region (same invalidation as `psc`).
    upper: Vec<PscEntry>,
    upper_next: u32,
    epochs: Vec<u32>,
    /// Per-ASID epoch of the paging-structure cache alone (INVLPG drops it).
    psc_epochs: Vec<u32>,
    gepoch: u32,
    tick: u32,
}

impl TlbData {
    fn new(entries: u32, ways: u32, psc_entries: u32) -> Self {
        let ways = ways.clamp(1, entries.max(1));
        let sets = (entries / ways).max(1).next_power_of_two();
        TlbData {
            set_mask: sets as u64 - 1,
            ways,
            any_huge: false,
            entries: vec![Entry::default(); (sets * ways) as usize],
            psc: vec![PscEntry::default(); psc_entries.max(1) as usize],
            psc_next: 0,
            upper: vec![PscEntry::default(); UPPER_ENTRIES],
            upper_next: 0,
            epochs: vec![0; 8],
            psc_epochs: vec![0; 8],
            gepoch: 1,
            tick: 0,
        }
    }

    fn epoch(&self, asid: u16) -> u32 {
        self.epochs.get(asid as usize).copied().unwrap_or(0)
    }

    fn psc_epoch(&self, asid: u16) -> u32 {
        self.psc_epochs.get(asid as usize).copied().unwrap_or(0)
    }

    fn bump(v: &mut Vec<u32>, asid: u16) {
        let a = asid as usize;
        if a >= v.len() {
            v.resize(a + 1, 0);
        }
        v[a] = v[a].wrapping_add(1);
    }

    #[inline]
    fn live(&self, e: &Entry) -> bool {
        e.flags & VALID != 0 && e.gepoch == self.gepoch && e.epoch == self.epoch(e.asid)
    }

    fn set_of(&self, tag: u64) -> std::ops::Range<usize> {
        let h = tag ^ (tag >> 17);
        let s = (h & self.set_mask) as usize;
        let w = self.ways as usize;
        s * w..s * w + w
    }

    fn tag(va: u64, huge: bool) -> u64 {
        if huge {
            (va >> crate::HPAGE_SHIFT) | HUGE_TAG
        } else {
            va >> crate::PAGE_SHIFT
        }
    }

    /// The entry that translates `va` for `asid`, 4 KiB first, then 2 MiB.
    #[inline]
    fn find(&self, asid: u16, va: u64) -> Option<usize> {
        for huge in [false, true] {
            if huge && !self.any_huge {
                break;
            }
            let tag = Self::tag(va, huge);
            for i in self.set_of(tag) {
                let e = &self.entries[i];
                if e.tag == tag && e.asid == asid && self.live(e) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// A hit on entry `i`: it becomes the most recently used.
    #[inline]
    fn touch(&mut self, i: usize) -> TlbHit {
        self.tick = self.tick.wrapping_add(1);
        let e = &mut self.entries[i];
        e.lru = self.tick;
        TlbHit {
            pfn: e.pfn,
            owner: e.owner,
            frame_gen: e.frame_gen,
            writable: e.flags & WRITE != 0,
            huge: e.flags & HUGE != 0,
        }
    }

    /// Cache a translation (a TLB fill after a page walk).
    pub fn fill(&mut self, asid: u16, va: u64, hit: TlbHit) {
        let tag = Self::tag(va, hit.huge);
        let range = self.set_of(tag);
        let mut victim = range.start;
        let mut best = u64::MAX;
        for i in range {
            let e = &self.entries[i];
            let score = if !self.live(e) || (e.tag == tag && e.asid == asid) {
                0
            } else {
                1 + e.lru as u64
            };
            if score < best {
                best = score;
                victim = i;
            }
            if score == 0 {
                break;
            }
        }
        self.tick = self.tick.wrapping_add(1);
        let mut flags = VALID;
        if hit.writable {
            flags |= WRITE;
        }
        if hit.huge {
            flags |= HUGE;
            self.any_huge = true;
        }
        self.entries[victim] = Entry {
            tag,
            pfn: hit.pfn,
            owner: hit.owner,
            frame_gen: hit.frame_gen,
            epoch: self.epoch(asid),
            gepoch: self.gepoch,
            lru: self.tick,
            asid,
            flags,
        };
    }

    /// Look up the PTE table that maps `va`'s 2 MiB region.
    pub fn psc_lookup(&self, asid: u16, va: u64) -> Option<PscHit> {
        let region = va >> crate::HPAGE_SHIFT;
        self.psc
            .iter()
            .find(|p| {
                p.valid
                    && p.region == region
                    && p.asid == asid
                    && p.gepoch == self.gepoch
                    && p.epoch == self.epoch(asid)
                    && p.pepoch == self.psc_epoch(asid)
            })
            .map(|p| PscHit {
                table: p.table,
                table_gen: p.table_gen,
            })
    }

    /// Does the paging-structure cache hold a live pointer to `table` for `asid`?
    pub fn psc_holds(&self, asid: u16, table: Pfn) -> bool {
        let (epoch, pepoch) = (self.epoch(asid), self.psc_epoch(asid));
        self.psc.iter().chain(&self.upper).any(|p| {
            p.valid
                && p.table == table
                && p.asid == asid
                && p.gepoch == self.gepoch
                && p.epoch == epoch
                && p.pepoch == pepoch
        })
    }

    /// Remember the PTE table a walk went through; the table of the
    /// valid entry it replaced, if any.
    pub fn psc_fill(&mut self, asid: u16, va: u64, table: Pfn, table_gen: u32) -> Option<Pfn> {
        let e = self.psc_entry(asid, va >> crate::HPAGE_SHIFT, table, table_gen);
        Self::cache_insert(&mut self.psc, &mut self.psc_next, e)
    }

    /// Remember the PMD table a walk reached through the PUD entry of `va`.
    pub fn pud_psc_fill(&mut self, asid: u16, va: u64, table: Pfn, table_gen: u32) -> Option<Pfn> {
        let e = self.psc_entry(asid, va >> PUD_SHIFT, table, table_gen);
        Self::cache_insert(&mut self.upper, &mut self.upper_next, e)
    }

    /// Replace the entry of the same region and ASID, else a round-robin
    /// victim; the table of the valid entry replaced, if any.
    fn cache_insert(cache: &mut [PscEntry], next: &mut u32, e: PscEntry) -> Option<Pfn> {
        let slot = match cache
            .iter()
            .position(|p| p.valid && p.region == e.region && p.asid == e.asid)
        {
            Some(i) => i,
            None => {
                let i = *next as usize;
                *next = (*next + 1) % cache.len() as u32;
                i
            }
        };
        let old = std::mem::replace(&mut cache[slot], e);
        old.valid.then_some(old.table)
    }

    fn psc_entry(&self, asid: u16, region: u64, table: Pfn, table_gen: u32) -> PscEntry {
        let epoch = self.epoch(asid);
        let pepoch = self.psc_epoch(asid);
        PscEntry {
            region,
            table,
            table_gen,
            epoch,
            pepoch,
            gepoch: self.gepoch,
            asid,
            valid: true,
        }
    }

    /// `INVLPG` / `TLBI VAE1` / `sfence.vma va, asid`: drop the translations
    /// of `va` in `asid`, and (as INVLPG does) every paging-structure-cache
    /// entry of that ASID.
    pub fn flush_one(&mut self, asid: u16, va: u64) {
        self.flush_one_leaf(asid, va);
        Self::bump(&mut self.psc_epochs, asid);
    }

    /// RISC-V `sfence.vma va, asid`: drop the leaf translations of `va` in
    /// `asid` only; the spec lets non-leaf (walk-cache) entries survive, so
    /// a freed page table needs a whole-ASID `sfence.vma`.
    pub fn flush_one_leaf(&mut self, asid: u16, va: u64) {
        for huge in [false, true] {
            if huge && !self.any_huge {
                break;
            }
            let tag = Self::tag(va, huge);
            for i in self.set_of(tag) {
                let e = &mut self.entries[i];
                if e.tag == tag && e.asid == asid {
                    e.flags = 0;
                }
            }
        }
    }

    /// Drop the translations of `va` under every ASID, global ones included
    /// (RISC-V `sfence.vma va, x0`; kernel mappings are global).
    pub fn flush_va(&mut self, va: u64) {
        for huge in [false, true] {
            if huge && !self.any_huge {
                break;
            }
            let tag = Self::tag(va, huge);
            for i in self.set_of(tag) {
                let e = &mut self.entries[i];
                if e.tag == tag {
                    e.flags = 0;
                }
            }
        }
    }

    /// Drop every translation of `asid` (CR3 write with flush, INVPCID
    /// single-context, `TLBI ASIDE1`, `sfence.vma zero, asid`).
    pub fn flush_asid(&mut self, asid: u16) {
        Self::bump(&mut self.epochs, asid);
    }

    /// Drop every translation (`__flush_tlb_all`, `TLBI VMALLE1`).
    pub fn flush_all(&mut self) {
        self.gepoch = self.gepoch.wrapping_add(1);
    }

    /// Number of live translations of `asid` (for tests and reports).
    pub fn count(&self, asid: u16) -> usize {
        self.entries
            .iter()
            .filter(|e| e.asid == asid && self.live(e))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(pfn: Pfn) -> TlbHit {
        TlbHit {
            owner: 0,
            pfn,
            frame_gen: 1,
            writable: true,
            huge: false,
        }
    }

    #[test]
    fn fill_lookup_flush() {
        let mut t = Tlb::new(64, 4, 4);
        t.fill(1, 0x1000, hit(7));
        t.fill(2, 0x1000, hit(8));
        assert_eq!(t.lookup(1, 0x1234).unwrap().pfn, 7);
        assert_eq!(t.lookup(2, 0x1000).unwrap().pfn, 8);
        t.flush_one(1, 0x1000);
        assert!(t.lookup(1, 0x1000).is_none());
        assert!(t.lookup(2, 0x1000).is_some());
        t.flush_asid(2);
        assert!(t.lookup(2, 0x1000).is_none());
        t.fill(2, 0x1000, hit(9));
        assert_eq!(t.lookup(2, 0x1000).unwrap().pfn, 9);
        t.flush_all();
        assert_eq!(t.count(2), 0);
    }

    #[test]
    fn capacity_is_finite_and_lru_evicts() {
        let mut t = Tlb::new(8, 8, 1); // one fully associative set
        assert_eq!(t.d().set_mask, 0);
        for p in 0..9u64 {
            t.fill(0, p << 12, hit(p as Pfn));
            t.lookup(0, 0); // keep page 0 hot
        }
        assert_eq!(t.count(0), 8);
        assert!(t.lookup(0, 0).is_some(), "hot entry survives");
        assert!(t.lookup(0, 1 << 12).is_none(), "coldest entry evicted");
    }

    #[test]
    fn huge_and_psc() {
        let mut t = Tlb::new(64, 4, 2);
        t.fill(
            0,
            0x20_0000,
            TlbHit {
                owner: 0,
                pfn: 3,
                frame_gen: 1,
                writable: false,
                huge: true,
            },
        );
        let h = t.lookup(0, 0x20_1234).unwrap();
        assert!(h.huge && !h.writable);
        t.psc_fill(0, 0x40_0000, 11, 5);
        assert_eq!(
            t.psc_lookup(0, 0x40_0fff),
            Some(PscHit {
                table: 11,
                table_gen: 5
            })
        );
        t.flush_one(0, 0x1000); // INVLPG drops all PSC entries of the ASID
        assert!(t.psc_lookup(0, 0x40_0000).is_none());
    }
}
