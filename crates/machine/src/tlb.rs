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
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const VALID: u8 = 1;
/// Entries of the PUD-entry cache (a few, as in Intel's PDPTE cache).
const UPPER_ENTRIES: usize = 4;
/// ASIDs whose epochs a TLB keeps in itself (x86 has 6 dynamic PCIDs).
const INLINE_ASIDS: usize = 8;
/// 1 GiB regions: what one PUD entry maps.
const PUD_SHIFT: u32 = 30;
const WRITE: u8 = 2;
const HUGE: u8 = 4;
/// Marks a tag as a 2 MiB translation so it never aliases a 4 KiB one.
const HUGE_TAG: u64 = 1 << 63;

/// What an entry holds besides its tag; stored as four words
/// ([`Info::pack`]), which are also what it hashes as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct Info {
    pfn: Pfn,
    /// Monitor-only: the address space the translation was filled for.
    owner: u32,
    frame_gen: u32,
    /// The epoch of the entry's ASID when it was filled.
    epoch: u32,
    /// The global epoch when it was filled.
    gepoch: u32,
    /// Tick of the last fill or hit (LRU replacement).
    lru: u32,
    asid: u16,
    flags: u8,
}

/// Words of an entry's [`Info`].
const INFO_WORDS: usize = 4;
/// Words of a set's hint ([`Entries`]).
const HINT_WORDS: usize = 2;

impl Info {
    /// The four words: `pfn | owner << 32`, `frame_gen | epoch << 32`,
    /// `gepoch | lru << 32`, `asid | flags << 16`.
    #[inline(always)]
    fn pack(&self) -> [u64; INFO_WORDS] {
        [
            u64::from(self.pfn) | u64::from(self.owner) << 32,
            u64::from(self.frame_gen) | u64::from(self.epoch) << 32,
            u64::from(self.gepoch) | u64::from(self.lru) << 32,
            u64::from(self.asid) | u64::from(self.flags) << 16,
        ]
    }

    /// The info packed in `w` (see [`Info::pack`]).
    #[inline(always)]
    fn unpack(w: &[u64; INFO_WORDS]) -> Info {
        Info {
            pfn: w[0] as u32,
            owner: (w[0] >> 32) as u32,
            frame_gen: w[1] as u32,
            epoch: (w[1] >> 32) as u32,
            gepoch: w[2] as u32,
            lru: (w[2] >> 32) as u32,
            asid: w[3] as u16,
            flags: (w[3] >> 16) as u8,
        }
    }
}

/// The translations, way `j` of set `s` being entry `s * ways + j`, in one
/// array of words (one allocation: the checker copies a TLB at every step
/// that changes it): each set's hint ([`SetHint`], two words), then each
/// set's fingerprints, then the tags (which a lookup compares side by
/// side), then each entry's [`Info`] (four words).
///
/// The array stays empty (no memory) until the first fill: an empty array
/// stands for all-zero entries, which are empty ones, so the TLBs of CPUs
/// that never run cost nothing. Compared and hashed as the entries (tags
/// and infos; the fingerprints are a function of the tags and the hints
/// are hints).
#[derive(Clone, Debug)]
struct Entries {
    sets: usize,
    ways: usize,
    /// A byte of each tag ([`fingerprint`]), eight ways to a word and
    /// `fp_words` words to a set (way `j` in byte `j % 8` of the set's word
    /// `j / 8`): a lookup compares a set's ways eight at a time and reads
    /// the tags of matching ways only. Written with the tag.
    fp_words: usize,
    /// Where the fingerprints, tags and infos start in `buf`.
    fp_at: usize,
    tag_at: usize,
    info_at: usize,
    buf: Vec<u64>,
}

/// What a TLB knows of one of its sets (a hint, as [`Hints`]), kept in
/// the set's block of [`Entries`].
#[derive(Clone, Copy, Debug)]
struct SetHint {
    /// `== Hints::flush_gen`: every way of the set holds a live
    /// translation, so a fill there evicts the least recently used way (or
    /// the one holding the same translation) without testing liveness.
    /// Set by a fill that saw every other way live; dropped (0) when a
    /// flush of one address clears an entry of the set.
    live: u64,
    /// With `live`, unless [`NO_ORDER`]: the ways from this one on, going
    /// round, hold ascending LRU stamps, all below the next tick, so this
    /// way is the least recently used. Set when a fill makes the set live
    /// and the stamps ascend so (fills of an emptied set go way after way;
    /// a flush of another ASID leaves them round as they were); moves on
    /// when the fill replaces that way; lost on a hit in the set or
    /// another fill.
    oldest: u32,
}

/// [`SetHint::oldest`] not known.
const NO_ORDER: u32 = u32::MAX;

/// A byte of `tag`, from all its bits (the tags of a set share the bits
/// that chose it).
#[inline(always)]
fn fingerprint(tag: u64) -> u64 {
    tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56
}

/// Every byte `0x7f`.
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Bit 7 of every byte of `x` that is zero (and no other bit).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7).wrapping_add(LOW7)) | x | LOW7)
}

/// The ways of a set whose fingerprint is a tag's (see
/// [`Entries::candidates`]), the set's fingerprints passed at each step (so
/// that the caller may change the entries in between).
struct Candidates {
    pattern: u64,
    /// The word that `m` is of.
    word: usize,
    /// Bit 7 of each byte of word `word` that matched and is not yet taken.
    m: u64,
    ways: usize,
}

impl Candidates {
    /// The next candidate way, in order, `fps` being the set's
    /// fingerprints ([`Entries::fps`]).
    #[inline(always)]
    fn next(&mut self, fps: &[u64]) -> Option<usize> {
        while self.m == 0 {
            self.word += 1;
            let &w = fps.get(self.word)?;
            self.m = zero_bytes(w ^ self.pattern);
        }
        let j = self.word * 8 + (self.m.trailing_zeros() / 8) as usize;
        self.m &= self.m - 1;
        // (Bytes past the last way are not ways.)
        (j < self.ways).then_some(j)
    }
}

impl Entries {
    fn new(sets: usize, ways: usize) -> Self {
        let fp_words = ways.div_ceil(8);
        let fp_at = sets * HINT_WORDS;
        let tag_at = fp_at + sets * fp_words;
        Entries {
            sets,
            ways,
            fp_words,
            fp_at,
            tag_at,
            info_at: tag_at + sets * ways,
            buf: Vec::new(),
        }
    }

