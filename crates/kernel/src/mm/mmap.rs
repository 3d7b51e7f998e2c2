//! mm/mmap.c, mm/vma.c: `munmap`, with `free_pgtables`; and the hugetlb
//! unmap path with `huge_pmd_unshare` (mm/hugetlb.c).

use crate::effects::{Effects, Label};
use crate::hw::memory_model as mo;
use crate::mm::memory::unmap_page_range_step;
use crate::mm::mmu_gather::{
    tlb_end_vma, tlb_finish_mmu, tlb_finish_mmu_free, tlb_flush_mmu_free_task,
    tlb_flush_mmu_tlbonly, tlb_gather_mmu, tlb_remove_table_sync,
};
use crate::world::{Flow, TaskState, Vma, World};
use crate::TaskId;
use machine::mem::{pte, table_index};
use machine::{Cost, CpuId, HPAGE_SIZE};

pub use crate::mm::mmap_lock::mmap_write_unlock;
use crate::mm::mmap_lock::{
    mmap_lock_sleeping, mmap_read_lock, mmap_read_unlock, mmap_write_downgrade, mmap_write_lock,
    vma_start_write, vma_start_write_free,
};

/// 1 GiB: the range one PMD table maps (`PUD_SIZE`).
pub const PUD_SIZE: u64 = 1 << PUD_SHIFT;
/// `PUD_SHIFT`.
pub const PUD_SHIFT: u32 = 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `do_vmi_munmap`: `mmap_write_lock`, `vma_start_write` of the VMAs
    /// in range (`exit_mmap`: `mmap_read_lock`).
    Enter,
    /// Queued in `mmap_write_lock` (`exit_mmap`: `mmap_read_lock`): a
    /// writer tries again when woken, a reader holds it once granted.
    LockWait,
    /// `__vma_enter_locked`: wait for the VMAs' readers; then detach the
    /// VMAs, `tlb_gather_mmu`.
    VmaWait,
    /// `unmap_vmas` → `zap_pte_range` (or `__unmap_hugepage_range`), one table per step.
    Zap(u64),
    /// `free_pgtables`: unhook PTE tables no VMA needs any more.
    FreePgtables,
    /// `tlb_finish_mmu` → `tlb_flush`.
    Flush,
    /// `tlb_flush_unshared_tables`: `tlb_remove_table_sync_one` if a table
    /// was fully unshared.
    Sync,
    /// `tlb_flush_mmu_free`.
    Free,
    /// The batches ran out mid-zap: `tlb_flush_mmu`'s flush, then zap on from here.
    BatchFlush(u64),
    /// `tlb_flush_mmu`'s free of the full batches.
    BatchFree(u64),
    /// `tlb_end_vma` at a VMA boundary; the next VMA starts here.
    EndVma(u64),
}

/// `munmap(start, len)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Munmap {
    pub start: u64,
    pub end: u64,
    /// The range was a hugetlbfs mapping.
    pub hugetlb: bool,
    /// `exit_mmap`'s `tlb_gather_mmu_fullmm`: the whole mm goes.
    pub fullmm: bool,
    /// Ends of the detached VMAs inside the range (`unmap_vmas` walks them
    /// one by one, `tlb_end_vma` after each).
    pub vma_ends: Vec<u64>,
    pub pc: Pc,
}

impl Munmap {
    pub fn new(start: u64, len: u64) -> Self {
        Munmap {
            start,
            end: start + len,
            hugetlb: false,
            fullmm: false,
            vma_ends: Vec::new(),
            pc: Pc::Enter,
        }
    }

    /// mm/mmap.c: `exit_mmap` of an mm whose mappings are `[start, start +
    /// len)`: the same teardown under a `fullmm` gather (`TLB_FLUSH_ALL`).
    pub fn exit_mmap(start: u64, len: u64) -> Self {
        Munmap {
            fullmm: true,
            ..Self::new(start, len)
        }
    }

