//! Page faults (mm/memory.c) and the PTE-range zap used by madvise and munmap.

use crate::effects::{Effects, Label};
use crate::hw::memory_model as mo;
use crate::mm::mmu_gather::MmuGather;
use crate::world::{Flow, World};
use crate::{MmId, TaskId};
use machine::mem::{pte, table_index, FrameUse};
use machine::{Cost, CpuId, Pfn, HPAGE_SIZE, PAGE_SIZE};

/// Spurious faults in a row at one address that the monitor accepts before
/// it calls the access livelocked (invariant 6). Upstream a stale
/// more-restrictive entry costs one spurious fault; the bound leaves room.
pub const SPURIOUS_FAULT_BOUND: u32 = 8;

/// A page fault in progress (`exc_page_fault` → `handle_mm_fault`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PageFault {
    pub va: u64,
    pub write: bool,
    /// `wp_page_copy` waits for its `ptep_clear_flush` before it drops the
    /// old page: the page to release then.
    pub release: Option<Pfn>,
    /// The lock the fault holds.
    pub lock: FaultLock,
    /// Asleep in `migration_entry_wait` until the PTE at `va` no longer
    /// holds a migration entry.
    pub migration_wait: bool,
}

/// Which lock a fault runs under (arch fault handlers: per-VMA lock first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultLock {
    /// Not taken yet.
    None,
    /// `lock_vma_under_rcu` succeeded on the VMA starting here.
    Vma(u64),
    /// `lock_vma_under_rcu` failed; queued in `mmap_read_lock`, asleep
    /// until granted the lock.
    WaitMmapRead,
    /// The VMA was write-locked (or absent): `lock_mm_and_find_vma` →
    /// `mmap_read_lock`.
    MmapRead,
}

impl PageFault {
    pub fn new(va: u64, write: bool) -> Self {
        PageFault {
            va,
            write,
            release: None,
            lock: FaultLock::None,
            migration_wait: false,
        }
    }

    /// Can the fault go on: a fault queued in `mmap_read_lock` sleeps
    /// until granted the lock; any other can run.
    pub fn can_run(&self, w: &World, task: TaskId) -> bool {
        let mm = w.tasks[task as usize].mm;
        if self.migration_wait {
            return !under_migration(w, mm, self.va);
        }
        self.lock != FaultLock::WaitMmapRead
            || !crate::mm::mmap_lock::mmap_lock_sleeping(w, mm, task)
    }

