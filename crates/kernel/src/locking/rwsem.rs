//! kernel/locking/rwsem.c: the reader/writer semaphore's queueing and
//! hand-off, as plain data (`mm->mmap_lock`, a file's `i_mmap_rwsem`).
//!
//! Followed: kernel/locking/rwsem.c read in LinxISA/linux b6dd432df2e5, a
//! fork of a tree after 6.16 (it has the hung-task blocker calls around
//! the sleeps; its `CONFIG_LINX` guards around debug warnings touch
//! nothing modelled here), with `rwsem_mark_wake` and
//! `rwsem_try_write_lock` cross-read in Kingxukai/linux 0291023e7330 (a
//! 6.17-class tree): the same. No 6.12 copy was at hand.
//!
//! ```text
//!  sem->count : RWSEM_WRITER_LOCKED | RWSEM_FLAG_WAITERS | RWSEM_FLAG_HANDOFF | readers
//!  model      : writer (task)       | !waiters.is_empty() | handoff            | readers
//!  wait_list  : waiters, FIFO: (task, read or write, timeout, woken)
//! ```
//! - `down_read`: `rwsem_read_trylock` fails when the count has a writer,
//!   waiters or the hand-off bit; `rwsem_down_read_slowpath` then steals
//!   the lock (no writer, no hand-off, not "very likely owned by
//!   readers"), else queues at the tail.
//! - `down_write`: `rwsem_write_trylock` needs a count of 0 (no waiters
//!   either); else the writer queues at the tail and tries
//!   `rwsem_try_write_lock` at once and at every wake-up. A writer that has
//!   waited past its timeout (`RWSEM_WAIT_TIMEOUT`) while the lock is held
//!   sets `RWSEM_FLAG_HANDOFF` (`handoff_set` on the first waiter): from
//!   then on no reader steals and no other writer takes the lock; the first
//!   waiter gets it.
//! - `up_read` (the last reader), `up_write`, `downgrade_write` and a
//!   queueing waiter that finds the lock free call `rwsem_mark_wake`: a
//!   writer at the head is woken (it takes the lock itself when it runs;
//!   until then a reader or writer may steal it, unless the hand-off bit is
//!   set); readers at the head are granted the lock at once, every reader
//!   of the queue up to `MAX_READERS_WAKEUP`, writers skipped (the
//!   phase-fair wake-up), and find it held when they run.
//!
//! Not modelled: optimistic spinning (`rwsem_optimistic_spin`, the osq):
//! a writer that finds the lock taken queues at once (see
//! docs/fidelity.md); signals (`down_*_killable`); the reader count's
//! overflow bit. A reader's hand-off (`rwsem_mark_wake` finding a writer
//! that stole the lock between `up_write` and the grant) cannot happen:
//! an unlock and its wake-up are one step of the model.

use crate::TaskId;

/// `RWSEM_WAIT_TIMEOUT`: `DIV_ROUND_UP(HZ, 250)` jiffies, at least 4 ms.
pub const RWSEM_WAIT_TIMEOUT: u64 = crate::arch::x86::tlb::HZ.div_ceil(250);

/// `MAX_READERS_WAKEUP`: readers one `rwsem_mark_wake` grants at most.
pub const MAX_READERS_WAKEUP: usize = 0x100;

/// `jiffies` at time `now` (ns), `CONFIG_HZ` ticks per second.
pub fn jiffies(now: machine::Time) -> u64 {
    now / (1_000_000_000 / crate::arch::x86::tlb::HZ)
}

/// include/linux/jiffies.h: `time_after(a, b)`.
fn time_after(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) < 0
}

/// `struct rwsem_waiter` on the wait list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RwsemWaiter {
    pub task: TaskId,
    /// `RWSEM_WAITING_FOR_WRITE` (else `_FOR_READ`).
    pub write: bool,
    /// `jiffies + RWSEM_WAIT_TIMEOUT` when it queued.
    pub timeout: u64,
    /// A writer that `rwsem_mark_wake` woke (`wake_q_add`) and that has not
    /// run its `rwsem_try_write_lock` since: the only writers that run.
    pub woken: bool,
}

/// `struct rw_semaphore`: the count's fields and the wait list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rwsem {
    /// `RWSEM_WRITER_LOCKED`, with `sem->owner`.
    pub writer: Option<TaskId>,
    /// The reader count (`count >> RWSEM_READER_SHIFT`).
    pub readers: u16,
    /// `RWSEM_FLAG_HANDOFF`. Set only by or for the first waiter, which
    /// then has `handoff_set`; cleared when it takes the lock or readers
    /// are granted it: while set, the first waiter is the one that set it.
    pub handoff: bool,
    /// `sem->wait_list`, oldest first (`RWSEM_FLAG_WAITERS` while not empty).
    pub waiters: Vec<RwsemWaiter>,
}

/// `enum rwsem_wake_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WakeType {
    /// `RWSEM_WAKE_ANY`: wake whatever is at the head.
    Any,
    /// `RWSEM_WAKE_READERS`: readers only.
    Readers,
    /// `RWSEM_WAKE_READ_OWNED`: the waker holds the read lock.
    ReadOwned,
}

