//! mm/khugepaged.c: collapsing 512 small pages into one PMD-mapped huge page
//! (`MADV_COLLAPSE` and khugepaged), in the kernel's order (read in
//! torvalds/linux 00f58104202c):
//!
//! ```text
//!  mmap_read_lock → hpage_collapse_scan_pmd (is_refcount_suitable:
//!  SCAN_PAGE_COUNT) → mmap_read_unlock → alloc_charge_folio
//!  → mmap_write_lock → revalidate → vma_start_write → anon_vma_lock_write
//!  → pmdp_collapse_flush (PMD cleared, 2 MiB range flushed by the
//!    architecture: arch::pmdp_collapse_flush)
//!  → tlb_remove_table_sync_one() (seed b step 2: tlb_remove_table_sync_mm)
//!  → __collapse_huge_page_isolate (refcounts again: a GUP-fast pin taken
//!    since the scan fails it: pmd_populate puts the old table back,
//!    anon_vma_unlock_write, out_up_write, the new folio is put)
//!  → anon_vma_unlock_write → copy the 512 pages, release them
//!  → set the huge PMD → deposit the old PTE table → mmap_write_unlock
//! ```
//! The sync is what keeps GUP-fast (which takes no lock) from reading the
//! old PTE table after it has been deposited; after it no walker can pin a
//! page of the range any more, so the isolate's refcounts are final.
use crate::effects::{Effects, Label, Stat};
use crate::hw::memory_model::{self as mo, Loc};
use crate::mm::gup::read_pmd;
use crate::mm::mmu_gather::tlb_remove_table_sync;
use crate::world::{Flow, Frame, World};
use crate::TaskId;
use machine::mem::{pte, table_index, FrameUse};
use machine::{Cost, CpuId, Pfn, HPAGE_SIZE, PAGE_SIZE, PTRS_PER_TABLE};

/// `enum scan_result` (mm/khugepaged.c) values the model produces, with
/// the names the `mm_collapse_huge_page` tracepoint prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanResult {
    /// `SCAN_PMD_NULL`: no PTE table to collapse (or it went away).
    PmdNull,
    /// `SCAN_PAGE_COUNT`: a page's refcount is above its mapcount (a GUP pin).
    PageCount,
    /// `SCAN_ALLOC_HUGE_PAGE_FAIL`.
    AllocHugePageFail,
}

impl ScanResult {
    pub const ALL: [ScanResult; 3] = [
        ScanResult::PmdNull,
        ScanResult::PageCount,
        ScanResult::AllocHugePageFail,
    ];
    /// include/trace/events/huge_memory.h `SCAN_STATUS` names.
    pub fn name(self) -> &'static str {
        match self {
            ScanResult::PmdNull => "pmd_null",
            ScanResult::PageCount => "page_count",
            ScanResult::AllocHugePageFail => "alloc_huge_page_failed",
        }
    }
}

/// `-EAGAIN`.
pub const EAGAIN: i32 = 11;
/// `-ENOMEM`.
pub const ENOMEM: i32 = 12;
/// `-EINVAL`.
pub const EINVAL: i32 = 22;

/// mm/khugepaged.c: `madvise_collapse_errno`.
pub fn madvise_collapse_errno(r: ScanResult) -> i32 {
    match r {
        ScanResult::AllocHugePageFail => -ENOMEM,
        // Resource temporarily unavailable: trying again might succeed.
        ScanResult::PageCount => -EAGAIN,
        ScanResult::PmdNull => -EINVAL,
    }
}

/// `madvise(start, len, MADV_COLLAPSE)` in progress (mm/khugepaged.c: `madvise_collapse`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MadviseCollapse {
    pub next: u64,
    pub end: u64,
    pub entered: bool,
    /// PMD ranges collapsed (or already huge), and the last failure.
    pub thps: u32,
    pub last_fail: Option<ScanResult>,
    /// `lru_add_drain_all`'s `has_work`: the remote CPUs whose drain work
    /// this call still has to `flush_work` (in order).
    pub has_work: Vec<CpuId>,
}

impl MadviseCollapse {
    pub fn new(start: u64, len: u64) -> Self {
        MadviseCollapse {
            next: start & !(HPAGE_SIZE - 1),
            end: start + len,
            entered: false,
            thps: 0,
            last_fail: None,
            has_work: Vec::new(),
        }
    }