    /// arch/x86/mm/fault.c `do_user_addr_fault` (arm64 `do_page_fault`,
    /// RISC-V `handle_page_fault`): `lock_vma_under_rcu`, else
    /// `lock_mm_and_find_vma` (`mmap_read_lock`); the lock is held until the
    /// fault is handled.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        if std::mem::take(&mut self.migration_wait) {
            // Woken: the fault returns 0 and the access is retried.
            self.unlock(w, mm, fx);
            return Flow::Return;
        }
        if self.lock == FaultLock::None {
            self.lock = match crate::mm::mmap_lock::lock_vma_under_rcu(w, mm, self.va, fx) {
                Some(start) => {
                    w.counters.vma_lock_success += 1;
                    FaultLock::Vma(start)
                }
                None => {
                    w.counters.vma_lock_fallback += 1;
                    if !crate::mm::mmap_lock::mmap_read_lock(w, mm, task, fx) {
                        // Queued: asleep until an unlock grants it the lock.
                        self.lock = FaultLock::WaitMmapRead;
                        return Flow::Block;
                    }
                    FaultLock::MmapRead
                }
            };
        }
        if self.lock == FaultLock::WaitMmapRead {
            if crate::mm::mmap_lock::mmap_lock_sleeping(w, mm, task) {
                return Flow::Block;
            }
            // Granted by the unlock that woke it.
            self.lock = FaultLock::MmapRead;
        }
        // (The common endings build their Flow here: no Flow is moved.)
        match self.handle_mm_fault(w, cpu, task, fx) {
            Handled::Done => {
                self.unlock(w, mm, fx);
                Flow::Return
            }
            Handled::Segv => {
                self.unlock(w, mm, fx);
                Flow::Yield
            }
            Handled::MigrationWait => {
                self.migration_wait = true;
                Flow::Block
            }
            Handled::Flush(flow) => {
                let exited = w.tasks[task as usize].state == crate::world::TaskState::Exited;
                if matches!(flow, Flow::Return) || exited {
                    self.unlock(w, mm, fx);
                }
                flow
            }
        }
    }

    /// The fault is over (handled, or its task killed): drop the lock it holds.
    fn unlock(&mut self, w: &mut World, mm: MmId, fx: &mut Effects) {
        match std::mem::replace(&mut self.lock, FaultLock::None) {
            FaultLock::Vma(start) => crate::mm::mmap_lock::vma_end_read(w, mm, start, fx),
            FaultLock::MmapRead => crate::mm::mmap_lock::mmap_read_unlock(w, mm, fx),
            FaultLock::None | FaultLock::WaitMmapRead => {}
        }
    }

    /// mm/memory.c: `handle_mm_fault`.
    fn handle_mm_fault(
        &mut self,
        w: &mut World,
        cpu: CpuId,
        task: TaskId,
        fx: &mut Effects,
    ) -> Handled {
        if let Some(old) = self.release.take() {
            // wp_page_copy, after ptep_clear_flush: folio_put(old_folio).
            w.mem.put_page(old);
            return Handled::Done;
        }
        fx.cost(Cost::PageFaultEntryExit, 1);
        w.counters.page_faults += 1;
        fx.label(Label::PageFault {
            va: self.va,
            write: self.write,
        });
        let mm = w.tasks[task as usize].mm;
        let vma = w.mms[mm as usize]
            .vmas
            .iter()
            .find(|v| v.start <= self.va && self.va < v.end)
            .cloned();
        match vma {
            Some(v) if v.hugetlb => {
                if hugetlb_fault(w, mm, self.va, fx).is_err() {
                    w.violation(
                        0,
                        cpu,
                        self.va,
                        format!("out of simulated memory at {:#x}", self.va),
                    );
                }
                return Handled::Done;
            }
            Some(v) if v.file.is_some() => {
                match pte_alloc_walk(w, cpu, mm, self.va) {
                    Ok(table) => {
                        do_shared_fault(w, cpu, task, mm, table, &v, self.va, self.write, fx)
                    }
                    Err(e) => w.violation(0, cpu, self.va, format!("{e}")),
                }
                return Handled::Done;
            }
            Some(v) if v.writable || !self.write => {}
            _ => {
                // SIGSEGV: the model's benchmarks never do this on purpose.
                w.counters.segv += 1;
                w.tasks[task as usize].kstack.clear();
                w.task_exit(cpu, task, fx);
                return Handled::Segv;
            }
        }
        let pmd = crate::mm::gup::read_pmd(w, mm, self.va).map_or(0, |(_, pmd)| pmd);
        if pte::present(pmd) && pte::huge(pmd) {
            // A huge PMD already maps it (e.g. collapsed under us): spurious.
            w.counters.spurious_faults += 1;
            fx.label(Label::SpuriousFault { va: self.va });
            return Handled::Done;
        }
        // The PTE table the PMD points to, else __pte_alloc (and the upper
        // levels' allocations) as the walk finds them missing.
        let table = if pte::present(pmd) {
            Ok(pte::pfn(pmd))
        } else {
            pte_alloc_walk(w, cpu, mm, self.va)
        };
        match table {
            Ok(table) => match handle_pte_fault(w, cpu, task, mm, table, self.va, self.write, fx) {
                Fault::Done => Handled::Done,
                Fault::MigrationWait => Handled::MigrationWait,
                Fault::Flush(flow, old) => {
                    self.release = Some(old);
                    Handled::Flush(flow)
                }
            },
            Err(_) => {
                w.counters.segv += 1;
                w.tasks[task as usize].kstack.clear();
                w.task_exit(cpu, task, fx);
                Handled::Segv
            }
        }
    }
}

/// How `handle_mm_fault` ended.
enum Handled {
    /// The fault is handled: it returns.
    Done,
    /// SIGSEGV: the task is gone.
    Segv,
    /// `migration_entry_wait`: asleep until the migration ends.
    MigrationWait,
    /// `wp_page_copy`'s flush to run; the fault then releases the old page.
    Flush(Flow),
}

/// What `handle_pte_fault` left to do.
enum Fault {
    Done,
    /// A migration entry: wait for the migration to end, then retry.
    MigrationWait,
    /// A flush is in progress (`flow`); release this page once it is done.
    Flush(Flow, Pfn),
}