impl Rwsem {
    /// `count & RWSEM_LOCK_MASK`: a writer or readers hold it.
    pub fn locked(&self) -> bool {
        self.writer.is_some() || self.readers > 0
    }

    /// Is `task` on the wait list?
    pub fn queued(&self, task: TaskId) -> bool {
        self.waiters.iter().any(|w| w.task == task)
    }

    /// Is `task` asleep on the lock: queued, and for a writer not woken
    /// (a queued reader runs once granted, which takes it off the list).
    pub fn sleeping(&self, task: TaskId) -> bool {
        self.waiters.iter().any(|w| w.task == task && !w.woken)
    }

    /// `down_read`: `rwsem_read_trylock`, else `rwsem_down_read_slowpath`.
    /// True: `task` holds the lock. False: it is queued and holds the lock
    /// once off the list (granted by `Rwsem::rwsem_mark_wake`). `wake` gets
    /// each task this call wakes.
    pub fn down_read(&mut self, task: TaskId, jiffies: u64, wake: &mut impl FnMut(TaskId)) -> bool {
        // rwsem_read_trylock: RWSEM_READ_FAILED_MASK.
        if self.writer.is_none() && self.waiters.is_empty() && !self.handoff {
            self.readers += 1;
            return true;
        }
        // rwsem_down_read_slowpath: "To prevent a constant stream of
        // readers from starving a sleeping writer, don't attempt optimistic
        // lock stealing if the lock is very likely owned by readers"
        // (owner RWSEM_READER_OWNED, rcnt > 1, no writer).
        let rcnt = self.readers as u32 + 1;
        let reader_owned = self.writer.is_none() && rcnt > 1;
        if !reader_owned && self.writer.is_none() && !self.handoff {
            // Reader optimistic lock stealing; the first reader wakes the
            // readers queued at the head.
            self.readers += 1;
            if rcnt == 1 && !self.waiters.is_empty() {
                self.rwsem_mark_wake(WakeType::ReadOwned, jiffies, wake);
            }
            return true;
        }
        // queue:
        if self.waiters.is_empty() && self.writer.is_none() {
            self.readers += 1;
            return true;
        }
        self.waiters.push(RwsemWaiter {
            task,
            write: false,
            timeout: jiffies + RWSEM_WAIT_TIMEOUT,
            woken: false,
        });
        self.rwsem_cond_wake_waiter(jiffies, wake);
        !self.queued(task)
    }

    /// `down_write`: `rwsem_write_trylock`, else
    /// `rwsem_down_write_slowpath` up to its first sleep (no optimistic
    /// spinning). True: `task` holds the lock. False: it sleeps on the
    /// list; once woken ([`Rwsem::sleeping`] false) it calls
    /// [`Rwsem::write_retry`]. `rt`: `rt_or_dl_task`.
    pub fn down_write(
        &mut self,
        task: TaskId,
        rt: bool,
        jiffies: u64,
        wake: &mut impl FnMut(TaskId),
    ) -> bool {
        // rwsem_write_trylock: cmpxchg from RWSEM_UNLOCKED_VALUE.
        if !self.locked() && self.waiters.is_empty() && !self.handoff {
            self.writer = Some(task);
            return true;
        }
        self.waiters.push(RwsemWaiter {
            task,
            write: true,
            timeout: jiffies + RWSEM_WAIT_TIMEOUT,
            woken: false,
        });
        if self.waiters.len() > 1 {
            self.rwsem_cond_wake_waiter(jiffies, wake);
        }
        self.rwsem_try_write_lock(task, rt, jiffies)
    }

    /// A woken writer's next turn of `rwsem_down_write_slowpath`'s loop:
    /// `rwsem_try_write_lock`; false: asleep again until the next wake-up.
    pub fn write_retry(&mut self, task: TaskId, rt: bool, jiffies: u64) -> bool {
        if let Some(w) = self.waiters.iter_mut().find(|w| w.task == task) {
            w.woken = false;
        }
        self.rwsem_try_write_lock(task, rt, jiffies)
    }

    /// `rwsem_try_write_lock` for queued writer `task`: take the lock if it
    /// is free and no other waiter holds the hand-off; else set the
    /// hand-off bit if `task` waited too long (or is RT) and the lock is
    /// held.
    fn rwsem_try_write_lock(&mut self, task: TaskId, rt: bool, jiffies: u64) -> bool {
        let first = self.waiters[0].task;
        if self.handoff && task != first {
            // "Honor handoff bit and yield only when the first waiter is
            // the one that set it."
            return false;
        }
        let i = self
            .waiters
            .iter()
            .position(|w| w.task == task)
            .expect("a queued writer");
        if self.locked() {
            if self.handoff || (!rt && !time_after(jiffies, self.waiters[i].timeout)) {
                return false;
            }
            // first->handoff_set = true.
            self.handoff = true;
            return false;
        }
        self.writer = Some(task);
        self.handoff = false;
        self.waiters.remove(i);
        true
    }

