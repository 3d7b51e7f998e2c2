//! include/linux/mmap_lock.h, mm/mmap_lock.c: `mmap_lock` as a
//! reader/writer semaphore, and the per-VMA locks (`CONFIG_PER_VMA_LOCK`,
//! selected on x86-64, arm64 and RISC-V).
//!
//! ```text
//!  mm->mmap_lock : writer (one task) | readers (a count) | hand-off
//!                  | wait list (FIFO: readers and writers)
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
//! readers cannot starve it. The `mmap_lock` rwsem itself queues and
//! hands off as kernel/locking/rwsem.c does ([`crate::locking::rwsem`]): a
//! reader arriving while a writer waits queues behind it; a woken writer
//! takes the lock when it runs; readers are granted it by the unlock that
//! wakes them. A queued task parks (its path's `can_run` is false) until
//! the lock is granted (a reader) or it is woken (a writer, which then
//! retries); unlocks still wake every CPU of the mm (docs/fidelity.md,
//! "Open differences"), other wake-ups only the woken task's CPU.

use crate::effects::Effects;
use crate::locking::rwsem::jiffies;
use crate::world::{layout, World};
use crate::{MmId, TaskId};

/// Is `task` asleep in `mmap_read_lock` / `mmap_write_lock` of `mm`:
/// queued, not granted the lock (a reader), not woken (a writer)?
pub fn mmap_lock_sleeping(w: &World, mm: MmId, task: TaskId) -> bool {
    w.mms[mm as usize].mmap_lock.sleeping(task)
}

/// include/linux/mmap_lock.h: `mmap_read_lock` → `down_read`: an atomic
/// add on `sem->count`, else the slow path's stealing or queueing. True:
/// `task` holds the lock. False: it is queued; it holds the lock once
/// [`mmap_lock_sleeping`] is false (no second call).
pub fn mmap_read_lock(w: &mut World, mm: MmId, task: TaskId, fx: &mut Effects) -> bool {
    let j = jiffies(w.now);
    let mut woken = Vec::new();
    let held = w.mms[mm as usize]
        .mmap_lock
        .down_read(task, j, &mut |t| woken.push(t));
    fx.write(layout::mmap_lock(mm));
    if !held {
        w.counters.rwsem_sleep_reader += 1;
    }
    wake_tasks(w, &woken, fx);
    held
}

/// include/linux/mmap_lock.h: `mmap_read_unlock` → `up_read`: the last
/// reader wakes the waiters; the mm's CPUs are woken.
pub fn mmap_read_unlock(w: &mut World, mm: MmId, fx: &mut Effects) {
    let j = jiffies(w.now);
    let m = &mut w.mms[mm as usize];
    // (Before the wake-up, which may grant the lock to queued readers.)
    let last = m.mmap_lock.readers == 1;
    m.mmap_lock.up_read(j, &mut |_| {});
    fx.write(layout::mmap_lock(mm));
    if last {
        wake_mm(w, mm, fx);
    }
}

/// include/linux/mmap_lock.h: `mmap_write_lock` → `down_write`: the
/// fast path's cmpxchg, else queue and `rwsem_try_write_lock`. A call by a
/// task already queued (woken: [`mmap_lock_sleeping`] false) is that
/// writer's next try. True: `task` holds the lock.
pub fn mmap_write_lock(w: &mut World, mm: MmId, task: TaskId, fx: &mut Effects) -> bool {
    let held = down_write(w, task, |w| &mut w.mms[mm as usize].mmap_lock, fx);
    fx.write(layout::mmap_lock(mm));
    held
}

/// kernel/locking/rwsem.c: `down_write` of the rwsem `sem` picks in `w`
/// (`mmap_lock`, `i_mmap_rwsem`), or for a queued writer that was woken,
/// its next `rwsem_try_write_lock`; counts the lock events and wakes the
/// CPUs of the tasks it woke. True: `task` holds it.
pub fn down_write(
    w: &mut World,
    task: TaskId,
    sem: impl Fn(&mut World) -> &mut crate::locking::rwsem::Rwsem,
    fx: &mut Effects,
) -> bool {
    let j = jiffies(w.now);
    let rt = w.tasks[task as usize].rt;
    let mut woken = Vec::new();
    let s = sem(w);
    let (queued, handoff) = (s.queued(task), s.handoff);
    let held = if queued {
        s.write_retry(task, rt, j)
    } else {
        s.down_write(task, rt, j, &mut |t| woken.push(t))
    };
    let handoff = !handoff && s.handoff;
    w.counters.rwsem_sleep_writer += (!queued && !held) as u64;
    w.counters.rwsem_wlock_handoff += handoff as u64;
    wake_tasks(w, &woken, fx);
    held
}

/// include/linux/mmap_lock.h: `mmap_write_unlock` → `vma_end_write_all`,
/// `up_write`: every VMA the writer locked is unlocked with it; the
/// waiters are woken (the mm's CPUs).
pub fn mmap_write_unlock(w: &mut World, mm: MmId, fx: &mut Effects) {
    let j = jiffies(w.now);
    vma_end_write_all(w, mm);
    w.mms[mm as usize].mmap_lock.up_write(j, &mut |_| {});
    fx.write(layout::mmap_lock(mm));
    wake_mm(w, mm, fx);
}

/// include/linux/mmap_lock.h: `mmap_write_downgrade` → `downgrade_write`:
/// the writer becomes a reader (`vma_end_write_all` first); readers at the
/// head of the queue are granted the lock with it.
pub fn mmap_write_downgrade(w: &mut World, mm: MmId, fx: &mut Effects) {
    let j = jiffies(w.now);
    vma_end_write_all(w, mm);
    w.mms[mm as usize].mmap_lock.downgrade_write(j, &mut |_| {});
    fx.write(layout::mmap_lock(mm));
    wake_mm(w, mm, fx);
}

/// `wake_up_q` of the tasks a lock call woke: each one's CPU.
fn wake_tasks(w: &World, woken: &[TaskId], fx: &mut Effects) {
    for &t in woken {
        fx.wake(w.tasks[t as usize].cpu);
    }
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