/// mm/memory.c: `__handle_mm_fault` → `__pud_alloc`/`__pmd_alloc`/`__pte_alloc`:
/// walk `mm`'s tables for `va`, allocating missing levels; returns the PTE table.
/// `cpu` makes the stores (`pmd_populate` and the upper levels' `*_populate`,
/// under the page-table lock: visible at once, [`mo::write_direct`]).
pub fn pte_alloc_walk(w: &mut World, cpu: CpuId, mm: MmId, va: u64) -> Result<Pfn, machine::Error> {
    let mut table = *w.mms[mm as usize].pgd;
    for level in [4u8, 3, 2] {
        let idx = table_index(va, level);
        let e = w.mem.read(table, idx).unwrap_or(0);
        table = if pte::present(e) {
            pte::pfn(e)
        } else {
            let t = w.mem.alloc(FrameUse::Table(level - 1))?;
            let loc = mo::Loc::PageTable { table, index: idx };
            mo::write_direct(w, cpu, loc, pte::make(t, pte::WRITE | pte::USER));
            t
        };
    }
    Ok(table)
}

/// Does the PTE of `va` in `mm` hold a migration entry (a fault on it
/// sleeps in `migration_entry_wait`)?
pub fn under_migration(w: &World, mm: MmId, va: u64) -> bool {
    let e = pte_table(w, mm, va).and_then(|t| w.mem.read(t, table_index(va, 1)));
    e.is_some_and(pte::is_migration)
}

/// Walk `mm`'s tables for `va` without allocating; the PTE table if present.
pub fn pte_table(w: &World, mm: MmId, va: u64) -> Option<Pfn> {
    let mut table = *w.mms[mm as usize].pgd;
    for level in [4u8, 3, 2] {
        let e = w.mem.read(table, table_index(va, level))?;
        if !pte::present(e) || (level == 2 && pte::huge(e)) {
            return None;
        }
        table = pte::pfn(e);
    }
    Some(table)
}

/// mm/memory.c: `handle_pte_fault`: a missing page → `do_anonymous_page`;
/// a write to a read-only PTE of a writable VMA → `do_wp_page`; a PTE that
/// already permits the access → spurious fault (`flush_tlb_fix_spurious_fault`).
#[allow(clippy::too_many_arguments)]
fn handle_pte_fault(
    w: &mut World,
    cpu: CpuId,
    task: TaskId,
    mm: MmId,
    table: Pfn,
    va: u64,
    write: bool,
    fx: &mut Effects,
) -> Fault {
    let idx = table_index(va, 1);
    let e = w.mem.read(table, idx).unwrap_or(0);
    if pte::is_swap(e) {
        do_swap_page(w, cpu, table, va, write, fx);
        return Fault::Done;
    }
    if pte::is_migration(e) {
        // do_swap_page → is_migration_entry → migration_entry_wait.
        w.counters.migration_entry_wait += 1;
        return Fault::MigrationWait;
    }
    if !pte::present(e) {
        do_anonymous_page(w, cpu, table, va, fx);
        return Fault::Done;
    }
    if !write || pte::writable(e) {
        if w.cfg.arch == machine::scenario::Arch::Arm64 {
            arm64_pte_fault_tail(w, cpu, task, mm, table, va, e, write, fx);
        } else {
            spurious_fault(w, cpu, task, mm, va, write, fx);
        }
        return Fault::Done;
    }
    do_wp_page(w, cpu, mm, table, va, e, fx)
}

/// mm/memory.c: the tail of `handle_pte_fault` as arm64 runs it:
/// `ptep_set_access_flags(pte_mkyoung(entry) [+ pte_mkdirty on a write])`;
/// if that changed the PTE, `__ptep_set_access_flags` did the flushing
/// (only for a write: `dirty`); if it changed nothing, a write fault gets
/// `flush_tlb_fix_spurious_fault` and a read fault nothing.
#[allow(clippy::too_many_arguments)]
fn arm64_pte_fault_tail(
    w: &mut World,
    cpu: CpuId,
    task: TaskId,
    mm: MmId,
    table: Pfn,
    va: u64,
    e: u64,
    write: bool,
    fx: &mut Effects,
) {
    let idx = table_index(va, 1);
    let entry = e | pte::ACCESSED | if write { pte::DIRTY } else { 0 };
    let changed = crate::arch::arm64::fault::__ptep_set_access_flags(
        w, cpu, mm, table, idx, va, entry, write, fx,
    );
    if changed {
        return; // update_mmu_cache: nothing on arm64
    }
    w.counters.spurious_faults += 1;
    fx.label(Label::SpuriousFault { va });
    if write {
        crate::arch::flush_tlb_fix_spurious_fault(w, cpu, mm, va, write, fx);
    }
    spurious_fault_monitor(w, cpu, task, va);
}

