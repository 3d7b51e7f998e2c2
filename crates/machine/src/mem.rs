//! Physical memory: frames with reuse generations, and page-table pages.
//!
//! A frame is an id, not a physical address range: a 2 MiB huge page is one
//! frame of order 9. Every free bumps the frame's generation, so a cached
//! translation (TLB entry, paging-structure-cache entry, a lockless walker's
//! pointer) that remembers the generation it saw can tell that its frame was
//! freed or reused since. The free list is LIFO, as the page allocator's
//! per-CPU lists are, so a freed frame is handed out again soon: that is what
//! turns a missed flush into a visible use-after-free.

use crate::footprint::{self, kind, Obj};
use crate::{Error, Pfn, PTRS_PER_TABLE};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// PTE bits (x86 names; the other architectures map theirs onto these).
pub mod pte {
    pub const PRESENT: u64 = 1 << 0;
    pub const WRITE: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    /// `_PAGE_PSE`: a leaf at PMD level (2 MiB).
    pub const HUGE: u64 = 1 << 7;
    /// A software bit of a present anonymous PTE (x86 `_PAGE_SOFTW1`'s
    /// place): the folio is in the swap cache with a clean copy in swap
    /// (mapped by a read fault's `do_swap_page`).
    pub const SWAPCACHE: u64 = 1 << 9;
    /// A non-present PTE holding a swap entry (`is_swap_pte`); the model
    /// keeps no swap offset, the page's contents are not tracked.
    pub const SWP_ENTRY: u64 = 1 << 10;
    /// A non-present PTE holding a migration entry (`is_migration_entry`):
    /// the frame being migrated in the PFN field, the old PTE's
    /// `WRITE`/`ACCESSED`/`DIRTY` bits kept (writable, young and dirty
    /// migration entries) and `SWAPCACHE` (the swap cache moves with the folio).
    pub const MIGRATION: u64 = 1 << 11;
    const PFN_SHIFT: u32 = 12;

    /// Build an entry pointing at `pfn` with `flags`.
    pub fn make(pfn: super::Pfn, flags: u64) -> u64 {
        ((pfn as u64) << PFN_SHIFT) | flags | PRESENT
    }
    pub fn pfn(e: u64) -> super::Pfn {
        (e >> PFN_SHIFT) as super::Pfn
    }
    pub fn present(e: u64) -> bool {
        e & PRESENT != 0
    }
    pub fn writable(e: u64) -> bool {
        e & WRITE != 0
    }
    pub fn huge(e: u64) -> bool {
        e & HUGE != 0
    }
    /// `is_swap_pte`: not present, a swap entry.
    pub fn is_swap(e: u64) -> bool {
        !present(e) && e & SWP_ENTRY != 0
    }
    /// `is_migration_entry`: not present, a migration entry.
    pub fn is_migration(e: u64) -> bool {
        !present(e) && e & MIGRATION != 0
    }
    /// mm/rmap.c `try_to_migrate_one`: the migration entry replacing the
    /// present PTE `e` (`make_{writable,readable}_migration_entry`, with
    /// `make_migration_entry_young`/`_dirty`).
    pub fn make_migration(e: u64) -> u64 {
        (e & !PRESENT) | MIGRATION
    }
    /// mm/migrate.c `remove_migration_pte`: the present PTE mapping `new`
    /// in place of migration entry `e`, with its write, young and dirty
    /// bits (and `SWAPCACHE`).
    pub fn from_migration(e: u64, new: super::Pfn) -> u64 {
        make(new, e & (WRITE | USER | ACCESSED | DIRTY | SWAPCACHE))
    }
}

/// What a frame currently holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameUse {
    Free,
    /// An anonymous user page (or huge page).
    Anon,
    /// A page-table page at `level` (4 = PGD ... 1 = PTE table).
    Table(u8),
    /// A PTE table kept aside for a huge PMD (`pgtable_trans_huge_deposit`).
    Deposited,
}

/// A frame's metadata but its generation (kept apart, see [`PhysMem`]).
///
/// A free frame has no references: its `refs` and `gup` hold the free
/// list's link instead (the next free frame, low half then high half; 0
/// ends the list), so the free list costs no memory of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FrameMeta {
    usage: FrameUse,
    /// References to an anonymous page (`folio_ref_count`): one per mapping
    /// (fork shares pages until one side writes or unmaps).
    refs: u16,
    /// References GUP holds on top of the mappings (`GUP_PIN_COUNTING_BIAS`
    /// per FOLL_PIN pin of a small folio): `folio_ref_count` = `refs + gup`.
    gup: u16,
}

