//! kernel/fork.c: `fork` → `copy_process` → `copy_mm` → `dup_mm` →
//! `dup_mmap`, and mm/memory.c: `copy_page_range`.
//!
//! The parent's private writable PTEs are write-protected and shared with
//! the child (each page gains a reference); `flush_tlb_mm(oldmm)` at the end
//! makes every CPU drop the parent's writable translations. The next write
//! by the parent takes a write-protect fault: `wp_page_copy` while the child
//! still maps the page, `wp_page_reuse` once the child has exec'd or exited.

use crate::effects::{Effects, Label};
use crate::mm::memory::{pte_alloc_walk, pte_table};
use crate::user::UserOp;
use crate::world::{Flow, World};
use crate::{MmId, TaskId};
use machine::mem::{pte, table_index};
use machine::{Cost, CpuId, HPAGE_SIZE, PAGE_SIZE};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `copy_process`, `dup_mm`: a new mm, `mmap_write_lock(oldmm)`,
    /// `vma_start_write` of its VMAs.
    Enter,
    /// Queued in `mmap_write_lock(oldmm)`: tries again when woken.
    LockWait,
    /// `__vma_enter_locked`: wait for the VMAs' readers; copy the VMAs.
    VmaWait,
    /// `copy_page_range` of VMA `vma`, one PTE table (`copy_pte_range`) per step.
    Copy { vma: u16, addr: u64 },
    /// `flush_tlb_mm(oldmm)`.
    Flush,
    /// `mmap_write_unlock(oldmm)`; `wake_up_new_task(child)`.
    Done,
}

/// `fork()` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fork {
    pub child_cpu: CpuId,
    pub child_prog: Arc<[UserOp]>,
    pub child_mm: MmId,
    pub pc: Pc,
}

impl Fork {
    /// dup_mmap: `mmap_write_lock(oldmm)` (queued: sleep until woken, then
    /// try again), `vma_start_write(mpnt)` of each VMA it copies (all at
    /// once here).
    fn dup_mmap_lock(&mut self, w: &mut World, mm: MmId, task: TaskId, fx: &mut Effects) -> Flow {
        if !crate::mm::mmap_lock::mmap_write_lock(w, mm, task, fx) {
            return Flow::Block;
        }
        crate::mm::mmap_lock::vma_start_write(w, mm, 0, u64::MAX, fx);
        self.pc = Pc::VmaWait;
        Flow::Continue
    }

    pub fn new(child_cpu: CpuId, child_prog: Arc<[UserOp]>) -> Self {
        Fork {
            child_cpu,
            child_prog,
            child_mm: 0,
            pc: Pc::Enter,
        }
    }

    /// Can the next step run: not asleep in `mmap_write_lock(oldmm)`, then
    /// the VMAs' readers gone; afterwards this task holds them.
    pub fn can_run(&self, w: &World, task: TaskId) -> bool {
        let mm = w.tasks[task as usize].mm;
        match self.pc {
            Pc::LockWait => !crate::mm::mmap_lock::mmap_lock_sleeping(w, mm, task),
            Pc::VmaWait => crate::mm::mmap_lock::vma_start_write_free(w, mm, 0, u64::MAX),
            _ => true,
        }
    }

