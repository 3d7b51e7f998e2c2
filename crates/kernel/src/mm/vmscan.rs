//! `madvise(MADV_PAGEOUT)` (mm/madvise.c) → `reclaim_pages` → mm/vmscan.c:
//! `shrink_folio_list`, whose unmaps are batched: mm/rmap.c
//! `try_to_unmap_one` with `TTU_BATCH_FLUSH` clears each PTE and only
//! records the flush (`set_tlb_ubc_flush_pending` →
//! `arch_tlbbatch_add_pending`); `try_to_unmap_flush` then issues one
//! `arch_tlbbatch_flush` for all of them before the folios are freed.
//!
//! ```text
//!  madvise(PAGEOUT) ─ per present PTE: ptep_get_and_clear, arch_tlbbatch_add_pending
//!                   ─ try_to_unmap_flush → arch_tlbbatch_flush (one IPI round)
//!                   ─ free the folios
//! ```
//!
//! Swap is not modelled: the page's contents are not kept (the model tracks
//! none), a later access faults in a fresh anonymous page.

use crate::arch::x86::tlb_kernel::{
    arch_tlbbatch_add_pending, ArchTlbbatchFlush, ArchTlbflushUnmapBatch,
};
use crate::effects::{Effects, Label};
use crate::mm::memory::pte_table;
use crate::world::{Flow, Frame, World};
use crate::TaskId;
use machine::mem::{pte, table_index};
use machine::{Cost, CpuId, CpuMask, Pfn, PAGE_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `madvise_cold_or_pageout_pte_range` + `shrink_folio_list`'s unmaps.
    Unmap,
    /// `try_to_unmap_flush()`.
    Flush,
    /// The folios go back to the allocator.
    Free,
}

/// `madvise(start, len, MADV_PAGEOUT)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MadvisePageout {
    pub start: u64,
    pub end: u64,
    /// `current->tlb_ubc`: the pending batched flush.
    pub batch: Option<ArchTlbflushUnmapBatch>,
    /// Folios unmapped, freed once the flush is done.
    pub folios: Vec<Pfn>,
    pub pc: Pc,
}

impl MadvisePageout {
    pub fn new(start: u64, len: u64) -> Self {
        MadvisePageout {
            start,
            end: start + len,
            batch: None,
            folios: Vec::new(),
            pc: Pc::Unmap,
        }
    }

    /// mm/madvise.c: `madvise_pageout` → mm/vmscan.c: `reclaim_pages` →
    /// `shrink_folio_list` (`try_to_unmap(folio, TTU_BATCH_FLUSH)`, then
    /// `try_to_unmap_flush()` before the folios are freed).
    pub fn step(&mut self, w: &mut World, _cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Unmap => {
                fx.cost(Cost::SyscallEntryExit, 1);
                fx.cost(Cost::ZapFixed, 1);
                fx.label(Label::Syscall {
                    nr: "madvise(MADV_PAGEOUT)",
                });
                self.try_to_unmap(w, task, fx);
                self.pc = Pc::Flush;
                Flow::Yield
            }
            Pc::Flush => {
                self.pc = Pc::Free;
                match self.batch.take() {
                    // try_to_unmap_flush: only if a flush is pending.
                    Some(b) => Flow::Call(Frame::ArchTlbbatchFlush(ArchTlbbatchFlush::new(b))),
                    None => Flow::Continue,
                }
            }
            Pc::Free => {
                if let Some(&first) = self.folios.first() {
                    fx.label(Label::FreePages {
                        n: self.folios.len() as u32,
                        first,
                    });
                }
                fx.cost(Cost::FreePage, self.folios.len() as u32);
                for pfn in self.folios.drain(..) {
                    w.mem.put_page(pfn);
                }
                Flow::Return
            }
        }
    }

    /// mm/rmap.c: `try_to_unmap_one` with `TTU_BATCH_FLUSH` for each present
    /// PTE of the range: `ptep_get_and_clear`, then
    /// `set_tlb_ubc_flush_pending` → `arch_tlbbatch_add_pending`.
    fn try_to_unmap(&mut self, w: &mut World, task: TaskId, fx: &mut Effects) {
        let mm = w.tasks[task as usize].mm;
        let mut va = self.start & !(PAGE_SIZE - 1);
        let mut n = 0u32;
        while va < self.end {
            if let Some(table) = pte_table(w, mm, va) {
                let idx = table_index(va, 1);
                let e = w.mem.read(table, idx).unwrap_or(0);
                if pte::present(e) {
                    w.mem.write(table, idx, 0);
                    self.folios.push(pte::pfn(e));
                    let batch = self.batch.get_or_insert_with(|| ArchTlbflushUnmapBatch {
                        cpumask: CpuMask::new(w.cpus.len()),
                        unmapped_pages: false,
                    });
                    arch_tlbbatch_add_pending(w, batch, mm, fx);
                    n += 1;
                }
            }
            va += PAGE_SIZE;
        }
        fx.cost(Cost::ZapPte, n);
        fx.label(Label::ZapPtes {
            mm,
            start: self.start,
            end: self.end,
            pages: n,
        });
    }
}