    /// Can the next step run: not asleep in `mmap_write_lock` (`exit_mmap`:
    /// `mmap_read_lock`), then no reader left in the VMAs in range, the
    /// hugetlbfs file's `i_mmap_lock_write` before zapping.
    pub fn can_run(&self, w: &World, task: TaskId) -> bool {
        let mm = w.tasks[task as usize].mm;
        match self.pc {
            Pc::LockWait => !mmap_lock_sleeping(w, mm, task),
            Pc::VmaWait => self.fullmm || vma_start_write_free(w, mm, self.start, self.end),
            Pc::Zap(_) if self.hugetlb => !w.hugetlb_i_mmap_rwsem.sleeping(task),
            _ => true,
        }
    }

    /// mm/vma.c: `do_vmi_align_munmap` → `vms_complete_munmap_vmas` → `unmap_region`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        if matches!(self.pc, Pc::LockWait | Pc::VmaWait) && !self.can_run(w, task) {
            // mmap_write_lock / vma_start_write sleep.
            return Flow::Block;
        }
        match self.pc {
            Pc::Enter => {
                fx.cost(Cost::SyscallEntryExit, 1);
                fx.cost(Cost::MunmapFixed, 1);
                fx.label(Label::Syscall { nr: "munmap" });
                self.pc = Pc::LockWait;
                // exit_mmap: mmap_read_lock around unmap_vmas (the model
                // keeps it through free_pgtables too).
                let held = if self.fullmm {
                    mmap_read_lock(w, mm, task, fx)
                } else {
                    mmap_write_lock(w, mm, task, fx)
                };
                if !held {
                    return Flow::Block;
                }
                self.locked(w, mm, fx)
            }
            Pc::LockWait => {
                // A reader was granted the lock; a woken writer tries again.
                if !self.fullmm && !mmap_write_lock(w, mm, task, fx) {
                    return Flow::Block;
                }
                self.locked(w, mm, fx)
            }
            Pc::VmaWait => {
                self.detach_vmas(&mut w.mms[mm as usize].vmas);
                if !self.fullmm {
                    // vms_complete_munmap_vmas: mmap_write_downgrade, then
                    // the page tables are zapped under the read lock.
                    mmap_write_downgrade(w, mm, fx);
                }
                tlb_gather_mmu(w, task, mm, self.fullmm);
                self.pc = Pc::Zap(self.start);
                Flow::Continue
            }
            Pc::Zap(addr) => self.zap_step(w, task, addr, fx),
            Pc::BatchFlush(next) => {
                self.pc = Pc::BatchFree(next);
                tlb_flush_mmu_tlbonly(w, task, fx)
            }
            Pc::BatchFree(next) => {
                tlb_flush_mmu_free_task(w, task, fx);
                self.pc = Pc::Zap(next);
                Flow::Yield
            }
            Pc::EndVma(next) => {
                self.pc = Pc::Zap(next);
                tlb_end_vma(w, task, fx)
            }
            Pc::FreePgtables => {
                self.pc = Pc::Flush;
                let upper = |w: &mut World| self.fullmm && free_upper_pgtables(w, task);
                if !self.hugetlb && (free_pgtables(w, task, self.start, self.end) | upper(w)) {
                    Flow::Yield
                } else {
                    Flow::Continue
                }
            }
            Pc::Flush => {
                self.pc = Pc::Sync;
                tlb_finish_mmu(w, task, fx)
            }
            Pc::Sync => {
                // tlb_flush_unshared_tables (6.19): the flush above covered
                // every unshare; the sync only when a table was left to its
                // last user, who may now modify and reuse it.
                self.pc = Pc::Free;
                let g = &mut w.tasks[task as usize].gather;
                if std::mem::take(&mut g.fully_unshared_tables) {
                    let mm = g.mm;
                    tlb_remove_table_sync(w, cpu, mm, fx)
                } else {
                    Flow::Continue
                }
            }
            Pc::Free => {
                if self.hugetlb && w.hugetlb_i_mmap_rwsem.writer == Some(task) {
                    // __hugetlb_zap_end: i_mmap_unlock_write.
                    i_mmap_unlock_write(w, fx);
                }
                tlb_finish_mmu_free(w, task, fx);
                mmap_read_unlock(w, mm, fx);
                Flow::Return
            }
        }
    }
}

