//! `struct mmu_gather` (mm/mmu_gather.c, include/asm-generic/tlb.h).
//!
//! Unmapping collects the pages (and page-table pages) it took out of the
//! tables; `tlb_flush_mmu` first flushes the TLBs of every CPU that may hold
//! translations (`tlb_flush` → `flush_tlb_mm_range(..., freed_tables)` on
//! x86), and only then frees the batches. Freeing before the flush is the
//! use-after-free the monitor looks for.

use crate::effects::{Effects, Label};
use crate::mm::mmap::PUD_SHIFT;
use crate::world::{Flow, World};
use crate::{MmId, TaskId};
use machine::{Cost, CpuId, Pfn, HPAGE_SHIFT, PAGE_SHIFT, PAGE_SIZE};

/// `MMU_GATHER_BUNDLE`: the pages `struct mmu_gather` holds in its local batch.
pub const MMU_GATHER_BUNDLE: usize = 8;
/// `MAX_GATHER_BATCH`: page pointers in one page-sized `struct
/// mmu_gather_batch` ((4096 - 16) / 8).
pub const MAX_GATHER_BATCH: usize = (4096 - 16) / 8;
/// `MAX_GATHER_BATCH_COUNT`: `10000UL / MAX_GATHER_BATCH` batches at most.
pub const MAX_GATHER_BATCH_COUNT: usize = 10_000 / MAX_GATHER_BATCH;
/// Pages a gather holds before `__tlb_remove_folio_pages_size` reports it
/// full: each batch moves on at `nr >= max - 1` (room is kept for a
/// two-slot page + nr_pages entry, 6.9's "mm/mmu_gather: add
/// __tlb_remove_folio_pages()"), so 7 in the local batch and 509 in each
/// of the 19 page-sized ones: 9,678 pages.
pub const GATHER_CAPACITY: usize =
    (MMU_GATHER_BUNDLE - 1) + MAX_GATHER_BATCH_COUNT * (MAX_GATHER_BATCH - 1);

/// The gather state of one unmap operation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MmuGather {
    pub mm: MmId,
    /// `tlb->start`, `tlb->end`: the range whose translations must go.
    pub start: u64,
    pub end: u64,
    /// `tlb->freed_tables`.
    pub freed_tables: bool,
    /// `tlb->unshared_tables`: a shared hugetlb PMD table was unshared.
    pub unshared_tables: bool,
    /// `tlb->fully_unshared_tables`: an unshare left the table with one
    /// user, who may now modify and reuse it (`tlb_flush_unshared_tables`
    /// syncs only then). Survives `__tlb_reset_range`.
    pub fully_unshared_tables: bool,
    /// `tlb->fullmm`: the whole address space goes (`tlb_gather_mmu_fullmm`,
    /// `exit_mmap`).
    pub fullmm: bool,
    /// `tlb->cleared_ptes`, `cleared_pmds`, `cleared_puds`: which levels
    /// the gather cleared entries at (`tlb_get_unmap_shift`).
    pub cleared_ptes: bool,
    pub cleared_pmds: bool,
    pub cleared_puds: bool,
    /// The page batch (`struct mmu_gather_batch`).
    pub pages: Vec<Pfn>,
    /// Page-table pages to free after the flush (`tlb_remove_table`).
    pub tables: Vec<Pfn>,
    /// `tlb_remove_table_one` (batch page not allocated, no PT_RECLAIM) has
    /// waited for the walkers: free `tables` at once, not after RCU.
    pub tables_synced: bool,
}

impl MmuGather {
    /// `tlb_gather_mmu(tlb, mm)`.
    pub fn tlb_gather_mmu(&mut self, mm: MmId) {
        self.mm = mm;
        self.start = u64::MAX;
        self.end = 0;
        self.freed_tables = false;
        self.unshared_tables = false;
        self.fully_unshared_tables = false;
        self.fullmm = false;
        self.reset_cleared();
        self.pages.clear();
        self.tables.clear();
        self.tables_synced = false;
    }

