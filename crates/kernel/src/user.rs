//! User space: each task runs a small program of benchmark operations.
//!
//! The ops are what the benchmarks' C loops do (`addr[0] = 1`,
//! `madvise(addr, len, MADV_DONTNEED)`, a `nop` busy-wait ...). Loads and
//! stores go through the hardware model ([`crate::hw::mmu`]); system calls
//! push the kernel path that implements them.

use crate::effects::{Effects, Stat};
use crate::mm::madvise::MadviseDontneed;
use crate::mm::memory::PageFault;
use crate::mm::mmap::Munmap;
use crate::world::{Flow, Frame, Task, World};
use crate::TaskId;
use machine::{Cost, CpuId, PAGE_SIZE};
use std::sync::Arc;

/// One operation of a user program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UserOp {
    /// Start timing measured operation `op` (an id from [`World::op_id`]).
    OpBegin(u16),
    /// Stop timing it; one latency sample.
    OpEnd(u16),
    /// One load or store.
    Touch { addr: u64, write: bool },
    /// One access per page over `[start, start + pages * 4 KiB)` (memset-like).
    TouchRange { start: u64, pages: u32, write: bool },
    /// `memset` of `pages` whole pages from `start` (usemem's inner loop):
    /// one store per page through the MMU plus `user_page_write` each.
    Memset { start: u64, pages: u32 },
    /// `madvise(start, len, MADV_DONTNEED)`.
    MadviseDontneed { start: u64, len: u64 },
    /// `mmap(start, len, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED)`.
    Mmap { start: u64, len: u64 },
    /// `munmap(start, len)`.
    Munmap { start: u64, len: u64 },
    /// `mmap(start, len, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_FIXED, fd, 0)` of file `file`.
    MmapFile { start: u64, len: u64, file: u32 },
    /// `mmap(start, len, ..., MAP_SHARED|MAP_FIXED, hugetlbfs_fd, 0)`.
    MmapHugetlb { start: u64, len: u64 },
    /// `madvise(start, len, MADV_COLLAPSE)`.
    MadviseCollapse { start: u64, len: u64 },
    /// `pin_user_pages_fast` (FOLL_PIN) of `pages` pages (e.g. an `O_DIRECT`
    /// buffer), at a window that moves by `stride` pages each loop iteration
    /// over a region of `span` pages starting at `base`. The pins stay with
    /// the task until [`UserOp::UnpinUserPages`].
    GupFast {
        base: u64,
        span: u32,
        pages: u32,
        stride: u32,
    },
    /// Wait for `n` I/Os priced `cost` each (an `O_DIRECT` read: `io_schedule`
    /// until the completion interrupt): the task sleeps, its CPU idles.
    IoWait { cost: Cost, n: u32 },
    /// `while (madvise(...) && errno == EAGAIN)`: back to op `to` if the last
    /// system call returned -EAGAIN (`UserState::ret`).
    RetryOnEagain { to: u16 },
    /// `unpin_user_pages_dirty_lock` of every page the task's GUP-fast calls
    /// pinned (the end of the I/O).
    UnpinUserPages,
    /// Busy-wait forever in user mode (the seed's `while (!stop) nop;`).
    Spin,
    /// Compute for `ns` nanoseconds without touching memory.
    Compute { ns: u32 },
    /// Time spent outside the model, priced from the cost profile
    /// (e.g. `TaskCreate` × i staggers the i-th thread of a benchmark).
    Charge { cost: Cost, n: u32 },
    /// Jump back to op `to` until the loop has run `times` times in all.
    Loop { to: u16, times: u64 },
    /// Leave the measured set, then keep spinning (so the CPU stays a target).
    DoneSpin,
    /// `fork()`: the child runs `child` on CPU `child_cpu` (it typically
    /// `exec`s at once: see [`UserOp::Exec`]).
    Fork {
        child_cpu: CpuId,
        child: Arc<[UserOp]>,
    },
    /// `execve()` of a small program: the inherited address space
    /// `[start, start + len)` is torn down (`exec_mmap` → `mmput` →
    /// `exit_mmap`, modelled as unmapping it), plus `exec_fixed`.
    Exec { start: u64, len: u64 },
    /// A system call whose kernel side `vmalloc`s `pages` pages as kernel
    /// object `obj` (its address is the vmap allocator's choice), with
    /// `VM_FLUSH_RESET_PERMS` if `reset_perms` (module or BPF memory).
    Vmalloc {
        obj: u8,
        pages: u32,
        reset_perms: bool,
    },
    /// A system call whose kernel side `vfree`s object `obj`.
    Vfree { obj: u8 },
    /// A system call whose kernel side reads object `obj`'s first page if
    /// the object exists (a refcounted object lookup).
    KernelRead { obj: u8 },
    /// `sched_yield()`: let the next task on this CPU's runqueue run.
    Yield,
    /// `sched_setaffinity(0, {cpu})`: the task may run on `cpu` only and
    /// moves there at once if it runs elsewhere (a benchmark's child
    /// pinning itself after it was born on its parent's CPU).
    SchedSetaffinity { cpu: CpuId },
    /// cyclictest's loop: `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
    /// next)` with `next += period_ns`; the driver starts op `op` when the
    /// timer expires, so the `OpEnd(op)` after it measures wake-up latency.
    ClockNanosleep { period_ns: u32, op: u16 },
    /// `wait(&status)` for any child (`do_wait`): returns at once if a
    /// child has exited and was not reaped yet, else sleeps until one exits.
    Wait,
    /// `exit()`: the last task of an mm tears it down (`exit_mmap`: pages,
    /// tables below the PGD, the `fullmm` flush), then
    /// `do_notify_parent` wakes a parent sleeping in [`UserOp::Wait`].
    /// A program that ends without it leaves its CPU and keeps the mm as it
    /// is (as if another user still held `mm_users`): what tests use to
    /// look at a world's page tables after the run.
    Exit,
    /// `madvise(start, len, MADV_PAGEOUT)`: reclaim the range now
    /// (batched unmap flush, `arch_tlbbatch_flush`).
    MadvisePageout { start: u64, len: u64 },
    /// A kswapd pass (kernel thread): `balance_pgdat` → `shrink_node` →
    /// `shrink_inactive_list` over the anonymous folios `mm` maps in
    /// `[start, start + len)`, `SWAP_CLUSTER_MAX` per `shrink_folio_list`.
    Kswapd {
        mm: crate::MmId,
        start: u64,
        len: u64,
    },
    /// `migrate_pages(2)` as `migratepages PID FROM TO` calls it: move
    /// `mm`'s folios in `[start, start + len)` on node `from` to node `to`
    /// (`mm` may be another process's). On odd iterations of the
    /// enclosing loop `from` and `to` swap: back and forth.
    MigratePages {
        mm: crate::MmId,
        start: u64,
        len: u64,
        from: u8,
        to: u8,
    },
}