impl Munmap {
    /// `mmap_lock` taken: `vms_gather_munmap_vmas`' `vma_start_write` of
    /// each VMA in range (munmap), then wait for their readers.
    fn locked(&mut self, w: &mut World, mm: crate::MmId, fx: &mut Effects) -> Flow {
        if !self.fullmm {
            vma_start_write(w, mm, self.start, self.end, fx);
        }
        self.pc = Pc::VmaWait;
        Flow::Continue
    }

    /// mm/vma.c: `vms_gather_munmap_vmas`: the VMAs in `[start, end)` leave
    /// the mm; one straddling an end is split (`__split_vma`) and keeps its
    /// outer part. Records the ends inside the range and any hugetlb VMA.
    fn detach_vmas(&mut self, vmas: &mut Vec<Vma>) {
        let (s, e) = (self.start, self.end);
        // A VMA holding the whole range splits in three: its upper part
        // goes right after its lower one (`kept`: where that one lands).
        let mut upper = None;
        let mut kept = 0;
        vmas.retain_mut(|v| {
            let keep = if v.end <= s || v.start >= e {
                true
            } else {
                self.hugetlb |= v.hugetlb;
                if v.end < e {
                    self.vma_ends.push(v.end);
                }
                if v.start < s && v.end > e {
                    upper = Some((
                        kept + 1,
                        Vma {
                            start: e,
                            ..v.clone()
                        },
                    ));
                }
                if v.start < s {
                    v.end = s;
                } else if v.end > e {
                    v.start = e;
                }
                v.start < s || v.end > e
            };
            kept += keep as usize;
            keep
        });
        if let Some((i, v)) = upper {
            vmas.insert(i, v);
        }
        self.vma_ends.sort_unstable();
    }

    /// `unmap_vmas` → `unmap_single_vma`: zap one table's worth (up to the
    /// VMA's end), then flush mid-way if the batches are full
    /// (`zap_pte_range`'s `force_flush` → `tlb_flush_mmu`; the model checks
    /// once per table) or go through `tlb_end_vma` at a VMA's end.
    fn zap_step(&mut self, w: &mut World, task: TaskId, addr: u64, fx: &mut Effects) -> Flow {
        if addr >= self.end {
            self.pc = Pc::FreePgtables;
            return Flow::Continue;
        }
        let stop = self
            .vma_ends
            .iter()
            .copied()
            .find(|&e| e > addr)
            .unwrap_or(self.end);
        let next = if self.hugetlb {
            // __hugetlb_zap_begin: i_mmap_lock_write (queued: asleep
            // until woken, then again).
            if w.hugetlb_i_mmap_rwsem.writer != Some(task) && !i_mmap_lock_write(w, task, fx) {
                return Flow::Block;
            }
            unmap_hugepage_range(w, task, addr, stop, fx)
        } else {
            unmap_page_range_step(w, task, addr, stop, fx)
        };
        self.pc = if next < self.end && w.tasks[task as usize].gather.batch_full() {
            Pc::BatchFlush(next)
        } else if next == stop && stop < self.end {
            Pc::EndVma(next)
        } else {
            Pc::Zap(next)
        };
        Flow::Yield
    }
}

