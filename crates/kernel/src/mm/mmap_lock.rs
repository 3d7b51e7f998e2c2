//! include/linux/mmap_lock.h, mm/mmap_lock.c: `mmap_lock` as a
//! reader/writer semaphore, and the per-VMA locks (`CONFIG_PER_VMA_LOCK`,
//! selected on x86-64, arm64 and RISC-V).
//!
//! ```text
//!  mm->mmap_lock : writer (one task) | readers (a count)
//!  vma lock      : write-locked by the mmap_lock writer (vma_start_write,
//!                  until mmap_write_unlock / _downgrade: vma_end_write_all)
//!                  | readers (lock_vma_under_rcu ... vma_end_read)
//! ```
//! Faults and `madvise(MADV_DONTNEED)` on one VMA try the VMA lock first
//! and fall back to `mmap_read_lock` when the VMA is write-locked; munmap
//! and collapse take `mmap_write_lock` and write-lock the VMAs they change,
//! which waits for the VMA's readers. A waiter is a path whose `can_run`
//! is false: the simulator parks its CPU until an unlock wakes the mm's
//! CPUs, the checker explores the orders. The lock words are cache lines
//! the cost model prices (`down_read`/`up_read` are atomic RMWs).
//! A writer that waits for a VMA's readers has already marked the VMA
//! (`vma_start_write` adds `VMA_LOCK_OFFSET` to `vm_refcnt` before it
//! waits; before 6.15 the `vm_lock` rwsem's queued writer made
//! `down_read_trylock` fail): new `lock_vma_under_rcu` calls fail and fall
//! back to `mmap_read_lock`, which the writer holds, so a stream of
//! readers cannot starve it. Simplification: the `mmap_lock` rwsem itself
//! has no FIFO hand-off (a reader is not queued behind a waiting writer).

use crate::effects::Effects;
use crate::world::{layout, World};
use crate::{MmId, TaskId};

/// Can `mmap_read_lock(mm)` be taken now (no writer)?
pub fn mmap_read_lock_free(w: &World, mm: MmId) -> bool {
    w.mms[mm as usize].mmap_lock_writer.is_none()
}

/// Can `task` take `mmap_write_lock(mm)` now (no writer, no reader)?
pub fn mmap_write_lock_free(w: &World, mm: MmId, task: TaskId) -> bool {
    let m = &w.mms[mm as usize];
    m.mmap_lock_writer.is_none_or(|t| t == task) && *m.mmap_lock_readers == 0
}

/// include/linux/mmap_lock.h: `mmap_read_lock` (the caller checked
/// [`mmap_read_lock_free`]): `down_read`, an atomic add on `sem->count`.
pub fn mmap_read_lock(w: &mut World, mm: MmId, fx: &mut Effects) {
    debug_assert!(mmap_read_lock_free(w, mm));
    *w.mms[mm as usize].mmap_lock_readers += 1;
    fx.write(layout::mmap_lock(mm));
}

/// include/linux/mmap_lock.h: `mmap_read_unlock`: the last reader wakes
/// the mm's CPUs (a writer may wait).
pub fn mmap_read_unlock(w: &mut World, mm: MmId, fx: &mut Effects) {
    let m = &mut w.mms[mm as usize];
    *m.mmap_lock_readers -= 1;
    fx.write(layout::mmap_lock(mm));
    if *m.mmap_lock_readers == 0 {
        wake_mm(w, mm, fx);
    }
}

/// include/linux/mmap_lock.h: `mmap_write_lock` (the caller checked
/// [`mmap_write_lock_free`]).
pub fn mmap_write_lock(w: &mut World, mm: MmId, task: TaskId, fx: &mut Effects) {
    debug_assert!(mmap_write_lock_free(w, mm, task));
    *w.mms[mm as usize].mmap_lock_writer = Some(task);
    fx.write(layout::mmap_lock(mm));
}

/// include/linux/mmap_lock.h: `mmap_write_unlock` → `vma_end_write_all`:
/// every VMA the writer locked is unlocked with it; wake the mm's CPUs.
pub fn mmap_write_unlock(w: &mut World, mm: MmId, fx: &mut Effects) {
    let m = &mut w.mms[mm as usize];
    *m.mmap_lock_writer = None;
    vma_end_write_all(w, mm);
    fx.write(layout::mmap_lock(mm));
    wake_mm(w, mm, fx);
}