    /// `tlb_gather_mmu_fullmm(tlb, mm)`: `exit_mmap` tears the whole mm down.
    pub fn tlb_gather_mmu_fullmm(&mut self, mm: MmId) {
        self.tlb_gather_mmu(mm);
        self.fullmm = true;
    }

    /// The `cleared_*` half of `__tlb_reset_range`.
    fn reset_cleared(&mut self) {
        self.cleared_ptes = false;
        self.cleared_pmds = false;
        self.cleared_puds = false;
    }

    /// include/asm-generic/tlb.h: `tlb_get_unmap_shift`: the smallest level
    /// the gather cleared gives the flush stride (PTE 4 KiB, PMD 2 MiB, PUD
    /// 1 GiB); nothing cleared, `PAGE_SHIFT`.
    pub fn tlb_get_unmap_shift(&self) -> u32 {
        if self.cleared_ptes {
            PAGE_SHIFT
        } else if self.cleared_pmds {
            HPAGE_SHIFT
        } else if self.cleared_puds {
            PUD_SHIFT
        } else {
            PAGE_SHIFT
        }
    }

    /// `tlb_remove_tlb_entry` (`tlb_flush_pte_range`: `cleared_ptes`) +
    /// `__tlb_remove_page_size`.
    pub fn remove_page(&mut self, pfn: Pfn, va: u64) {
        self.cleared_ptes = true;
        self.start = self.start.min(va);
        self.end = self.end.max(va + PAGE_SIZE);
        self.pages.push(pfn);
    }

    /// `tlb_remove_pmd_tlb_entry` / `tlb_remove_huge_tlb_entry` of a 2 MiB
    /// page (`tlb_flush_pmd_range`: `cleared_pmds`) +
    /// `tlb_remove_page_size(tlb, page, HPAGE_PMD_SIZE)`: a huge page at `va`.
    pub fn remove_huge_page(&mut self, pfn: Pfn, va: u64) {
        self.cleared_pmds = true;
        self.start = self.start.min(va);
        self.end = self.end.max(va + machine::HPAGE_SIZE);
        self.pages.push(pfn);
    }

    /// `tlb_unshare_pmd_ptdesc`: this mm's PUD no longer points at a shared
    /// PMD table covering `[region, region + 1G)`; `fully` when the table is
    /// now exclusively owned by its last user.
    pub fn unshare_pmd_table(&mut self, region: u64, fully: bool) {
        self.fully_unshared_tables |= fully;
        // tlb_unshare_pmd_ptdesc: tlb_flush_pmd_range(tlb, addr & PUD_MASK, PUD_SIZE).
        self.cleared_pmds = true;
        self.start = self.start.min(region);
        self.end = self.end.max(region + crate::mm::mmap::PUD_SIZE);
        self.unshared_tables = true;
    }

    /// `pmd_free_tlb` → `tlb_flush_pud_range(tlb, address, PAGE_SIZE)`: a
    /// PMD table covering `[region, region + 1G)`; the range grows by one
    /// page (`freed_tables` makes the flush reach the walk caches).
    pub fn remove_pmd_table(&mut self, pfn: Pfn, region: u64) {
        self.cleared_puds = true;
        self.start = self.start.min(region);
        self.end = self.end.max(region + PAGE_SIZE);
        self.freed_tables = true;
        self.tables.push(pfn);
    }

    /// `pud_free_tlb` → `tlb_flush_p4d_range` + `tlb_remove_table`: a PUD
    /// table covering 512 GiB from `region` (no P4D level in the model:
    /// counted as a PUD-level clear).
    pub fn remove_pud_table(&mut self, pfn: Pfn, region: u64) {
        self.remove_pmd_table(pfn, region);
    }

    /// `pte_free_tlb` → `tlb_flush_pmd_range(tlb, address, PAGE_SIZE)` +
    /// `tlb_remove_table`: a PTE table covering `[va, va + 2M)`; the range
    /// grows by one page only.
    pub fn remove_table(&mut self, pfn: Pfn, va: u64) {
        self.cleared_pmds = true;
        self.start = self.start.min(va);
        self.end = self.end.max(va + PAGE_SIZE);
        self.freed_tables = true;
        self.tables.push(pfn);
    }

