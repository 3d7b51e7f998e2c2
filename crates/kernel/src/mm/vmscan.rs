//! mm/vmscan.c: `shrink_folio_list`, the reclaim of a list of isolated
//! folios, as `madvise(MADV_PAGEOUT)` (mm/madvise.c → `reclaim_pages`) and
//! kswapd (`balance_pgdat` → `shrink_inactive_list`) run it. Each folio is
//! unmapped by mm/rmap.c `try_to_unmap(folio, TTU_BATCH_FLUSH)`
//! ([`crate::mm::rmap`]); the deferred flushes are paid by
//! `try_to_unmap_flush` before folios are freed.
//!
//! ```text
//!  isolate ─ per PTE table (MADV_PAGEOUT) or SWAP_CLUSTER_MAX folios (kswapd)
//!  shrink_folio_list, per folio:
//!    anon, not in swap cache: add_to_swap (mm.swap = none: fails, kept mapped)
//!    try_to_unmap_one (batched, or ptep_clear_flush)
//!    dirty? try_to_unmap_flush_dirty; pageout()   (zram: written at once)
//!    free_folios full (31)? try_to_unmap_flush; free_unref_folios
//!  end of list: try_to_unmap_flush; free_unref_folios
//! ```
//!
//! Not modelled: the LRU lists and `folio_check_references` (the folios
//! handed over are taken as old), file folios (the page cache stays
//! resident), folios mapped more than once (the other mappings' rmap walk;
//! such folios are kept), `mm->tlb_flush_batched`.

use crate::effects::{Effects, Label};
use crate::mm::memory::pte_table;
use crate::mm::rmap::{
    try_to_unmap_flush, try_to_unmap_flush_dirty, try_to_unmap_one, TlbflushUnmapBatch,
};
use crate::world::{Flow, Frame, World};
use crate::{MmId, TaskId};
use machine::mem::{pte, table_index};
use machine::scenario::Swap;
use machine::{Cost, CpuId, Pfn, HPAGE_SIZE, PAGE_SIZE};

/// `SWAP_CLUSTER_MAX`: folios `shrink_inactive_list` isolates per call.
pub const SWAP_CLUSTER_MAX: usize = 32;

/// `PAGEVEC_SIZE`: folios `free_folios` holds (`folio_batch_add` returns 0
/// when it is full; 31 since v6.10).
pub const PAGEVEC_SIZE: usize = 31;

/// How folios are isolated for one `shrink_folio_list` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolate {
    /// `madvise_cold_or_pageout_pte_range`: the folios of one PTE table,
    /// then `reclaim_pages`.
    PerTable,
    /// kswapd's `shrink_inactive_list`: `SWAP_CLUSTER_MAX` folios a call.
    Cluster,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// The reclaim pass's fixed part (the walk to the folios, the LRU locks).
    Start,
    /// Isolate the next folios of the range (or return at its end).
    Isolate,
    /// `shrink_folio_list`: the next folio, up to `try_to_unmap`.
    Folio,
    /// After the unmap (and its flush, if not batched).
    Unmapped,
    /// `pageout()` of the dirty folio.
    Pageout,
    /// `free_it:` the folio joins `free_folios`.
    FreeIt,
    /// `free_unref_folios` of a full batch, after `try_to_unmap_flush`.
    BatchFree,
    /// End of the list: `try_to_unmap_flush()`.
    Flush,
    /// ... and `free_unref_folios`.
    Free,
}

/// Reclaim of `mm`'s anonymous folios in `[next, end)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShrinkFolioList {
    pub mm: MmId,
    pub next: u64,
    pub end: u64,
    pub isolate: Isolate,
    /// The isolated folios (address, frame), and the next one to look at.
    pub folios: Vec<(u64, Pfn)>,
    pub i: usize,
    /// The folio being reclaimed and whether it is dirty.
    pub cur: (u64, Pfn, bool),
    /// `current->tlb_ubc`.
    pub ubc: TlbflushUnmapBatch,
    /// `free_folios`.
    pub free: Vec<Pfn>,
    pub pc: Pc,
}

