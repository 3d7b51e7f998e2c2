//! mm/migrate.c: page migration between NUMA nodes, as `migrate_pages(2)`
//! (`migratepages PID FROM TO`) runs it: mm/mempolicy.c `do_migrate_pages`
//! → `migrate_to_node` (`queue_pages_range` isolates the folios on the
//! source node) → `migrate_pages(MIGRATE_SYNC)` → `migrate_pages_sync`,
//! whose first try is `migrate_pages_batch(MIGRATE_ASYNC)`: the batched
//! unmap and move this module follows.
//!
//! ```text
//!  isolate    up to NR_MAX_BATCHED_MIGRATION (512) folios on node `from`
//!  unmap      per folio: migrate_folio_unmap → alloc on node `to`,
//!             try_to_migrate_one(TTU_BATCH_FLUSH): migration entry, flush
//!             batched (or ptep_clear_flush without <arch>.batched_unmap)
//!  flush      try_to_unmap_flush()            one arch_tlbbatch_flush
//!  move       per folio: migrate_folio_move → refcount check, folio_copy,
//!             remove_migration_ptes (PTE → new folio), folio_unlock (wakes
//!             migration_entry_wait), the old folio freed
//! ```
//!
//! A thread touching a page under migration faults on the migration entry
//! and sleeps in `migration_entry_wait` until `remove_migration_ptes` ran
//! ([`crate::mm::memory`]).
//!
//! Sources read: torvalds/linux `0003e2a41468` mm/migrate.c
//! (`migrate_pages`, `migrate_pages_batch`, `migrate_pages_sync`,
//! `alloc_migration_target`), mm/rmap.c (`try_to_migrate_one`); the
//! batching is Huang Ying's series in v6.3 (7e12beb8ca2a "migrate_pages:
//! batch flushing TLB", 5dfab109d519 "migrate_pages: batch _unmap and
//! _move").
//!
//! Not modelled: the retry passes (`NR_MAX_MIGRATE_*_RETRY`; a folio whose
//! reference count is not the expected one is restored at once, as after
//! the last pass) and `migrate_pages_sync`'s one-by-one fallback, large
//! folios, file folios, folios mapped more than once (skipped at
//! isolation, as `MPOL_MF_MOVE` does), mmu notifiers, the LRU.

use crate::effects::{Effects, Label};
use crate::mm::memory::pte_table;
use crate::mm::rmap::{try_to_migrate_one, try_to_unmap_flush, TlbflushUnmapBatch};
use crate::world::{Flow, World};
use crate::{MmId, TaskId};
use machine::mem::{pte, table_index, FrameUse};
use machine::{Cost, CpuId, Pfn, PAGE_SIZE};

/// `NR_MAX_BATCHED_MIGRATION` (= `HPAGE_PMD_NR`): folios one
/// `migrate_pages_batch` takes.
pub const NR_MAX_BATCHED_MIGRATION: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// The system call and `mmap_read_lock` of the walk.
    Start,
    /// `queue_pages_range`: isolate the next batch (or return at the end).
    Isolate,
    /// `migrate_folio_unmap` of the next isolated folio.
    Unmap,
    /// `move:` `try_to_unmap_flush()`.
    Flush,
    /// `migrate_folio_move` of the next unmapped folio.
    Move,
}

/// `migrate_pages` of `mm`'s folios in `[next, end)` from node `from` to
/// node `to`, in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MigratePages {
    pub mm: MmId,
    pub next: u64,
    pub end: u64,
    pub from: u8,
    pub to: u8,
    /// The isolated folios (address, frame).
    pub folios: Vec<(u64, Pfn)>,
    /// `unmap_folios` with their `dst_folios`: (address, old, new).
    pub unmapped: Vec<(u64, Pfn, Pfn)>,
    /// The next folio of `folios` (unmap) or `unmapped` (move).
    pub i: usize,
    /// `current->tlb_ubc`.
    pub ubc: TlbflushUnmapBatch,
    pub pc: Pc,
}