    /// mm/khugepaged.c: `madvise_collapse`: `collapse_huge_page` for each
    /// PMD range; a whitelisted failure (`SCAN_PMD_NULL`, `SCAN_PAGE_COUNT`)
    /// goes on with the next range, any other stops. Returns 0 if every
    /// range is huge now, else `madvise_collapse_errno(last_fail)`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        if !self.entered {
            self.entered = true;
            fx.cost(Cost::SyscallEntryExit, 1);
            fx.label(Label::Syscall {
                nr: "madvise(MADV_COLLAPSE)",
            });
            // mmgrab(mm); lru_add_drain_all(): every CPU's batched folios
            // onto the LRU (a folio in a batch holds a reference the scan's
            // is_refcount_suitable would see, and is not PageLRU).
            self.has_work = crate::mm::swap::lru_add_drain_all(w, cpu, fx);
        }
        // lru_add_drain_all's flush_work of each CPU it queued work on.
        while let Some(&c) = self.has_work.first() {
            if !crate::mm::swap::flush_work_wait(w, cpu, task, c, fx) {
                return Flow::Yield;
            }
            self.has_work.remove(0);
        }
        let stop = self.last_fail == Some(ScanResult::AllocHugePageFail);
        if self.next >= self.end || stop {
            // thps == nr_ranges ? 0 : madvise_collapse_errno(last_fail)
            let ret = self.last_fail.map_or(0, madvise_collapse_errno);
            if ret == -EAGAIN {
                w.counters.madv_collapse_eagain += 1;
            }
            w.tasks[task as usize].us.ret = ret;
            return Flow::Return;
        }
        let addr = self.next;
        self.next += HPAGE_SIZE;
        Flow::Call(Frame::CollapseHugePage(CollapseHugePage::new(addr)))
    }
}

