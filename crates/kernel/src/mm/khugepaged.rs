//! mm/khugepaged.c: collapsing 512 small pages into one PMD-mapped huge page
//! (`MADV_COLLAPSE` and khugepaged), in the kernel's order:
//!
//! ```text
//!  mmap_write_lock → alloc + revalidate → pmdp_collapse_flush (PMD cleared,
//!  2 MiB range flushed by the architecture) → tlb_remove_table_sync_one()
//!  (seed b step 2: tlb_remove_table_sync_mm(mm))
//!  → copy the 512 pages, release them → set the huge PMD → deposit the
//!  old PTE table → mmap_write_unlock
//! ```
//! The sync is what keeps GUP-fast (which takes no lock) from reading the
//! old PTE table after it has been deposited.

use crate::effects::{Effects, Label, Stat};
use crate::hw::memory_model::{self as mo, Loc};
use crate::mm::gup::read_pmd;
use crate::mm::mmu_gather::tlb_remove_table_sync;
use crate::world::{Flow, Frame, World};
use crate::TaskId;
use machine::mem::{pte, table_index, FrameUse};
use machine::{Cost, CpuId, Pfn, HPAGE_SIZE, PTRS_PER_TABLE};

/// `madvise(start, len, MADV_COLLAPSE)` in progress (mm/khugepaged.c: `madvise_collapse`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MadviseCollapse {
    pub next: u64,
    pub end: u64,
    pub entered: bool,
}

impl MadviseCollapse {
    pub fn new(start: u64, len: u64) -> Self {
        MadviseCollapse {
            next: start & !(HPAGE_SIZE - 1),
            end: start + len,
            entered: false,
        }
    }

    /// mm/khugepaged.c: `madvise_collapse`: `collapse_huge_page` for each PMD range.
    pub fn step(&mut self, _w: &mut World, _cpu: CpuId, _task: TaskId, fx: &mut Effects) -> Flow {
        if !self.entered {
            self.entered = true;
            fx.cost(Cost::SyscallEntryExit, 1);
            fx.label(Label::Syscall {
                nr: "madvise(MADV_COLLAPSE)",
            });
        }
        if self.next >= self.end {
            return Flow::Return;
        }
        let addr = self.next;
        self.next += HPAGE_SIZE;
        Flow::Call(Frame::CollapseHugePage(CollapseHugePage::new(addr)))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `mmap_write_lock`, `alloc_charge_folio`, `hugepage_vma_revalidate`.
    Lock,
    /// `pmdp_collapse_flush`.
    Flush,
    /// `tlb_remove_table_sync_one` (step 2: `tlb_remove_table_sync_mm`).
    Sync,
    /// `__collapse_huge_page_copy`.
    Copy,
    /// `set_pmd_at`, `pgtable_trans_huge_deposit`, `mmap_write_unlock`.
    Install,
}

/// `collapse_huge_page(mm, address, ...)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CollapseHugePage {
    pub addr: u64,
    pub pc: Pc,
    pub hpage: Pfn,
    pub table: Pfn,
}

impl CollapseHugePage {
    pub fn new(addr: u64) -> Self {
        CollapseHugePage {
            addr,
            pc: Pc::Lock,
            hpage: 0,
            table: 0,
        }
    }