/// The same program with every `MADV_DONTNEED` turned into `MADV_PAGEOUT`
/// (a madvise workload or check world reused for reclaim's batched flush).
pub fn pageout_instead_of_dontneed(prog: &[UserOp]) -> std::sync::Arc<[UserOp]> {
    prog.iter()
        .map(|op| match *op {
            UserOp::MadviseDontneed { start, len } => UserOp::MadvisePageout { start, len },
            ref other => other.clone(),
        })
        .collect()
}

/// An op id no measurement uses: a `ClockNanosleep` with it only paces.
pub const NO_OP: u16 = u16::MAX;

/// Program counter and loop state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UserState {
    pub pc: u16,
    pub iter: u64,
    /// The last system call's return value where the model keeps one
    /// (`MADV_COLLAPSE`: 0 or `-errno`).
    pub ret: i32,
    /// Progress inside a `TouchRange`.
    pub sub: u32,
    /// `clock_nanosleep(TIMER_ABSTIME)`: the next wake-up time (ns).
    pub deadline: u64,
    /// `DoneSpin` already reported.
    pub done: bool,
    /// The task that forked this one (`real_parent`): its exit wakes it.
    pub parent: Option<TaskId>,
    /// Exited children not yet reaped by [`UserOp::Wait`].
    pub zombies: u32,
    /// Sleeping in `wait()` (on `wait_chldexit`), not on a timer.
    pub in_wait: bool,
}