    /// Is there anything to flush? (`tlb_flush_mmu_tlbonly`'s test: a level
    /// was cleared, which sets the range; or a nested gather's escalation,
    /// `fullmm` with `freed_tables`.)
    pub fn needs_flush(&self) -> bool {
        self.end > self.start || (self.fullmm && self.freed_tables)
    }

    /// `__tlb_remove_page_size` returned true: every batch is full
    /// (`tlb_next_batch` refuses past `MAX_GATHER_BATCH_COUNT`).
    pub fn batch_full(&self) -> bool {
        self.pages.len() >= GATHER_CAPACITY
    }

    /// `__tlb_reset_range` after `tlb_flush_mmu_tlbonly`: the range, the
    /// cleared levels and `freed_tables` start over (the batches stay).
    pub fn reset_range(&mut self) {
        self.start = u64::MAX;
        self.end = 0;
        self.freed_tables = false;
        self.reset_cleared();
    }
}

/// mm/mmu_gather.c: `tlb_flush_mmu_free` → `tlb_batch_pages_flush` and
/// `tlb_table_flush`: free what the gather collected. Must run after the flush.
pub fn tlb_flush_mmu_free(w: &mut World, tlb: &mut MmuGather, fx: &mut Effects) {
    free_batches(w, tlb, fx);
    tlb.start = u64::MAX;
    tlb.end = 0;
    tlb.freed_tables = false;
    tlb.unshared_tables = false;
    tlb.reset_cleared();
}

/// Free the page and table batches (keeping the range to flush).
pub fn free_batches(w: &mut World, tlb: &mut MmuGather, fx: &mut Effects) {
    if let Some(&first) = tlb.pages.first() {
        fx.label(Label::FreePages {
            n: tlb.pages.len() as u32,
            first,
        });
    }
    fx.cost(Cost::FreePage, tlb.pages.len() as u32);
    let mem = &mut *w.mem;
    for pfn in tlb.pages.drain(..) {
        mem.put_page(pfn);
    }
    if !tlb.tables.is_empty() {
        fx.cost(Cost::FreeTable, tlb.tables.len() as u32);
        let tables = std::mem::take(&mut tlb.tables);
        if std::mem::take(&mut tlb.tables_synced) {
            // __tlb_remove_table_one (!PT_RECLAIM): after the sync, at once.
            free_tables(w, tlb.mm, &tables, fx);
        } else {
            tlb_remove_table_free(w, tlb.mm, tables, fx);
        }
    }
}

/// mm/mmu_gather.c: `tlb_remove_table_free` → `call_rcu(tlb_remove_table_rcu)`:
/// the pages wait for every CPU that is inside an RCU read-side section now
/// (IRQs or preemption off, e.g. a GUP-fast walk, or a vCPU preempted in one).
pub fn tlb_remove_table_free(w: &mut World, mm: MmId, tables: Vec<Pfn>, fx: &mut Effects) {
    match rcu_readers(w, None) {
        None => free_tables(w, mm, &tables, fx),
        Some(waiting) => w.rcu_batches.push(crate::world::RcuBatch {
            mm,
            tables,
            waiting,
            waiter: None,
        }),
    }
}

/// The CPUs (other than `except`) in an RCU read-side section now (IRQs or
/// preemption off), if any. Asks each CPU only when some CPU is in one
/// ([`World::any_cpu_atomic`]).
fn rcu_readers(w: &World, except: Option<CpuId>) -> Option<machine::CpuMask> {
    if !w.any_cpu_atomic() {
        return None;
    }
    let mut waiting = machine::CpuMask::new(w.cpus.len());
    for c in w.cpus.iter().filter(|c| Some(c.id) != except) {
        if c.irqs_off > 0 || c.preempt_count > 0 {
            waiting.set(c.id);
        }
    }
    (!waiting.is_empty()).then_some(waiting)
}