    /// `up_read`: the last reader wakes the waiters (`rwsem_wake`).
    pub fn up_read(&mut self, jiffies: u64, wake: &mut impl FnMut(TaskId)) {
        self.readers -= 1;
        if !self.locked() && !self.waiters.is_empty() {
            self.rwsem_mark_wake(WakeType::Any, jiffies, wake);
        }
    }

    /// `up_write`: wake the waiters (`rwsem_wake`).
    pub fn up_write(&mut self, jiffies: u64, wake: &mut impl FnMut(TaskId)) {
        self.writer = None;
        if !self.waiters.is_empty() {
            self.rwsem_mark_wake(WakeType::Any, jiffies, wake);
        }
    }

    /// `downgrade_write`: the writer becomes a reader; readers at the head
    /// are granted the lock with it (`rwsem_downgrade_wake`).
    pub fn downgrade_write(&mut self, jiffies: u64, wake: &mut impl FnMut(TaskId)) {
        self.writer = None;
        self.readers += 1;
        if !self.waiters.is_empty() {
            self.rwsem_mark_wake(WakeType::ReadOwned, jiffies, wake);
        }
    }

    /// `rwsem_cond_wake_waiter` with the count as it is now (a waiter just
    /// queued): nothing while a writer holds the lock; readers at the head
    /// while readers hold it; the head otherwise.
    fn rwsem_cond_wake_waiter(&mut self, jiffies: u64, wake: &mut impl FnMut(TaskId)) {
        if self.writer.is_some() {
            return;
        }
        let t = if self.readers > 0 {
            WakeType::Readers
        } else {
            WakeType::Any
        };
        self.rwsem_mark_wake(t, jiffies, wake);
    }

    /// `rwsem_mark_wake` (the wait list is not empty).
    fn rwsem_mark_wake(&mut self, t: WakeType, jiffies: u64, wake: &mut impl FnMut(TaskId)) {
        let first = &mut self.waiters[0];
        if first.write {
            if t == WakeType::Any {
                // "Until the task is actually later awoken later by the
                // caller, other writers are able to steal it. Readers, on
                // the other hand, will block as they will notice the
                // queued writer."
                first.woken = true;
                wake(first.task);
            }
            return;
        }
        if t != WakeType::ReadOwned && self.writer.is_some() {
            // A writer stole the lock before the grant: a reader that
            // waited too long requests the hand-off.
            if time_after(jiffies, first.timeout) {
                self.handoff = true;
            }
            return;
        }
        // Grant up to MAX_READERS_WAKEUP read locks to all the readers in
        // the queue, writers skipped; clear the hand-off.
        let mut woken = 0;
        self.waiters.retain(|w| {
            if w.write || woken == MAX_READERS_WAKEUP {
                return true;
            }
            woken += 1;
            wake(w.task);
            false
        });
        self.readers += woken as u16;
        self.handoff = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: TaskId) {}

    /// Readers queued behind a writer at the head are all granted at
    /// `up_write`, also those behind a second writer, which stays queued.
    #[test]
    fn up_write_grants_every_queued_reader_skipping_writers() {
        let mut s = Rwsem::default();
        assert!(s.down_write(0, false, 0, &mut none));
        assert!(!s.down_read(1, 0, &mut none));
        assert!(!s.down_write(2, false, 0, &mut none));
        assert!(!s.down_read(3, 0, &mut none));
        let mut woken = Vec::new();
        s.up_write(0, &mut |t| woken.push(t));
        assert_eq!(woken, [1, 3]);
        assert_eq!(s.readers, 2);
        assert_eq!(s.waiters.len(), 1);
        assert!(s.sleeping(2));
    }

    /// A writer at the head is woken, not granted: a reader arriving
    /// before it runs steals the lock; after the timeout the writer's
    /// retry sets the hand-off and no reader steals any more.
    #[test]
    fn a_woken_writer_can_be_stolen_from_until_the_hand_off() {
        let mut s = Rwsem::default();
        assert!(s.down_read(0, 0, &mut none));
        assert!(!s.down_write(1, false, 0, &mut none));
        let mut woken = Vec::new();
        s.up_read(0, &mut |t| woken.push(t));
        assert_eq!(woken, [1]);
        assert!(!s.sleeping(1));
        // A reader steals the free lock (no hand-off yet).
        assert!(s.down_read(2, 1, &mut none));
        assert!(!s.write_retry(1, false, 1));
        assert!(!s.handoff, "not waited past RWSEM_WAIT_TIMEOUT");
        s.up_read(1, &mut none);
        assert!(s.down_read(3, 2, &mut none));
        let late = RWSEM_WAIT_TIMEOUT + 1;
        assert!(!s.write_retry(1, false, late));
        assert!(s.handoff);
        s.up_read(late, &mut none);
        assert!(
            !s.down_read(4, late, &mut none),
            "the hand-off stops stealing"
        );
        assert!(s.write_retry(1, false, late));
        assert_eq!(s.writer, Some(1));
        assert!(!s.handoff);
    }
}