impl MigratePages {
    pub fn new(w: &World, mm: MmId, start: u64, end: u64, from: u8, to: u8) -> Self {
        MigratePages {
            mm,
            next: start & !(PAGE_SIZE - 1),
            end,
            from,
            to,
            folios: Vec::new(),
            unmapped: Vec::new(),
            i: 0,
            ubc: TlbflushUnmapBatch::new(w),
            pc: Pc::Start,
        }
    }

    /// mm/migrate.c: `migrate_pages` → `migrate_pages_batch`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, _task: TaskId, fx: &mut Effects) -> Flow {
        let late_flush = w.cfg.inject.migrate_move_before_flush;
        match self.pc {
            Pc::Start => {
                fx.cost(Cost::SyscallEntryExit, 1);
                fx.cost(Cost::ZapFixed, 1);
                fx.label(Label::Syscall {
                    nr: "migrate_pages",
                });
                self.pc = Pc::Isolate;
                Flow::Yield
            }
            Pc::Isolate => self.queue_pages_range(w),
            Pc::Unmap => {
                let Some(&(va, src)) = self.folios.get(self.i) else {
                    self.i = 0;
                    self.pc = if late_flush { Pc::Move } else { Pc::Flush };
                    return Flow::Continue;
                };
                self.i += 1;
                self.migrate_folio_unmap(w, cpu, va, src, fx)
            }
            Pc::Flush => {
                // "Flush TLBs for all unmapped folios".
                self.pc = if late_flush { Pc::Isolate } else { Pc::Move };
                try_to_unmap_flush(w, cpu, &mut self.ubc, fx).unwrap_or(Flow::Continue)
            }
            Pc::Move => {
                let Some(&(va, src, dst)) = self.unmapped.get(self.i) else {
                    self.unmapped.clear();
                    self.pc = if late_flush { Pc::Flush } else { Pc::Isolate };
                    return Flow::Continue;
                };
                self.i += 1;
                migrate_folio_move(w, cpu, self.mm, va, src, dst, fx);
                Flow::Yield
            }
        }
    }

    /// mm/mempolicy.c: `queue_pages_range` → `queue_folios_pte_range`: the
    /// next `NR_MAX_BATCHED_MIGRATION` anonymous folios mapped once on
    /// node `from` (`migrate_pages` cuts its list into batches of that
    /// size). None left: the system call returns.
    fn queue_pages_range(&mut self, w: &World) -> Flow {
        self.folios.clear();
        self.i = 0;
        while self.next < self.end && self.folios.len() < NR_MAX_BATCHED_MIGRATION {
            if let Some(f) = migratable_folio_at(w, self.mm, self.next, self.from) {
                self.folios.push((self.next, f));
            }
            self.next += PAGE_SIZE;
        }
        if self.folios.is_empty() {
            return Flow::Return;
        }
        self.pc = Pc::Unmap;
        Flow::Continue
    }

    /// mm/migrate.c: `migrate_folio_unmap`: allocate the target folio on
    /// node `to` (`alloc_migration_target`), then `try_to_migrate` with
    /// `TTU_BATCH_FLUSH`; a flush that was not batched is returned to run.
    fn migrate_folio_unmap(
        &mut self,
        w: &mut World,
        cpu: CpuId,
        va: u64,
        src: Pfn,
        fx: &mut Effects,
    ) -> Flow {
        let Some(table) = pte_table(w, self.mm, va) else {
            return Flow::Yield;
        };
        fx.cost(Cost::MigrateFolio, 1);
        let Ok(dst) = w.mem.alloc_node(FrameUse::Anon, self.to) else {
            w.violation(0, cpu, va, format!("out of simulated memory at {va:#x}"));
            return Flow::Yield;
        };
        let (idx, mm) = (table_index(va, 1), self.mm);
        let (old, flush) = try_to_migrate_one(w, cpu, &mut self.ubc, mm, table, idx, va, src, fx);
        if old == 0 {
            w.mem.free(dst); // unmapped meanwhile: migrate_folio_undo_dst
            return Flow::Yield;
        }
        fx.cost(Cost::ZapPte, 1);
        self.unmapped.push((va, src, dst));
        flush.unwrap_or(Flow::Yield)
    }
}