impl FrameMeta {
    /// A free frame, linked to `next` (0: the end of the free list).
    fn free(next: Pfn) -> FrameMeta {
        FrameMeta {
            usage: FrameUse::Free,
            refs: next as u16,
            gup: (next >> 16) as u16,
        }
    }

    /// The free frame after this free one (0: none).
    fn next_free(&self) -> Pfn {
        debug_assert_eq!(self.usage, FrameUse::Free);
        Pfn::from(self.refs) | Pfn::from(self.gup) << 16
    }
}

/// The contents of one page-table page, with a digest of them kept up to
/// date on every write, so that hashing a table costs one word, not 512.
#[derive(Clone, Debug)]
struct Table {
    e: [u64; PTRS_PER_TABLE],
    /// Wrapping sum of [`entry_digest`] over the entries (not kept, so
    /// stale, once the memory defers digests: [`PhysMem::defer_digests`]).
    digest: u64,
    /// How many entries are not 0 (follows from `e`).
    used: u16,
}

/// Equal entries (the digest and count follow from them, or are not kept).
impl PartialEq for Table {
    fn eq(&self, o: &Self) -> bool {
        self.e == o.e
    }
}
impl Eq for Table {}

impl Table {
    /// The digest of the entries, from scratch.
    fn digest_of(&self) -> u64 {
        let d = self.e.iter().enumerate().map(|(i, &v)| entry_digest(i, v));
        d.fold(0, u64::wrapping_add)
    }

    fn new() -> Arc<Self> {
        Arc::new(Table {
            e: [0; PTRS_PER_TABLE],
            digest: 0,
            used: 0,
        })
    }
}

/// Page-table pages freed all zero, kept for reuse (at most this many).
const SPARE_TABLES: usize = 64;