/// include/linux/mmap_lock.h: `mmap_write_downgrade`: the writer becomes a
/// reader (`vma_end_write_all` first); readers waiting may go.
pub fn mmap_write_downgrade(w: &mut World, mm: MmId, fx: &mut Effects) {
    let m = &mut w.mms[mm as usize];
    *m.mmap_lock_writer = None;
    *m.mmap_lock_readers += 1;
    vma_end_write_all(w, mm);
    fx.write(layout::mmap_lock(mm));
    wake_mm(w, mm, fx);
}

/// include/linux/mmap_lock.h: `vma_end_write_all`: bumping `mm_lock_seq`
/// unlocks every write-locked VMA of the mm at once.
fn vma_end_write_all(w: &mut World, mm: MmId) {
    for v in w.mms[mm as usize].vmas.iter_mut() {
        v.vm_write_locked = false;
    }
}

/// The VMA of `mm` containing `va`, by index.
fn find_vma(w: &World, mm: MmId, va: u64) -> Option<usize> {
    w.mms[mm as usize]
        .vmas
        .iter()
        .position(|v| v.start <= va && va < v.end)
}

/// mm/mmap_lock.c: `lock_vma_under_rcu`: read-lock the VMA holding `va`
/// unless a writer has it write-locked (`vma_start_read` fails; the caller
/// falls back to `mmap_read_lock`). Returns the VMA's start on success.
pub fn lock_vma_under_rcu(w: &mut World, mm: MmId, va: u64, fx: &mut Effects) -> Option<u64> {
    let i = find_vma(w, mm, va)?;
    let v = &mut w.mms[mm as usize].vmas[i];
    if v.vm_write_locked {
        return None;
    }
    v.vm_readers += 1;
    fx.write(layout::vma_lock(mm, v.start));
    Some(v.start)
}

/// include/linux/mmap_lock.h: `vma_end_read`: the last reader wakes the
/// mm's CPUs (a `vma_start_write` may wait).
pub fn vma_end_read(w: &mut World, mm: MmId, start: u64, fx: &mut Effects) {
    let Some(v) = w.mms[mm as usize]
        .vmas
        .iter_mut()
        .find(|v| v.start == start)
    else {
        return;
    };
    v.vm_readers -= 1;
    let last = v.vm_readers == 0;
    fx.write(layout::vma_lock(mm, start));
    if last {
        wake_mm(w, mm, fx);
    }
}

/// Can the mmap_lock writer write-lock every VMA overlapping `[start,
/// end)` now (`__vma_enter_locked` waits for the VMA's readers)?
pub fn vma_start_write_free(w: &World, mm: MmId, start: u64, end: u64) -> bool {
    w.mms[mm as usize]
        .vmas
        .iter()
        .all(|v| v.end <= start || v.start >= end || v.vm_readers == 0)
}

/// include/linux/mmap_lock.h: `vma_start_write` of every VMA overlapping
/// `[start, end)` (the caller holds `mmap_write_lock`): from now on new
/// `lock_vma_under_rcu` calls fail, until `mmap_write_unlock`; the caller
/// then waits for the readers already in ([`vma_start_write_free`],
/// `__vma_enter_locked`) before it changes the VMAs.
pub fn vma_start_write(w: &mut World, mm: MmId, start: u64, end: u64, fx: &mut Effects) {
    for v in w.mms[mm as usize].vmas.iter_mut() {
        if v.end > start && v.start < end {
            v.vm_write_locked = true;
            fx.write(layout::vma_lock(mm, v.start));
        }
    }
}

/// Wake every CPU running a task of `mm`: any of them may wait on one of
/// its locks. (In CPU order: [`crate::world::Mm::running`] caches the CPUs
/// whose `curr` is a task of `mm`.)
#[inline]
fn wake_mm(w: &World, mm: MmId, fx: &mut Effects) {
    let running = &w.mms[mm as usize].running.0;
    // (A check of the cache, not a read of the model: not in a footprint,
    // which must not differ between debug and release builds.)
    debug_assert!(machine::footprint::paused(|| w.cpus.iter().all(
        |c| running.test(c.id) == c.curr.is_some_and(|t| w.tasks[t as usize].mm == mm)
    )));
    running.for_each(|c| fx.wake(c));
}