    /// kernel/fork.c: `dup_mmap`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        let mm = w.tasks[task as usize].mm;
        if !self.can_run(w, task) {
            // dup_mmap's mmap_write_lock(oldmm) sleeps.
            return Flow::Block;
        }
        match self.pc {
            Pc::Enter => {
                fx.cost(Cost::SyscallEntryExit, 1);
                fx.cost(Cost::ForkFixed, 1);
                fx.label(Label::Syscall { nr: "fork" });
                let child = match w.mm_alloc() {
                    Ok(m) => m,
                    Err(e) => {
                        w.violation(0, 0, 0, format!("fork: {e}"));
                        return Flow::Return;
                    }
                };
                self.child_mm = child;
                self.pc = Pc::LockWait;
                self.dup_mmap_lock(w, mm, task, fx)
            }
            Pc::LockWait => self.dup_mmap_lock(w, mm, task, fx),
            Pc::VmaWait => {
                let child = self.child_mm;
                *w.mms[child as usize].vmas = w.mms[mm as usize].vmas.clone();
                for v in w.mms[child as usize].vmas.iter_mut() {
                    // vm_area_dup: the copy starts unlocked.
                    v.vm_write_locked = false;
                    v.vm_readers = 0;
                }
                w.counters.forks += 1;
                fx.label(Label::Fork { parent: mm, child });
                let start = w.mms[mm as usize].vmas.first().map_or(0, |v| v.start);
                self.pc = Pc::Copy {
                    vma: 0,
                    addr: start,
                };
                Flow::Yield
            }
            Pc::Copy { vma, addr } => {
                let Some(v) = w.mms[mm as usize].vmas.get(vma as usize).cloned() else {
                    self.pc = Pc::Flush;
                    return Flow::Continue;
                };
                if addr >= v.end || v.hugetlb {
                    let next = w.mms[mm as usize]
                        .vmas
                        .get(vma as usize + 1)
                        .map_or(0, |n| n.start);
                    self.pc = Pc::Copy {
                        vma: vma + 1,
                        addr: next,
                    };
                    return Flow::Continue;
                }
                let cow = v.writable && v.file.is_none();
                let next = copy_pte_range(w, cpu, mm, self.child_mm, addr, v.end, cow, fx);
                self.pc = Pc::Copy { vma, addr: next };
                Flow::Yield
            }
            Pc::Flush => {
                self.pc = Pc::Done;
                crate::arch::flush_tlb_mm(w, mm, fx)
            }
            Pc::Done => {
                crate::mm::mmap::mmap_write_unlock(w, mm, fx);
                let prog: Vec<UserOp> = self.child_prog.to_vec();
                // wake_up_new_task → select_task_rq(WF_FORK): a child that
                // may run anywhere (it inherits its parent's cpus_mask) is
                // placed by sched_balance_fork; else it goes where the
                // workload put it.
                let all = w.tasks[task as usize].cpus_allowed_all;
                let to = if all {
                    crate::sched::fair::select_task_rq_fair_fork(w, task, cpu as u32) as CpuId
                } else {
                    self.child_cpu
                };
                if all && to != cpu {
                    w.counters.sched_fork_remote += 1;
                }
                let child = w.spawn(self.child_mm, to, prog, false);
                // activate_task; wakeup_preempt → resched_curr of `to`.
                crate::sched::core::resched_curr(w, cpu, to, fx);
                // copy_process: p->real_parent = current.
                w.tasks[child as usize].us.parent = Some(task);
                if all {
                    w.tasks[child as usize].cpus_allowed_all = true;
                    w.cpus[to as usize].fair.idle_stamp = None;
                }
                fx.wake(to);
                Flow::Return
            }
        }
    }
}

/// mm/memory.c: `copy_pte_range` → `copy_present_pte` for the part of
/// `[addr, end)` in one PTE table: share every present page with the child
/// (`folio_try_dup_anon_rmap_pte`) and write-protect both PTEs of a
/// writable private mapping (`ptep_set_wrprotect`). Returns where the next
/// table starts.
#[allow(clippy::too_many_arguments)]
fn copy_pte_range(
    w: &mut World,
    cpu: CpuId,
    src: MmId,
    dst: MmId,
    addr: u64,
    end: u64,
    cow: bool,
    fx: &mut Effects,
) -> u64 {
    let next = ((addr / HPAGE_SIZE) + 1) * HPAGE_SIZE;
    let stop = next.min(end);
    let Some(table) = pte_table(w, src, addr) else {
        return stop;
    };
    let dst_table = match pte_alloc_walk(w, cpu, dst, addr) {
        Ok(t) => t,
        Err(e) => {
            w.violation(0, 0, addr, format!("fork: {e}"));
            return end;
        }
    };
    let mut copied = 0u32;
    let mut va = addr & !(PAGE_SIZE - 1);
    while va < stop {
        let idx = table_index(va, 1);
        let mut e = w.mem.read(table, idx).unwrap_or(0);
        if pte::present(e) {
            if cow && pte::writable(e) {
                e &= !pte::WRITE;
                w.mem.write(table, idx, e);
            }
            w.mem.get_page(pte::pfn(e));
            w.mem.write(dst_table, idx, e);
            copied += 1;
        }
        va += PAGE_SIZE;
    }
    fx.cost(Cost::CopyPte, copied);
    stop
}