/// One entry's share of a table digest: zero for an empty entry, else a
/// well-mixed function of its index and value (splitmix64's finaliser).
#[inline]
fn entry_digest(idx: usize, val: u64) -> u64 {
    if val == 0 {
        return 0;
    }
    let mut z = val ^ (idx as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The frame allocator and the contents of page-table pages.
///
/// Table pages are shared copy-on-write between clones of the memory (the
/// checker clones the world once per explored transition and most steps
/// write no page table), and hash as their digests.
#[derive(Debug)]
pub struct PhysMem {
    meta: Vec<FrameMeta>,
    /// Each frame's generation, apart from `meta`: every TLB fill reads
    /// the one of the frame it maps, and four bytes a frame keep more of
    /// them in cache than the whole metadata.
    gens: Vec<u32>,
    /// The last frame freed (0: none): the head of the free list, which
    /// runs through the free frames' metadata ([`FrameMeta::free`]) and
    /// hands frames out again last freed first.
    free_head: Pfn,
    tables: Vec<Option<Arc<Table>>>,
    /// Each frame's NUMA node (`folio_nid`): the node it was last
    /// allocated on. The free list is one list, not one per node: any
    /// free frame can be handed out on any node.
    nodes: Vec<u8>,
    limit: u32,
    in_use: u32,
    /// Zeroed page-table pages to hand out again instead of allocating and
    /// zeroing 4 KiB (unmap-heavy runs free and allocate tables all the
    /// time). Not state: neither compared nor hashed, not cloned.
    spare: Vec<Arc<Table>>,
    /// Table digests are not kept on writes but computed when the memory
    /// is hashed (the simulator, which never hashes it, writes millions of
    /// entries). Not state: neither compared nor hashed.
    defer_digests: bool,
    /// Record accesses in the thread's [`footprint`] (the checker's
    /// worlds only). Not state: neither compared nor hashed.
    track: bool,
}

impl Clone for PhysMem {
    fn clone(&self) -> Self {
        PhysMem {
            meta: self.meta.clone(),
            gens: self.gens.clone(),
            free_head: self.free_head,
            tables: self.tables.clone(),
            nodes: self.nodes.clone(),
            limit: self.limit,
            in_use: self.in_use,
            spare: Vec::new(),
            defer_digests: self.defer_digests,
            track: self.track,
        }
    }
}

impl PartialEq for PhysMem {
    fn eq(&self, o: &Self) -> bool {
        (
            &self.meta,
            &self.gens,
            self.free_head,
            &self.tables,
            &self.nodes,
            self.limit,
            self.in_use,
        ) == (
            &o.meta,
            &o.gens,
            o.free_head,
            &o.tables,
            &o.nodes,
            o.limit,
            o.in_use,
        )
    }
}
impl Eq for PhysMem {}

/// Every field; each frame as two words (its metadata packed, its table
/// digest or 0), one hasher round each instead of one per field.
impl Hash for PhysMem {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_usize(self.meta.len());
        let frames = self.meta.iter().zip(&self.gens).zip(&self.tables);
        for (((m, &gen), t), &node) in frames.zip(&self.nodes) {
            let usage = match m.usage {
                FrameUse::Free => 0,
                FrameUse::Anon => 1,
                FrameUse::Table(level) => 2 | u64::from(level) << 2,
                FrameUse::Deposited => 3,
            };
            // The node in bits 40-47: 0 on one-node machines (the hash as before).
            let node = u64::from(node) << 40;
            h.write_u64(u64::from(gen) | usage << 32 | node | u64::from(m.refs) << 48);
            // A table's digest is a wrapping sum, 0 when empty: mark presence.
            let digest = |t: &Table| match self.defer_digests {
                false => t.digest,
                true => t.digest_of(),
            };
            h.write_u64(
                t.as_deref()
                    .map_or(0, |t| digest(t) ^ 0x9e37_79b9_7f4a_7c15),
            );
        }
        self.free_head.hash(h);
        self.tables.len().hash(h);
        self.limit.hash(h);
        self.in_use.hash(h);
    }
}

impl PhysMem {
    /// Memory of at most `limit` frames (frame 0 is never handed out).
    pub fn new(limit: u32) -> Self {
        PhysMem {
            meta: vec![FrameMeta::free(0)],
            gens: vec![0],
            free_head: 0,
            tables: vec![None],
            nodes: vec![0],
            limit,
            in_use: 0,
            spare: Vec::new(),
            defer_digests: false,
            track: false,
        }
    }

    /// Stop keeping table digests on writes: hashing the memory computes
    /// them instead (the same hash, at 512 entries a table). For a memory
    /// that is written far more often than hashed.
    pub fn defer_digests(&mut self) {
        self.defer_digests = true;
    }

    /// Record this memory's accesses in the thread's [`footprint`] or not.
    pub fn track_footprints(&mut self, on: bool) {
        self.track = on;
    }

    #[inline(always)]
    fn rec(&self, kind: u8, index: usize, write: bool) {
        if self.track {
            footprint::note(Obj::new(kind, index), write);
        }
    }

    /// Allocate a frame for `usage` (`alloc_page`, `pte_alloc_one`, ...)
    /// on node 0. Page-table pages come zeroed.
    pub fn alloc(&mut self, usage: FrameUse) -> Result<Pfn, Error> {
        self.alloc_node(usage, 0)
    }

    /// Allocate a frame for `usage` on NUMA node `node` (`alloc_pages_node`,
    /// `__folio_alloc(.., nid, ..)`).
    pub fn alloc_node(&mut self, usage: FrameUse, node: u8) -> Result<Pfn, Error> {
        self.rec(kind::FRAME_ALLOC, 0, true);
        let pfn = match self.free_head {
            0 => {
                let p = self.meta.len() as Pfn;
                if p > self.limit {
                    return Err(self.out_of_memory());
                }
                self.meta.push(FrameMeta::free(0));
                self.gens.push(0);
                self.tables.push(None);
                self.nodes.push(0);
                p
            }
            p => {
                self.free_head = self.meta[p as usize].next_free();
                p
            }
        };
        self.meta[pfn as usize] = FrameMeta {
            usage,
            refs: 1,
            gup: 0,
        };
        self.nodes[pfn as usize] = node;
        self.rec(kind::FRAME, pfn as usize, true);
        if let FrameUse::Table(_) = usage {
            let t = self.spare.pop().unwrap_or_else(Table::new);
            self.tables[pfn as usize] = Some(t);
        }
        self.in_use += 1;
        Ok(pfn)
    }

    #[cold]
    fn out_of_memory(&self) -> Error {
        Error::TooBig(format!(
            "out of simulated memory: more than {} frames in use (raise machine.memory)",
            self.limit
        ))
    }

    /// Free a frame: its generation moves on, its table contents are gone.
    pub fn free(&mut self, pfn: Pfn) {
        self.rec(kind::FRAME_ALLOC, 0, true);
        self.rec(kind::FRAME, pfn as usize, true);
        let m = &mut self.meta[pfn as usize];
        debug_assert_ne!(m.usage, FrameUse::Free, "double free of frame {pfn}");
        // Only page-table pages (in use or deposited) have contents.
        let table = matches!(m.usage, FrameUse::Table(_) | FrameUse::Deposited);
        *m = FrameMeta::free(self.free_head);
        self.free_head = pfn;
        let g = &mut self.gens[pfn as usize];
        *g = g.wrapping_add(1);
        debug_assert!(table || self.tables[pfn as usize].is_none());
        if table {
            self.free_table(pfn);
        }
        self.in_use -= 1;
    }

    /// The contents of a freed page-table page go (kept as a spare if no
    /// clone holds them and they are all zero: as good as new).
    fn free_table(&mut self, pfn: Pfn) {
        if let Some(t) = self.tables[pfn as usize].take() {
            if t.used == 0 && self.spare.len() < SPARE_TABLES && Arc::strong_count(&t) == 1 {
                self.spare.push(t);
            }
        }
    }

    /// `folio_get`: another mapping of the page (fork's `copy_present_pte`).
    pub fn get_page(&mut self, pfn: Pfn) {
        self.rec(kind::FRAME, pfn as usize, true);
        let m = &mut self.meta[pfn as usize];
        debug_assert_ne!(m.usage, FrameUse::Free, "get_page of free frame {pfn}");
        m.refs = m.refs.saturating_add(1);
    }

    /// `folio_put`: drop one reference; the page is freed with the last
    /// (a GUP pin keeps an unmapped page). Returns whether it was freed.
    pub fn put_page(&mut self, pfn: Pfn) -> bool {
        self.rec(kind::FRAME, pfn as usize, true);
        let m = &mut self.meta[pfn as usize];
        if m.refs > 1 || m.gup > 0 {
            m.refs = m.refs.saturating_sub(1);
            return false;
        }
        self.free(pfn);
        true
    }

    /// `try_grab_folio_fast`: GUP takes `n` references (FOLL_PIN on a
    /// small folio: `GUP_PIN_COUNTING_BIAS`).
    pub fn gup_get(&mut self, pfn: Pfn, n: u16) {
        self.rec(kind::FRAME, pfn as usize, true);
        let m = &mut self.meta[pfn as usize];
        debug_assert_ne!(m.usage, FrameUse::Free, "GUP pin of free frame {pfn}");
        m.gup = m.gup.saturating_add(n);
    }

    /// `unpin_user_page` → `gup_put_folio`: drop GUP's `n` references; a
    /// page no mapping holds any more is freed with them. Returns whether
    /// it was freed.
    pub fn gup_put(&mut self, pfn: Pfn, n: u16) -> bool {
        self.rec(kind::FRAME, pfn as usize, true);
        let m = &mut self.meta[pfn as usize];
        m.gup = m.gup.saturating_sub(n);
        if m.gup == 0 && m.refs == 0 {
            self.free(pfn);
            return true;
        }
        false
    }

    /// `folio_ref_count`: the mappings' references plus GUP's.
    pub fn ref_count(&self, pfn: Pfn) -> u32 {
        self.rec(kind::FRAME, pfn as usize, false);
        let m = &self.meta[pfn as usize];
        debug_assert_ne!(m.usage, FrameUse::Free, "references of free frame {pfn}");
        m.refs as u32 + m.gup as u32
    }

    /// The mappings' references (`folio_mapcount` for an anonymous page).
    pub fn refs(&self, pfn: Pfn) -> u16 {
        self.rec(kind::FRAME, pfn as usize, false);
        let m = &self.meta[pfn as usize];
        debug_assert_ne!(m.usage, FrameUse::Free, "references of free frame {pfn}");
        m.refs
    }

    /// Give a frame a new role without freeing it (e.g. a PTE table that is
    /// unhooked and deposited): for anyone who cached it, it was reused.
    pub fn retag(&mut self, pfn: Pfn, usage: FrameUse) {
        self.rec(kind::FRAME, pfn as usize, true);
        let m = &mut self.meta[pfn as usize];
        m.usage = usage;
        let g = &mut self.gens[pfn as usize];
        *g = g.wrapping_add(1);
    }

    /// The frame's current generation.
    #[inline]
    pub fn gen(&self, pfn: Pfn) -> u32 {
        self.rec(kind::FRAME, pfn as usize, false);
        self.gens[pfn as usize]
    }

    /// `folio_nid`: the frame's NUMA node.
    pub fn node(&self, pfn: Pfn) -> u8 {
        self.rec(kind::FRAME, pfn as usize, false);
        self.nodes[pfn as usize]
    }

    pub fn usage(&self, pfn: Pfn) -> FrameUse {
        self.rec(kind::FRAME, pfn as usize, false);
        self.meta[pfn as usize].usage
    }

    /// Frames in use now.
    pub fn in_use(&self) -> u32 {
        self.rec(kind::FRAME_ALLOC, 0, false);
        self.in_use
    }

    /// Highest frame number handed out so far plus one.
    pub fn high_water(&self) -> u32 {
        self.rec(kind::FRAME_ALLOC, 0, false);
        self.meta.len() as u32
    }

    /// Read entry `idx` of page-table page `pfn`; `None` if `pfn` is not a
    /// page-table page any more (freed or reused).
    #[inline]
    pub fn read(&self, pfn: Pfn, idx: usize) -> Option<u64> {
        self.rec(kind::FRAME, pfn as usize, false);
        self.tables[pfn as usize].as_ref().map(|t| t.e[idx])
    }

    /// A walk read entry `idx` of table `pfn`: ask the cache for what a
    /// walk of the next page reads (an access stream goes page after page),
    /// its frame's generation and the next line of entries. A hint to the
    /// host's caches, no more.
    #[inline]
    pub fn prefetch_after(&self, pfn: Pfn, idx: usize) {
        let Some(Some(t)) = self.tables.get(pfn as usize) else {
            return;
        };
        if let Some(&next) = t.e.get(idx + 1) {
            prefetch(self.gens.as_ptr().wrapping_add(pte::pfn(next) as usize));
        }
        prefetch(t.e.as_ptr().wrapping_add(idx + 8));
    }

    /// Write entry `idx` of page-table page `pfn`.
    #[inline(always)]
    pub fn write(&mut self, pfn: Pfn, idx: usize, val: u64) {
        self.rec(kind::FRAME, pfn as usize, true);
        let keep = !self.defer_digests;
        let t = self.tables[pfn as usize]
            .as_mut()
            .expect("write to a frame that is not a page table");
        let old = t.e[idx];
        if old == val {
            return;
        }
        let t = table_mut(t);
        if keep {
            t.digest = t
                .digest
                .wrapping_sub(entry_digest(idx, old))
                .wrapping_add(entry_digest(idx, val));
        }
        t.used = t.used + u16::from(val != 0) - u16::from(old != 0);
        t.e[idx] = val;
    }

    /// Does page-table page `pfn` hold no present entry?
    pub fn table_empty(&self, pfn: Pfn) -> bool {
        self.rec(kind::FRAME, pfn as usize, false);
        // (An all-zero table, as most are when asked, needs no scan.)
        self.tables[pfn as usize]
            .as_ref()
            .is_none_or(|t| t.used == 0 || t.e.iter().all(|e| !pte::present(*e)))
    }
}

/// Ask the host's cache for the line at `p` (which need not be valid
/// memory: a prefetch never faults).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads nothing architecturally and never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A page-table page to write, copied first if a world clone shares it.
#[inline]
fn table_mut(t: &mut Arc<Table>) -> &mut Table {
    // (No Weak of it is ever made: the strong count says it all.)
    if Arc::strong_count(t) != 1 {
        unshare(t);
    }
    // SAFETY: this is the only Arc and no Weak exists (none is ever made;
    // `unshare` made a copy if a clone shared it), and `&mut t` keeps it
    // so while the borrow lives: nothing else can reach the table.
    // (`Arc::make_mut` does the same after an atomic compare-exchange,
    // which the simulator paid on every page-table write.) The fence
    // orders this after the last use by a clone dropped on another thread.
    std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    unsafe { &mut *(Arc::as_ptr(t) as *mut Table) }
}

/// Copy a page-table page a clone shares (out of line: the checker's path).
#[cold]
#[inline(never)]
fn unshare(t: &mut Arc<Table>) {
    Arc::make_mut(t);
}

/// Index of `va` in the page-table page at `level` (4 = PGD ... 1 = PTE).
#[inline]
pub fn table_index(va: u64, level: u8) -> usize {
    ((va >> (12 + 9 * (level as u32 - 1))) & 511) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_bumps_generation_lifo() {
        let mut m = PhysMem::new(4);
        let a = m.alloc(FrameUse::Anon).unwrap();
        let g = m.gen(a);
        m.free(a);
        let b = m.alloc(FrameUse::Table(1)).unwrap();
        assert_eq!(a, b, "LIFO reuse");
        assert_ne!(m.gen(b), g);
        assert_eq!(m.read(b, 3), Some(0));
        m.write(b, 3, pte::make(9, pte::WRITE));
        assert!(!m.table_empty(b));
        assert_eq!(pte::pfn(m.read(b, 3).unwrap()), 9);
    }

    /// A migration entry is not present, names the frame being migrated
    /// and keeps the write, young and dirty bits, which the restored PTE
    /// of the new frame gets back; a swap entry is not a migration entry.
    #[test]
    fn migration_entries_keep_the_bits_and_name_the_frame() {
        let e = pte::make(7, pte::WRITE | pte::USER | pte::ACCESSED | pte::DIRTY);
        let m = pte::make_migration(e);
        assert!(pte::is_migration(m) && !pte::present(m) && !pte::is_swap(m));
        assert_eq!(pte::pfn(m), 7);
        assert_eq!(
            pte::from_migration(m, 9),
            pte::make(9, e & !(7 << 12) & !pte::PRESENT)
        );
        let ro = pte::make_migration(pte::make(7, pte::USER));
        assert!(!pte::writable(pte::from_migration(ro, 9)));
        assert!(!pte::is_migration(pte::SWP_ENTRY));
    }

    /// A frame carries the node it was allocated on; a reuse relabels it;
    /// two memories that differ only in a frame's node differ.
    #[test]
    fn frames_carry_their_node() {
        let mut m = PhysMem::new(4);
        let a = m.alloc_node(FrameUse::Anon, 1).unwrap();
        assert_eq!(m.node(a), 1);
        m.free(a);
        let b = m.alloc(FrameUse::Anon).unwrap();
        assert_eq!((b, m.node(b)), (a, 0));
        let mut n = PhysMem::new(4);
        n.alloc_node(FrameUse::Anon, 1).unwrap();
        let mut o = PhysMem::new(4);
        o.alloc(FrameUse::Anon).unwrap();
        assert_ne!(n, o);
        let h = |m: &PhysMem| {
            let mut s = std::collections::hash_map::DefaultHasher::new();
            m.hash(&mut s);
            s.finish()
        };
        assert_ne!(h(&n), h(&o));
    }

    /// The free list runs through the free frames' metadata: frames come
    /// back last freed first, past the 16 bits of a link's low half, and
    /// memories compare and hash by the order of their free lists.
    #[test]
    fn free_list_is_a_stack_in_the_metadata() {
        let mut m = PhysMem::new(70_001);
        let all: Vec<Pfn> = (0..70_000)
            .map(|_| m.alloc(FrameUse::Anon).unwrap())
            .collect();
        let mut other = m.clone();
        let freed = [all[3], all[69_999], all[65_536], all[0]];
        for &p in &freed {
            m.free(p);
        }
        for &p in freed.iter().rev() {
            other.free(p);
        }
        assert!(m != other, "the same free frames in another order");
        for mem in [&mut m, &mut other] {
            for _ in 0..4 {
                mem.alloc(FrameUse::Anon).unwrap();
            }
        }
        assert!(m == other && fp(&m) == fp(&other), "all handed out again");
        for &p in &freed {
            m.free(p);
        }
        let back: Vec<Pfn> = (0..4)
            .map(|_| m.alloc(FrameUse::Table(1)).unwrap())
            .collect();
        assert_eq!(back, [all[0], all[65_536], all[69_999], all[3]], "LIFO");
        assert_eq!(m.in_use(), 70_000);
        let fresh = m.alloc(FrameUse::Anon).unwrap();
        assert_eq!(fresh, 70_001, "an empty free list grows the memory");
    }

    #[test]
    fn digest_follows_contents_and_clones_share() {
        let mut m = PhysMem::new(8);
        let t = m.alloc(FrameUse::Table(1)).unwrap();
        let empty = m.clone();
        m.write(t, 5, pte::make(3, 0));
        let mut n = m.clone();
        assert_ne!(fp(&m), fp(&empty));
        n.write(t, 7, pte::make(4, 0));
        assert_eq!(m.read(t, 7), Some(0), "a write to a clone stays there");
        n.write(t, 7, 0);
        assert_eq!((&n, fp(&n)), (&m, fp(&m)));
        n.write(t, 5, 0);
        assert_eq!((&n, fp(&n)), (&empty, fp(&empty)));
    }

    /// A memory that defers its digests (switched before or after some
    /// writes) hashes and compares as one that keeps them, write for write.
    #[test]
    fn deferred_digests_hash_the_same() {
        let mut kept = PhysMem::new(64);
        let mut early = PhysMem::new(64);
        early.defer_digests();
        let mut late = PhysMem::new(64);
        let mut x = 3u64;
        for step in 0..3000 {
            if step == 1000 {
                late.defer_digests();
            }
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let (idx, val) = ((x >> 20) as usize % 512, (x >> 40) % 4 * 4096);
            for m in [&mut kept, &mut early, &mut late] {
                while m.high_water() < 9 {
                    m.alloc(FrameUse::Table(1)).unwrap();
                }
                m.write(1 + (x >> 50) as u32 % 8, idx, val);
            }
            if step % 500 == 499 {
                assert_eq!(fp(&early), fp(&kept));
                assert_eq!(fp(&late), fp(&kept));
                assert!(early == kept && late == kept);
            }
        }
        assert_ne!(fp(&kept), fp(&PhysMem::new(64)));
    }

    fn fp(m: &PhysMem) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        m.hash(&mut h);
        h.finish()
    }

    #[test]
    fn limit_is_an_error_not_a_panic() {
        let mut m = PhysMem::new(2);
        m.alloc(FrameUse::Anon).unwrap();
        m.alloc(FrameUse::Anon).unwrap();
        assert!(matches!(m.alloc(FrameUse::Anon), Err(Error::TooBig(_))));
    }

    #[test]
    fn indices() {
        let va = (3u64 << 39) | (5 << 30) | (7 << 21) | (9 << 12);
        assert_eq!([4, 3, 2, 1].map(|l| table_index(va, l)), [3, 5, 7, 9]);
    }

    /// A table freed all zero comes back as a new one (same contents, same
    /// hash); one freed with entries, or that a clone still holds, does not
    /// leak them.
    #[test]
    fn freed_tables_come_back_zero() {
        let mut m = PhysMem::new(8);
        let t = m.alloc(FrameUse::Table(1)).unwrap();
        m.write(t, 1, pte::make(5, 0));
        m.write(t, 1, 0);
        m.free(t);
        let u = m.alloc(FrameUse::Table(1)).unwrap();
        assert_eq!(u, t, "LIFO");
        assert!((0..PTRS_PER_TABLE).all(|i| m.read(u, i) == Some(0)));
        let mut fresh = PhysMem::new(8);
        fresh.alloc(FrameUse::Table(1)).unwrap();
        fresh.free(t);
        fresh.alloc(FrameUse::Table(1)).unwrap();
        assert_eq!((&m, fp(&m)), (&fresh, fp(&fresh)));
        m.write(u, 2, pte::make(6, 0));
        let held = m.clone();
        m.write(u, 2, 0);
        m.free(u);
        let v = m.alloc(FrameUse::Table(1)).unwrap();
        assert_eq!(held.read(v, 2).map(pte::pfn), Some(6), "the clone's copy");
        assert_eq!(m.read(v, 2), Some(0));
        m.write(v, 3, pte::make(7, 0));
        m.free(v);
        let w = m.alloc(FrameUse::Table(1)).unwrap();
        assert_eq!(m.read(w, 3), Some(0), "freed with an entry: not reused");
        assert!(m.table_empty(w));
    }
}