/// Can the task's user code make progress (i.e. it is not spinning idly)?
#[inline]
pub fn can_run(w: &World, task: &Task) -> bool {
    match task.prog.get(task.us.pc as usize) {
        Some(UserOp::Spin) => false,
        Some(UserOp::DoneSpin) => !task.us.done,
        // mmap: not asleep in mmap_write_lock (`us.sub` = 2), then
        // (`us.sub` = 1) the readers of the VMAs it replaces gone.
        Some(
            UserOp::Mmap { start, len }
            | UserOp::MmapHugetlb { start, len }
            | UserOp::MmapFile { start, len, .. },
        ) => match task.us.sub {
            0 => true,
            1 => crate::mm::mmap_lock::vma_start_write_free(w, task.mm, *start, start + len),
            _ => !crate::mm::mmap_lock::mmap_lock_sleeping(w, task.mm, task.id),
        },
        _ => task.state != crate::world::TaskState::Exited,
    }
}

/// Run the user program until it does something visible.
pub fn step_user(w: &mut World, cpu: CpuId, t: TaskId, fx: &mut Effects) -> Flow {
    let task = &w.tasks[t as usize];
    let pc = task.us.pc as usize;
    // Read in place (its fields copied out as each arm binds them), not
    // cloned: the program is shared and no step changes it.
    let Some(op) = task.prog.get(pc) else {
        w.task_exit(cpu, t, fx);
        return Flow::Yield;
    };
    let is_mmap = matches!(
        *op,
        UserOp::Mmap { .. } | UserOp::MmapHugetlb { .. } | UserOp::MmapFile { .. }
    );
    if is_mmap && !can_run(w, &w.tasks[t as usize]) {
        // mmap's mmap_write_lock sleeps.
        return Flow::Block;
    }
    let advance = |w: &mut World| {
        let us = &mut w.tasks[t as usize].us;
        us.pc += 1;
        us.sub = 0;
    };
    match *op {
        UserOp::OpBegin(id) => {
            fx.stat(Stat::OpBegin(t, id));
            advance(w);
            Flow::Continue
        }
        UserOp::OpEnd(id) => {
            fx.stat(Stat::OpEnd(t, id));
            advance(w);
            Flow::Continue
        }
        UserOp::Touch { addr, write } => {
            access(w, cpu, t, addr, write, fx, Next::Op);
            Flow::Yield
        }
        UserOp::TouchRange {
            start,
            pages,
            write,
        } => {
            let sub = w.tasks[t as usize].us.sub;
            if sub >= pages {
                advance(w);
                return Flow::Continue;
            }
            let va = start + sub as u64 * PAGE_SIZE;
            access(w, cpu, t, va, write, fx, Next::Page);
            Flow::Yield
        }
        UserOp::Memset { start, pages } => {
            let sub = w.tasks[t as usize].us.sub;
            if sub >= pages {
                advance(w);
                return Flow::Continue;
            }
            let va = start + sub as u64 * PAGE_SIZE;
            if access(w, cpu, t, va, true, fx, Next::Page) {
                fx.cost(Cost::UserPageWrite, 1);
            }
            Flow::Yield
        }
        UserOp::MadviseDontneed { start, len } => {
            advance(w);
            call(w, t, || Frame::Madvise(MadviseDontneed::new(start, len)))
        }
        UserOp::MadvisePageout { start, len } => {
            advance(w);
            call(w, t, || {
                Frame::MadvisePageout(crate::mm::vmscan::MadvisePageout::new(start, len))
            })
        }
        UserOp::Kswapd { mm, start, len } => {
            advance(w);
            use crate::mm::vmscan::{Isolate, ShrinkFolioList};
            let r = ShrinkFolioList::new(w, mm, start, start + len, Isolate::Cluster);
            call(w, t, || Frame::ShrinkFolioList(r))
        }
        UserOp::MigratePages {
            mm,
            start,
            len,
            from,
            to,
        } => {
            let (from, to) = match w.tasks[t as usize].us.iter % 2 {
                0 => (from, to),
                _ => (to, from),
            };
            advance(w);
            use crate::mm::migrate::MigratePages;
            let m = MigratePages::new(w, mm, start, start + len, from, to);
            call(w, t, || Frame::MigratePages(m))
        }
        UserOp::Munmap { start, len } => {
            advance(w);
            call(w, t, || Frame::Munmap(Munmap::new(start, len)))
        }
        UserOp::MadviseCollapse { start, len } => {
            advance(w);
            call(w, t, || {
                Frame::MadviseCollapse(crate::mm::khugepaged::MadviseCollapse::new(start, len))
            })
        }
        UserOp::GupFast {
            base,
            span,
            pages,
            stride,
        } => {
            let us = &w.tasks[t as usize].us;
            let slots = span.saturating_sub(pages).max(1) as u64;
            let first = (us.iter * stride as u64) % slots;
            advance(w);
            let start = base + first * PAGE_SIZE;
            call(w, t, || {
                Frame::GupFast(crate::mm::gup::GupFast::new(start, pages))
            })
        }
        UserOp::UnpinUserPages => {
            // The pins outlive the walk's step: the unpin is a step of its
            // own even right after the walk (no I/O in between).
            let us = &mut w.tasks[t as usize].us;
            if us.sub == 0 {
                us.sub = 1;
                return Flow::Yield;
            }
            crate::mm::gup::unpin_user_pages(w, t, fx);
            advance(w);
            Flow::Yield
        }
        UserOp::MmapFile { start, len, file } => {
            let flow = sys_mmap(w, t, start, len, Mapping::File(file), fx);
            if !matches!(flow, Flow::Block) {
                advance(w);
            }
            flow
        }
        UserOp::Mmap { start, len } => {
            let flow = sys_mmap(w, t, start, len, Mapping::Anon, fx);
            if !matches!(flow, Flow::Block) {
                advance(w);
            }
            flow
        }
        UserOp::MmapHugetlb { start, len } => {
            let flow = sys_mmap(w, t, start, len, Mapping::Hugetlb, fx);
            if !matches!(flow, Flow::Block) {
                advance(w);
            }
            flow
        }
        UserOp::Spin => Flow::Block,
        UserOp::DoneSpin => {
            done_spin(w, t, fx);
            Flow::Block
        }
        UserOp::Compute { ns } => {
            fx.ns(ns);
            advance(w);
            Flow::Yield
        }
        UserOp::Charge { cost, n } => {
            fx.cost(cost, n);
            advance(w);
            Flow::Yield
        }
        UserOp::Loop { to, times } => {
            fx.cost(Cost::UserLoop, 1);
            let us = &mut w.tasks[t as usize].us;
            us.iter += 1;
            if us.iter < times {
                us.pc = to;
            } else {
                us.pc += 1;
                us.iter = 0;
            }
            us.sub = 0;
            Flow::Continue
        }
        UserOp::Fork {
            child_cpu,
            ref child,
        } => {
            let child = child.clone();
            advance(w);
            call(w, t, || {
                Frame::Fork(crate::mm::fork::Fork::new(child_cpu, child))
            })
        }
        UserOp::Exec { start, len } => {
            // Tear down the old mm first, then the rest of execve.
            let us = &mut w.tasks[t as usize].us;
            if us.sub == 0 {
                us.sub = 1;
                fx.label(crate::Label::Syscall { nr: "execve" });
                return call(w, t, || Frame::Munmap(Munmap::exit_mmap(start, len)));
            }
            fx.cost(Cost::ExecFixed, 1);
            advance(w);
            Flow::Yield
        }
        UserOp::Vmalloc {
            obj,
            pages,
            reset_perms,
        } => {
            fx.cost(Cost::SyscallEntryExit, 1);
            crate::mm::vmalloc::vmalloc(w, cpu, obj, pages, reset_perms, fx);
            advance(w);
            Flow::Yield
        }
        UserOp::Vfree { obj } => {
            fx.cost(Cost::SyscallEntryExit, 1);
            advance(w);
            call(w, t, || Frame::Vfree(crate::mm::vmalloc::Vfree::new(obj)))
        }
        UserOp::KernelRead { obj } => {
            kernel_read(w, cpu, obj, fx);
            advance(w);
            Flow::Yield
        }
        UserOp::ClockNanosleep { period_ns, op } => {
            advance(w);
            clock_nanosleep(w, cpu, t, period_ns, op, fx);
            Flow::Yield
        }
        UserOp::RetryOnEagain { to } => {
            let us = &mut w.tasks[t as usize].us;
            if us.ret == -crate::mm::khugepaged::EAGAIN {
                us.ret = 0;
                us.pc = to;
                us.sub = 0;
                // A user-mode branch: the retry is the next step.
                fx.cost(Cost::UserLoop, 1);
                return Flow::Yield;
            }
            advance(w);
            Flow::Continue
        }
        UserOp::IoWait { cost, n } => {
            advance(w);
            if n == 0 {
                return Flow::Continue;
            }
            io_wait(w, cpu, t, cost, n, fx);
            Flow::Yield
        }
        UserOp::Yield => {
            fx.cost(Cost::SyscallEntryExit, 1);
            advance(w);
            crate::sched::core::scheduler_tick(w, cpu, None, fx);
            Flow::Yield
        }
        UserOp::SchedSetaffinity { cpu: to } => {
            fx.cost(Cost::SyscallEntryExit, 1);
            advance(w);
            crate::sched::core::sched_setaffinity(w, cpu, t, to, fx);
            Flow::Yield
        }
        UserOp::Wait => {
            if crate::exit::do_wait(w, cpu, t, fx) {
                advance(w);
            }
            Flow::Yield
        }
        UserOp::Exit => {
            if let Some(f) = crate::mm::mmap::exit_mm(w, t) {
                return call(w, t, || Frame::Munmap(f));
            }
            if let Some(flush) = crate::arch::riscv::tlbflush::exit_mmap(w, t) {
                return flush;
            }
            crate::exit::do_notify_parent(w, cpu, t, fx);
            w.task_exit(cpu, t, fx);
            Flow::Yield
        }
    }
}