impl ShrinkFolioList {
    pub fn new(w: &World, mm: MmId, start: u64, end: u64, isolate: Isolate) -> Self {
        ShrinkFolioList {
            mm,
            next: start & !(PAGE_SIZE - 1),
            end,
            isolate,
            folios: Vec::new(),
            i: 0,
            cur: (0, 0, false),
            ubc: TlbflushUnmapBatch::new(w),
            free: Vec::new(),
            pc: Pc::Start,
        }
    }

    /// mm/vmscan.c: `shrink_folio_list` (and the isolation before it).
    pub fn step(&mut self, w: &mut World, cpu: CpuId, _task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Start => {
                fx.cost(Cost::ZapFixed, 1);
                self.pc = Pc::Isolate;
                Flow::Yield
            }
            Pc::Isolate => self.isolate(w),
            Pc::Folio => self.folio(w, cpu, fx),
            Pc::Unmapped => {
                self.pc = if self.cur.2 { Pc::Pageout } else { Pc::FreeIt };
                if !self.cur.2 {
                    return Flow::Continue;
                }
                // "Folio is dirty. Flush the TLB if a writable entry
                // potentially exists to avoid CPU writes after I/O starts."
                try_to_unmap_flush_dirty(w, cpu, &mut self.ubc, fx).unwrap_or(Flow::Continue)
            }
            Pc::Pageout => {
                // pageout() → swap_writepage; zram completes at once (PAGE_SUCCESS, clean).
                fx.cost(Cost::SwapOutPage, 1);
                w.counters.pswpout += 1;
                self.pc = Pc::FreeIt;
                Flow::Yield
            }
            Pc::FreeIt => {
                self.free.push(self.cur.1);
                w.counters.pgsteal += 1;
                if self.free.len() < PAGEVEC_SIZE {
                    self.pc = Pc::Folio;
                    return Flow::Continue;
                }
                self.pc = Pc::BatchFree;
                try_to_unmap_flush(w, cpu, &mut self.ubc, fx).unwrap_or(Flow::Continue)
            }
            Pc::BatchFree => {
                self.free_unref_folios(w, fx);
                self.pc = Pc::Folio;
                Flow::Yield
            }
            Pc::Flush => {
                self.pc = Pc::Free;
                try_to_unmap_flush(w, cpu, &mut self.ubc, fx).unwrap_or(Flow::Continue)
            }
            Pc::Free => {
                self.free_unref_folios(w, fx);
                self.pc = Pc::Isolate;
                Flow::Yield
            }
        }
    }

    /// Isolate the next folios: the present anonymous PTEs of the next
    /// PTE table that has any (`Isolate::PerTable`), or the next
    /// `SWAP_CLUSTER_MAX` of them. None left: the reclaim returns.
    fn isolate(&mut self, w: &World) -> Flow {
        self.folios.clear();
        self.i = 0;
        while self.folios.is_empty() && self.next < self.end {
            let stop = match self.isolate {
                Isolate::PerTable => ((self.next / HPAGE_SIZE + 1) * HPAGE_SIZE).min(self.end),
                Isolate::Cluster => self.end,
            };
            while self.next < stop && self.folios.len() < self.cap() {
                if let Some(f) = anon_folio_at(w, self.mm, self.next) {
                    self.folios.push((self.next, f));
                }
                self.next += PAGE_SIZE;
            }
        }
        if self.folios.is_empty() {
            return Flow::Return;
        }
        self.pc = Pc::Folio;
        Flow::Continue
    }

    /// The most folios one `shrink_folio_list` call gets.
    fn cap(&self) -> usize {
        match self.isolate {
            Isolate::PerTable => 512,
            Isolate::Cluster => SWAP_CLUSTER_MAX,
        }
    }

    /// The next folio of the list: keep it (no swap, shared), or
    /// `try_to_unmap` it; a flush that was not batched is returned to run.
    fn folio(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) -> Flow {
        let Some(&(va, pfn)) = self.folios.get(self.i) else {
            self.pc = Pc::Flush;
            return Flow::Continue;
        };
        self.i += 1;
        let Some(table) = pte_table(w, self.mm, va) else {
            return Flow::Yield;
        };
        let idx = table_index(va, 1);
        let e = w.mem.read(table, idx).unwrap_or(0);
        let swapcache = e & pte::SWAPCACHE != 0;
        // Mapped elsewhere too, or pinned: the model walks no other mapping.
        let shared = w.mem.ref_count(pfn) > 1;
        if shared || (!swapcache && w.cfg.mm.swap == Swap::None) {
            // add_to_swap fails (or try_to_unmap would leave it mapped):
            // activate_locked, the folio stays mapped.
            w.counters.reclaim_kept += 1;
            return Flow::Yield;
        }
        // add_to_swap marks the folio dirty; a swap-cache folio is dirty if
        // its PTE is.
        let dirty = !swapcache || e & pte::DIRTY != 0;
        let (old, flush) =
            try_to_unmap_one(w, cpu, &mut self.ubc, self.mm, table, idx, va, pfn, fx);
        if old == 0 {
            return Flow::Yield; // unmapped meanwhile
        }
        fx.cost(Cost::ZapPte, 1);
        fx.label(Label::ZapPtes {
            mm: self.mm,
            start: va,
            end: va + PAGE_SIZE,
            pages: 1,
        });
        self.cur = (va, pfn, dirty);
        self.pc = Pc::Unmapped;
        flush.unwrap_or(Flow::Yield)
    }

    /// mm/page_alloc.c: `free_unref_folios(&free_folios)`.
    fn free_unref_folios(&mut self, w: &mut World, fx: &mut Effects) {
        if let Some(&first) = self.free.first() {
            fx.label(Label::FreePages {
                n: self.free.len() as u32,
                first,
            });
        }
        fx.cost(Cost::FreePage, self.free.len() as u32);
        for pfn in self.free.drain(..) {
            w.mem.put_page(pfn);
        }
    }
}