/// mm/memory.c: the tail of `handle_pte_fault` when the PTE already allows
/// the access: count it, `flush_tlb_fix_spurious_fault`, and let the
/// livelock monitor see it.
#[allow(clippy::too_many_arguments)]
fn spurious_fault(
    w: &mut World,
    cpu: CpuId,
    task: TaskId,
    mm: MmId,
    va: u64,
    write: bool,
    fx: &mut Effects,
) {
    w.counters.spurious_faults += 1;
    fx.label(Label::SpuriousFault { va });
    crate::arch::flush_tlb_fix_spurious_fault(w, cpu, mm, va, write, fx);
    spurious_fault_monitor(w, cpu, task, va);
}

/// Invariant 6: a stale more-restrictive TLB entry may cost a spurious
/// fault, but the fault must get rid of it. `SPURIOUS_FAULT_BOUND` in a row
/// at one address is a livelock. The monitor then drops the entry itself
/// (recorded, counted) so that the run can go on and report everything else.
fn spurious_fault_monitor(w: &mut World, cpu: CpuId, task: TaskId, va: u64) {
    if crate::hw::memory_model::tlbi_in_flight(w, cpu, va) {
        return; // the hardware will complete it and drop the entry
    }
    let page = va & !(PAGE_SIZE - 1);
    let t = &mut w.tasks[task as usize];
    if t.spurious_va == page {
        t.spurious_streak += 1;
    } else {
        t.spurious_va = page;
        t.spurious_streak = 1;
    }
    if t.spurious_streak < SPURIOUS_FAULT_BOUND {
        return;
    }
    t.spurious_streak = 0;
    w.counters.spurious_livelocks += 1;
    w.violation(
        6,
        cpu,
        va,
        format!(
            "CPU{cpu} livelocked: {SPURIOUS_FAULT_BOUND} spurious faults in a row at {va:#x}; the stale read-only TLB entry is never flushed (flush_tlb_fix_spurious_fault does nothing)"
        ),
    );
    let asid = w.cpus[cpu as usize].tlbstate.loaded_mm_asid;
    w.cpus[cpu as usize].tlb.flush_one(asid, va);
}

/// mm/memory.c: `do_wp_page`: a write to a write-protected PTE. If the page
/// is ours alone (`wp_can_reuse_anon_folio`: one reference, e.g. the fork
/// child has exec'd), `wp_page_reuse` makes the PTE writable in place;
/// otherwise `wp_page_copy` gives this mm its own copy.
fn do_wp_page(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    table: Pfn,
    va: u64,
    e: u64,
    fx: &mut Effects,
) -> Fault {
    fx.cost(Cost::DoWpPage, 1);
    let idx = table_index(va, 1);
    let old = pte::pfn(e);
    if w.mem.refs(old) <= 1 {
        // wp_page_reuse → ptep_set_access_flags(maybe_mkwrite(pte_mkdirty(entry))).
        w.counters.wp_reuse += 1;
        fx.label(Label::WpPageReuse { va, pfn: old });
        let entry = e | pte::WRITE | pte::DIRTY | pte::ACCESSED;
        crate::arch::ptep_set_access_flags(w, cpu, mm, table, idx, va, entry, fx);
        return Fault::Done;
    }
    // wp_page_copy: copy into a new page, then under the PTE lock
    // ptep_clear_flush + set_pte_at (atomic for other CPUs, which wait on
    // the lock); the old page is released only after the flush.
    let Ok(new) = w.mem.alloc(FrameUse::Anon) else {
        w.violation(0, 0, va, format!("out of simulated memory at {va:#x}"));
        return Fault::Done;
    };
    fx.cost(Cost::CopyPage, 1);
    w.counters.wp_copy += 1;
    // wp_page_copy: folio_add_lru_vma(new_folio).
    crate::mm::swap::folio_add_lru(w, cpu, 1);
    fx.label(Label::WpPageCopy { va, old, new });
    w.mem.write(
        table,
        idx,
        pte::make(new, pte::WRITE | pte::USER | pte::ACCESSED | pte::DIRTY),
    );
    // arm64: ptep_clear_flush's clear (xchg_relaxed) reaches the page
    // walkers at flush_tlb_page's dsb(ishst); until then they see the old entry.
    crate::hw::memory_model::pte_store_for_walkers(w, cpu, table, idx, e, fx);
    let flow = crate::arch::flush_tlb_page(w, mm, va & !(PAGE_SIZE - 1), fx);
    Fault::Flush(flow, old)
}

/// `fault_around_bytes` (64 KiB): a read fault on a file maps this many
/// pages around the address that are already in the page cache.
pub const FAULT_AROUND_PAGES: u64 = 16;