    #[inline(always)]
    fn allocated(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The array, allocated (all entries zero, each fingerprint that of
    /// tag 0; no set's order known).
    fn allocate(&mut self) {
        let n = self.sets * self.ways;
        self.buf = vec![0; self.info_at + n * INFO_WORDS];
        for h in self.buf[..self.fp_at].chunks_exact_mut(HINT_WORDS) {
            h[1] = u64::from(NO_ORDER);
        }
        let fp0 = fingerprint(0) * (u64::MAX / 255);
        self.buf[self.fp_at..self.tag_at].fill(fp0);
    }

    /// The index of the tag of way `j` of set `set`.
    #[inline(always)]
    fn tag_index(&self, set: usize, j: usize) -> usize {
        self.tag_at + set * self.ways + j
    }

    /// The index of the info of way `j` of set `set`.
    #[inline(always)]
    fn info_index(&self, set: usize, j: usize) -> usize {
        self.info_at + (set * self.ways + j) * INFO_WORDS
    }

    #[inline(always)]
    fn tag(&self, set: usize, j: usize) -> u64 {
        self.buf[self.tag_index(set, j)]
    }

    #[inline(always)]
    fn info(&self, set: usize, j: usize) -> Info {
        let i = self.info_index(set, j);
        Info::unpack(self.buf[i..i + INFO_WORDS].try_into().unwrap())
    }

    /// The LRU stamp of way `j` of set `set`.
    #[inline(always)]
    fn lru(&self, set: usize, j: usize) -> u32 {
        (self.buf[self.info_index(set, j) + 2] >> 32) as u32
    }

    #[inline(always)]
    fn set_lru(&mut self, set: usize, j: usize, lru: u32) {
        let i = self.info_index(set, j) + 2;
        let w = &mut self.buf[i];
        *w = (*w & u64::from(u32::MAX)) | u64::from(lru) << 32;
    }

    /// Clear the flags of way `j` of set `set` (the entry is invalid).
    #[inline(always)]
    fn invalidate(&mut self, set: usize, j: usize) {
        let i = self.info_index(set, j) + 3;
        let w = &mut self.buf[i];
        *w &= !(0xff << 16);
    }

    /// Write way `j` of set `set`: its tag (and fingerprint) and info.
    #[inline(always)]
    fn set_entry(&mut self, set: usize, j: usize, tag: u64, info: &Info) {
        let t = self.tag_index(set, j);
        self.buf[t] = tag;
        let w = &mut self.buf[self.fp_at + set * self.fp_words + j / 8];
        let shift = 8 * (j % 8);
        *w = (*w & !(0xff << shift)) | fingerprint(tag) << shift;
        let i = self.info_index(set, j);
        self.buf[i..i + INFO_WORDS].copy_from_slice(&info.pack());
    }

    #[inline(always)]
    fn hint(&self, set: usize) -> SetHint {
        let b = set * HINT_WORDS;
        SetHint {
            live: self.buf[b],
            oldest: self.buf[b + 1] as u32,
        }
    }

    #[inline(always)]
    fn set_live(&mut self, set: usize, live: u64) {
        self.buf[set * HINT_WORDS] = live;
    }

    #[inline(always)]
    fn set_oldest(&mut self, set: usize, oldest: u32) {
        self.buf[set * HINT_WORDS + 1] = u64::from(oldest);
    }

    /// The ways of set `set` whose fingerprint is `tag`'s, in order: every
    /// way that holds `tag`, and a few others. None if the array is not
    /// allocated (nothing was ever filled).
    #[inline(always)]
    fn candidates(&self, set: usize, tag: u64) -> Option<Candidates> {
        let &w = self.buf.get(self.fp_at + set * self.fp_words)?;
        let pattern = fingerprint(tag) * (u64::MAX / 255);
        Some(Candidates {
            pattern,
            word: 0,
            m: zero_bytes(w ^ pattern),
            ways: self.ways,
        })
    }

    /// The fingerprint words of set `set` (the array allocated).
    #[inline(always)]
    fn fps(&self, set: usize) -> &[u64] {
        let at = self.fp_at + set * self.fp_words;
        &self.buf[at..at + self.fp_words]
    }

    /// Every entry's tag and info words, in order (none if the array is
    /// not allocated).
    fn each(&self) -> impl Iterator<Item = (u64, &[u64])> {
        let words = self.buf.get(self.tag_at..).unwrap_or_default();
        let (tags, info) = words.split_at((self.info_at - self.tag_at).min(words.len()));
        tags.iter().copied().zip(info.chunks_exact(INFO_WORDS))
    }

    /// Is every entry all zero?
    fn is_zero(&self) -> bool {
        self.each()
            .all(|(t, i)| t == 0 && i.iter().all(|&w| w == 0))
    }
}

impl PartialEq for Entries {
    fn eq(&self, o: &Self) -> bool {
        self.sets == o.sets
            && self.ways == o.ways
            && match (self.allocated(), o.allocated()) {
                (true, true) => self.each().eq(o.each()),
                _ => self.is_zero() && o.is_zero(),
            }
    }
}
impl Eq for Entries {}

/// Hashes as the array of entries it replaced (`Vec<Entry>`, so that the
/// checker's fingerprints did not change): the length, then each entry as
/// five words, its tag and info words.
impl Hash for Entries {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let len = self.sets * self.ways;
        h.write_usize(len);
        if !self.allocated() {
            for _ in 0..len * 5 {
                h.write_u64(0);
            }
            return;
        }
        for (tag, info) in self.each() {
            h.write_u64(tag);
            for &w in info {
                h.write_u64(w);
            }
        }
    }
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

/// Every field, packed into four words (as [`Entries`]').
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
#[derive(Debug)]
pub struct Tlb {
    s: Arc<Shared>,
    /// The ASID and 4 KiB tag of the last lookup, if it missed and no
    /// translation was filled and no ASID or global epoch moved since: no
    /// live entry holds that tag and ASID, so a fill of it need not look
    /// for one. A hint, not state: not compared or hashed. (Kept out of
    /// the shared contents: a miss must not unshare them.)
    missed: Missed,
    /// The paging-structure-cache slot last found or filled: probed first
    /// by `psc_lookup`, and a refill of the identical entry there is
    /// skipped. A hint, as `missed` (atomic: a lookup through `&self`
    /// moves it).
    psc_mru: AtomicU32,
    /// Bit `t % 256` is set when `Hints::tables[t % 256]` is not 0: the
    /// same filter, here so that `psc_holds` on a TLB that cannot hold
    /// the table reads no shared contents (the monitor asks every CPU for
    /// every freed table). A hint, as `missed`.
    psc_tables: [u64; 4],
    /// Bit `asid % 64` is set once a translation of `asid` was filled: a
    /// flush of one address in an ASID whose bit is clear has no entry to
    /// drop (a broadcast TLBI reaches every CPU, most of which never ran
    /// the mm). Here, not in the shared contents, so that the test reads
    /// nothing behind the pointer. A hint, as `missed` (a clone copies it
    /// with the contents it describes).
    filled: u64,
    /// The paging-structure-cache slots, packed. `None` unless
    /// [`Tlb::keep_table_slots`] asked for them (the checker's small
    /// machines do without, and their copies of a TLB copy nothing more).
    /// A hint, as `missed`.
    slots: Option<SlotHints>,
}

/// A TLB's paging-structure-cache slots, packed so that asking whether a
/// table or region is there at all reads a few lines, not every entry.
#[derive(Clone, Debug)]
struct SlotHints {
    /// `pfns[i]`: the table of slot `i` (both caches, as
    /// `TlbData::caches`; 0, which no table is, until filled).
    pfns: Box<[Pfn]>,
    /// A byte per slot of both caches, the [`fingerprint`] of its table,
    /// eight to a word (as [`Entries`]' fingerprints): `psc_holds`
    /// compares in full only the slots whose byte matches.
    table_fps: Box<[u64]>,
    /// A byte per slot of the PTE-table cache (not the PUD-entry cache),
    /// [`psc_fingerprint`] of its region and ASID: a lookup or fill reads
    /// in full only the slots whose byte matches.
    psc_fps: Box<[u64]>,
}

impl Clone for Tlb {
    fn clone(&self) -> Self {
        Tlb {
            s: Arc::clone(&self.s),
            missed: self.missed,
            psc_mru: AtomicU32::new(self.psc_mru.load(Ordering::Relaxed)),
            psc_tables: self.psc_tables,
            filled: self.filled,
            slots: self.slots.clone(),
        }
    }
}

/// The ASID and 4 KiB tag of a lookup that missed (see [`Tlb`]).
type Missed = Option<(u16, u64)>;

/// Fingerprint bytes, eight to a word: `fps` with byte `i` set to `fp`.
#[inline(always)]
fn set_fp(fps: &mut [u64], i: usize, fp: u64) {
    let shift = 8 * (i % 8);
    let w = &mut fps[i / 8];
    *w = *w & !(0xff << shift) | fp << shift;
}

/// The fingerprint bytes of `keys`, eight to a word.
fn fps_of(keys: impl ExactSizeIterator<Item = u64>) -> Box<[u64]> {
    let mut fps = vec![0u64; keys.len().div_ceil(8)];
    for (i, k) in keys.enumerate() {
        set_fp(&mut fps, i, k);
    }
    fps.into()
}

/// The byte of a paging-structure-cache slot in [`SlotHints`]' `psc_fps`.
#[inline(always)]
fn psc_fingerprint(region: u64, asid: u16) -> u64 {
    fingerprint(region ^ u64::from(asid) << 48)
}

/// The first of the `n` slots whose byte in `fps` is `fp` and which
/// satisfies `f` (given its index).
#[inline]
fn first_psc_slot(
    fps: &[u64],
    n: usize,
    fp: u64,
    mut f: impl FnMut(usize) -> bool,
) -> Option<usize> {
    let pattern = fp * 0x0101_0101_0101_0101;
    let mut c = Candidates {
        pattern,
        word: 0,
        m: zero_bytes(fps.first()? ^ pattern),
        ways: n,
    };
    while let Some(j) = c.next(fps) {
        if f(j) {
            return Some(j);
        }
    }
    None
}

/// A paging-structure-cache fill: the table cached, and the table of the
/// valid entry it replaced, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PscSwap {
    pub table: Pfn,
    pub gone: Option<Pfn>,
}

/// The bucket of a table in the paging-structure caches' filters
/// ([`Hints::tables`], `Tlb::psc_tables`).
#[inline]
fn psc_bucket(table: Pfn) -> usize {
    table as usize % 256
}

#[derive(Debug)]
struct Shared {
    data: TlbData,
    /// Hash of `data` (never 0), or 0 until computed since the last change.
    digest: AtomicU64,
    hints: Hints,
}

/// Facts about a TLB's contents that let it answer without a scan: hints,
/// not state. A clone copies them; they are neither compared nor hashed,
/// and every answer is the one the contents alone give.
#[derive(Clone, Debug)]
struct Hints {
    /// `tables[t % 256]`: how many entries of the paging-structure caches
    /// hold a table `t` of that bucket, live or stale (255 sticks: never
    /// decremented again). `psc_holds` of a table in an empty bucket is
    /// false without a scan (the monitor asks it of every CPU for every
    /// freed table). Kept on insert, the only change to the entries.
    tables: [u8; 256],
    /// Moves on (from 1) whenever an ASID's epoch or the global epoch does,
    /// that is whenever live entries may have died all over the TLB, and
    /// when the LRU tick comes round to 0.
    flush_gen: u64,
}

impl Clone for Shared {
    fn clone(&self) -> Self {
        Shared {
            data: self.data.clone(),
            digest: AtomicU64::new(self.digest.load(Ordering::Relaxed)),
            hints: self.hints.clone(),
        }
    }
}

impl Hints {
    /// `table` was just cached in place of an entry of `gone` (if valid);
    /// whether `gone`'s bucket still holds a table.
    fn note_table(&mut self, table: Pfn, gone: Option<Pfn>) -> bool {
        let n = &mut self.tables[psc_bucket(table)];
        *n = n.saturating_add(1);
        let Some(g) = gone else { return false };
        let n = &mut self.tables[psc_bucket(g)];
        if *n != u8::MAX {
            *n -= 1;
        }
        *n != 0
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
        let data = TlbData::new(entries, ways, psc_entries);
        Tlb {
            missed: None,
            psc_mru: AtomicU32::new(0),
            psc_tables: [0; 4],
            filled: 0,
            slots: None,
            s: Arc::new(Shared {
                data,
                digest: AtomicU64::new(0),
                hints: Hints {
                    tables: [0; 256],
                    flush_gen: 1,
                },
            }),
        }
    }