/// kernel/exit.c: `exit_mm` → kernel/fork.c `mmput` → mm/mmap.c
/// `exit_mmap` (read in CachyOS/linux `06b47f69`, 6.18-class), when task
/// `t` is the last user of its mm (`mm_users` drops to 0): a `fullmm`
/// gather over every VMA (`unmap_vmas`), `free_pgtables` (each PTE table
/// through `pte_free_tlb` → `tlb_remove_table`, RCU-freed), and
/// `tlb_finish_mmu` → `tlb_flush` (x86: `flush_tlb_mm_range(mm, 0,
/// TLB_FLUSH_ALL, .., freed_tables)`, which IPIs the lazy CPUs that still
/// have the mm loaded; arm64: `flush_tlb_mm`; RISC-V: `flush_tlb_mm`).
/// An mm with no modelled VMA left (a real process still has its text
/// and stack, which the model does not map) still frees the tables its
/// munmaps left above the PTE level. `None` when another task still uses
/// the mm, or it has a hugetlb VMA (the model's unmap takes hugetlb ranges
/// one at a time).
pub fn exit_mm(w: &mut World, t: TaskId) -> Option<Munmap> {
    let task = &w.tasks[t as usize];
    let mm = task.mm;
    if task.us.sub != 0 || mm == crate::INIT_MM || !last_user(w, t) {
        return None;
    }
    let vmas = &w.mms[mm as usize].vmas;
    if vmas.iter().any(|v| v.hugetlb) {
        return None;
    }
    let start = vmas.iter().map(|v| v.start).min().unwrap_or(0);
    let end = vmas.iter().map(|v| v.end).max().unwrap_or(0);
    w.tasks[t as usize].us.sub = 1;
    Some(Munmap::exit_mmap(start, end - start))
}

/// kernel/fork.c: `mmput`'s `atomic_dec_and_test(&mm->mm_users)`: no other
/// task that has not exited uses task `t`'s mm. (The model counts `t` down
/// at `do_exit`'s end, so two tasks of one mm exiting together both see
/// the other.)
pub fn last_user(w: &World, t: TaskId) -> bool {
    let mm = w.tasks[t as usize].mm;
    let users = *w.mms[mm as usize].mm_users;
    let me = machine::footprint::paused(|| w.tasks[t as usize].state != TaskState::Exited);
    debug_assert_eq!(
        users as usize,
        machine::footprint::paused(|| {
            let live = |u: &crate::world::Task| u.state != TaskState::Exited;
            w.tasks.iter().filter(|u| u.mm == mm && live(u)).count()
        }),
        "mm{mm}'s mm_users"
    );
    users == u32::from(me)
}

/// include/linux/fs.h: `i_mmap_lock_write` → `down_write` of the
/// hugetlbfs file's `i_mmap_rwsem` ([`crate::locking::rwsem`]); a call by
/// a queued writer (woken) is its next try. True: `task` holds it.
fn i_mmap_lock_write(w: &mut World, task: TaskId, fx: &mut Effects) -> bool {
    crate::mm::mmap_lock::down_write(w, task, |w| &mut w.hugetlb_i_mmap_rwsem, fx)
}

/// include/linux/fs.h: `i_mmap_unlock_write` → `up_write`: the waiter at
/// the head is woken; every CPU running a task re-checks (the unmappers
/// are tasks of different mms).
fn i_mmap_unlock_write(w: &mut World, fx: &mut Effects) {
    let j = crate::locking::rwsem::jiffies(w.now);
    w.hugetlb_i_mmap_rwsem.up_write(j, &mut |_| {});
    for c in &w.cpus {
        if c.curr.is_some() {
            fx.wake(c.id);
        }
    }
}