/// mm/memory.c: `do_fault` → `do_read_fault` (first `do_fault_around`:
/// `filemap_map_pages` maps every cached page of the aligned 64 KiB window
/// that has no PTE yet) or `do_shared_fault` for a write (`filemap_fault`
/// finds the page, `finish_fault` maps it and takes a reference); a PTE
/// already there makes it a spurious fault.
#[allow(clippy::too_many_arguments)]
fn do_shared_fault(
    w: &mut World,
    cpu: CpuId,
    task: TaskId,
    mm: MmId,
    table: Pfn,
    v: &crate::world::Vma,
    va: u64,
    write: bool,
    fx: &mut Effects,
) {
    if !write && do_fault_around(w, table, v, va, fx) {
        return;
    }
    let idx = table_index(va, 1);
    if pte::present(w.mem.read(table, idx).unwrap_or(0)) {
        spurious_fault(w, cpu, task, mm, va, true, fx);
        return;
    }
    let file = &w.files[v.file.unwrap_or(0) as usize];
    let n = ((va - v.start) / PAGE_SIZE) as usize;
    let Some(&page) = file.get(n) else {
        // Beyond EOF: SIGBUS in the kernel; the benchmarks never do it.
        w.counters.segv += 1;
        return;
    };
    fx.cost(Cost::FilemapFault, 1);
    w.mem.get_page(page);
    w.mem.write(
        table,
        idx,
        pte::make(page, pte::WRITE | pte::USER | pte::ACCESSED | pte::DIRTY),
    );
    fx.label(Label::DoAnonymousPage { va, pfn: page });
}

/// mm/memory.c: `do_fault_around` → mm/filemap.c: `filemap_map_pages`: map
/// the cached pages of the `FAULT_AROUND_PAGES`-aligned window around `va`
/// (inside the VMA and this PTE table) that have no PTE. Returns whether it
/// mapped `va` itself.
fn do_fault_around(
    w: &mut World,
    table: Pfn,
    v: &crate::world::Vma,
    va: u64,
    fx: &mut Effects,
) -> bool {
    let window = FAULT_AROUND_PAGES * PAGE_SIZE;
    let from = (va & !(window - 1)).max(v.start);
    let to = ((va & !(window - 1)) + window).min(v.end);
    let file = v.file.unwrap_or(0) as usize;
    let mut mapped = 0u32;
    let mut hit = false;
    let cache = w.files.get(file).map_or(&[][..], |f| &f[..]);
    let mem = &mut *w.mem;
    let mut a = from;
    while a < to {
        let idx = table_index(a, 1);
        let n = ((a - v.start) / PAGE_SIZE) as usize;
        if let Some(&page) = cache.get(n) {
            if !pte::present(mem.read(table, idx).unwrap_or(0)) {
                mem.get_page(page);
                mem.write(
                    table,
                    idx,
                    pte::make(page, pte::WRITE | pte::USER | pte::ACCESSED),
                );
                mapped += 1;
                hit |= a == (va & !(PAGE_SIZE - 1));
            }
        }
        a += PAGE_SIZE;
    }
    if hit {
        fx.cost(Cost::FilemapFault, 1);
        fx.cost(Cost::FaultAroundPte, mapped.saturating_sub(1));
    }
    hit
}

/// mm/memory.c: `do_anonymous_page`: allocate and zero a page, map it writable.
/// The folio comes from the faulting CPU's node (`alloc_pages` under the
/// default local policy).
fn do_anonymous_page(w: &mut World, cpu: CpuId, table: Pfn, va: u64, fx: &mut Effects) {
    fx.cost(Cost::DoAnonymousPage, 1);
    let node = w.cfg.topology.cpu_to_node(cpu as u32) as u8;
    match w.mem.alloc_node(FrameUse::Anon, node) {
        Ok(pfn) => {
            w.mem.write(
                table,
                table_index(va, 1),
                pte::make(pfn, pte::WRITE | pte::USER | pte::ACCESSED | pte::DIRTY),
            );
            fx.label(Label::DoAnonymousPage { va, pfn });
            // folio_add_lru_vma: into this CPU's LRU add batch.
            crate::mm::swap::folio_add_lru(w, cpu, 1);
        }
        Err(_) => {
            // Out of simulated memory: the access will fault again; the
            // driver stops the run and reports it (memory sizing is checked up front).
            w.violation(0, 0, va, format!("out of simulated memory at {va:#x}"));
        }
    }
}