/// What an `mmap` maps.
enum Mapping {
    Anon,
    Hugetlb,
    File(u32),
}

/// mm/mmap.c: `mmap(MAP_FIXED)`: the syscall under `mmap_write_lock`
/// (queued: `us.sub` = 2, [`Flow::Block`] until woken), the VMAs it
/// replaces write-locked (`vma_start_write`; their readers waited for:
/// `us.sub` = 1), the new VMA.
fn sys_mmap(
    w: &mut World,
    t: TaskId,
    start: u64,
    len: u64,
    what: Mapping,
    fx: &mut Effects,
) -> Flow {
    let mm = w.tasks[t as usize].mm;
    if w.tasks[t as usize].us.sub == 0 {
        fx.cost(Cost::SyscallEntryExit, 1);
        fx.cost(Cost::MmapFixed, 1);
        fx.label(crate::Label::Syscall { nr: "mmap" });
        w.tasks[t as usize].us.sub = 2;
    }
    if w.tasks[t as usize].us.sub == 2 {
        if !crate::mm::mmap_lock::mmap_write_lock(w, mm, t, fx) {
            return Flow::Block;
        }
        crate::mm::mmap_lock::vma_start_write(w, mm, start, start + len, fx);
        w.tasks[t as usize].us.sub = 1;
    }
    if !crate::mm::mmap_lock::vma_start_write_free(w, mm, start, start + len) {
        return Flow::Block;
    }
    w.tasks[t as usize].us.sub = 0;
    w.mms[mm as usize]
        .vmas
        .retain(|v| v.end <= start || v.start >= start + len);
    match what {
        Mapping::Anon => w.add_vma(mm, start, len),
        Mapping::Hugetlb => w.add_vma_hugetlb(mm, start, len),
        Mapping::File(file) => w.add_vma_file(mm, start, len, file),
    }
    crate::mm::mmap_lock::mmap_write_unlock(w, mm, fx);
    Flow::Yield
}