/// mm/memory.c: `free_pgtables` → `free_pgd_range` (PTE level only): unhook
/// each PTE table of `[start, end)` that no remaining VMA overlaps and hand it
/// to the gather (`pte_free_tlb`). Returns whether any table was unhooked.
fn free_pgtables(w: &mut World, task: TaskId, start: u64, end: u64) -> bool {
    let mm = w.tasks[task as usize].mm;
    let mut any = false;
    let mut region = start & !(HPAGE_SIZE - 1);
    while region < end {
        let (rs, re) = (region, region + HPAGE_SIZE);
        let used = w.mms[mm as usize]
            .vmas
            .iter()
            .any(|v| v.start < re && v.end > rs);
        if !used {
            // The PTE table (`pte_table`'s walk) and the PMD table holding it.
            let pmd = crate::mm::gup::read_pmd(w, mm, region)
                .filter(|&(_, e)| pte::present(e) && !pte::huge(e));
            if let Some((pmd_table, e)) = pmd {
                let t = pte::pfn(e);
                if w.mem.table_empty(t) {
                    let loc = mo::Loc::PageTable {
                        table: pmd_table,
                        index: table_index(region, 2),
                    };
                    mo::write_direct(w, w.tasks[task as usize].cpu, loc, 0);
                    w.tasks[task as usize].gather.remove_table(t, region);
                    any = true;
                }
            }
        }
        region = re;
    }
    any
}

/// mm/memory.c: `free_pgtables` → `free_pgd_range` → `free_pud_range` /
/// `free_pmd_range` above the PTE level, for `exit_mmap` (no VMA left, so
/// floor and ceiling allow every level): each PMD table, then each PUD
/// table, left empty is unhooked and handed to the gather (`pmd_free_tlb`,
/// `pud_free_tlb` → `tlb_remove_table`, freed after the flush and an RCU
/// grace period). The PGD stays until `__mmdrop` (not modelled). Returns
/// whether any table was unhooked.
fn free_upper_pgtables(w: &mut World, task: TaskId) -> bool {
    let mm = w.tasks[task as usize].mm;
    let pgd = *w.mms[mm as usize].pgd;
    let mut any = false;
    for i in 0..512u64 {
        let pge = w.mem.read(pgd, i as usize).unwrap_or(0);
        if !pte::present(pge) {
            continue;
        }
        let (pud, region) = (pte::pfn(pge), i << 39);
        for j in 0..512u64 {
            let e = w.mem.read(pud, j as usize).unwrap_or(0);
            if pte::present(e) && !pte::huge(e) && w.mem.table_empty(pte::pfn(e)) {
                w.mem.write(pud, j as usize, 0);
                let g = &mut w.tasks[task as usize].gather;
                g.remove_pmd_table(pte::pfn(e), region + (j << PUD_SHIFT));
                any = true;
            }
        }
        if w.mem.table_empty(pud) {
            w.mem.write(pgd, i as usize, 0);
            w.tasks[task as usize].gather.remove_pud_table(pud, region);
            any = true;
        }
    }
    any
}

/// The PUD table of `va` in `mm`, if the PGD entry exists.
pub fn pud_table(w: &World, mm: crate::MmId, va: u64) -> Option<machine::Pfn> {
    let e = w.mem.read(*w.mms[mm as usize].pgd, table_index(va, 4))?;
    pte::present(e).then(|| pte::pfn(e))
}