/// mm/memory.c: `do_swap_page` of a folio reclaim wrote to a synchronous
/// (zram) swap device: allocate, read it back, map it. A write fault maps
/// it writable and dirty and drops the swap copy (`should_try_to_free_swap`:
/// `folio_free_swap`); a read fault keeps the folio in the swap cache,
/// clean (`SWAPCACHE`), and maps it read-only: the kernel maps an
/// exclusive folio writable and the hardware sets the dirty bit on a later
/// write, which the model's MMU does not do, so the write takes a
/// `do_wp_page` (reuse) that dirties the PTE instead.
fn do_swap_page(w: &mut World, cpu: CpuId, table: Pfn, va: u64, write: bool, fx: &mut Effects) {
    fx.cost(Cost::SwapInPage, 1);
    w.counters.pswpin += 1;
    let Ok(pfn) = w.mem.alloc(FrameUse::Anon) else {
        w.violation(0, 0, va, format!("out of simulated memory at {va:#x}"));
        return;
    };
    // The synchronous device's path: folio_add_lru(folio).
    crate::mm::swap::folio_add_lru(w, cpu, 1);
    let flags = if write {
        pte::WRITE | pte::DIRTY
    } else {
        pte::SWAPCACHE
    };
    w.mem.write(
        table,
        table_index(va, 1),
        pte::make(pfn, flags | pte::USER | pte::ACCESSED),
    );
    fx.label(Label::DoAnonymousPage { va, pfn });
}

/// `struct zap_details`: the part the model reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ZapDetails {
    /// `details->reclaim_pt`: free PTE tables the zap leaves empty
    /// (PT_RECLAIM; `madvise_dontneed_single_vma` sets it).
    pub reclaim_pt: bool,
}

/// mm/pt_reclaim.c: `reclaim_pt_is_enabled`: the caller asked for it
/// (`details->reclaim_pt`), the kernel has `CONFIG_PT_RECLAIM`, and the zap
/// covers a whole PTE table (`end - start >= PMD_SIZE`).
pub fn reclaim_pt_is_enabled(w: &World, start: u64, end: u64, details: &ZapDetails) -> bool {
    details.reclaim_pt && w.cfg.pt_reclaim && end - start >= HPAGE_SIZE
}

/// mm/memory.c: `zap_pte_range` for the part of `[addr, end)` inside one PTE
/// table: clear present PTEs and add their pages to the gather; with
/// PT_RECLAIM, unhook the table if that left it empty. Returns where the
/// next table starts. On arm64 under the checker's model, the page walkers
/// see each clear only after `cpu`'s next DSB (`pte_store_for_walkers`).
#[allow(clippy::too_many_arguments)]
pub fn zap_pte_range(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    addr: u64,
    end: u64,
    details: &ZapDetails,
    tlb: &mut MmuGather,
    fx: &mut Effects,
) -> u64 {
    let next = ((addr / HPAGE_SIZE) + 1) * HPAGE_SIZE;
    let stop = next.min(end);
    let pmd = crate::mm::gup::read_pmd(w, mm, addr);
    if let Some((pmd_table, pmd)) = pmd {
        if pte::present(pmd) && pte::huge(pmd) {
            // zap_huge_pmd (whole 2 MiB only; a partial zap would split first).
            let region = addr & !(HPAGE_SIZE - 1);
            if addr == region && stop == next {
                let loc = mo::Loc::PageTable {
                    table: pmd_table,
                    index: table_index(addr, 2),
                };
                mo::write_direct(w, cpu, loc, 0);
                // arm64: pmdp_huge_get_and_clear_full, seen by the walkers
                // at tlb_flush's dsb(ishst).
                let idx = table_index(addr, 2);
                crate::hw::memory_model::pte_store_for_walkers(w, cpu, pmd_table, idx, pmd, fx);
                tlb.remove_huge_page(pte::pfn(pmd), region);
                // zap_deposited_table → pte_free: the deposited table goes at once.
                let dep = &mut w.mms[mm as usize].deposited;
                if let Some(i) = dep.iter().position(|(a, _)| *a == region) {
                    let (_, t) = dep.swap_remove(i);
                    w.mem.free(t);
                }
                fx.cost(Cost::ZapPte, 1);
                fx.label(Label::ZapPtes {
                    mm,
                    start: addr,
                    end: stop,
                    pages: 512,
                });
            }
            return stop;
        }
    }
    // The PTE table (what `pte_table` would walk to again).
    let Some(table) = pmd.and_then(|(_, e)| pte::present(e).then(|| pte::pfn(e))) else {
        return stop;
    };
    let mut cleared = 0u32;
    let mut va = addr & !(PAGE_SIZE - 1);
    while va < stop {
        let idx = table_index(va, 1);
        let e = w.mem.read(table, idx).unwrap_or(0);
        if pte::present(e) {
            // ptep_get_and_clear_full, tlb_remove_tlb_entry, __tlb_remove_page
            w.mem.write(table, idx, 0);
            crate::hw::memory_model::pte_store_for_walkers(w, cpu, table, idx, e, fx);
            if w.cfg.arch == machine::scenario::Arch::Riscv {
                // RISC-V's clear is atomic_long_xchg (amoswap.d.aqrl):
                // fully ordered, so this hart's older stores (an
                // mm_cpumask bit) are visible no later than the clear.
                let full = crate::hw::memory_model::Order::Full;
                crate::hw::memory_model::barrier(w, cpu, None, full, fx);
            }
            tlb.remove_page(pte::pfn(e), va);
            cleared += 1;
        } else if pte::is_swap(e) || pte::is_migration(e) {
            // zap_nonpresent_ptes → free_swap_and_cache; a migration
            // entry's folio stays with the migration, which frees it.
            w.mem.write(table, idx, 0);
        }
        va += PAGE_SIZE;
    }
    fx.cost(Cost::ZapPte, cleared);
    fx.label(Label::ZapPtes {
        mm,
        start: addr,
        end: stop,
        pages: cleared,
    });
    if reclaim_pt_is_enabled(w, addr, stop, details) && w.mem.table_empty(table) {
        try_get_and_clear_pmd(w, cpu, mm, addr, table, tlb, fx);
    }
    stop
}

