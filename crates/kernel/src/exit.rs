//! kernel/exit.c: a child's exit waking its parent, and the parent's
//! `wait()` (LTP mmapstress01's parent forks a replacement each time
//! `wait()` returns).
//!
//! ```text
//!   child:  do_exit -> exit_mm (mmput -> exit_mmap: the last user tears the
//!                   mm down, `mm::mmap::exit_mm`: pages, tables, one flush)
//!                   -> exit_notify -> do_notify_parent -> __wake_up_parent
//!                      -> try_to_wake_up(parent), from the child's CPU,
//!                         not WF_SYNC for placement (the waker is PF_EXITING)
//!                   -> do_task_dead (schedule)
//!   parent: wait4 -> do_wait: a zombie child? reap it and return;
//!                   else sleep on wait_chldexit until a child's exit wakes it
//! ```

use crate::effects::Effects;
use crate::world::{TaskState, World};
use crate::TaskId;
use machine::{Cost, CpuId};

/// kernel/exit.c: `do_notify_parent` → `__wake_up_parent`: the exiting
/// task `child` (still running on `cpu`) becomes a zombie its parent may
/// reap, and wakes the parent if it sleeps in `wait()`.
pub fn do_notify_parent(w: &mut World, cpu: CpuId, child: TaskId, fx: &mut Effects) {
    let Some(parent) = w.tasks[child as usize].us.parent else {
        return;
    };
    let p = &mut w.tasks[parent as usize];
    if p.state == TaskState::Exited {
        return;
    }
    p.us.zombies += 1;
    if p.us.in_wait {
        p.us.in_wait = false;
        crate::sched::core::try_to_wake_up(w, parent, cpu, fx);
    }
}

/// kernel/exit.c: `do_wait` for any child (`wait(&status)`): reap a
/// zombie if there is one (`release_task`) and return true; else the
/// task sleeps until a child's exit wakes it (false: the op runs again
/// then).
pub fn do_wait(w: &mut World, cpu: CpuId, t: TaskId, fx: &mut Effects) -> bool {
    fx.cost(Cost::SyscallEntryExit, 1);
    let task = &mut w.tasks[t as usize];
    if task.us.zombies > 0 {
        task.us.zombies -= 1;
        return true;
    }
    fx.label(crate::Label::Syscall { nr: "wait4" });
    task.us.in_wait = true;
    task.state = TaskState::Sleeping;
    w.set_curr(cpu, None);
    crate::sched::core::schedule(w, cpu, fx);
    false
}