/// mm/hugetlb.c: `__unmap_hugepage_range` for the part of `[addr, end)` in
/// one 1 GiB region. A PMD table still shared with another mm is not touched:
/// `huge_pmd_unshare` drops this mm's PUD entry (`tlb->unshared_tables`).
/// The last user clears the huge PMDs, and frees the table once the whole
/// region is gone. Returns where the next region starts.
pub fn unmap_hugepage_range(
    w: &mut World,
    task: TaskId,
    addr: u64,
    end: u64,
    fx: &mut Effects,
) -> u64 {
    let mm = w.tasks[task as usize].mm;
    let region = addr & !(PUD_SIZE - 1);
    let stop = (region + PUD_SIZE).min(end);
    let Some(pud) = pud_table(w, mm, addr) else {
        return stop;
    };
    let e = w.mem.read(pud, table_index(addr, 3)).unwrap_or(0);
    if !pte::present(e) {
        return stop;
    }
    let table = pte::pfn(e);
    let shared = w.hugetlb_pmds.iter().position(|s| s.table == table);
    let mut tlb = std::mem::take(&mut w.tasks[task as usize].gather);
    match shared {
        Some(i) if w.hugetlb_pmds[i].users > 1 => {
            // huge_pmd_unshare: pud_clear, put the table's share count.
            w.mem.write(pud, table_index(addr, 3), 0);
            w.hugetlb_pmds[i].users -= 1;
            w.counters.pmd_unshares += 1;
            let fully = w.hugetlb_pmds[i].users == 1;
            w.counters.pmd_fully_unshared += fully as u64;
            tlb.unshare_pmd_table(region, fully);
            fx.label(Label::PmdUnshare { mm, table });
        }
        _ => {
            if shared.is_some() {
                crate::mm::mmu_gather::check_unshared_table_reuse(w, mm, table);
            }
            let mut n = 0;
            let mut va = addr & !(HPAGE_SIZE - 1);
            while va < stop {
                let idx = table_index(va, 2);
                let leaf = w.mem.read(table, idx).unwrap_or(0);
                if pte::present(leaf) {
                    w.mem.write(table, idx, 0);
                    tlb.remove_huge_page(pte::pfn(leaf), va);
                    n += 1;
                }
                va += HPAGE_SIZE;
            }
            fx.cost(Cost::ZapPte, n);
            fx.label(Label::ZapPtes {
                mm,
                start: addr,
                end: stop,
                pages: n * 512,
            });
            let still_mapped = w.mms[mm as usize]
                .vmas
                .iter()
                .any(|v| v.start < region + PUD_SIZE && v.end > region);
            if !still_mapped && w.mem.table_empty(table) {
                w.mem.write(pud, table_index(addr, 3), 0);
                if let Some(i) = shared {
                    w.hugetlb_pmds.swap_remove(i);
                }
                tlb.remove_pmd_table(table, region);
            }
        }
    }
    w.tasks[task as usize].gather = tlb;
    stop
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `detach_vmas` (in place) leaves the VMAs, ends and hugetlb flag
    /// that rebuilding the list would: every kind of overlap, including a
    /// VMA split in three.
    #[test]
    fn detach_vmas_matches_a_rebuilt_list() {
        let vma = |start, end, hugetlb| Vma {
            start,
            end,
            writable: true,
            hugetlb,
            file: None,
            vm_write_locked: false,
            vm_readers: 0,
            anon_vma_locked: false,
        };
        let layouts = [
            vec![vma(0x1000, 0x3000, false), vma(0x5000, 0x8000, true)],
            vec![vma(0x1000, 0x9000, false), vma(0xa000, 0xb000, false)],
            vec![
                vma(0x0, 0x2000, false),
                vma(0x2000, 0x4000, false),
                vma(0x4000, 0x6000, false),
            ],
        ];
        for vmas in &layouts {
            for s in (0..0xc000u64).step_by(0x1000) {
                for e in (s + 0x1000..=0xc000).step_by(0x1000) {
                    let mut m = Munmap::new(s, e - s);
                    let mut got = vmas.clone();
                    m.detach_vmas(&mut got);
                    // The list rebuilt, VMA by VMA.
                    let (mut kept, mut ends, mut huge) = (Vec::new(), Vec::new(), false);
                    for v in vmas.iter().cloned() {
                        if v.end <= s || v.start >= e {
                            kept.push(v);
                            continue;
                        }
                        huge |= v.hugetlb;
                        if v.end < e {
                            ends.push(v.end);
                        }
                        if v.start < s {
                            kept.push(Vma {
                                end: s,
                                ..v.clone()
                            });
                        }
                        if v.end > e {
                            kept.push(Vma { start: e, ..v });
                        }
                    }
                    ends.sort_unstable();
                    assert_eq!(
                        (got, m.vma_ends, m.hugetlb),
                        (kept, ends, huge),
                        "{s:#x}..{e:#x}"
                    );
                }
            }
        }
    }
}