/// `rcu_qs` for `cpu`: free every batch no CPU holds back any more.
pub fn rcu_quiescent_state(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    let mut i = 0;
    while i < w.rcu_batches.len() {
        w.rcu_batches[i].waiting.clear(cpu);
        if w.rcu_batches[i].waiting.is_empty() {
            let b = w.rcu_batches.swap_remove(i);
            if let Some(t) = b.waiter {
                // synchronize_rcu() returns: wake the sleeper.
                fx.wake(w.tasks[t as usize].cpu);
                continue;
            }
            w.counters.rcu_table_batches += 1;
            free_tables(w, b.mm, &b.tables, fx);
        } else {
            i += 1;
        }
    }
}

/// `tlb_remove_table_rcu` → `__tlb_remove_table`: the pages go back.
fn free_tables(w: &mut World, mm: MmId, tables: &[Pfn], fx: &mut Effects) {
    for &pfn in tables {
        fx.label(Label::FreeTable { pfn });
        check_table_unreachable(w, mm, pfn);
        w.mem.free(pfn);
    }
}

/// Invariant 3 at the moment a page-table page is freed: no CPU may still
/// hold a paging-structure-cache pointer to it under the ASID it has loaded
/// (lazily or not), or its walker may speculatively read the page after
/// reuse. Any mm counts, not only `mm`: a hugetlb PMD table shared with
/// another mm may be cached through that mm's PUD entry.
fn check_table_unreachable(w: &mut World, mm: MmId, table: Pfn) {
    check_table_uncached(w, table, None, |c| {
        format!("page-table frame {table} of mm{mm} freed while CPU{c}")
    });
}

/// mm/hugetlb.c (seed b's hazard): the last user of a hugetlb PMD table that
/// another mm unshared now changes its entries. Every CPU that cached the
/// table through the other mm's PUD entry must have flushed (the unshare's
/// flush, with lazy CPUs included, switches them to init_mm), or its walker
/// may read this mm's entries as the other mm's, and the table after it is
/// freed.
pub fn check_unshared_table_reuse(w: &mut World, mm: MmId, table: Pfn) {
    check_table_uncached(w, table, Some(mm), |c| {
        format!("hugetlb PMD table frame {table}, unshared by another mm, reused by its last user mm{mm} while CPU{c}")
    });
}

/// Invariant 3: no CPU (other than those with `except` loaded) holds `table`
/// in its paging-structure caches under the ASID it has loaded. A vCPU the
/// host preempted with `KVM_VCPU_FLUSH_TLB` set runs nothing before the
/// host flushes its TLB (`record_steal_time` → `kvm_vcpu_flush_tlb_guest`),
/// so its caches cannot be walked (its software walkers are the RCU
/// grace period's business).
fn check_table_uncached(
    w: &mut World,
    table: Pfn,
    except: Option<MmId>,
    what: impl Fn(CpuId) -> String,
) {
    let holds = |c: &crate::world::Cpu| {
        let flushed_on_entry = c.vcpu_preempted && c.kvm_flush_pending;
        Some(c.tlbstate.loaded_mm) != except
            && !flushed_on_entry
            && c.tlb.psc_holds(c.tlbstate.loaded_mm_asid, table)
    };
    let mut bad: Vec<(CpuId, bool, MmId)> = Vec::new();
    let mut ask = |c: &crate::world::Cpu| {
        if holds(c) {
            bad.push((c.id, c.tlbstate.is_lazy, c.tlbstate.loaded_mm));
        }
    };
    match w.psc_index.0.cpus(table) {
        // Only the CPUs in the row of the table's bucket can hold it.
        Some(cpus) => cpus.for_each(|c| ask(&w.cpus[c])),
        None => w.cpus.iter().for_each(ask),
    }
    debug_assert_eq!(
        bad.iter().map(|b| b.0).collect::<Vec<_>>(),
        machine::footprint::paused(|| w
            .cpus
            .iter()
            .filter(|c| holds(c))
            .map(|c| c.id)
            .collect::<Vec<_>>()),
        "the PSC index missed a CPU"
    );
    for (cpu, lazy, loaded) in bad {
        let msg = format!(
            "{} ({} mm{loaded}) still caches it in its paging-structure cache",
            what(cpu),
            if lazy { "lazy in" } else { "running" }
        );
        w.violation(3, cpu, 0, msg);
    }
}