/// The program's measured part is over: report the task done (once); it
/// spins idle from now on.
fn done_spin(w: &mut World, t: TaskId, fx: &mut Effects) {
    let task = &mut w.tasks[t as usize];
    if !task.us.done {
        task.us.done = true;
        if task.measured {
            task.measured = false;
            *w.measuring -= 1;
            fx.stat(Stat::Done(t));
        }
    }
}

/// A system call that reads vmalloc'd object `obj` if it exists: the
/// kernel's own translation of its address through this CPU's TLB.
fn kernel_read(w: &mut World, cpu: CpuId, obj: u8, fx: &mut Effects) {
    fx.cost(Cost::SyscallEntryExit, 1);
    if let Some(va) = crate::mm::vmalloc::obj_va(w, obj) {
        crate::hw::mmu::kernel_access(w, cpu, va, fx);
    }
}

/// kernel/time/hrtimer.c: `clock_nanosleep(TIMER_ABSTIME)` on the next
/// period (cyclictest's loop): the task sleeps, its hrtimer armed on this
/// CPU, and the CPU schedules.
fn clock_nanosleep(
    w: &mut World,
    cpu: CpuId,
    t: TaskId,
    period_ns: u32,
    op: u16,
    fx: &mut Effects,
) {
    fx.cost(Cost::SyscallEntryExit, 1);
    fx.label(crate::Label::Syscall {
        nr: "clock_nanosleep",
    });
    let now = w.now;
    let task = &mut w.tasks[t as usize];
    let base = if task.us.deadline == 0 {
        now
    } else {
        task.us.deadline
    };
    task.us.deadline = (base + period_ns as u64).max(now + 1);
    task.state = crate::world::TaskState::Sleeping;
    fx.timer(cpu, t, op, task.us.deadline);
    w.set_curr(cpu, None);
    crate::sched::core::schedule(w, cpu, fx);
}