    /// mm/khugepaged.c: `collapse_huge_page`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        match self.pc {
            Pc::Lock => {
                w.mms[mm as usize].mmap_lock_writer = Some(task);
                let op = w.op_id("collapse_huge_page");
                fx.stat(Stat::OpBegin(task, op));
                fx.cost(Cost::CollapseSetup, 1);
                let table = match read_pmd(w, mm, self.addr) {
                    Some((_, pmd)) if pte::present(pmd) && !pte::huge(pmd) => pte::pfn(pmd),
                    _ => {
                        // SCAN_PMD_NULL / already huge: nothing to collapse.
                        mmap_write_unlock(w, mm, fx);
                        fx.stat(Stat::OpEnd(task, op));
                        return Flow::Return;
                    }
                };
                match w.mem.alloc(FrameUse::Anon) {
                    Ok(h) => self.hpage = h,
                    Err(_) => {
                        mmap_write_unlock(w, mm, fx);
                        fx.stat(Stat::OpEnd(task, op));
                        return Flow::Return;
                    }
                }
                self.table = table;
                self.pc = Pc::Flush;
                Flow::Yield
            }
            Pc::Flush => {
                // pmdp_collapse_flush: pmdp_huge_get_and_clear, then the
                // architecture's flush of the 2 MiB (arch::pmdp_collapse_flush).
                // A 6.1.192 x86 guest shows x86's: lazy CPUs of the
                // collapsing mm take one TLB IPI each.
                let (pmd_table, _) = read_pmd(w, mm, self.addr).expect("PMD level exists");
                set_pmd(w, cpu, pmd_table, self.addr, 0, fx);
                fx.label(Label::PmdpCollapseFlush {
                    va: self.addr,
                    table: self.table,
                });
                self.pc = Pc::Sync;
                crate::arch::pmdp_collapse_flush(w, cpu, mm, self.addr, fx)
            }
            Pc::Sync => {
                self.pc = Pc::Copy;
                tlb_remove_table_sync(w, cpu, mm, fx)
            }
            Pc::Copy => {
                let mut n = 0;
                for i in 0..PTRS_PER_TABLE {
                    let e = w.mem.read(self.table, i).unwrap_or(0);
                    if pte::present(e) {
                        w.mem.write(self.table, i, 0);
                        w.mem.free(pte::pfn(e));
                        n += 1;
                    }
                }
                fx.cost(Cost::CollapseCopyPage, n);
                self.pc = Pc::Install;
                Flow::Yield
            }
            Pc::Install => {
                let (pmd_table, _) = read_pmd(w, mm, self.addr).expect("PMD level exists");
                let huge = pte::make(
                    self.hpage,
                    pte::WRITE | pte::USER | pte::HUGE | pte::ACCESSED | pte::DIRTY,
                );
                set_pmd(w, cpu, pmd_table, self.addr, huge, fx);
                if w.cfg.mm.targeted_table_sync {
                    // mmap_write_unlock below is a locked op (up_write): the
                    // new PMD is visible, and this CPU's own later page-table
                    // reads (which bypass the store buffer) see it.
                    mo::barrier(w, cpu, None, mo::Order::Full, fx);
                }
                // pgtable_trans_huge_deposit: the old PTE table is kept for a later split.
                w.mem.retag(self.table, FrameUse::Deposited);
                w.mms[mm as usize].deposited.push((self.addr, self.table));
                fx.label(Label::CollapseInstall {
                    va: self.addr,
                    hpage: self.hpage,
                    deposited: self.table,
                });
                w.counters.collapses += 1;
                mmap_write_unlock(w, mm, fx);
                let op = w.op_id("collapse_huge_page");
                fx.stat(Stat::OpEnd(task, op));
                Flow::Return
            }
        }
    }
}

use crate::mm::mmap::mmap_write_unlock;

/// Set the PMD of `addr` in `pmd_table`. With seed (b) step 2 the store
/// goes through the checker's store buffer: whether a GUP-fast walker sees
/// the cleared PMD is what the step-2 ordering argument is about (under SC,
/// the simulator's model, it is the same plain write).
fn set_pmd(w: &mut World, cpu: CpuId, pmd_table: Pfn, addr: u64, val: u64, fx: &mut Effects) {
    let index = table_index(addr, 2);
    if w.cfg.mm.targeted_table_sync {
        mo::store(
            w,
            cpu,
            Loc::PageTable {
                table: pmd_table,
                index,
            },
            val,
            fx,
        );
    } else {
        w.mem.write(pmd_table, index, val);
    }
}
