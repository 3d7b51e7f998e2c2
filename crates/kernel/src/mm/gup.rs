//! mm/gup.c: GUP-fast, the lockless page-table walker.
//!
//! `gup_fast` disables IRQs for the whole range, walks PGD → PUD → PMD → PTE
//! without any lock, and for each page reads the PTE, grabs the folio
//! (`try_grab_folio_fast`), then re-reads PMD and PTE and backs out if either
//! changed. Disabling IRQs is what makes it safe: whoever unhooks a page
//! table and frees what it mapped must first wait until every CPU has taken
//! an interrupt (the flush IPI or `tlb_remove_table_sync_one`), which a CPU
//! inside this walk cannot do. Without that wait, a walker that read a PTE
//! just before the PMD was cleared can grab a folio that was freed since.

use crate::effects::{Effects, Label};
use crate::world::{Flow, World};
use crate::TaskId;
use machine::mem::{pte, table_index, FrameUse};
use machine::{Cost, CpuId, Pfn, HPAGE_SIZE, PAGE_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `local_irq_save` (first time); `gup_fast_pgd_range` down to the PMD.
    Pmd,
    /// `gup_fast_pte_range`: `ptep_get_lockless`.
    Pte,
    /// `try_grab_folio_fast`, then the PMD/PTE re-check.
    Grab { pfn: Pfn, gen: u32, pte: u64 },
}

/// One `get_user_pages_fast(start, pages)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GupFast {
    pub start: u64,
    pub pages: u32,
    pub done: u32,
    pub irqs_off: bool,
    /// The PMD value and PTE table the walk is going through, with the
    /// table's generation when the PMD was read.
    pub pmd: u64,
    pub table: Pfn,
    pub table_gen: u32,
    pub pc: Pc,
}

impl GupFast {
    pub fn new(start: u64, pages: u32) -> Self {
        GupFast {
            start,
            pages,
            done: 0,
            irqs_off: false,
            pmd: 0,
            table: 0,
            table_gen: 0,
            pc: Pc::Pmd,
        }
    }

    fn va(&self) -> u64 {
        self.start + self.done as u64 * PAGE_SIZE
    }

    fn finish(&mut self, w: &mut World, cpu: CpuId) -> Flow {
        if self.irqs_off {
            // local_irq_restore
            w.cpus[cpu as usize].irqs_off -= 1;
            self.irqs_off = false;
        }
        Flow::Return
    }

    /// mm/gup.c: `gup_fast` → `gup_fast_pgd_range` → `gup_fast_pmd_range` → `gup_fast_pte_range`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        fx.cost(Cost::GupFastWalk, 1);
        let mm = w.tasks[task as usize].mm;
        let va = self.va();
        match self.pc {
            Pc::Pmd => {
                if !self.irqs_off {
                    w.counters.gup_fast += 1;
                    w.cpus[cpu as usize].irqs_off += 1;
                    self.irqs_off = true;
                }
                let pmd = read_pmd(w, mm, va).map_or(0, |(_, p)| p);
                if !pte::present(pmd) {
                    // Nothing mapped: gup_fast stops; the slow path would fault.
                    return self.finish(w, cpu);
                }
                if pte::huge(pmd) {
                    // gup_fast_pmd_leaf: the folio is the huge page itself.
                    grab(
                        w,
                        cpu,
                        va,
                        pte::pfn(pmd),
                        w.mem.gen(pte::pfn(pmd)),
                        "huge PMD",
                    );
                    self.done = self
                        .pages
                        .min(self.done + ((HPAGE_SIZE - (va % HPAGE_SIZE)) / PAGE_SIZE) as u32);
                    return if self.done >= self.pages {
                        self.finish(w, cpu)
                    } else {
                        Flow::Yield
                    };
                }
                self.pmd = pmd;
                self.table = pte::pfn(pmd);
                self.table_gen = w.mem.gen(self.table);
                fx.label(Label::GupFastPmd {
                    va,
                    table: self.table,
                });
                self.pc = Pc::Pte;
                Flow::Yield
            }
            Pc::Pte => {
                let t = self.table;
                if w.mem.gen(t) != self.table_gen || w.mem.usage(t) != FrameUse::Table(1) {
                    let now = match w.mem.usage(t) {
                        FrameUse::Free => "freed",
                        FrameUse::Deposited => "deposited for a huge PMD",
                        _ => "reused",
                    };
                    w.violation(
                        3,
                        cpu,
                        va,
                        format!("GUP-fast on CPU{cpu} read page-table frame {t} for {va:#x} after it was {now} (its walk began before)"),
                    );
                    return self.finish(w, cpu);
                }
                let e = w.mem.read(t, table_index(va, 1)).unwrap_or(0);
                if !pte::present(e) {
                    return self.finish(w, cpu);
                }
                let pfn = pte::pfn(e);
                self.pc = Pc::Grab {
                    pfn,
                    gen: w.mem.gen(pfn),
                    pte: e,
                };
                Flow::Yield
            }
            Pc::Grab { pfn, gen, pte: e } => {
                grab(w, cpu, va, pfn, gen, "PTE");
                let pmd_now = read_pmd(w, mm, va).map_or(0, |(_, p)| p);
                let pte_now = if pmd_now == self.pmd {
                    w.mem.read(self.table, table_index(va, 1))
                } else {
                    None
                };
                let backoff = pmd_now != self.pmd || pte_now != Some(e);
                fx.label(Label::GupFastPte {
                    va,
                    table: self.table,
                    backoff,
                });
                if backoff {
                    // gup_put_folio and give up: the page tables changed under us.
                    w.counters.gup_fast_backoff += 1;
                    return self.finish(w, cpu);
                }
                self.done += 1;
                if self.done >= self.pages {
                    return self.finish(w, cpu);
                }
                self.pc = if self.va().is_multiple_of(HPAGE_SIZE) {
                    Pc::Pmd
                } else {
                    Pc::Pte
                };
                Flow::Yield
            }
        }
    }
}

/// The PMD table and PMD entry of `va` in `mm`, if the upper levels exist.
pub fn read_pmd(w: &World, mm: crate::MmId, va: u64) -> Option<(Pfn, u64)> {
    let mut table = w.mms[mm as usize].pgd;
    for level in [4u8, 3] {
        let e = w.mem.read(table, table_index(va, level))?;
        if !pte::present(e) {
            return None;
        }
        table = pte::pfn(e);
    }
    Some((table, w.mem.read(table, table_index(va, 2))?))
}

/// `try_grab_folio_fast`: the folio must still be the one the entry named
/// when it was read (invariant 1: no reference to a freed or reused page).
fn grab(w: &mut World, cpu: CpuId, va: u64, pfn: Pfn, gen: u32, via: &str) {
    if w.mem.gen(pfn) != gen || w.mem.usage(pfn) != FrameUse::Anon {
        w.violation(
            1,
            cpu,
            va,
            format!("GUP-fast on CPU{cpu} grabbed frame {pfn} for {va:#x} through a {via} read before the frame was freed"),
        );
    }
}