/// mm/pt_reclaim.c: `try_get_and_clear_pmd` (the PMD lock is never
/// contended in the model, so the `try_to_free_pte` re-check path is not
/// taken) then `free_pte` → `pte_free_tlb`: the PMD entry goes now, the
/// table into the gather (`freed_tables`, so x86 IPIs lazy CPUs too) and
/// through `tlb_remove_table` after the flush, like `free_pgtables`' tables.
fn try_get_and_clear_pmd(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    addr: u64,
    table: Pfn,
    tlb: &mut MmuGather,
    fx: &mut Effects,
) {
    let Some((pmd_table, _)) = crate::mm::gup::read_pmd(w, mm, addr) else {
        return;
    };
    let region = addr & !(HPAGE_SIZE - 1);
    let loc = mo::Loc::PageTable {
        table: pmd_table,
        index: table_index(region, 2),
    };
    mo::write_direct(w, cpu, loc, 0);
    if !w.cfg.inject.pt_reclaim_without_freed_tables {
        tlb.remove_table(table, region);
    } else {
        // Injected bug: the table is gathered without `freed_tables`.
        tlb.tables.push(table);
    }
    w.counters.pt_reclaimed += 1;
    fx.label(Label::PtReclaim {
        mm,
        va: region,
        table,
    });
}

/// mm/gup.c: `populate_vma_page_range` (`MAP_POPULATE` / `MADV_POPULATE_WRITE`)
/// done before a benchmark's measured phase: fault in `[start, end)` with
/// private anonymous pages, without simulated time.
pub fn populate_range(w: &mut World, mm: MmId, start: u64, end: u64) -> Result<(), machine::Error> {
    let mut va = start & !(PAGE_SIZE - 1);
    while va < end {
        // Before the run: the weak memory holds nothing, so no CPU's
        // message is made and CPU 0 stands for the set-up.
        let table = pte_alloc_walk(w, 0, mm, va)?;
        let stop = (((va / HPAGE_SIZE) + 1) * HPAGE_SIZE).min(end);
        let mem = &mut *w.mem;
        // (A table with nothing present, as a new one, fills without reads.)
        let fill = mem.table_empty(table);
        while va < stop {
            let idx = table_index(va, 1);
            if fill || !pte::present(mem.read(table, idx).unwrap_or(0)) {
                let pfn = mem.alloc(FrameUse::Anon)?;
                mem.write(
                    table,
                    idx,
                    pte::make(pfn, pte::WRITE | pte::USER | pte::ACCESSED | pte::DIRTY),
                );
            }
            va += PAGE_SIZE;
        }
    }
    Ok(())
}

/// mm/memory.c: `unmap_page_range`, one PTE table's worth per call, into
/// the task's `mmu_gather`. Returns where the next table starts.
pub fn unmap_page_range_step(
    w: &mut World,
    task: TaskId,
    addr: u64,
    end: u64,
    fx: &mut Effects,
) -> u64 {
    unmap_page_range_details(w, task, addr, end, &ZapDetails::default(), fx)
}