/// The anonymous folio `mm` maps at `va` by a present 4 KiB PTE, if any
/// (not a file, hugetlb or huge-PMD mapping).
fn anon_folio_at(w: &World, mm: MmId, va: u64) -> Option<Pfn> {
    let v = w.mms[mm as usize]
        .vmas
        .iter()
        .find(|v| v.start <= va && va < v.end)?;
    if v.file.is_some() || v.hugetlb {
        return None;
    }
    let e = w.mem.read(pte_table(w, mm, va)?, table_index(va, 1))?;
    pte::present(e).then(|| pte::pfn(e))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageoutPc {
    /// Entry: the system call, then the reclaim.
    Enter,
    /// Back from it.
    Done,
}

/// `madvise(start, len, MADV_PAGEOUT)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MadvisePageout {
    pub start: u64,
    pub end: u64,
    pub pc: PageoutPc,
}

impl MadvisePageout {
    pub fn new(start: u64, len: u64) -> Self {
        MadvisePageout {
            start,
            end: start + len,
            pc: PageoutPc::Enter,
        }
    }

    /// mm/madvise.c: `madvise_pageout` → `madvise_cold_or_pageout_pte_range`
    /// (isolate the folios of each PTE table) → mm/vmscan.c: `reclaim_pages`
    /// → `shrink_folio_list`.
    pub fn step(&mut self, w: &mut World, _cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            PageoutPc::Enter => {
                fx.cost(Cost::SyscallEntryExit, 1);
                fx.cost(Cost::ZapFixed, 1);
                fx.label(Label::Syscall {
                    nr: "madvise(MADV_PAGEOUT)",
                });
                self.pc = PageoutPc::Done;
                let mm = w.tasks[task as usize].mm;
                let r = ShrinkFolioList::new(w, mm, self.start, self.end, Isolate::PerTable);
                Flow::Call(Frame::ShrinkFolioList(r))
            }
            PageoutPc::Done => Flow::Return,
        }
    }
}