/// Hand `collapse_huge_page`'s result to the `madvise_collapse` that called
/// it (the frame under the running one on the task's stack).
fn collapse_result(w: &mut World, task: TaskId, r: Result<(), ScanResult>) {
    if let Err(e) = r {
        w.counters.collapse_fail[ScanResult::ALL.iter().position(|&x| x == e).unwrap_or(0)] += 1;
    }
    if let Some(Frame::MadviseCollapse(m)) = w.tasks[task as usize].kstack.last_mut() {
        match r {
            Ok(()) => m.thps += 1,
            Err(e) => m.last_fail = Some(e),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `mmap_read_lock`, `hpage_collapse_scan_pmd`, `mmap_read_unlock`,
    /// `alloc_charge_folio`.
    Scan,
    /// Queued in the scan's `mmap_read_lock`; the scan once granted it.
    ScanWait,
    /// `mmap_write_lock`, `hugepage_vma_revalidate`, `check_pmd_still_valid`.
    Lock,
    /// Queued in `mmap_write_lock`; tries again when woken.
    LockWait,
    /// `vma_start_write` (waits for the VMA's readers), `anon_vma_lock_write`.
    VmaStartWrite,
    /// `pmdp_collapse_flush`.
    Flush,
    /// `tlb_remove_table_sync_one` (step 2: `tlb_remove_table_sync_mm`).
    Sync,
    /// `__collapse_huge_page_isolate`, `anon_vma_unlock_write`.
    Isolate,
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
    /// The PMD `pmdp_collapse_flush` cleared (`_pmd`), for `pmd_populate`.
    pub orig_pmd: u64,
}

impl CollapseHugePage {
    pub fn new(addr: u64) -> Self {
        CollapseHugePage {
            addr,
            pc: Pc::Scan,
            hpage: 0,
            table: 0,
            orig_pmd: 0,
        }
    }

    /// Can the next step run: not asleep in the scan's `mmap_read_lock`
    /// or in `mmap_write_lock`, then `vma_start_write` (no VMA readers).
    pub fn can_run(&self, w: &World, task: TaskId) -> bool {
        let mm = w.tasks[task as usize].mm;
        match self.pc {
            Pc::ScanWait | Pc::LockWait => !mmap_lock_sleeping(w, mm, task),
            Pc::VmaStartWrite => vma_start_write_free(w, mm, self.addr, self.addr + HPAGE_SIZE),
            _ => true,
        }
    }

    /// mm/khugepaged.c: `collapse_huge_page` (entered from `hpage_collapse_scan_pmd`).
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        if !self.can_run(w, task) {
            // mmap_read_lock / mmap_write_lock / vma_start_write sleep.
            return Flow::Block;
        }
        match self.pc {
            Pc::Scan => {
                let op = w.op_id("collapse_huge_page");
                fx.stat(Stat::OpBegin(task, op));
                if !mmap_read_lock(w, mm, task, fx) {
                    self.pc = Pc::ScanWait;
                    return Flow::Block;
                }
                self.hpage_collapse_scan_pmd(w, task, fx)
            }
            // Granted mmap_read_lock by the unlock that woke it.
            Pc::ScanWait => self.hpage_collapse_scan_pmd(w, task, fx),
            Pc::Lock | Pc::LockWait => {
                if !mmap_write_lock(w, mm, task, fx) {
                    self.pc = Pc::LockWait;
                    return Flow::Block;
                }
                // hugepage_vma_revalidate + check_pmd_still_valid: the PMD
                // still points to the table the scan saw.
                let pmd = read_pmd(w, mm, self.addr).map_or(0, |(_, p)| p);
                if pte::present(pmd) && pte::huge(pmd) {
                    // find_pmd_or_thp_or_none: SCAN_PMD_MAPPED (a racing
                    // collapse got there first); madvise_collapse counts
                    // the range as done.
                    return self.out_up_write(w, task, Ok(()), false, fx);
                }
                if !(pte::present(pmd) && pte::pfn(pmd) == self.table) {
                    return self.out_up_write(w, task, Err(ScanResult::PmdNull), false, fx);
                }
                // vma_start_write: new VMA readers fail from here on;
                // those already in are waited for.
                vma_start_write(w, mm, self.addr, self.addr + HPAGE_SIZE, fx);
                self.pc = Pc::VmaStartWrite;
                if !self.can_run(w, task) {
                    return Flow::Block;
                }
                self.anon_vma_lock_write(w, mm);
                Flow::Yield
            }
            Pc::VmaStartWrite => {
                self.anon_vma_lock_write(w, mm);
                Flow::Yield
            }
            Pc::Flush => {
                // pmdp_collapse_flush: pmdp_huge_get_and_clear, then the
                // architecture's flush of the 2 MiB (arch::pmdp_collapse_flush).
                // A 6.1.192 x86 guest shows x86's: lazy CPUs of the
                // collapsing mm take one TLB IPI each.
                let (pmd_table, pmd) = read_pmd(w, mm, self.addr).expect("PMD level exists");
                self.orig_pmd = pmd;
                set_pmd(w, cpu, pmd_table, self.addr, 0, fx);
                if !w.cfg.mm.targeted_table_sync {
                    // arm64: pmdp_huge_get_and_clear (xchg_relaxed): the
                    // walkers see the clear at the flush's dsb(ishst). (With
                    // the targeted sync the store itself is buffered.)
                    let idx = machine::mem::table_index(self.addr, 2);
                    mo::pte_store_for_walkers(w, cpu, pmd_table, idx, pmd, fx);
                }
                fx.label(Label::PmdpCollapseFlush {
                    va: self.addr,
                    table: self.table,
                });
                self.pc = Pc::Sync;
                crate::arch::pmdp_collapse_flush(w, cpu, mm, self.addr, fx)
            }
            Pc::Sync => {
                self.pc = Pc::Isolate;
                tlb_remove_table_sync(w, cpu, mm, fx)
            }
            Pc::Isolate => self.isolate(w, cpu, task, fx),
            Pc::Copy => {
                self.copy(w, cpu, fx);
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
                // The small folios went back to the LRU through this CPU's
                // batch (6.1 release_pte_page → putback_lru_page, 6.12
                // release_pte_folio → folio_putback_lru: folio_add_lru),
                // and the huge one's folio_add_lru (a large folio) drained
                // it whole.
                crate::mm::swap::folio_add_lru_large(w, cpu);
                mmap_write_unlock(w, mm, fx);
                let op = w.op_id("collapse_huge_page");
                fx.stat(Stat::OpEnd(task, op));
                collapse_result(w, task, Ok(()));
                Flow::Return
            }
        }
    }

    /// mm/khugepaged.c: `hpage_collapse_scan_pmd` under `mmap_read_lock`
    /// (held: taken at `Pc::Scan`) (`find_pmd_or_thp_or_none`,
    /// `is_refcount_suitable` per present page), then
    /// `collapse_huge_page`'s `mmap_read_unlock` and `alloc_charge_folio`;
    /// straight on to `mmap_write_lock`.
    fn hpage_collapse_scan_pmd(&mut self, w: &mut World, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        let op = w.op_id("collapse_huge_page");
        let pmd = read_pmd(w, mm, self.addr).map_or(0, |(_, p)| p);
        let scan = if !pte::present(pmd) {
            Err(ScanResult::PmdNull)
        } else if pte::huge(pmd) {
            // SCAN_PMD_MAPPED: already huge; madvise_collapse counts it done.
            mmap_read_unlock(w, mm, fx);
            fx.cost(Cost::CollapseSetup, 1);
            fx.stat(Stat::OpEnd(task, op));
            collapse_result(w, task, Ok(()));
            return Flow::Return;
        } else {
            self.table = pte::pfn(pmd);
            match first_pinned(w, self.table) {
                Some(_) => Err(ScanResult::PageCount),
                None => Ok(()),
            }
        };
        mmap_read_unlock(w, mm, fx);
        // A scan stopped by a pin costs the walk; any other attempt the
        // set-up the calibration fitted (scan, allocation, locks).
        if scan == Err(ScanResult::PageCount) {
            fx.cost(Cost::CollapseScan, 1);
        } else {
            fx.cost(Cost::CollapseSetup, 1);
        }
        let alloc = scan.and_then(|()| {
            w.mem
                .alloc(FrameUse::Anon)
                .map_err(|_| ScanResult::AllocHugePageFail)
        });
        match alloc {
            Ok(h) => self.hpage = h,
            Err(r) => {
                fx.label(Label::CollapseFailed {
                    va: self.addr,
                    status: r.name(),
                    restored: false,
                });
                fx.stat(Stat::OpEnd(task, op));
                collapse_result(w, task, Err(r));
                return Flow::Return;
            }
        }
        self.pc = Pc::Lock;
        Flow::Continue
    }

    /// The VMA's readers gone (`vma_start_write` done):
    /// `anon_vma_lock_write(vma->anon_vma)`.
    fn anon_vma_lock_write(&mut self, w: &mut World, mm: crate::MmId) {
        set_anon_vma_locked(w, mm, self.addr, true);
        self.pc = Pc::Flush;
    }

    /// mm/khugepaged.c: `__collapse_huge_page_isolate` after the sync: every
    /// page's refcount must equal its mapcount (`is_refcount_suitable`);
    /// else the PMD is put back (`pmd_populate(mm, pmd, pmd_pgtable(_pmd))`).
    fn isolate(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        set_anon_vma_locked(w, mm, self.addr, false);
        if first_pinned(w, self.table).is_some() {
            let (pmd_table, _) = read_pmd(w, mm, self.addr).expect("PMD level exists");
            set_pmd(w, cpu, pmd_table, self.addr, self.orig_pmd, fx);
            if w.cfg.mm.targeted_table_sync {
                // pmd_populate under the PMD lock, then mmap_write_unlock:
                // both releases. The restored PMD is in memory before the
                // lock is free (as after the install below): a fault that
                // takes the lock next finds it, not the cleared entry.
                mo::barrier(w, cpu, None, mo::Order::Full, fx);
            }
            w.counters.collapse_pmd_restored += 1;
            return self.out_up_write(w, task, Err(ScanResult::PageCount), true, fx);
        }
        self.pc = Pc::Copy;
        Flow::Continue
    }

    /// `__collapse_huge_page_copy` → `__collapse_huge_page_copy_succeeded`:
    /// clear each PTE, `folio_remove_rmap_pte`, `free_folio_and_swap_cache`
    /// (a `folio_put`: a page still pinned survives it, without its data).
    fn copy(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) {
        let mut n = 0;
        // Pages still pinned, for invariant 9 (checked before each
        // release: a release leaves a page's GUP references as they were).
        let mut pinned = Vec::new();
        let mem = &mut *w.mem;
        for i in 0..PTRS_PER_TABLE {
            let e = mem.read(self.table, i).unwrap_or(0);
            if pte::present(e) {
                let pfn = pte::pfn(e);
                if mem.ref_count(pfn) != mem.refs(pfn) as u32 {
                    pinned.push((self.addr + (i as u64) * PAGE_SIZE, pfn));
                }
                mem.write(self.table, i, 0);
                mem.put_page(pfn);
                n += 1;
            }
        }
        for (va, pfn) in pinned {
            released_pinned(w, cpu, va, pfn);
        }
        fx.cost(Cost::CollapseCopyPage, n);
    }

    /// `out_up_write`: `mmap_write_unlock`, then `out_nolock`'s
    /// `folio_put` of the new huge folio; the tracepoint's status. `Ok`:
    /// `SCAN_PMD_MAPPED`, which `madvise_collapse` counts as a success.
    fn out_up_write(
        &mut self,
        w: &mut World,
        task: TaskId,
        r: Result<(), ScanResult>,
        restored: bool,
        fx: &mut Effects,
    ) -> Flow {
        let mm = w.tasks[task as usize].mm;
        mmap_write_unlock(w, mm, fx);
        w.mem.free(self.hpage);
        fx.label(Label::CollapseFailed {
            va: self.addr,
            status: r.err().map_or("pmd_mapped", ScanResult::name),
            restored,
        });
        let op = w.op_id("collapse_huge_page");
        fx.stat(Stat::OpEnd(task, op));
        collapse_result(w, task, r);
        Flow::Return
    }
}

/// `is_refcount_suitable` over the present pages of PTE table `table`: the
/// first page whose `folio_ref_count` exceeds its mapcount (a GUP
/// reference). `inject.collapse_skip_refcount_check` finds none.
fn first_pinned(w: &World, table: Pfn) -> Option<Pfn> {
    if w.cfg.inject.collapse_skip_refcount_check {
        return None;
    }
    // Every GUP reference belongs to a pin a task holds (`completed` takes
    // both, `unpin_user_pages` drops both): with no pin held, no page's
    // refcount exceeds its mapcount, and the 512 entries need no look.
    if w.tasks.iter().all(|t| t.pins.is_empty()) {
        debug_assert_eq!(machine::footprint::paused(|| scan_pinned(w, table)), None);
        return None;
    }
    scan_pinned(w, table)
}

/// The first present page of `table` with GUP references on top of its mappings.
fn scan_pinned(w: &World, table: Pfn) -> Option<Pfn> {
    (0..PTRS_PER_TABLE).find_map(|i| {
        let e = w.mem.read(table, i).unwrap_or(0);
        let pfn = pte::pfn(e);
        (pte::present(e) && w.mem.ref_count(pfn) != w.mem.refs(pfn) as u32).then_some(pfn)
    })
}

/// Invariant 9: a collapse never releases a page a GUP pin still holds:
/// the pinner (an `O_DIRECT` read) writes it after the copy, and the data
/// never reaches the huge page now mapped at `va`. Records the violation
/// for a page found pinned when released.
#[cold]
fn released_pinned(w: &mut World, cpu: CpuId, va: u64, pfn: Pfn) {
    let holder = w
        .tasks
        .iter()
        .find(|t| t.pins.iter().any(|&(p, _)| p == pfn))
        .map_or(String::from("a task"), |t| format!("task {}", t.id));
    w.violation(
        9,
        cpu,
        va,
        format!("collapse on CPU{cpu} copied and released frame {pfn} at {va:#x} while {holder} still pins it: the pinner's later writes are lost"),
    );
}

/// `anon_vma_lock_write` / `anon_vma_unlock_write` of the VMA holding `addr`.
fn set_anon_vma_locked(w: &mut World, mm: crate::MmId, addr: u64, locked: bool) {
    if let Some(v) = w.mms[mm as usize]
        .vmas
        .iter_mut()
        .find(|v| v.start <= addr && addr < v.end)
    {
        v.anon_vma_locked = locked;
    }
}

use crate::mm::mmap_lock::{
    mmap_lock_sleeping, mmap_read_lock, mmap_read_unlock, mmap_write_lock, mmap_write_unlock,
    vma_start_write, vma_start_write_free,
};

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