    /// Keep the paging-structure-cache slots' tables ([`Tlb::psc_pfns`])
    /// and fingerprints apart (`SlotHints`), for a TLB that is asked
    /// `psc_holds` often and whose lookups often miss the MRU slot.
    pub fn keep_table_slots(mut self) -> Self {
        let d = self.d();
        let all = d.caches.iter();
        self.slots = Some(SlotHints {
            pfns: all
                .clone()
                .map(|e| if e.valid { e.table } else { 0 })
                .collect(),
            table_fps: fps_of(all.map(|e| fingerprint(u64::from(e.table)))),
            psc_fps: fps_of(d.psc().iter().map(|e| psc_fingerprint(e.region, e.asid))),
        });
        self
    }

    #[inline]
    fn d(&self) -> &TlbData {
        &self.s.data
    }

    /// The shared part, unshared first if a clone shares it; its digest
    /// is dropped (the caller changes the contents).
    #[inline(always)]
    fn shared_mut(&mut self) -> &mut Shared {
        // (No Weak of it is ever made: the strong count says it all.)
        if Arc::strong_count(&self.s) != 1 {
            self.unshare();
        }
        // SAFETY: this is the only Arc and no Weak exists (none is ever
        // made; `unshare` made a copy if a clone shared it), and `&mut
        // self` keeps it so while the borrow lives: nothing else can reach
        // the value. (`Arc::make_mut` would do the same after an atomic
        // compare-exchange, which the simulator paid on every TLB access.)
        // The fence orders this after the last use by a clone dropped on
        // another thread.
        std::sync::atomic::fence(Ordering::Acquire);
        let s = unsafe { &mut *(Arc::as_ptr(&self.s) as *mut Shared) };
        *s.digest.get_mut() = 0;
        s
    }

    /// Copy the contents a clone shares (out of line: the checker's path).
    #[cold]
    #[inline(never)]
    fn unshare(&mut self) {
        Arc::make_mut(&mut self.s);
    }

    /// The contents, unshared first if a clone shares them.
    #[inline]
    fn m(&mut self) -> &mut TlbData {
        &mut self.shared_mut().data
    }

    /// Look `va` up for `asid`, 4 KiB first, then 2 MiB. Updates LRU.
    #[inline(always)]
    pub fn lookup(&mut self, asid: u16, va: u64) -> Option<TlbHit> {
        let Some((set, j)) = self.d().find(asid, va) else {
            self.missed = Some((asid, va >> crate::PAGE_SHIFT));
            return None;
        };
        let s = self.shared_mut();
        Some(s.data.touch(&mut s.hints, set, j))
    }

    /// Does the TLB hold a translation of `va` for `asid`? (No LRU update.)
    pub fn holds(&self, asid: u16, va: u64) -> bool {
        self.d().find(asid, va).is_some()
    }

    /// Cache a translation (a TLB fill after a page walk).
    #[inline(always)]
    pub fn fill(&mut self, asid: u16, va: u64, hit: TlbHit) {
        let missed = self.missed.take();
        self.filled |= 1 << (asid % 64);
        let s = self.shared_mut();
        s.data.fill(&mut s.hints, asid, va, hit, missed)
    }

    /// May the TLB hold a leaf translation of `asid`? False only if none
    /// was ever filled (a flush of its addresses would change nothing).
    #[inline]
    pub fn may_hold(&self, asid: u16) -> bool {
        self.filled & (1 << (asid % 64)) != 0
    }

    /// Look up the PTE table that maps `va`'s 2 MiB region.
    pub fn psc_lookup(&self, asid: u16, va: u64) -> Option<PscHit> {
        let mru = self.psc_mru.load(Ordering::Relaxed) as usize;
        let (slot, hit) = self.d().psc_lookup(mru, asid, va, &self.slots)?;
        if slot != mru {
            self.psc_mru.store(slot as u32, Ordering::Relaxed);
        }
        Some(hit)
    }

    /// Does the paging-structure cache hold a live pointer to `table` for `asid`?
    pub fn psc_holds(&self, asid: u16, table: Pfn) -> bool {
        let b = psc_bucket(table);
        if self.psc_tables[b / 64] & 1 << (b % 64) == 0 {
            return false;
        }
        let d = self.d();
        let (epoch, pepoch) = d.epochs_of(asid);
        let live = |e: &PscEntry| d.psc_live(e, asid, epoch, pepoch);
        let Some(h) = &self.slots else {
            return d.caches.iter().any(|e| e.table == table && live(e));
        };
        // Only the slots whose byte matches are read in full.
        let fp = fingerprint(u64::from(table));
        first_psc_slot(&h.table_fps, h.pfns.len(), fp, |i| {
            h.pfns[i] == table && live(&d.caches[i])
        })
        .is_some()
    }

    /// `table` was just cached in place of an entry of `gone` (if valid),
    /// whose bucket still holds a table if `left`: the filter follows.
    fn note_table(&mut self, table: Pfn, gone: Option<Pfn>, left: bool) {
        let b = psc_bucket(table);
        self.psc_tables[b / 64] |= 1 << (b % 64);
        if let Some(g) = gone {
            let b = psc_bucket(g);
            self.psc_tables[b / 64] &= !(1 << (b % 64));
            self.psc_tables[b / 64] |= u64::from(left) << (b % 64);
        }
    }

