//! mm/madvise.c: `madvise(MADV_DONTNEED)`.

use crate::effects::{Effects, Label};
use crate::mm::memory::{unmap_page_range_details, FaultLock, ZapDetails};
use crate::mm::mmap_lock::{lock_vma_under_rcu, mmap_read_lock, mmap_read_unlock, vma_end_read};
use crate::mm::mmu_gather::{
    tlb_finish_mmu, tlb_finish_mmu_free, tlb_flush_mmu_free_task, tlb_flush_mmu_tlbonly,
    tlb_gather_mmu,
};
use crate::world::{Flow, World};
use crate::TaskId;
use machine::{Cost, CpuId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `madvise_dontneed_single_vma` → `zap_page_range_single`: `tlb_gather_mmu`.
    Enter,
    /// `unmap_single_vma` → `zap_pte_range`, one PTE table per step.
    Zap(u64),
    /// `tlb_finish_mmu` → `tlb_flush_mmu` → `tlb_flush`.
    Flush,
    /// `tlb_flush_mmu_free`.
    Free,
    /// The batches ran out mid-zap: `tlb_flush_mmu`'s flush, then zap on from here.
    BatchFlush(u64),
    /// `tlb_flush_mmu`'s free of the full batches.
    BatchFree(u64),
}

/// `madvise(start, len, MADV_DONTNEED)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MadviseDontneed {
    pub start: u64,
    pub end: u64,
    pub pc: Pc,
    /// `madvise_lock`'s choice (per-VMA read lock or `mmap_read_lock`).
    pub lock: FaultLock,
}

impl MadviseDontneed {
    pub fn new(start: u64, len: u64) -> Self {
        MadviseDontneed {
            start,
            end: start + len,
            pc: Pc::Enter,
            lock: FaultLock::None,
        }
    }

    /// mm/madvise.c: `madvise_dontneed_free` → mm/memory.c: `zap_page_range_single`.
    pub fn step(&mut self, w: &mut World, _cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        if !self.can_run(w, task) {
            // madvise_lock sleeps in mmap_read_lock.
            return Flow::Block;
        }
        match self.pc {
            Pc::Enter if self.lock == FaultLock::WaitMmapRead => {
                // Granted mmap_read_lock by the unlock that woke it.
                self.lock = FaultLock::MmapRead;
                tlb_gather_mmu(w, task, mm, false);
                self.pc = Pc::Zap(self.start);
                Flow::Continue
            }
            Pc::Enter => {
                fx.cost(Cost::SyscallEntryExit, 1);
                fx.cost(Cost::ZapFixed, 1);
                fx.label(Label::Syscall {
                    nr: "madvise(MADV_DONTNEED)",
                });
                self.lock = madvise_lock(w, mm, task, self.start, self.end, fx);
                if self.lock == FaultLock::WaitMmapRead {
                    return Flow::Block;
                }
                tlb_gather_mmu(w, task, mm, false);
                self.pc = Pc::Zap(self.start);
                Flow::Continue
            }
            Pc::Zap(addr) => {
                if addr >= self.end {
                    self.pc = Pc::Flush;
                    return Flow::Continue;
                }
                // madvise_dontneed_single_vma: `.reclaim_pt = true` (PT_RECLAIM).
                let details = ZapDetails { reclaim_pt: true };
                let next = unmap_page_range_details(w, task, addr, self.end, &details, fx);
                // zap_pte_range's force_flush when the batches are full (checked per table).
                let full = w.tasks[task as usize].gather.batch_full();
                self.pc = if full && next < self.end {
                    Pc::BatchFlush(next)
                } else {
                    Pc::Zap(next)
                };
                Flow::Yield
            }
            Pc::Flush => {
                self.pc = Pc::Free;
                tlb_finish_mmu(w, task, fx)
            }
            Pc::Free => {
                tlb_finish_mmu_free(w, task, fx);
                madvise_unlock(w, mm, self.lock, fx);
                Flow::Return
            }
            Pc::BatchFlush(next) => {
                self.pc = Pc::BatchFree(next);
                tlb_flush_mmu_tlbonly(w, task, fx)
            }
            Pc::BatchFree(next) => {
                tlb_flush_mmu_free_task(w, task, fx);
                self.pc = Pc::Zap(next);
                Flow::Yield
            }
        }
    }
}

impl MadviseDontneed {
    /// Asleep while queued in `mmap_read_lock` (not granted it yet).
    pub fn can_run(&self, w: &World, task: TaskId) -> bool {
        if self.lock != FaultLock::WaitMmapRead {
            return true;
        }
        let mm = w.tasks[task as usize].mm;
        !crate::mm::mmap_lock::mmap_lock_sleeping(w, mm, task)
    }
}

/// mm/madvise.c: `madvise_lock` → `try_vma_read_lock` (MADV_DONTNEED is
/// `MADVISE_VMA_READ_LOCK` since 6.16): the VMA lock when the range lies in
/// one VMA and no writer holds it, else `mmap_read_lock` (`WaitMmapRead`:
/// queued in it).
fn madvise_lock(
    w: &mut World,
    mm: crate::MmId,
    task: TaskId,
    start: u64,
    end: u64,
    fx: &mut Effects,
) -> FaultLock {
    if let Some(vstart) = lock_vma_under_rcu(w, mm, start, fx) {
        let vend = w.mms[mm as usize]
            .vmas
            .iter()
            .find(|v| v.start == vstart)
            .map_or(0, |v| v.end);
        if end <= vend {
            w.counters.vma_lock_success += 1;
            return FaultLock::Vma(vstart);
        }
        vma_end_read(w, mm, vstart, fx);
    }
    w.counters.vma_lock_fallback += 1;
    if mmap_read_lock(w, mm, task, fx) {
        FaultLock::MmapRead
    } else {
        FaultLock::WaitMmapRead
    }
}

/// mm/madvise.c: `madvise_unlock`.
fn madvise_unlock(w: &mut World, mm: crate::MmId, lock: FaultLock, fx: &mut Effects) {
    match lock {
        FaultLock::Vma(start) => vma_end_read(w, mm, start, fx),
        FaultLock::MmapRead => mmap_read_unlock(w, mm, fx),
        FaultLock::None | FaultLock::WaitMmapRead => {}
    }
}