/// mm/memory.c: `unmap_page_range` with the caller's `zap_details`
/// (`zap_page_range_single`), one PTE table's worth per call.
pub fn unmap_page_range_details(
    w: &mut World,
    task: TaskId,
    addr: u64,
    end: u64,
    details: &ZapDetails,
    fx: &mut Effects,
) -> u64 {
    let (mm, cpu) = (w.tasks[task as usize].mm, w.tasks[task as usize].cpu);
    let mut tlb = std::mem::take(&mut w.tasks[task as usize].gather);
    let next = zap_pte_range(w, cpu, mm, addr, end, details, &mut tlb, fx);
    w.tasks[task as usize].gather = tlb;
    next
}

/// mm/hugetlb.c: `hugetlb_fault` → `huge_pte_alloc` → `huge_pmd_share`
/// (reuse another mm's PMD table for the same hugetlbfs range, raising its
/// share count) → `hugetlb_no_page` (a 2 MiB page from the pool).
fn hugetlb_fault(w: &mut World, mm: MmId, va: u64, fx: &mut Effects) -> Result<(), machine::Error> {
    let pgd = *w.mms[mm as usize].pgd;
    let i4 = table_index(va, 4);
    let e = w.mem.read(pgd, i4).unwrap_or(0);
    let pud = if pte::present(e) {
        pte::pfn(e)
    } else {
        let t = w.mem.alloc(FrameUse::Table(3))?;
        w.mem.write(pgd, i4, pte::make(t, pte::WRITE | pte::USER));
        t
    };
    let i3 = table_index(va, 3);
    if !pte::present(w.mem.read(pud, i3).unwrap_or(0)) {
        let region = va & !(crate::mm::mmap::PUD_SIZE - 1);
        let table = match w.hugetlb_pmds.iter_mut().find(|s| s.region == region) {
            Some(s) => {
                s.users += 1;
                w.counters.pmd_shares += 1;
                fx.label(Label::PmdShare { mm, table: s.table });
                s.table
            }
            None => {
                let t = w.mem.alloc(FrameUse::Table(2))?;
                w.hugetlb_pmds.push(crate::world::SharedPmd {
                    region,
                    table: t,
                    users: 1,
                });
                t
            }
        };
        w.mem
            .write(pud, i3, pte::make(table, pte::WRITE | pte::USER));
    }
    let table = pte::pfn(w.mem.read(pud, i3).unwrap_or(0));
    let i2 = table_index(va, 2);
    if !pte::present(w.mem.read(table, i2).unwrap_or(0)) {
        fx.cost(Cost::DoAnonymousPage, 1);
        let page = w.mem.alloc(FrameUse::Anon)?;
        w.mem.write(
            table,
            i2,
            pte::make(
                page,
                pte::WRITE | pte::USER | pte::HUGE | pte::ACCESSED | pte::DIRTY,
            ),
        );
        fx.label(Label::DoAnonymousPage { va, pfn: page });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine::scenario::SpuriousFaultFlush;

    /// arm64 `handle_pte_fault` tail with the seed's local spurious flush: a
    /// read fault on a PTE that already allows it flushes nothing; a write
    /// fault whose `ptep_set_access_flags` changed nothing flushes locally;
    /// a fault that only sets the young bit changes the PTE and flushes
    /// nothing. (Before: every spurious fault, read or write, flushed.)
    #[test]
    fn arm64_spurious_flush_only_for_unchanged_write_faults() {
        let s = machine::Scenario::from_toml("[machine]\narch = \"arm64\"\ncpus = 2\n", "test")
            .unwrap();
        let mut w = World::new(&s).unwrap();
        w.cfg.arm64.spurious_fault_flush = SpuriousFaultFlush::Local;
        let mm = w.mm_alloc().unwrap();
        let t = w.spawn(mm, 0, vec![], false);
        let va = 0x4000_0000;
        let table = pte_alloc_walk(&mut w, 0, mm, va).unwrap();
        let idx = table_index(va, 1);
        let mut fx = Effects::default();
        let full = pte::WRITE | pte::USER | pte::ACCESSED | pte::DIRTY;
        w.mem.write(table, idx, pte::make(77, full));
        let e = w.mem.read(table, idx).unwrap();
        handle_pte_fault(&mut w, 0, t, mm, table, va, false, &mut fx);
        assert_eq!((w.counters.spurious_faults, w.counters.tlbi_local), (1, 0));
        handle_pte_fault(&mut w, 0, t, mm, table, va, true, &mut fx);
        assert_eq!((w.counters.spurious_faults, w.counters.tlbi_local), (2, 1));
        w.mem.write(table, idx, e & !pte::ACCESSED);
        handle_pte_fault(&mut w, 0, t, mm, table, va, false, &mut fx);
        assert_eq!((w.counters.spurious_faults, w.counters.tlbi_local), (2, 1));
        assert_eq!(w.mem.read(table, idx), Some(e));
    }
}