    /// Slot `slot` (of both caches) now holds `table`: the slot hints
    /// follow, if kept.
    #[inline(always)]
    fn note_slot_table(&mut self, slot: usize, table: Pfn) {
        if let Some(h) = &mut self.slots {
            h.pfns[slot] = table;
            set_fp(&mut h.table_fps, slot, fingerprint(u64::from(table)));
        }
    }

    /// Remember the PTE table a walk went through; what the fill changed
    /// (`None`: the slot already held this entry).
    pub fn psc_fill(&mut self, asid: u16, va: u64, table: Pfn, table_gen: u32) -> Option<PscSwap> {
        let e = self
            .d()
            .psc_entry(asid, va >> crate::HPAGE_SHIFT, table, table_gen);
        // The slot holding this region and ASID would be overwritten with
        // the same entry: nothing to change (and nothing to unshare).
        let mru = *self.psc_mru.get_mut() as usize;
        if self.d().psc().get(mru) == Some(&e) {
            return None;
        }
        let fps = self.slots.as_ref().map(|h| &h.psc_fps[..]);
        let found = TlbData::same_slot(self.d().psc(), &e, fps);
        let s = self.shared_mut();
        let d = &mut s.data;
        let n = d.caches.len() - UPPER_ENTRIES;
        let psc = &mut d.caches[..n];
        let (slot, gone) = TlbData::cache_insert(psc, &mut d.psc_next, e, found);
        let left = s.hints.note_table(table, gone);
        if let Some(h) = &mut self.slots {
            set_fp(&mut h.psc_fps, slot, psc_fingerprint(e.region, e.asid));
        }
        self.note_table(table, gone, left);
        self.note_slot_table(slot, table);
        *self.psc_mru.get_mut() = slot as u32;
        Some(PscSwap { table, gone })
    }

    /// Remember the PMD table a walk reached through the PUD entry of `va`;
    /// what the fill changed.
    pub fn pud_psc_fill(&mut self, asid: u16, va: u64, table: Pfn, table_gen: u32) -> PscSwap {
        let s = self.shared_mut();
        let e = s.data.psc_entry(asid, va >> PUD_SHIFT, table, table_gen);
        let d = &mut s.data;
        let n = d.caches.len() - UPPER_ENTRIES;
        let upper = &mut d.caches[n..];
        let found = TlbData::same_slot(upper, &e, None);
        let (slot, gone) = TlbData::cache_insert(upper, &mut d.upper_next, e, found);
        let left = s.hints.note_table(table, gone);
        self.note_table(table, gone, left);
        self.note_slot_table(n + slot, table);
        PscSwap { table, gone }
    }

    /// The table of each paging-structure-cache slot (live or stale; 0,
    /// which no table is, for a slot never filled); empty unless
    /// [`Tlb::keep_table_slots`].
    #[inline]
    pub fn psc_pfns(&self) -> &[Pfn] {
        self.slots.as_ref().map_or(&[], |h| &h.pfns)
    }

    /// `INVLPG` / `TLBI VAE1` / `sfence.vma va, asid`: drop the translations
    /// of `va` in `asid`, and (as INVLPG does) every paging-structure-cache
    /// entry of that ASID.
    pub fn flush_one(&mut self, asid: u16, va: u64) {
        if self.may_hold(asid) {
            self.flush_one_leaf(asid, va);
        }
        self.m().bump(1, asid, 1);
    }

    /// [`Tlb::flush_one_leaf`] (if `leaf`) or [`Tlb::flush_one`] of every
    /// `stride`-th address from `start` below `end`, as a range TLBI done
    /// page by page: the same result, but a TLB that never filled the ASID
    /// (most, on a big machine) costs one check, not one per page.
    pub fn flush_range(&mut self, asid: u16, (start, end, stride): (u64, u64, u64), leaf: bool) {
        assert!(stride > 0, "flush_range: stride 0");
        let n = if start < end {
            (end - start - 1) / stride + 1
        } else {
            0
        };
        if n == 0 {
            return;
        }
        if self.may_hold(asid) {
            let s = self.shared_mut();
            for i in 0..n {
                s.data.flush_leaf(start + i * stride, Some(asid));
            }
        }
        if !leaf {
            // `n` bumps of the ASID's walk-cache epoch.
            self.m().bump(1, asid, n as u32);
        }
    }

    /// RISC-V `sfence.vma va, asid` / arm64 `TLBI VALE1`: drop the leaf
    /// translations of `va` in `asid` only; walk-cache entries survive.
    pub fn flush_one_leaf(&mut self, asid: u16, va: u64) {
        // A TLB that never filled this ASID has no leaf entry to drop.
        if self.may_hold(asid) {
            let s = self.shared_mut();
            s.data.flush_leaf(va, Some(asid))
        }
    }

    /// Drop the translations of `va` under every ASID, global ones included
    /// (RISC-V `sfence.vma va, x0`; kernel mappings are global).
    pub fn flush_va(&mut self, va: u64) {
        let s = self.shared_mut();
        s.data.flush_leaf(va, None)
    }

    /// Drop every translation of `asid` (CR3 write with flush, INVPCID
    /// single-context, `TLBI ASIDE1`, `sfence.vma zero, asid`).
    pub fn flush_asid(&mut self, asid: u16) {
        // (After 2^32 flushes an epoch comes round again: old entries live.)
        self.missed = None;
        let s = self.shared_mut();
        s.data.bump(0, asid, 1);
        s.hints.flush_gen += 1;
    }

    /// Drop every translation (`__flush_tlb_all`, `TLBI VMALLE1`).
    pub fn flush_all(&mut self) {
        self.missed = None;
        let s = self.shared_mut();
        s.data.gepoch = s.data.gepoch.wrapping_add(1);
        s.hints.flush_gen += 1;
    }

    /// Number of live translations of `asid` (for tests and reports).
    pub fn count(&self, asid: u16) -> usize {
        self.d().count(asid)
    }
}

/// The contents of a TLB.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TlbData {
    /// `sets - 1`; the number of sets is a power of two, as in hardware.
    set_mask: u64,
    ways: u32,
    /// Has any 2 MiB translation ever been cached? (Skips that probe if not.)
    any_huge: bool,
    entries: Entries,
    /// In one allocation (the checker copies a TLB at every step that
    /// changes it): the paging-structure cache (PTE tables per 2 MiB
    /// region), all but the last [`UPPER_ENTRIES`] slots; then the PUD-entry cache (PMD
    /// tables per 1 GiB region, same invalidation), [`UPPER_ENTRIES`]
    /// slots.
    caches: Vec<PscEntry>,
    psc_next: u32,
    upper_next: u32,
    /// The epoch of each ASID below [`INLINE_ASIDS`] and that of its
    /// paging-structure-cache entries alone (INVLPG drops them), kept
    /// here (no allocation, no pointer to follow); `epochs_more` those of
    /// the ASIDs after (see [`TlbData::epoch_array`]).
    epochs_inline: [[u32; 2]; INLINE_ASIDS],
    epochs_more: Vec<[u32; 2]>,
    /// The epochs are two arrays of `epochs_len` and `psc_epochs_len`
    /// epochs (compared and hashed as such): the epochs past an array's
    /// length are 0.
    epochs_len: u32,
    psc_epochs_len: u32,
    gepoch: u32,
    tick: u32,
}

/// Hashes as the fields it had (each cache and epoch array a `Vec` of
/// its own), so that the checker's fingerprints did not change.
impl Hash for TlbData {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (self.set_mask, self.ways, self.any_huge).hash(h);
        self.entries.hash(h);
        (self.psc(), self.psc_next, self.upper(), self.upper_next).hash(h);
        let (e, p) = (self.epochs_len as usize, self.psc_epochs_len as usize);
        if e <= INLINE_ASIDS && p <= INLINE_ASIDS {
            // (Mostly: the arrays gathered on the stack.)
            let mut a = [[0u32; INLINE_ASIDS]; 2];
            for (i, r) in self.epochs_inline.iter().enumerate() {
                (a[0][i], a[1][i]) = (r[0], r[1]);
            }
            (&a[0][..e], &a[1][..p], self.gepoch, self.tick).hash(h);
        } else {
            let (e, p) = (self.epoch_array(0), self.epoch_array(1));
            (e, p, self.gepoch, self.tick).hash(h);
        }
    }
}