/// mm/mmu_gather.c: `tlb_flush_mmu` → `tlb_flush_mmu_tlbonly` → `tlb_flush`,
/// the first half: call `flush_tlb_mm_range` for what the gather covered.
/// (The `inject.free_before_flush` bug frees the batches first.)
pub fn tlb_flush_mmu_tlbonly(w: &mut World, task: TaskId, fx: &mut Effects) -> Flow {
    let g = &w.tasks[task as usize].gather;
    if w.cfg.mm.table_batch_alloc_fail && !w.cfg.pt_reclaim && !g.tables.is_empty() {
        return Flow::Call(crate::world::Frame::TlbRemoveTableOne(TlbRemoveTableOne {
            pc: OnePc::Invalidate,
        }));
    }
    if w.cfg.inject.free_before_flush {
        let mut tlb = std::mem::take(&mut w.tasks[task as usize].gather);
        free_batches(w, &mut tlb, fx);
        w.tasks[task as usize].gather = tlb;
    }
    crate::arch::tlb_flush(w, task, fx)
}

/// The second half of `tlb_flush_mmu`, once the flush has returned.
pub fn tlb_flush_mmu_free_task(w: &mut World, task: TaskId, fx: &mut Effects) {
    let mut tlb = std::mem::take(&mut w.tasks[task as usize].gather);
    tlb_flush_mmu_free(w, &mut tlb, fx);
    w.tasks[task as usize].gather = tlb;
}

/// mm/mmu_gather.c: `__tlb_gather_mmu`: start `task`'s gather on `mm` and
/// `inc_tlb_flush_pending(mm)`, which `mm_tlb_flush_nested` counts.
pub fn tlb_gather_mmu(w: &mut World, task: TaskId, mm: crate::MmId, fullmm: bool) {
    let g = &mut w.tasks[task as usize].gather;
    if fullmm {
        g.tlb_gather_mmu_fullmm(mm);
    } else {
        g.tlb_gather_mmu(mm);
    }
    *w.mms[mm as usize].tlb_flush_pending += 1;
}

/// mm/mmu_gather.c: `tlb_finish_mmu`, the flush half: if another gather
/// on this mm is in progress (`mm_tlb_flush_nested`: it may have cleared
/// PTEs this one skipped as already clear, and not flushed them yet), flush
/// the whole mm with `freed_tables` (`tlb->fullmm = 1; tlb->freed_tables =
/// 1`), then `tlb_flush_mmu`. Only x86's `tlb_flush` reads `fullmm`; the
/// other architectures keep the gathered range.
pub fn tlb_finish_mmu(w: &mut World, task: TaskId, fx: &mut Effects) -> Flow {
    let g = &w.tasks[task as usize].gather;
    if *w.mms[g.mm as usize].tlb_flush_pending > 1 {
        let g = &mut w.tasks[task as usize].gather;
        g.fullmm = true;
        g.freed_tables = true;
        fx.label(Label::TlbFlushNested { mm: g.mm });
    }
    tlb_flush_mmu_tlbonly(w, task, fx)
}

/// The end of `tlb_finish_mmu`: free the batches, `dec_tlb_flush_pending`.
pub fn tlb_finish_mmu_free(w: &mut World, task: TaskId, fx: &mut Effects) {
    tlb_flush_mmu_free_task(w, task, fx);
    let mm = w.tasks[task as usize].gather.mm;
    let m = &mut w.mms[mm as usize];
    *m.tlb_flush_pending = m.tlb_flush_pending.saturating_sub(1);
}

/// include/asm-generic/tlb.h / arch/x86/include/asm/tlb.h (seed b):
/// `tlb_table_flush_implies_ipi_broadcast`: did the preceding TLB flush
/// already interrupt every CPU that could be in a lockless walk? On x86 the
/// static key says so only with native flush and no INVLPGB. The forced
/// variant ignores the key (unsafe, for the checker and the monitor).
/// Only x86 overrides the generic `return false` (arm64 and RISC-V keep it:
/// their flushes do not interrupt the walkers).
pub fn tlb_table_flush_implies_ipi_broadcast(w: &World) -> bool {
    let m = &w.cfg.mm;
    let x86_key = w.cfg.arch == machine::scenario::Arch::X86 && w.cfg.tlb_ipi_broadcast_key;
    m.force_skip_table_sync || (m.skip_redundant_table_sync && x86_key)
}