/// The anonymous folio `mm` maps once at `va` by a present 4 KiB PTE, if
/// it is on node `from` (`queue_folios_pte_range`: `folio_nid` in the
/// node mask; shared folios skipped without `MPOL_MF_MOVE_ALL`).
fn migratable_folio_at(w: &World, mm: MmId, va: u64, from: u8) -> Option<Pfn> {
    let v = w.mms[mm as usize]
        .vmas
        .iter()
        .find(|v| v.start <= va && va < v.end)?;
    if v.file.is_some() || v.hugetlb {
        return None;
    }
    let e = w.mem.read(pte_table(w, mm, va)?, table_index(va, 1))?;
    let pfn = pte::present(e).then(|| pte::pfn(e))?;
    (w.mem.node(pfn) == from && w.mem.refs(pfn) == 1).then_some(pfn)
}

/// mm/migrate.c: `migrate_folio_move` of `src` (unmapped at `va`) to
/// `dst`: `__folio_migrate_mapping`'s `folio_ref_freeze` against the
/// expected count (a GUP pin fails it: -EAGAIN, and after the last pass
/// `migrate_folio_undo_src` restores the old mapping), `folio_copy`,
/// `remove_migration_ptes`, `folio_unlock`, the old folio freed.
fn migrate_folio_move(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    va: u64,
    src: Pfn,
    dst: Pfn,
    fx: &mut Effects,
) {
    let pinned = w.mem.ref_count(src) != 1;
    if pinned && !w.cfg.inject.migrate_skip_refcount_check {
        remove_migration_ptes(w, mm, va, src, src, fx);
        w.mem.free(dst);
        w.counters.pgmigrate_fail += 1;
        return;
    }
    if pinned {
        migrated_pinned(w, cpu, va, src);
    }
    fx.cost(Cost::MigrateCopyPage, 1);
    if !remove_migration_ptes(w, mm, va, src, dst, fx) {
        w.mem.free(dst); // zapped meanwhile: nothing maps the new folio
    }
    fx.label(Label::MigrateFolioMove {
        va,
        old: src,
        new: dst,
    });
    w.mem.put_page(src);
    w.counters.pgmigrate_success += 1;
}

/// mm/migrate.c: `remove_migration_ptes(src, dst)` → `remove_migration_pte`
/// for the one mapping (`mm`, `va`): the migration entry of `src` becomes
/// a present PTE of `dst` with its write, young and dirty bits; then
/// `folio_unlock` wakes the `migration_entry_wait`ers. Returns whether an
/// entry was found (a zap may have cleared it).
pub fn remove_migration_ptes(
    w: &mut World,
    mm: MmId,
    va: u64,
    src: Pfn,
    dst: Pfn,
    fx: &mut Effects,
) -> bool {
    let idx = table_index(va, 1);
    let e = pte_table(w, mm, va).and_then(|t| Some((t, w.mem.read(t, idx)?)));
    let restored = match e {
        Some((table, e)) if pte::is_migration(e) && pte::pfn(e) == src => {
            w.mem.write(table, idx, pte::from_migration(e, dst));
            true
        }
        _ => false,
    };
    folio_unlock(w, mm, fx);
    restored
}

/// mm/filemap.c: `folio_unlock` → `folio_wake_bit`: wake the tasks sleeping
/// on the folio (in `migration_entry_wait`). They are tasks of `mm`, still
/// current on their CPUs (the model's sleep keeps the CPU).
fn folio_unlock(w: &World, mm: MmId, fx: &mut Effects) {
    w.mms[mm as usize].running.0.for_each(|c| fx.wake(c));
}

/// Invariant 9: migration never moves a folio a GUP pin still holds (the
/// pinner's later writes would go to the freed old frame).
#[cold]
fn migrated_pinned(w: &mut World, cpu: CpuId, va: u64, pfn: Pfn) {
    w.violation(
        9,
        cpu,
        va,
        format!("migration on CPU{cpu} copied and released frame {pfn} at {va:#x} while a GUP pin still holds it: the pinner's later writes are lost"),
    );
}