impl TlbData {
    fn new(entries: u32, ways: u32, psc_entries: u32) -> Self {
        let ways = ways.clamp(1, entries.max(1));
        let sets = (entries / ways).max(1).next_power_of_two();
        TlbData {
            set_mask: sets as u64 - 1,
            ways,
            any_huge: false,
            entries: Entries::new(sets as usize, ways as usize),
            caches: vec![PscEntry::default(); psc_entries.max(1) as usize + UPPER_ENTRIES],
            epochs_inline: [[0; 2]; INLINE_ASIDS],
            epochs_more: Vec::new(),
            psc_next: 0,
            upper_next: 0,
            epochs_len: 8,
            psc_epochs_len: 8,
            gepoch: 1,
            tick: 0,
        }
    }

    /// The paging-structure cache.
    fn psc(&self) -> &[PscEntry] {
        &self.caches[..self.caches.len() - UPPER_ENTRIES]
    }

    /// The PUD-entry cache.
    fn upper(&self) -> &[PscEntry] {
        &self.caches[self.caches.len() - UPPER_ENTRIES..]
    }

    /// The epochs of ASIDs (`k` 0) or of their paging-structure-cache
    /// entries (`k` 1), as the array of them.
    fn epoch_array(&self, k: usize) -> Vec<u32> {
        let len = [self.epochs_len, self.psc_epochs_len][k] as usize;
        let e = self.epochs_inline.iter().chain(&self.epochs_more);
        let e = e.map(|r| r[k]).chain(std::iter::repeat(0));
        e.take(len).collect()
    }

    #[inline]
    fn epoch(&self, asid: u16) -> u32 {
        self.epochs_of(asid).0
    }

    /// The epoch of `asid` and that of its paging-structure-cache entries.
    #[inline]
    fn epochs_of(&self, asid: u16) -> (u32, u32) {
        let a = asid as usize;
        let [e, p] = match self.epochs_inline.get(a) {
            Some(&r) => r,
            None => self
                .epochs_more
                .get(a - INLINE_ASIDS)
                .copied()
                .unwrap_or_default(),
        };
        (e, p)
    }

    /// The epoch of `asid` (`k` 0) or of its paging-structure-cache
    /// entries (`k` 1) moves on `n` times.
    fn bump(&mut self, k: usize, asid: u16, n: u32) {
        let a = asid as usize;
        let r = match a.checked_sub(INLINE_ASIDS) {
            None => &mut self.epochs_inline[a],
            Some(i) => {
                if i >= self.epochs_more.len() {
                    self.epochs_more.resize(i + 1, [0; 2]);
                }
                &mut self.epochs_more[i]
            }
        };
        r[k] = r[k].wrapping_add(n);
        let len = if k == 0 {
            &mut self.epochs_len
        } else {
            &mut self.psc_epochs_len
        };
        *len = (*len).max(asid as u32 + 1);
    }

    /// Is this entry valid and filled since the last flush of its ASID and
    /// of everything? `epoch` is the current epoch of its ASID.
    #[inline]
    fn live_at(&self, e: &Info, epoch: u32) -> bool {
        e.flags & VALID != 0 && e.gepoch == self.gepoch && e.epoch == epoch
    }

    /// The set a tag maps to.
    #[inline]
    fn set_of(&self, tag: u64) -> usize {
        let h = tag ^ (tag >> 17);
        (h & self.set_mask) as usize
    }

    fn tag(va: u64, huge: bool) -> u64 {
        if huge {
            (va >> crate::HPAGE_SHIFT) | HUGE_TAG
        } else {
            va >> crate::PAGE_SHIFT
        }
    }

    /// The entry that translates `va` for `asid`, 4 KiB first, then 2 MiB
    /// (the first way of the set that matches): its set and way.
    #[inline]
    fn find(&self, asid: u16, va: u64) -> Option<(usize, usize)> {
        let found = self.probe(asid, Self::tag(va, false));
        if found.is_some() || !self.any_huge {
            return found;
        }
        self.probe(asid, Self::tag(va, true))
    }

    /// The set of `tag` and its first way that translates it for `asid`.
    #[inline(always)]
    fn probe(&self, asid: u16, tag: u64) -> Option<(usize, usize)> {
        let set = self.set_of(tag);
        let e = &self.entries;
        // Mostly no way has the tag, nor its fingerprint.
        let mut candidates = e.candidates(set, tag)?;
        let fps = e.fps(set);
        while let Some(j) = candidates.next(fps) {
            if e.tag(set, j) == tag {
                let i = e.info(set, j);
                if i.asid == asid && self.live_at(&i, self.epoch(asid)) {
                    return Some((set, j));
                }
            }
        }
        None
    }

    /// The LRU clock moves on (the next stamp).
    #[inline]
    fn next_tick(&mut self, hints: &mut Hints) -> u32 {
        self.tick = self.tick.wrapping_add(1);
        if self.tick == 0 {
            // Older stamps are now above newer ones.
            hints.flush_gen += 1;
        }
        self.tick
    }

    /// A hit on way `j` of set `set`: it becomes the most recently used.
    #[inline]
    fn touch(&mut self, hints: &mut Hints, set: usize, j: usize) -> TlbHit {
        let tick = self.next_tick(hints);
        self.entries.set_oldest(set, NO_ORDER);
        self.entries.set_lru(set, j, tick);
        let e = self.entries.info(set, j);
        TlbHit {
            pfn: e.pfn,
            owner: e.owner,
            frame_gen: e.frame_gen,
            writable: e.flags & WRITE != 0,
            huge: e.flags & HUGE != 0,
        }
    }

    /// Cache a translation (a TLB fill after a page walk) in the first way
    /// of its set that is dead or holds the same tag and ASID, else in the
    /// least recently used (the first of equals). `missed`: the ASID and
    /// tag of a lookup that missed since the last fill (see [`Tlb`]).
    #[inline(always)]
    fn fill(&mut self, hints: &mut Hints, asid: u16, va: u64, hit: TlbHit, missed: Missed) {
        if !self.entries.allocated() {
            self.entries.allocate();
        }
        let tag = Self::tag(va, hit.huge);
        let set = self.set_of(tag);
        let way = self.victim(hints.flush_gen, set, asid, tag, missed);
        let mut flags = VALID;
        if hit.writable {
            flags |= WRITE;
        }
        if hit.huge {
            flags |= HUGE;
            self.any_huge = true;
        }
        let info = Info {
            pfn: hit.pfn,
            owner: hit.owner,
            frame_gen: hit.frame_gen,
            epoch: self.epoch(asid),
            gepoch: self.gepoch,
            lru: self.next_tick(hints),
            asid,
            flags,
        };
        self.entries.set_entry(set, way, tag, &info);
    }

    /// The way a fill of `tag` for `asid` replaces in set `set` (see
    /// [`TlbData::fill`]); the set's hint is updated for the fill.
    #[inline(always)]
    fn victim(&mut self, flush_gen: u64, set: usize, asid: u16, tag: u64, missed: Missed) -> usize {
        let h = self.entries.hint(set);
        if h.live == flush_gen {
            // (A 2 MiB tag is never a missed 4 KiB one.)
            let missed = missed == Some((asid, tag));
            let v = if missed && h.oldest != NO_ORDER {
                // (What `victim_in_live_set` answers, without the call.)
                h.oldest as usize
            } else {
                self.victim_in_live_set(set, asid, tag, missed, h.oldest)
            };
            let oldest = if h.oldest == NO_ORDER || v != h.oldest as usize {
                NO_ORDER
            } else if h.oldest + 1 == self.ways {
                0
            } else {
                h.oldest + 1
            };
            self.entries.set_oldest(set, oldest);
            return v;
        }
        let (v, all_live) = self.victim_scan(set, asid, tag);
        if all_live {
            self.entries.set_live(set, flush_gen);
            let oldest = self.oldest_after(set, v);
            self.entries.set_oldest(set, oldest);
        }
        v
    }