/// mm/mmu_gather.c: `tlb_remove_table_sync_one`: `smp_call_function(
/// tlb_remove_table_smp_sync, NULL, 1)`, an IPI to every other online CPU,
/// counted in the CAL row; with seed (b) it returns early when the flush
/// already implied the broadcast.
pub fn tlb_remove_table_sync_one(w: &mut World, fx: &mut Effects) -> Flow {
    if tlb_table_flush_implies_ipi_broadcast(w) {
        w.counters.table_sync_skipped += 1;
        fx.label(Label::TableSync { ipis: false });
        return Flow::Continue;
    }
    w.counters.table_sync_ipi += 1;
    fx.label(Label::TableSync { ipis: true });
    Flow::Call(crate::world::Frame::SmpCallFunctionManyCond(
        crate::kernel_smp::SmpCallFunctionManyCond::smp_call_function(
            w.cpus.len(),
            crate::kernel_smp::CallFunc::TlbRemoveTableSmpSync,
        ),
    ))
}

/// The sync a page-table operation on `mm` ends with: with seed (b) step 2
/// (`mm.targeted_table_sync`) `tlb_remove_table_sync_mm(mm)`, else
/// `tlb_remove_table_sync_one()`. Step 1's early return comes first in both.
pub fn tlb_remove_table_sync(w: &mut World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> Flow {
    if w.cfg.mm.targeted_table_sync && !tlb_table_flush_implies_ipi_broadcast(w) {
        return tlb_remove_table_sync_mm(w, cpu, mm, fx);
    }
    tlb_remove_table_sync_one(w, fx)
}

/// mm/mmu_gather.c (seed b step 2, the v4 design): `tlb_remove_table_sync_mm`:
/// read every other CPU's `active_lockless_pt_walk_mm` and IPI (and wait for)
/// only those in a lockless walk of `mm`. A walker that publishes after the
/// read must see the cleared PMD: the `smp_mb()` here pairs with the one
/// `gup_fast` runs after publishing (the store-buffering pattern).
pub fn tlb_remove_table_sync_mm(w: &mut World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> Flow {
    use crate::hw::memory_model::{self as mo, Loc, Order};
    if !mo::dropped(w, mo::TLB_REMOVE_TABLE_SYNC_MM_SMP_MB) {
        fx.cost(Cost::LocklessWalkMb, 1);
    }
    mo::barrier(
        w,
        cpu,
        Some(mo::TLB_REMOVE_TABLE_SYNC_MM_SMP_MB),
        Order::Full,
        fx,
    );
    let n = w.cpus.len();
    // One line per other CPU, missed together: the first costs a transfer,
    // the rest overlap with it.
    fx.cost(Cost::CacheLineTransfer, (n > 1) as u32);
    fx.cost(Cost::CacheLineConcurrent, n.saturating_sub(2) as u32);
    let mut mask = machine::CpuMask::new(n);
    for c in (0..n as CpuId).filter(|&c| c != cpu) {
        if mo::read_once(w, cpu, Loc::ActiveLocklessPtWalkMm(c), fx) == mm as u64 + 1 {
            mask.set(c);
        }
        w.cpus[c as usize].walk_line_shared = true;
    }
    w.counters.table_sync_targeted += 1;
    fx.label(Label::TableSyncMm {
        walkers: mask.weight(),
    });
    if mask.is_empty() {
        return Flow::Continue;
    }
    w.counters.table_sync_ipi += 1;
    let mut f = crate::kernel_smp::SmpCallFunctionManyCond::new(
        mask,
        crate::kernel_smp::CallFunc::TlbRemoveTableSmpSync,
        crate::kernel_smp::Cond::Always,
    );
    f.run_local = false;
    Flow::Call(crate::world::Frame::SmpCallFunctionManyCond(f))
}

/// include/asm-generic/tlb.h: `tlb_end_vma`: flush (and reset the range) at
/// each VMA boundary, unless `fullmm` or the architecture selects
/// `MMU_GATHER_MERGE_VMAS` (x86 does, arch/x86/Kconfig; arm64 and RISC-V
/// do not). Returns the flush to call, if any.
pub fn tlb_end_vma(w: &mut World, task: TaskId, fx: &mut Effects) -> Flow {
    let g = &w.tasks[task as usize].gather;
    if g.fullmm || w.cfg.arch == machine::scenario::Arch::X86 {
        return Flow::Continue;
    }
    let flow = crate::arch::tlb_flush(w, task, fx);
    w.tasks[task as usize].gather.reset_range();
    flow
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnePc {
    /// `tlb_table_invalidate`: `tlb_flush_mmu_tlbonly`.
    Invalidate,
    /// `tlb_remove_table_sync_rcu()`.
    Sync,
    /// In `synchronize_rcu()`, asleep.
    Wait,
}

/// mm/mmu_gather.c: `tlb_remove_table` when `__get_free_page(GFP_NOWAIT)`
/// for the batch fails, without `CONFIG_PT_RECLAIM` (7.1 and seed (b)'s
/// base, 1fb3d8c20bfa): `tlb_table_invalidate(tlb)`, then
/// `tlb_remove_table_one` → `__tlb_remove_table_one`:
/// `tlb_remove_table_sync_rcu()`, then the table is freed at once (the
/// gather's free step does it, `tables_synced`). With PT_RECLAIM the
/// fallback is `call_rcu` on the ptdesc, which the batch path already is.
/// The kernel does this at `tlb_remove_table` time, mid-zap; the model at
/// the gather's flush, which then is the invalidate (one flush, not two).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TlbRemoveTableOne {
    pub pc: OnePc,
}

impl TlbRemoveTableOne {
    /// Asleep in `synchronize_rcu()` until its grace period ends.
    pub fn can_run(&self, w: &World, task: TaskId) -> bool {
        self.pc != OnePc::Wait || !w.rcu_batches.iter().any(|b| b.waiter == Some(task))
    }

    /// mm/mmu_gather.c: `tlb_table_invalidate` + `__tlb_remove_table_one`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            OnePc::Invalidate => {
                self.pc = OnePc::Sync;
                crate::arch::tlb_flush(w, task, fx)
            }
            OnePc::Sync => {
                if tlb_remove_table_sync_rcu(w, cpu, task, fx) {
                    self.pc = OnePc::Wait;
                    return Flow::Block;
                }
                w.tasks[task as usize].gather.tables_synced = true;
                Flow::Return
            }
            OnePc::Wait => {
                w.tasks[task as usize].gather.tables_synced = true;
                Flow::Return
            }
        }
    }
}

