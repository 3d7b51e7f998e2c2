//! mm/mmap.c, mm/vma.c: `munmap`, with `free_pgtables`.

use crate::effects::{Effects, Label};
use crate::mm::memory::{pte_table, unmap_page_range_step};
use crate::mm::mmu_gather::{tlb_flush_mmu_free_task, tlb_flush_mmu_tlbonly};
use crate::world::{Flow, Vma, World};
use crate::TaskId;
use machine::mem::{pte, table_index};
use machine::{Cost, CpuId, HPAGE_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `do_vmi_munmap`: detach the VMAs, `tlb_gather_mmu`.
    Enter,
    /// `unmap_vmas` → `zap_pte_range`, one PTE table per step.
    Zap(u64),
    /// `free_pgtables`: unhook PTE tables no VMA needs any more.
    FreePgtables,
    /// `tlb_finish_mmu` → `tlb_flush`.
    Flush,
    /// `tlb_flush_mmu_free`.
    Free,
}

/// `munmap(start, len)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Munmap {
    pub start: u64,
    pub end: u64,
    pub pc: Pc,
}

impl Munmap {
    pub fn new(start: u64, len: u64) -> Self {
        Munmap {
            start,
            end: start + len,
            pc: Pc::Enter,
        }
    }

    /// mm/vma.c: `do_vmi_align_munmap` → `vms_complete_munmap_vmas` → `unmap_region`.
    pub fn step(&mut self, w: &mut World, _cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        match self.pc {
            Pc::Enter => {
                fx.cost(Cost::SyscallEntryExit, 1);
                fx.cost(Cost::MunmapFixed, 1);
                fx.label(Label::Syscall { nr: "munmap" });
                let (s, e) = (self.start, self.end);
                let vmas = &mut w.mms[mm as usize].vmas;
                let mut kept = Vec::with_capacity(vmas.len() + 1);
                for v in vmas.drain(..) {
                    if v.end <= s || v.start >= e {
                        kept.push(v);
                        continue;
                    }
                    if v.start < s {
                        kept.push(Vma {
                            start: v.start,
                            end: s,
                            writable: v.writable,
                        });
                    }
                    if v.end > e {
                        kept.push(Vma {
                            start: e,
                            end: v.end,
                            writable: v.writable,
                        });
                    }
                }
                *vmas = kept;
                w.tasks[task as usize].gather.tlb_gather_mmu(mm);
                self.pc = Pc::Zap(self.start);
                Flow::Continue
            }
            Pc::Zap(addr) => {
                if addr >= self.end {
                    self.pc = Pc::FreePgtables;
                    return Flow::Continue;
                }
                let next = unmap_page_range_step(w, task, addr, self.end, fx);
                self.pc = Pc::Zap(next);
                Flow::Yield
            }
            Pc::FreePgtables => {
                self.pc = Pc::Flush;
                if free_pgtables(w, task, self.start, self.end) {
                    Flow::Yield
                } else {
                    Flow::Continue
                }
            }
            Pc::Flush => {
                self.pc = Pc::Free;
                tlb_flush_mmu_tlbonly(w, task, fx)
            }
            Pc::Free => {
                tlb_flush_mmu_free_task(w, task, fx);
                Flow::Return
            }
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
            if let Some(t) = pte_table(w, mm, region) {
                if w.mem.table_empty(t) {
                    let pmd = pmd_table(w, mm, region);
                    w.mem.write(pmd, table_index(region, 2), 0);
                    w.tasks[task as usize].gather.remove_table(t, region);
                    any = true;
                }
            }
        }
        region = re;
    }
    any
}

/// The PMD table of `va` (which must exist).
fn pmd_table(w: &World, mm: crate::MmId, va: u64) -> machine::Pfn {
    let mut table = w.mms[mm as usize].pgd;
    for level in [4u8, 3] {
        table = pte::pfn(
            w.mem
                .read(table, table_index(va, level))
                .expect("upper table present"),
        );
    }
    table
}