    /// The least recently used way of set `set` once way `j` of it is
    /// filled (with the next tick) if the other ways' LRU stamps ascend,
    /// all below the next tick, going round from the way after `j`: that
    /// way. Else [`NO_ORDER`].
    fn oldest_after(&self, set: usize, j: usize) -> u32 {
        let ways = self.ways as usize;
        let others = (j + 1..ways).chain(0..j).map(|k| self.entries.lru(set, k));
        let mut prev = None;
        for l in others.chain([self.tick.wrapping_add(1)]) {
            if prev.is_some_and(|p| p >= l) {
                return NO_ORDER;
            }
            prev = Some(l);
        }
        ((j + 1) % ways) as u32
    }

    /// The victim way in set `set` (see [`TlbData::fill`]), testing
    /// liveness; and whether every other way of the set holds a live
    /// translation.
    #[inline(always)]
    fn victim_scan(&self, set: usize, asid: u16, tag: u64) -> (usize, bool) {
        let last = self.ways as usize - 1;
        let e = &self.entries;
        // Mostly the first way, when flushed, is the one filled again.
        let i = e.info(set, 0);
        if i.flags & VALID == 0 || i.gepoch != self.gepoch {
            return (0, last == 0);
        }
        let own = self.epoch(asid);
        let (mut victim, mut oldest) = (0, u32::MAX);
        for j in 0..=last {
            let i = e.info(set, j);
            let epoch = if i.asid == asid {
                own
            } else {
                self.epoch(i.asid)
            };
            if !self.live_at(&i, epoch) || (e.tag(set, j) == tag && i.asid == asid) {
                // The ways before it were live.
                return (j, j == last);
            }
            if i.lru < oldest {
                (victim, oldest) = (j, i.lru);
            }
        }
        (victim, true)
    }

    /// The victim way in set `set` when every way of it is live: the first
    /// way that holds the same tag and ASID (none if `missed`), else the
    /// least recently used (way `oldest` unless [`NO_ORDER`]).
    #[inline]
    fn victim_in_live_set(
        &self,
        set: usize,
        asid: u16,
        tag: u64,
        missed: bool,
        oldest: u32,
    ) -> usize {
        let ways = self.ways as usize;
        let e = &self.entries;
        if !missed {
            let same = |&j: &usize| e.tag(set, j) == tag && e.info(set, j).asid == asid;
            if let Some(j) = (0..ways).find(same) {
                return j;
            }
        }
        if oldest != NO_ORDER {
            return oldest as usize;
        }
        let mut victim = 0;
        let mut min = u32::MAX;
        for j in 0..ways {
            let l = e.lru(set, j);
            if l < min {
                (victim, min) = (j, l);
            }
        }
        victim
    }

    /// Look up the PTE table that maps `va`'s 2 MiB region, probing slot
    /// `mru` first; and its slot.
    /// `slots`: the slot hints, if kept (their region fingerprints).
    pub fn psc_lookup(
        &self,
        mru: usize,
        asid: u16,
        va: u64,
        slots: &Option<SlotHints>,
    ) -> Option<(usize, PscHit)> {
        let region = va >> crate::HPAGE_SHIFT;
        let (epoch, pepoch) = self.epochs_of(asid);
        let hit = |p: &&PscEntry| p.region == region && self.psc_live(p, asid, epoch, pepoch);
        // At most one valid entry holds a region of an ASID (`cache_insert`
        // replaces it in place): a match in slot `mru` is the one a scan
        // finds.
        let psc = self.psc();
        let slot = match psc.get(mru).filter(hit) {
            Some(_) => mru,
            None => self.psc_scan(asid, region, slots.as_ref().map(|h| &h.psc_fps[..]))?,
        };
        let p = &psc[slot];
        let found = PscHit {
            table: p.table,
            table_gen: p.table_gen,
        };
        Some((slot, found))
    }

    /// The slot of `psc_lookup`'s entry when it is not in the MRU slot
    /// (kept out of line: the MRU hit is the common case).
    #[inline(never)]
    fn psc_scan(&self, asid: u16, region: u64, fps: Option<&[u64]>) -> Option<usize> {
        let (epoch, pepoch) = self.epochs_of(asid);
        let hit = |p: &PscEntry| p.region == region && self.psc_live(p, asid, epoch, pepoch);
        let psc = self.psc();
        match fps {
            Some(f) => first_psc_slot(
                f,
                psc.len(),
                psc_fingerprint(region, asid),
                |i| hit(&psc[i]),
            ),
            None => psc.iter().position(hit),
        }
    }

    /// Is this paging-structure-cache entry valid, of `asid`, and filled
    /// since the last flush of everything, of the ASID (its `epoch`) and
    /// of the ASID's walk-cache entries (`pepoch`)?
    #[inline]
    fn psc_live(&self, p: &PscEntry, asid: u16, epoch: u32, pepoch: u32) -> bool {
        p.valid
            && p.asid == asid
            && p.gepoch == self.gepoch
            && p.epoch == epoch
            && p.pepoch == pepoch
    }

    /// The slot of `cache` holding a valid entry of `e`'s region and
    /// ASID, if any. `fps`: the slots' [`psc_fingerprint`]s, if kept.
    fn same_slot(cache: &[PscEntry], e: &PscEntry, fps: Option<&[u64]>) -> Option<usize> {
        let same = |p: &PscEntry| p.valid && p.region == e.region && p.asid == e.asid;
        match fps {
            Some(f) => {
                let fp = psc_fingerprint(e.region, e.asid);
                first_psc_slot(f, cache.len(), fp, |i| same(&cache[i]))
            }
            None => cache.iter().position(same),
        }
    }

    /// Replace the entry of the same region and ASID (in slot `found`,
    /// from [`TlbData::same_slot`]), else a round-robin victim; the slot
    /// written and the table of the valid entry replaced, if any.
    fn cache_insert(
        cache: &mut [PscEntry],
        next: &mut u32,
        e: PscEntry,
        found: Option<usize>,
    ) -> (usize, Option<Pfn>) {
        let slot = match found {
            Some(i) => i,
            None => {
                let i = *next as usize;
                *next = (*next + 1) % cache.len() as u32;
                i
            }
        };
        let old = std::mem::replace(&mut cache[slot], e);
        (slot, old.valid.then_some(old.table))
    }

