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
//!
//! Every walk here is `pin_user_pages_fast` (FOLL_PIN, as `O_DIRECT` uses):
//! a page the re-check accepts keeps `GUP_PIN_COUNTING_BIAS` references
//! (1 on a huge folio) in the task's `pins` until [`unpin_user_pages`]. A
//! pinned page's refcount exceeds its mapcount, which is what makes
//! `collapse_huge_page` fail with `SCAN_PAGE_COUNT` (mm/khugepaged.c).
//!
//! Seed (b) step 2 (`mm.targeted_table_sync`, the v4 design): on entry the
//! walk publishes its mm in `per_cpu(active_lockless_pt_walk_mm)`, then
//! `smp_mb()`, then reads the PMD; on exit it clears the variable. The sync
//! then interrupts only CPUs whose variable names the mm. The walk's PMD
//! reads and the collapser's PMD clear go through the checker's store
//! buffers then: "publish; read PMD" against "clear PMD; read the walkers"
//! is the store-buffering pattern.

use crate::effects::{Effects, Label};
use crate::hw::memory_model::{self as mo, Loc, Order};
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
    /// The PMD read was a huge leaf (the folio is the 2 MiB page).
    pub huge: bool,
    /// Seed (b) step 2: `active_lockless_pt_walk_mm` is published.
    pub published: bool,
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
            huge: false,
            published: false,
            pc: Pc::Pmd,
        }
    }

    fn va(&self) -> u64 {
        self.start + self.done as u64 * PAGE_SIZE
    }

    fn finish(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) -> Flow {
        if self.irqs_off {
            if self.published {
                self.published = false;
                // this_cpu_write(active_lockless_pt_walk_mm, NULL): after the
                // last re-check (stores do not pass earlier loads).
                publish(w, cpu, 0, fx);
            }
            // local_irq_restore
            w.local_irq_enable(cpu);
            self.irqs_off = false;
        }
        Flow::Return
    }

    /// mm/gup.c: `gup_fast` → `gup_fast_pgd_range` → `gup_fast_pmd_range` → `gup_fast_pte_range`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        if self.pc == Pc::Pmd && !self.irqs_off {
            // local_irq_save
            w.counters.gup_fast += 1;
            w.local_irq_disable(cpu);
            self.irqs_off = true;
            if w.cfg.mm.targeted_table_sync && !w.cfg.inject.gup_fast_publish_late {
                lockless_pt_walk_begin(w, cpu, mm, fx);
                self.published = true;
                return Flow::Yield;
            }
        } else if w.cfg.mm.targeted_table_sync && !self.published && self.irqs_off {
            // inject.gup_fast_publish_late: the PMD was read in the step
            // before, when the walk was not visible yet.
            lockless_pt_walk_begin(w, cpu, mm, fx);
            self.published = true;
            return Flow::Yield;
        }
        fx.cost(Cost::GupFastWalk, 1);
        let va = self.va();
        match self.pc {
            Pc::Pmd => {
                let (pmd_table, pmd) = gup_read_pmd(w, cpu, mm, va, fx).unwrap_or((0, 0));
                if !pte::present(pmd) {
                    // Nothing mapped: gup_fast stops; the slow path would fault.
                    return self.finish(w, cpu, fx);
                }
                if pte::huge(pmd) {
                    // gup_fast_pmd_leaf: grab the huge folio, then re-check the PMD.
                    self.pmd = pmd;
                    self.huge = true;
                    // The walker keeps its pointer into this PMD table (`pmdp`).
                    self.table = pmd_table;
                    self.table_gen = w.mem.gen(pmd_table);
                    let pfn = pte::pfn(pmd);
                    self.pc = Pc::Grab {
                        pfn,
                        gen: w.mem.gen(pfn),
                        pte: pmd,
                    };
                    return Flow::Yield;
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
                if !self.table_still_valid(w, cpu, va, FrameUse::Table(1)) {
                    return self.finish(w, cpu, fx);
                }
                let e = w.mem.read(t, table_index(va, 1)).unwrap_or(0);
                if !pte::present(e) {
                    return self.finish(w, cpu, fx);
                }
                let pfn = pte::pfn(e);
                self.pc = Pc::Grab {
                    pfn,
                    gen: w.mem.gen(pfn),
                    pte: e,
                };
                Flow::Yield
            }
            Pc::Grab { pfn, gen, pte: e } if self.huge => {
                // try_grab_folio_fast, then `pmd_val(orig) != pmd_val(*pmdp)`:
                // the re-check reads the PMD table through the walker's pointer.
                if !self.table_still_valid(w, cpu, va, FrameUse::Table(2)) {
                    return self.finish(w, cpu, fx);
                }
                let pmd_now = read_pmd_entry(w, cpu, self.table, va, fx);
                if pmd_now != e {
                    w.counters.gup_fast_backoff += 1;
                    return self.finish(w, cpu, fx);
                }
                completed(w, cpu, task, va, pfn, gen, 1);
                let left = ((HPAGE_SIZE - (va % HPAGE_SIZE)) / PAGE_SIZE) as u32;
                self.done = self.pages.min(self.done + left);
                self.huge = false;
                self.pc = Pc::Pmd;
                if self.done >= self.pages {
                    self.finish(w, cpu, fx)
                } else {
                    Flow::Yield
                }
            }
            Pc::Grab { pfn, gen, pte: e } => {
                // try_grab_folio_fast, then the PMD and PTE re-checks; the PTE
                // is re-read through the walker's pointer into the PTE table.
                let pmd_now = gup_read_pmd(w, cpu, mm, va, fx).map_or(0, |(_, p)| p);
                if !self.table_still_valid(w, cpu, va, FrameUse::Table(1)) {
                    return self.finish(w, cpu, fx);
                }
                let pte_now = w.mem.read(self.table, table_index(va, 1));
                let backoff = pmd_now != self.pmd || pte_now != Some(e);
                if !backoff {
                    completed(w, cpu, task, va, pfn, gen, GUP_PIN_COUNTING_BIAS);
                }
                fx.label(Label::GupFastPte {
                    va,
                    table: self.table,
                    backoff,
                });
                if backoff {
                    // gup_put_folio and give up: the page tables changed under us.
                    w.counters.gup_fast_backoff += 1;
                    return self.finish(w, cpu, fx);
                }
                self.done += 1;
                if self.done >= self.pages {
                    return self.finish(w, cpu, fx);
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
    let mut table = *w.mms[mm as usize].pgd;
    for level in [4u8, 3] {
        let e = w.mem.read(table, table_index(va, level))?;
        if !pte::present(e) {
            return None;
        }
        table = pte::pfn(e);
    }
    Some((table, w.mem.read(table, table_index(va, 2))?))
}

/// mm/gup.c (seed b step 2, v4 design): `gup_fast` publishes `mm` in
/// `active_lockless_pt_walk_mm`, then `smp_mb()`: the publication is visible
/// before `gup_fast_pgd_range` reads the PMD. Pairs with
/// `tlb_remove_table_sync_mm`'s `smp_mb()` between clearing the PMD and
/// reading the walkers: without both, each side can miss the other.
fn lockless_pt_walk_begin(w: &mut World, cpu: CpuId, mm: crate::MmId, fx: &mut Effects) {
    publish(w, cpu, mm as u64 + 1, fx);
    if !mo::dropped(w, mo::GUP_FAST_PUBLISH_SMP_MB) {
        fx.cost(Cost::LocklessWalkMb, 1);
    }
    mo::barrier(w, cpu, Some(mo::GUP_FAST_PUBLISH_SMP_MB), Order::Full, fx);
}

/// `this_cpu_write(active_lockless_pt_walk_mm, val)` (0 = NULL, else mm + 1):
/// a store to this CPU's own line, which it must first take back if a
/// syncing CPU read it since.
fn publish(w: &mut World, cpu: CpuId, val: u64, fx: &mut Effects) {
    fx.cost(Cost::LocklessWalkStore, 1);
    if std::mem::take(&mut w.cpus[cpu as usize].walk_line_shared) {
        fx.cost(Cost::LocklessWalkLineReown, 1);
    }
    mo::store(w, cpu, Loc::ActiveLocklessPtWalkMm(cpu), val, fx);
}

/// The walk's read of the PMD of `va`: with step 2 a load through the
/// checker's memory model (the collapser's clear may still be buffered).
fn gup_read_pmd(
    w: &mut World,
    cpu: CpuId,
    mm: crate::MmId,
    va: u64,
    fx: &mut Effects,
) -> Option<(Pfn, u64)> {
    let (table, pmd) = read_pmd(w, mm, va)?;
    if !w.cfg.mm.targeted_table_sync {
        return Some((table, pmd));
    }
    Some((table, read_pmd_entry(w, cpu, table, va, fx)))
}

/// `pmdp_get_lockless(pmdp)` through the walker's pointer into `table`.
fn read_pmd_entry(w: &mut World, cpu: CpuId, table: Pfn, va: u64, fx: &mut Effects) -> u64 {
    let index = table_index(va, 2);
    if w.cfg.mm.targeted_table_sync {
        mo::read_once(w, cpu, Loc::PageTable { table, index }, fx)
    } else {
        w.mem.read(table, index).unwrap_or(0)
    }
}

/// include/linux/mm.h: `GUP_PIN_COUNTING_BIAS`: what one FOLL_PIN adds to
/// a small folio's refcount (a large folio gets 1 and `_pincount` + 1).
pub const GUP_PIN_COUNTING_BIAS: u16 = 1024;

/// A page the walk returns must still be the folio its entry named when
/// read (invariant 1). Grabbing a freed folio and then backing out on the
/// re-check is fine: that is how GUP-fast's speculative reference works.
/// So is the ABA the re-check cannot see and need not: the folio was
/// freed and the same frame mapped again at `va` with an identical entry
/// (arm64, whose broadcast TLBI does not wait for a walker with IRQs off:
/// a zap, the free and a refault all fit in one walk), since the pin is
/// then of the page `va` maps now. The reference `try_grab_folio_fast`
/// took (FOLL_PIN: `refs` = `GUP_PIN_COUNTING_BIAS`, or 1 on a large
/// folio) stays with the caller until it unpins (`unpin_user_pages`).
#[allow(clippy::too_many_arguments)]
fn completed(w: &mut World, cpu: CpuId, task: TaskId, va: u64, pfn: Pfn, gen: u32, refs: u16) {
    let mm = w.tasks[task as usize].mm;
    let same_folio = w.mem.gen(pfn) == gen || maps_now(w, mm, va, pfn);
    if !same_folio || w.mem.usage(pfn) != FrameUse::Anon {
        w.violation(
            1,
            cpu,
            va,
            format!("GUP-fast on CPU{cpu} returned frame {pfn} for {va:#x}, freed since its entry was read"),
        );
        return;
    }
    w.mem.gup_get(pfn, refs);
    w.tasks[task as usize].pins.push((pfn, refs));
    w.counters.gup_pins += 1;
}

/// Does `mm`'s page table map `va` to frame `pfn` now (a huge PMD or a
/// PTE)? Memory as it is, not as a walker may see it: the monitor's view.
fn maps_now(w: &World, mm: crate::MmId, va: u64, pfn: Pfn) -> bool {
    let Some((_, pmd)) = read_pmd(w, mm, va) else {
        return false;
    };
    if !pte::present(pmd) {
        return false;
    }
    if pte::huge(pmd) {
        return pte::pfn(pmd) == pfn;
    }
    let e = w.mem.read(pte::pfn(pmd), table_index(va, 1)).unwrap_or(0);
    pte::present(e) && pte::pfn(e) == pfn
}

/// mm/gup.c: `unpin_user_pages_dirty_lock` → `gup_put_folio` for each page
/// the task pinned: a page no mapping holds any more is freed now.
pub fn unpin_user_pages(w: &mut World, task: TaskId, fx: &mut Effects) {
    let pins = std::mem::take(&mut w.tasks[task as usize].pins);
    // One atomic subtraction on each folio's refcount.
    fx.cost(Cost::AtomicOp, pins.len() as u32);
    for (pfn, refs) in pins {
        w.mem.gup_put(pfn, refs);
    }
}

impl GupFast {
    /// Invariant 3: the page-table page this walk holds a pointer to must not
    /// have been freed or reused since the walk read the entry pointing to it.
    fn table_still_valid(&self, w: &mut World, cpu: CpuId, va: u64, want: FrameUse) -> bool {
        let t = self.table;
        if w.mem.gen(t) == self.table_gen && w.mem.usage(t) == want {
            return true;
        }
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
        false
    }
}