/// The task waits for `n` I/Os of `cost` each: it sleeps, the CPU's timer
/// standing for the completion interrupt, and the CPU schedules.
fn io_wait(w: &mut World, cpu: CpuId, t: TaskId, cost: Cost, n: u32, fx: &mut Effects) {
    let task = &mut w.tasks[t as usize];
    task.us.deadline = w.now;
    task.state = crate::world::TaskState::Sleeping;
    fx.sleep(cpu, t, cost, n);
    w.set_curr(cpu, None);
    crate::sched::core::schedule(w, cpu, fx);
}

/// A system call's kernel path: what `Flow::Call` does from user mode (the
/// kernel stack is empty, so the run loop takes the frame straight back
/// off it), with the frame built in its box rather than moved there.
fn call(w: &mut World, t: TaskId, f: impl FnOnce() -> Frame) -> Flow {
    debug_assert!(w.tasks[t as usize].kstack.is_empty(), "user mode");
    w.tasks[t as usize].kstack.push_with(f);
    Flow::Continue
}

/// What a completed access moves on to.
enum Next {
    /// The next op (`Touch`).
    Op,
    /// The next page of the same op (`TouchRange`, `Memset`).
    Page,
}

/// A load/store, the end of the step either way: done (advance; returns
/// true) or a page fault (push the handler, which runs from the next step:
/// what `Flow::CallYield` does, with the frame built in its box rather
/// than moved there through the `Flow`; returns false).
fn access(
    w: &mut World,
    cpu: CpuId,
    t: TaskId,
    va: u64,
    write: bool,
    fx: &mut Effects,
    next: Next,
) -> bool {
    match crate::hw::mmu::user_access(w, cpu, va, write, fx) {
        crate::hw::mmu::Access::Done => {
            let task = &mut w.tasks[t as usize];
            task.spurious_streak = 0;
            match next {
                Next::Op => task.us.pc += 1,
                Next::Page => task.us.sub += 1,
            }
            true
        }
        crate::hw::mmu::Access::Fault => {
            // The access is retried after the fault returns.
            let fault = || Frame::PageFault(PageFault::new(va, write));
            w.tasks[t as usize].kstack.push_with(fault);
            false
        }
    }
}