    fn psc_entry(&self, asid: u16, region: u64, table: Pfn, table_gen: u32) -> PscEntry {
        let (epoch, pepoch) = self.epochs_of(asid);
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

    /// Drop the leaf translations of `va` (4 KiB and 2 MiB) in `asid`, or
    /// under every ASID if None (RISC-V `sfence.vma va, x0`; kernel
    /// mappings are global). A set that lost an entry is no longer known
    /// to be all live.
    fn flush_leaf(&mut self, va: u64, asid: Option<u16>) {
        for huge in [false, true] {
            if huge && !self.any_huge {
                break;
            }
            let tag = Self::tag(va, huge);
            let set = self.set_of(tag);
            let e = &mut self.entries;
            // None: nothing was ever filled.
            let Some(mut candidates) = e.candidates(set, tag) else {
                return;
            };
            while let Some(j) = candidates.next(e.fps(set)) {
                if e.tag(set, j) == tag && asid.is_none_or(|a| e.info(set, j).asid == a) {
                    e.invalidate(set, j);
                    e.set_live(set, 0);
                }
            }
        }
    }

    /// Number of live translations of `asid` (for tests and reports).
    pub fn count(&self, asid: u16) -> usize {
        let epoch = self.epoch(asid);
        let info = self
            .entries
            .each()
            .map(|(_, w)| Info::unpack(w.try_into().unwrap()));
        info.filter(|e| e.asid == asid && self.live_at(e, epoch))
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

    /// The replacement and flush rules written plainly, every way tested
    /// for liveness on every access: what the hinted paths must agree with.
    struct Model {
        set_mask: u64,
        ways: usize,
        /// (tag, asid, lru, epoch, gepoch, valid, pfn)
        e: Vec<(u64, u16, u32, u32, u32, bool, Pfn)>,
        epochs: std::collections::HashMap<u16, u32>,
        gepoch: u32,
        tick: u32,
    }

    impl Model {
        fn new(entries: usize, ways: usize) -> Self {
            let e = vec![(0, 0, 0, 0, 0, false, 0); entries];
            let (set_mask, epochs) = ((entries / ways) as u64 - 1, Default::default());
            Model {
                set_mask,
                ways,
                e,
                epochs,
                gepoch: 1,
                tick: 0,
            }
        }
        fn set(&self, tag: u64) -> std::ops::Range<usize> {
            let s = ((tag ^ (tag >> 17)) & self.set_mask) as usize;
            s * self.ways..(s + 1) * self.ways
        }
        fn live(&self, i: usize) -> bool {
            let (_, a, _, ep, g, valid, _) = self.e[i];
            valid && g == self.gepoch && ep == self.epochs.get(&a).copied().unwrap_or(0)
        }
        fn lookup(&mut self, asid: u16, va: u64) -> Option<Pfn> {
            for tag in [va >> 12, (va >> 21) | HUGE_TAG] {
                let found = self
                    .set(tag)
                    .find(|&i| self.e[i].0 == tag && self.e[i].1 == asid && self.live(i));
                if let Some(i) = found {
                    self.tick = self.tick.wrapping_add(1);
                    self.e[i].2 = self.tick;
                    return Some(self.e[i].6);
                }
            }
            None
        }
        fn fill(&mut self, asid: u16, va: u64, huge: bool, pfn: Pfn) {
            let tag = if huge {
                (va >> 21) | HUGE_TAG
            } else {
                va >> 12
            };
            let ways = self.set(tag);
            let same = |m: &Self, i: usize| m.e[i].0 == tag && m.e[i].1 == asid;
            let v = match ways.clone().find(|&i| !self.live(i) || same(self, i)) {
                Some(i) => i,
                None => ways.min_by_key(|&i| self.e[i].2).unwrap(),
            };
            self.tick = self.tick.wrapping_add(1);
            let epoch = self.epochs.get(&asid).copied().unwrap_or(0);
            self.e[v] = (tag, asid, self.tick, epoch, self.gepoch, true, pfn);
        }
        fn flush_leaf(&mut self, asid: Option<u16>, va: u64) {
            for tag in [va >> 12, (va >> 21) | HUGE_TAG] {
                for i in self.set(tag) {
                    if self.e[i].0 == tag && asid.is_none_or(|a| self.e[i].1 == a) {
                        self.e[i].5 = false;
                    }
                }
            }
        }
        fn count(&self, asid: u16) -> usize {
            let n = self.e.len();
            (0..n)
                .filter(|&i| self.e[i].1 == asid && self.live(i))
                .count()
        }
    }

    /// Random fills, lookups and flushes, mostly streaming through pages as
    /// `usemem` does (so that sets fill up live and in order), agree with
    /// [`Model`]: lookups, victims (seen through later lookups), counts.
    #[test]
    fn agrees_with_a_plain_model() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut below = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for (entries, ways) in [(64, 4), (96, 12), (16, 16), (8, 1)] {
            let (mut t, mut m) = (
                Tlb::new(entries, ways, 4),
                Model::new(entries as usize, ways as usize),
            );
            let mut page = 0u64;
            for step in 0..100_000u32 {
                let asid = [1, 1, 1, 2, KERNEL_ASID][below(5) as usize];
                let va = match below(10) {
                    0..=6 => {
                        page += 1;
                        page << 12
                    }
                    7..=8 => page.saturating_sub(below(3 * entries as u64)) << 12,
                    _ => below(8) << 21,
                };
                let found = t.lookup(asid, va).map(|h| h.pfn);
                assert_eq!(found, m.lookup(asid, va), "step {step}");
                if found.is_none() || below(20) == 0 {
                    let huge = below(30) == 0;
                    t.fill(asid, va, TlbHit { huge, ..hit(step) });
                    m.fill(asid, va, huge, step);
                }
                let old = page.saturating_sub(below(entries as u64)) << 12;
                match below(500) {
                    0 => {
                        t.flush_asid(asid);
                        *m.epochs.entry(asid).or_default() += 1;
                    }
                    1 => {
                        t.flush_all();
                        m.gepoch += 1;
                    }
                    2..=6 => {
                        t.flush_one(asid, old);
                        m.flush_leaf(Some(asid), old);
                    }
                    7..=9 => {
                        t.flush_one_leaf(asid, old);
                        m.flush_leaf(Some(asid), old);
                    }
                    10..=11 => {
                        t.flush_va(old);
                        m.flush_leaf(None, old);
                    }
                    _ => {}
                }
                if step % 997 == 0 {
                    assert_eq!(t.count(asid), m.count(asid), "step {step}");
                }
            }
        }
    }

    /// The ASID the kernel's global translations are filled under.
    const KERNEL_ASID: u16 = u16::MAX;

    /// A flush of another ASID leaves a full set's ways round in LRU order
    /// (the set's oldest way is found again, not searched on every fill),
    /// and the victims are still the least recently used.
    #[test]
    fn foreign_asid_flush_keeps_the_round_order() {
        let mut t = Tlb::new(4, 4, 1); // one set of four ways
        for p in 0..6u64 {
            assert!(t.lookup(1, p << 12).is_none());
            t.fill(1, p << 12, hit(p as Pfn));
        }
        // Pages 4, 5, 2, 3 in ways 0..3: way 2 is the oldest.
        for p in 6..10u64 {
            t.flush_asid(2);
            assert!(t.lookup(1, p << 12).is_none());
            t.fill(1, p << 12, hit(p as Pfn));
            assert!(
                t.lookup(1, (p - 4) << 12).is_none(),
                "page {} evicted",
                p - 4
            );
        }
        assert_eq!(
            t.d().entries.hint(0).oldest,
            2,
            "pages 6, 7, 8, 9 in ways 2, 3, 0, 1"
        );
    }

    #[test]
    fn lru_victim_in_a_full_set() {
        let mut t = Tlb::new(4, 4, 1); // one set of four ways
        for p in 0..4u64 {
            assert!(t.lookup(1, p << 12).is_none());
            t.fill(1, p << 12, hit(p as Pfn));
        }
        // Pages 0..3 in ways 0..3, stamps ascending: page 0 goes first ...
        t.fill(1, 4 << 12, hit(4));
        assert!(t.lookup(1, 0).is_none());
        // ... then page 1, unless a hit made it recent: then page 2.
        assert!(t.lookup(1, 1 << 12).is_some());
        t.fill(1, 5 << 12, hit(5));
        assert!(t.lookup(1, 2 << 12).is_none());
        assert!(t.lookup(1, 1 << 12).is_some());
        // A refill of a cached page replaces its own entry, not the LRU.
        t.fill(1, 3 << 12, hit(33));
        assert_eq!(t.lookup(1, 3 << 12).map(|h| h.pfn), Some(33));
        assert_eq!(t.count(1), 4);
        assert!(t.lookup(1, 4 << 12).is_some());
        // A dead way is taken before any live one.
        t.flush_one_leaf(1, 4 << 12);
        t.fill(1, 6 << 12, hit(6));
        assert!(t.lookup(1, 5 << 12).is_some() && t.lookup(1, 1 << 12).is_some());
        // Filled way after way, but way 0 was hit before the set was full:
        // way 1 is the least recently used.
        t.flush_all();
        for p in 0..4u64 {
            t.fill(1, p << 12, hit(p as Pfn));
            if p == 2 {
                assert!(t.lookup(1, 0).is_some());
            }
        }
        t.fill(1, 4 << 12, hit(4));
        assert!(t.lookup(1, 1 << 12).is_none() && t.lookup(1, 0).is_some());
    }

    #[test]
    fn flush_epochs() {
        let mut t = Tlb::new(64, 4, 4);
        t.fill(1, 0x1000, hit(1));
        t.fill(2, 0x1000, hit(2));
        t.flush_asid(1);
        assert!(t.lookup(1, 0x1000).is_none(), "ASID 1 flushed");
        assert!(t.lookup(2, 0x1000).is_some(), "ASID 2 kept");
        t.fill(1, 0x1000, hit(3));
        assert_eq!(t.lookup(1, 0x1000).map(|h| h.pfn), Some(3));
        t.flush_all();
        assert_eq!((t.count(1), t.count(2)), (0, 0));
    }

    /// A new TLB hashes as `entries` all-zero entries (the arrays are not
    /// allocated) and equals another new TLB; one that was filled does not.
    #[test]
    fn unfilled_tlb_hashes_as_zero_entries() {
        let fp = |t: &Tlb| {
            let mut h = rustc_hash::FxHasher::default();
            t.hash(&mut h);
            h.finish()
        };
        let t = Tlb::new(8, 2, 1);
        let mut h = rustc_hash::FxHasher::default();
        let d = t.d();
        (d.set_mask, d.ways, d.any_huge).hash(&mut h);
        h.write_usize(8);
        (0..40).for_each(|_| h.write_u64(0));
        (d.psc(), d.psc_next, d.upper(), d.upper_next).hash(&mut h);
        (d.epoch_array(0), d.epoch_array(1), d.gepoch, d.tick).hash(&mut h);
        let mut want = rustc_hash::FxHasher::default();
        want.write_u64(h.finish() | 1);
        assert_eq!(fp(&t), want.finish());
        let mut u = Tlb::new(8, 2, 1);
        assert!(t == u && fp(&t) == fp(&u));
        u.fill(0, 0, hit(0));
        assert!(t != u && fp(&t) != fp(&u));
    }

    /// Epochs of ASIDs past those kept inline hash and compare as the two
    /// epoch arrays they stand for.
    #[test]
    fn many_asids_hash_as_epoch_arrays() {
        let mut t = Tlb::new(8, 2, 1);
        t.flush_asid(20);
        t.flush_one(11, 0);
        t.flush_one(3, 0);
        let d = t.d();
        assert_eq!((d.epoch_array(0).len(), d.epoch_array(1).len()), (21, 12));
        assert_eq!(
            (d.epoch(20), d.epochs_of(11).1, d.epochs_of(3).1),
            (1, 1, 1)
        );
        let mut h = rustc_hash::FxHasher::default();
        (d.set_mask, d.ways, d.any_huge).hash(&mut h);
        d.entries.hash(&mut h);
        (d.psc(), d.psc_next, d.upper(), d.upper_next).hash(&mut h);
        (d.epoch_array(0), d.epoch_array(1), d.gepoch, d.tick).hash(&mut h);
        let mut g = rustc_hash::FxHasher::default();
        d.hash(&mut g);
        assert_eq!(h.finish(), g.finish());
        let mut u = Tlb::new(8, 2, 1);
        u.flush_one(3, 0);
        u.flush_one(11, 0);
        assert!(t != u);
        u.flush_asid(20);
        assert!(t == u);
    }

    /// The paging-structure cache answers the same whichever slot was used
    /// last, and an identical refill changes nothing.
    #[test]
    fn psc_hint_is_only_a_hint() {
        let mut t = Tlb::new(64, 4, 4);
        for r in 0..6u64 {
            t.psc_fill(1, r << 21, 10 + r as Pfn, 0);
        }
        for r in 0..6u64 {
            let want = (r >= 2).then_some(PscHit {
                table: 10 + r as Pfn,
                table_gen: 0,
            });
            assert_eq!(t.psc_lookup(1, r << 21), want, "region {r}");
            assert_eq!(t.psc_lookup(2, r << 21), None);
        }
        let before = t.clone();
        t.psc_fill(1, 5 << 21, 15, 0);
        assert!(
            Arc::ptr_eq(&t.s, &before.s),
            "identical refill: not unshared"
        );
        t.psc_fill(1, 5 << 21, 15, 1);
        assert_eq!(t.psc_lookup(1, 5 << 21).map(|p| p.table_gen), Some(1));
        t.flush_one(1, 0);
        assert_eq!(t.psc_lookup(1, 5 << 21), None, "INVLPG drops the PSC");
        t.psc_fill(1, 5 << 21, 15, 1);
        assert!(t.psc_lookup(1, 5 << 21).is_some());
    }

    /// A range flush is the per-page flushes it stands for, on a TLB that
    /// holds the ASID and on one that never filled it.
    #[test]
    fn flush_range_is_flushes_page_by_page() {
        for leaf in [false, true] {
            for (start, end, stride) in [
                (0, 0x8000, 0x1000),
                (0x1000, 0x1001, 0x1000),
                (5, 5, 1),
                (0, 1 << 22, 1 << 21),
            ] {
                let mut a = Tlb::new(64, 4, 4);
                (0..16u64).for_each(|p| a.fill(3, p << 12, hit(p as Pfn)));
                a.psc_fill(3, 0, 7, 0);
                let (mut b, idle) = (a.clone(), Tlb::new(64, 4, 4));
                a.flush_range(3, (start, end, stride), leaf);
                let mut va = start;
                while va < end {
                    if leaf {
                        b.flush_one_leaf(3, va);
                    } else {
                        b.flush_one(3, va);
                    }
                    va += stride;
                }
                assert!(a == b, "{start:#x}..{end:#x} leaf {leaf}");
                let (mut c, mut d) = (idle.clone(), idle.clone());
                c.flush_range(3, (start, end, stride), leaf);
                let mut va = start;
                while va < end {
                    if leaf {
                        d.flush_one_leaf(3, va);
                    } else {
                        d.flush_one(3, va);
                    }
                    va += stride;
                }
                assert!(c == d, "idle: {start:#x}..{end:#x} leaf {leaf}");
            }
        }
    }

    /// With the slots' tables and fingerprints kept (`keep_table_slots`,
    /// 36 slots: four chunks of eight and four more), `psc_holds`,
    /// `psc_lookup` and the fills answer as from the entries alone, over
    /// fills, flushes of one address and of an ASID, with regions shared
    /// by several ASIDs.
    #[test]
    fn psc_with_table_slots_answers_as_without() {
        let mut kept = Tlb::new(64, 4, 32).keep_table_slots();
        let mut plain = Tlb::new(64, 4, 32);
        let mut x = 99u64;
        let mut held = 0;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let asid = 1 + (x >> 60) as u16 % 3;
            let va = ((x >> 20) % 64) << 21;
            let table = 1 + (x >> 30) as u32 % 80;
            let swaps: Vec<_> = [&mut kept, &mut plain]
                .into_iter()
                .map(|t| match step % 8 {
                    0 => (t.flush_one(asid, va), None).1,
                    1 if x & 1 << 9 != 0 => (t.flush_asid(asid), None).1,
                    2 => Some(t.pud_psc_fill(asid, va << 9, table, 0)),
                    _ => t.psc_fill(asid, va, table, 0),
                })
                .collect();
            assert_eq!(swaps[0], swaps[1]);
            let ask = 1 + (x >> 40) as u32 % 80;
            assert_eq!(kept.psc_holds(asid, ask), plain.psc_holds(asid, ask));
            let at = ((x >> 44) % 64) << 21;
            assert_eq!(kept.psc_lookup(asid, at), plain.psc_lookup(asid, at));
            held += usize::from(plain.psc_holds(asid, ask));
        }
        assert!(held > 500, "{held}");
    }

    /// `psc_holds` answers from the entries whatever the table filter says:
    /// tables sharing a bucket, replaced entries, stale ones.
    #[test]
    fn psc_holds_follows_the_entries() {
        let mut t = Tlb::new(64, 4, 2);
        t.psc_fill(1, 0, 7, 0);
        t.psc_fill(1, 1 << 21, 7 + 256, 0);
        assert!(t.psc_holds(1, 7) && t.psc_holds(1, 7 + 256) && !t.psc_holds(1, 7 + 512));
        assert!(!t.psc_holds(2, 7), "another ASID");
        t.psc_fill(1, 2 << 21, 9, 0); // replaces the entry of table 7
        assert!(!t.psc_holds(1, 7) && t.psc_holds(1, 7 + 256) && t.psc_holds(1, 9));
        t.pud_psc_fill(1, 0, 7, 0);
        assert!(t.psc_holds(1, 7), "the PUD-entry cache counts too");
        let u = t.clone();
        t.flush_one(1, 0);
        assert!(!t.psc_holds(1, 9), "stale after INVLPG");
        assert!(u.psc_holds(1, 9), "a clone keeps its own");
    }
}