/// mm/mmu_gather.c: `tlb_remove_table_sync_rcu` = `synchronize_rcu()`: wait
/// for every CPU now in an RCU read-side section (IRQs or preemption off:
/// GUP-fast) to leave it. Seed (b) patch 1/2 returns early when
/// `tlb_table_flush_implies_ipi_broadcast()`. The grace period is priced
/// (`synchronize_rcu`) on the caller. Returns whether the caller must sleep
/// until a reader leaves (the grace period is registered then).
pub fn tlb_remove_table_sync_rcu(
    w: &mut World,
    cpu: CpuId,
    task: TaskId,
    fx: &mut Effects,
) -> bool {
    if tlb_table_flush_implies_ipi_broadcast(w) {
        w.counters.table_sync_rcu_skipped += 1;
        fx.label(Label::TableSyncRcu { skipped: true });
        return false;
    }
    w.counters.table_sync_rcu += 1;
    fx.label(Label::TableSyncRcu { skipped: false });
    fx.cost(Cost::SynchronizeRcu, 1);
    let Some(waiting) = rcu_readers(w, Some(cpu)) else {
        return false;
    };
    let mm = w.tasks[task as usize].gather.mm;
    w.rcu_batches.push(crate::world::RcuBatch {
        mm,
        tables: Vec::new(),
        waiting,
        waiter: Some(task),
    });
    true
}
