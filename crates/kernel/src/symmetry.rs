//! Renaming CPUs, for the checker's symmetry reduction.
//!
//! Checker machinery, not a model of anything in the kernel. Nothing in the
//! model depends on the numeric value of a CPU id or a task id, only on
//! which is which: renaming the CPUs (and, with them, the tasks pinned to
//! them) everywhere in a world gives a world that behaves the same up to
//! that renaming. The checker uses it to store one state per orbit:
//! [`canonical_fingerprint`] is the least fingerprint over a set of CPU
//! permutations (over those that order the CPUs' id-free signatures
//! least, usually one).
//!
//! A CPU permutation `perm` maps CPU `c` to `perm[c]`. Tasks follow their
//! CPUs: the k-th task (in id order) whose `cpu` is `c` becomes the k-th
//! task whose `cpu` is `perm[c]`, so the relative id order of the tasks of
//! one CPU (which breaks ties, e.g. between timers) is kept. When the two
//! CPUs do not hold as many tasks, the permutation does not apply to that
//! world ([`World::task_perm`] is `None`).
//!
//! Every field that names a CPU or a task is renamed: the `cpus` and `tasks`
//! vectors (order and `id`), `Task::cpu`, `Cpu::curr`/`rq`/`cfd_locked`,
//! queued csds (initiator, and the `flush_tlb_info` they point to),
//! `flush_tlb_info.initiating_cpu` (of infos ever filled in), every cpumask (`mm_cpumask`, the masks
//! of flushes in progress, RCU batches), `mmap_lock` owners, `fork`'s child
//! CPU (in frames and programs), `Violation::cpu`, the store buffers
//! (their order and the CPUs their locations name), and the weak model's
//! messages and views ([`crate::hw::weak_mem::WeakMem::renamed`]). Violation texts are
//! free-form and keep the names they were written with. Counters hash to
//! nothing and are left as they are.

use crate::arch::x86::tlb::{FlushTlbInfo, InfoRef};
use crate::cow::Tracked;
use crate::hw::filled_index::FilledIndex;
use crate::hw::memory_model::{Buffered, StoreBuffer};
use crate::hw::psc_index::PscIndex;
use crate::kernel_smp::{CallFunc, Csd};
use crate::locking::rwsem::{Rwsem, RwsemWaiter};
use crate::user::UserOp;
use crate::world::{field, Cpu, Frame, Hint, Mm, RcuBatch, Task, Violation, World};
use crate::TaskId;
use machine::CpuId;
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A joint renaming of CPU ids and task ids.
struct Renaming<'a> {
    cpu: &'a [CpuId],
    task: Vec<TaskId>,
}

impl Renaming<'_> {
    fn cpu(&self, c: CpuId) -> CpuId {
        self.cpu[c as usize]
    }
    fn task(&self, t: TaskId) -> TaskId {
        self.task[t as usize]
    }
    fn info_ref(&self, r: InfoRef) -> InfoRef {
        match r {
            InfoRef::PerCpu(c) => InfoRef::PerCpu(self.cpu(c)),
            InfoRef::Stack(t) => InfoRef::Stack(self.task(t)),
        }
    }
    fn call_func(&self, f: CallFunc) -> CallFunc {
        match f {
            CallFunc::FlushTlbFunc(r) => CallFunc::FlushTlbFunc(self.info_ref(r)),
            CallFunc::DoKernelRangeFlush(r) => CallFunc::DoKernelRangeFlush(self.info_ref(r)),
            CallFunc::SchedTtwuPending(t) => CallFunc::SchedTtwuPending(self.task(t)),
            other => other,
        }
    }
    /// A `flush_tlb_info` never filled in (all zero, as at boot) names no
    /// CPU: its `initiating_cpu` 0 is not an id and stays, or boot states
    /// whose groups include CPU 0 would never coincide.
    fn flush_info(&self, f: &FlushTlbInfo) -> FlushTlbInfo {
        if *f == FlushTlbInfo::default() {
            return *f;
        }
        FlushTlbInfo {
            initiating_cpu: self.cpu(f.initiating_cpu),
            ..*f
        }
    }
    /// A program with `fork`'s child CPUs renamed (shared as is when it forks nothing).
    fn prog(&self, p: &Arc<[UserOp]>) -> Arc<[UserOp]> {
        let names_cpu =
            |op: &UserOp| matches!(op, UserOp::Fork { .. } | UserOp::SchedSetaffinity { .. });
        if !p.iter().any(names_cpu) {
            return p.clone();
        }
        p.iter()
            .map(|op| match op {
                UserOp::Fork { child_cpu, child } => UserOp::Fork {
                    child_cpu: self.cpu(*child_cpu),
                    child: self.prog(child),
                },
                UserOp::SchedSetaffinity { cpu } => UserOp::SchedSetaffinity {
                    cpu: self.cpu(*cpu),
                },
                other => other.clone(),
            })
            .collect()
    }
    fn frame(&self, f: &Frame) -> Frame {
        let mut f = f.clone();
        match &mut f {
            Frame::FlushTlbMmRange(x) => x.info = x.info.map(|r| self.info_ref(r)),
            Frame::FlushTlbKernelRange(x) => x.info = x.info.map(|r| self.info_ref(r)),
            Frame::ShrinkFolioList(x) => x.ubc.arch = x.ubc.arch.permuted(self.cpu),
            Frame::MigratePages(x) => x.ubc.arch = x.ubc.arch.permuted(self.cpu),
            Frame::ArchTlbbatchFlush(x) => {
                x.info = x.info.map(|r| self.info_ref(r));
                x.batch.cpumask = x.batch.cpumask.permuted(self.cpu);
            }
            Frame::SmpCallFunctionManyCond(x) => {
                x.mask = x.mask.permuted(self.cpu);
                x.queued = x.queued.permuted(self.cpu);
                x.csd_busy = x.csd_busy.permuted(self.cpu);
                x.func = self.call_func(x.func);
            }
            Frame::Fork(x) => {
                x.child_cpu = self.cpu(x.child_cpu);
                x.child_prog = self.prog(&x.child_prog);
            }
            Frame::RiscvFlushTlbRange(x) => {
                x.cmask = x.cmask.permuted(self.cpu);
                x.deferred = x.deferred.permuted(self.cpu);
            }
            // No CPU or task ids inside.
            Frame::PageFault(_)
            | Frame::Madvise(_)
            | Frame::Munmap(_)
            | Frame::GupFast(_)
            | Frame::MadviseCollapse(_)
            | Frame::CollapseHugePage(_)
            | Frame::Vfree(_)
            | Frame::MadvisePageout(_)
            | Frame::SwitchMmIrqsOff(_)
            | Frame::TlbRemoveTableOne(_)
            | Frame::Arm64Dsb(_)
            | Frame::Arm64CheckAndSwitchContext(_) => {}
        }
        f
    }
    fn task_struct(&self, t: &Task) -> Task {
        Task {
            id: self.task(t.id),
            cpu: self.cpu(t.cpu),
            prog: self.prog(&t.prog),
            kstack: t.kstack.iter().map(|f| self.frame(f)).collect(),
            stack_info: self.flush_info(&t.stack_info),
            ..t.clone()
        }
    }
    fn cpu_struct(&self, c: &Cpu) -> Cpu {
        Cpu {
            id: self.cpu(c.id),
            call_single_queue: c
                .call_single_queue
                .iter()
                .map(|csd| Csd {
                    initiator: self.cpu(csd.initiator),
                    func: self.call_func(csd.func),
                })
                .collect(),
            cfd_locked: c.cfd_locked.permuted(self.cpu),
            curr: c.curr.map(|t| self.task(t)),
            rq: c.rq.iter().map(|&t| self.task(t)).collect(),
            flush_info: self.flush_info(&c.flush_info),
            lru_drain_waiter: c.lru_drain_waiter.map(|t| self.task(t)),
            ..c.clone()
        }
    }
    /// A store buffer with the CPUs its locations name renamed.
    fn membuf(&self, b: &StoreBuffer) -> StoreBuffer {
        StoreBuffer {
            entries: b.entries.iter().map(|e| self.buffered(e)).collect(),
            ..*b
        }
    }
    /// A buffered store with the CPU its location names renamed.
    fn buffered(&self, e: &Buffered) -> Buffered {
        Buffered {
            loc: e.loc.renamed(|c| self.cpu(c)),
            ..*e
        }
    }
    /// An rwsem with its writer and waiters renamed.
    fn rwsem(&self, s: &Rwsem) -> Rwsem {
        Rwsem {
            writer: s.writer.map(|t| self.task(t)),
            waiters: s
                .waiters
                .iter()
                .map(|w| RwsemWaiter {
                    task: self.task(w.task),
                    ..*w
                })
                .collect(),
            ..s.clone()
        }
    }
    fn mm(&self, m: &Mm) -> Mm {
        let mut n = m.clone();
        *n.cpumask = m.cpumask.permuted(self.cpu);
        n.running.0 = m.running.0.permuted(self.cpu);
        *n.mmap_lock = self.rwsem(&m.mmap_lock);
        n
    }
}

/// The parts of a world that hold CPU or task ids, renamed.
struct Renamed {
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    mms: Vec<Mm>,
    violations: Vec<Violation>,
    rcu_batches: Vec<RcuBatch>,
    membufs: Vec<StoreBuffer>,
}

/// The tasks grouped by CPU, in id order within each: what
/// [`World::task_perm`] needs, built once for every permutation tried.
struct TaskLayout {
    /// Task ids sorted by (CPU, id).
    by_cpu: Vec<TaskId>,
    /// Index in `by_cpu` of CPU `c`'s first task; `start[n]` = the tasks.
    start: Vec<usize>,
    /// Each task's rank among its CPU's tasks.
    rank: Vec<usize>,
    /// Each task's CPU.
    cpu: Vec<usize>,
}

impl TaskLayout {
    fn of(w: &World) -> TaskLayout {
        let n = w.cpus.len();
        let mut count = vec![0usize; n + 1];
        let mut rank = Vec::with_capacity(w.tasks.len());
        let mut cpu = Vec::with_capacity(w.tasks.len());
        for t in &w.tasks {
            let c = (t.cpu as usize).min(n);
            rank.push(count[c]);
            cpu.push(c);
            count[c] += 1;
        }
        let mut start = vec![0usize; n + 2];
        for c in 0..=n {
            start[c + 1] = start[c] + count[c];
        }
        let mut by_cpu = vec![0; w.tasks.len()];
        for (t, (&c, &r)) in cpu.iter().zip(&rank).enumerate() {
            by_cpu[start[c] + r] = t as TaskId;
        }
        TaskLayout {
            by_cpu,
            start,
            rank,
            cpu,
        }
    }

    /// See [`World::task_perm`]. A task whose CPU is out of range (none
    /// in a well-formed world) makes every permutation fail.
    fn perm(&self, perm: &[CpuId]) -> Option<Vec<TaskId>> {
        let n = self.start.len() - 2;
        if perm.len() != n || self.start[n + 1] != self.start[n] {
            return None;
        }
        let mut hit = vec![false; n];
        let len = |c: usize| self.start[c + 1] - self.start[c];
        for (c, &to) in perm.iter().enumerate() {
            let to = to as usize;
            if to >= n || std::mem::replace(&mut hit[to], true) {
                return None;
            }
            if len(c) != len(to) {
                return None;
            }
        }
        let tp = (0..self.rank.len())
            .map(|t| self.by_cpu[self.start[perm[self.cpu[t]] as usize] + self.rank[t]])
            .collect();
        Some(tp)
    }
}

impl World {
    /// The task renaming that goes with CPU permutation `perm` (task `t`
    /// becomes `result[t]`): the k-th task of CPU `c` becomes the k-th task
    /// of CPU `perm[c]`. `None` when `perm` is not a permutation of this
    /// world's CPUs or some CPU and its image hold different numbers of tasks.
    pub fn task_perm(&self, perm: &[CpuId]) -> Option<Vec<TaskId>> {
        TaskLayout::of(self).perm(perm)
    }

    /// This world with CPU `c` renamed to `perm[c]` everywhere (and the
    /// tasks renamed along, see [`World::task_perm`]), or `None` when the
    /// permutation does not apply.
    pub fn try_permute_cpus(&self, perm: &[CpuId]) -> Option<World> {
        let r = Renaming {
            cpu: perm,
            task: self.task_perm(perm)?,
        };
        let Renamed {
            cpus,
            tasks,
            mms,
            violations,
            rcu_batches,
            membufs,
        } = renamed(self, &r);
        let psc_index = Hint(PscIndex::of(cpus.iter().map(|c| c.tlb.psc_pfns())));
        let tlb_filled = Hint(FilledIndex::of(cpus.iter().map(|c| &c.tlb)));
        let mut w = World {
            psc_index: Tracked::new(field::PSC_INDEX, psc_index),
            tlb_filled: Tracked::new(field::TLB_FILLED, tlb_filled),
            cpus: cpus.into(),
            tasks: tasks.into(),
            mms: mms.into(),
            violations: Tracked::new(field::VIOLATIONS, violations),
            rcu_batches: Tracked::new(field::RCU_BATCHES, rcu_batches),
            membufs: membufs.into(),
            weak: self.weak.renamed(perm),
            hugetlb_i_mmap_rwsem: Tracked::new(
                field::HUGETLB_I_MMAP_RWSEM,
                r.rwsem(&self.hugetlb_i_mmap_rwsem),
            ),
            ..self.clone()
        };
        w.track_footprints(self.cpus.tag() != 0);
        Some(w)
    }

    /// This world with CPU `c` renamed to `perm[c]` everywhere, the tasks
    /// following their CPUs. Panics when the permutation does not apply
    /// (see [`World::task_perm`]).
    pub fn permute_cpus(&self, perm: &[CpuId]) -> World {
        self.try_permute_cpus(perm)
            .expect("a permutation of the CPUs between CPUs holding as many tasks")
    }
}

/// Rename the id-holding parts of `w`.
fn renamed(w: &World, r: &Renaming) -> Renamed {
    // Slot i of the result holds the renamed element whose new id is i.
    let mut cpu_from = vec![0usize; w.cpus.len()];
    for (c, &to) in r.cpu.iter().enumerate() {
        cpu_from[to as usize] = c;
    }
    let mut task_from = vec![0usize; w.tasks.len()];
    for (t, &to) in r.task.iter().enumerate() {
        task_from[to as usize] = t;
    }
    Renamed {
        cpus: cpu_from.iter().map(|&c| r.cpu_struct(&w.cpus[c])).collect(),
        membufs: cpu_from.iter().map(|&c| r.membuf(&w.membufs[c])).collect(),
        tasks: task_from
            .iter()
            .map(|&t| r.task_struct(&w.tasks[t]))
            .collect(),
        mms: w.mms.iter().map(|m| r.mm(m)).collect(),
        violations: w
            .violations
            .iter()
            .map(|v| Violation {
                cpu: r.cpu(v.cpu),
                ..v.clone()
            })
            .collect(),
        rcu_batches: w
            .rcu_batches
            .iter()
            .map(|b| RcuBatch {
                waiting: b.waiting.permuted(r.cpu),
                waiter: b.waiter.map(|t| r.task(t)),
                ..b.clone()
            })
            .collect(),
    }
}

/// The least fingerprint (with hasher `H`) of `w` renamed by the identity
/// or by a permutation of `perms` that applies to it, among those that put
/// the CPUs' id-free signatures in the least order: equal for
/// two worlds that are renamings of each other by those permutations
/// (when they form a group), different otherwise (up to hash collisions).
///
/// Nothing is cloned per permutation where it can be helped: the parts
/// without ids (memory, configuration, allocator) and the id-free fields
/// of each CPU and task are hashed once; per permutation only the ids are
/// renamed and hashed, slot by slot in the renamed order.
pub fn canonical_fingerprint<H: Hasher + Default>(w: &World, perms: &[Vec<CpuId>]) -> u64 {
    // Destructured in full so that a new field cannot be forgotten here.
    let World {
        cfg,
        now,
        cpus,
        tasks,
        mms,
        mem,
        op_names,
        measuring,
        violations,
        counters: _, // hashes to nothing
        hugetlb_pmds,
        hugetlb_i_mmap_rwsem,
        rcu_batches,
        asids,
        files,
        next_ctx_id,
        membufs,
        weak,
        psc_index: _,      // a hint: hashes to nothing
        atomic_nesting: _, // a hint: hashes to nothing
        tlb_filled: _,     // a hint: hashes to nothing
        vmap,
    } = w;
    let mut h = H::default();
    (cfg, now, mem, op_names, measuring).hash(&mut h);
    (hugetlb_pmds, asids, files, next_ctx_id, vmap).hash(&mut h);
    let fixed = h.finish();
    // The id-free hashes are cached in the elements' slots: a successor
    // recomputes only those of the CPUs, tasks and mms its step changed.
    let cpu_fixed: Vec<u64> = (0..cpus.len())
        .map(|c| cpus.id_free_digest(c, cpu_fixed_hash::<FxHasher>))
        .collect();
    let invlpgb = cfg.invlpgb;
    let task_fixed: Vec<u64> = (0..tasks.len())
        .map(|t| tasks.id_free_digest(t, |t| task_fixed_hash::<FxHasher>(t, invlpgb)))
        .collect();
    let fp = |r: &Renaming| {
        let mut h = H::default();
        fixed.hash(&mut h);
        let mut from = vec![0usize; cpus.len()];
        for (c, &to) in r.cpu.iter().enumerate() {
            from[to as usize] = c;
        }
        from.len().hash(&mut h);
        for &c in &from {
            cpu_fixed[c].hash(&mut h);
            hash_cpu_ids(&cpus[c], r, &mut h);
            hash_membuf(&membufs[c], r, &mut h);
        }
        if !weak.is_empty() {
            weak.hash_renamed(r.cpu, &mut h);
        }
        let mut from = vec![0usize; tasks.len()];
        for (t, &to) in r.task.iter().enumerate() {
            from[to as usize] = t;
        }
        from.len().hash(&mut h);
        for &t in &from {
            task_fixed[t].hash(&mut h);
            hash_task_ids(&tasks[t], r, &mut h);
        }
        r.rwsem(hugetlb_i_mmap_rwsem).hash(&mut h);
        mms.len().hash(&mut h);
        for (i, m) in mms.iter().enumerate() {
            mms.id_free_digest(i, mm_fixed_hash).hash(&mut h);
            hash_mm_ids(m, r, &mut h);
        }
        violations.len().hash(&mut h);
        for v in violations.iter() {
            let Violation {
                invariant,
                cpu,
                addr,
                what,
            } = v;
            (invariant, r.cpu(*cpu), addr, what).hash(&mut h);
        }
        rcu_batches.len().hash(&mut h);
        for b in rcu_batches.iter() {
            let RcuBatch {
                mm,
                tables,
                waiting,
                waiter,
            } = b;
            (mm, tables, waiting.permuted(r.cpu)).hash(&mut h);
            waiter.map(|t| r.task(t)).hash(&mut h);
        }
        h.finish()
    };
    // Only the renamings that put the CPUs' signatures in the least order
    // are fingerprinted (usually one): the choice depends only on the
    // renamed worlds, so renamings of each other still agree.
    let sig = cpu_signatures(w, &cpu_fixed, &task_fixed);
    let identity: Vec<CpuId> = (0..cpus.len() as CpuId).collect();
    let all = std::iter::once(&identity[..]).chain(perms.iter().map(|p| &p[..]));
    least_order(w, all, &sig)
        .into_iter()
        .map(|(cpu, task)| fp(&Renaming { cpu, task }))
        .min()
        .expect("the identity applies")
}

/// Of `perms`, those that apply to `w` and put the CPUs' signatures `sig`
/// in the least order, each with its task renaming. A permutation's task
/// renaming is built only if its order is not already beaten.
fn least_order<'a>(
    w: &World,
    perms: impl Iterator<Item = &'a [CpuId]>,
    sig: &[u64],
) -> Vec<(&'a [CpuId], Vec<TaskId>)> {
    let layout = TaskLayout::of(w);
    let mut least: Vec<u64> = Vec::new();
    let mut order = vec![0; sig.len()];
    let mut cands = Vec::new();
    for perm in perms {
        for (c, &to) in perm.iter().enumerate() {
            order[to as usize] = sig[c];
        }
        let cmp = order.cmp(&least);
        if !least.is_empty() && cmp == std::cmp::Ordering::Greater {
            continue;
        }
        let Some(task) = layout.perm(perm) else {
            continue;
        };
        if least.is_empty() || cmp == std::cmp::Ordering::Less {
            least.clone_from(&order);
            cands.clear();
        }
        cands.push((perm, task));
    }
    cands
}

/// Hash a store buffer with the CPUs its locations name renamed by `r`
/// (the hash of [`Renaming::membuf`]'s result, built without it).
fn hash_membuf<H: Hasher>(b: &StoreBuffer, r: &Renaming, h: &mut H) {
    let StoreBuffer { entries, epoch } = b;
    entries.len().hash(h);
    for e in entries {
        r.buffered(e).hash(h);
    }
    epoch.hash(h);
}

/// The hash of an mm's fields that hold no ids.
fn mm_fixed_hash(m: &Mm) -> u64 {
    let Mm {
        id,
        ctx_id,
        tlb_gen,
        pgd,
        cpumask: _,
        vmas,
        next_trim_cpumask,
        mmap_lock: _,
        deposited,
        context_id,
        tlb_flush_pending,
        global_asid,
        asid_transition,
        mm_users,
        running: _, // a hint: hashes to nothing
    } = m;
    let mut h = FxHasher::default();
    (id, ctx_id, tlb_gen, pgd, vmas, next_trim_cpumask).hash(&mut h);
    (deposited, context_id, tlb_flush_pending).hash(&mut h);
    (global_asid, asid_transition, mm_users).hash(&mut h);
    h.finish()
}

/// Hash an mm's id-holding fields, renamed by `r`.
fn hash_mm_ids<H: Hasher>(m: &Mm, r: &Renaming, h: &mut H) {
    m.cpumask.permuted(r.cpu).hash(h);
    r.rwsem(&m.mmap_lock).hash(h);
}

/// Per CPU, the hash of what a renaming carries along with it and holds
/// no id: its id-free fields and those of its tasks, in id order (a
/// renaming keeps the order of one CPU's tasks).
fn cpu_signatures(w: &World, cpu_fixed: &[u64], task_fixed: &[u64]) -> Vec<u64> {
    let mut hs: Vec<FxHasher> = cpu_fixed
        .iter()
        .map(|f| {
            let mut h = FxHasher::default();
            f.hash(&mut h);
            h
        })
        .collect();
    for (t, task) in w.tasks.iter().enumerate() {
        task_fixed[t].hash(&mut hs[task.cpu as usize]);
    }
    hs.iter().map(|h| h.finish()).collect()
}

/// The hash of a CPU's fields that hold no ids.
fn cpu_fixed_hash<H: Hasher + Default>(c: &Cpu) -> u64 {
    let Cpu {
        id: _,
        irqs_off,
        preempt_count,
        tlbstate,
        tlb,
        call_single_queue: _,
        ipi_pending,
        cfd_locked: _,
        curr: _,
        rq: _,
        flush_info: _,
        vcpu_preempted,
        kvm_flush_pending,
        asid,
        riscv,
        need_resched,
        flush_info_busy,
        active_lockless_pt_walk_mm,
        walk_line_shared,
        fair,
        lru_add,
        lru_drain_work,
        kworker_runnable,
        lru_drain_waiter: _,
    } = c;
    let mut h = H::default();
    (irqs_off, preempt_count, tlbstate, tlb, ipi_pending).hash(&mut h);
    (vcpu_preempted, kvm_flush_pending, asid, riscv).hash(&mut h);
    (need_resched, flush_info_busy).hash(&mut h);
    (active_lockless_pt_walk_mm, walk_line_shared, fair).hash(&mut h);
    (lru_add, lru_drain_work, kworker_runnable).hash(&mut h);
    h.finish()
}

/// Hash a CPU's id-holding fields, renamed by `r`.
fn hash_cpu_ids<H: Hasher>(c: &Cpu, r: &Renaming, h: &mut H) {
    r.cpu(c.id).hash(h);
    c.call_single_queue.len().hash(h);
    for csd in &c.call_single_queue {
        Csd {
            initiator: r.cpu(csd.initiator),
            func: r.call_func(csd.func),
        }
        .hash(h);
    }
    c.cfd_locked.permuted(r.cpu).hash(h);
    c.curr.map(|t| r.task(t)).hash(h);
    c.rq.len().hash(h);
    for &t in &c.rq {
        r.task(t).hash(h);
    }
    r.flush_info(&c.flush_info).hash(h);
    c.lru_drain_waiter.map(|t| r.task(t)).hash(h);
}

/// The hash of a task's fields that hold no ids. `pid` is read only by
/// `consider_global_asid` (INVLPGB): hashing it otherwise would split
/// orbits of worlds that behave the same.
fn task_fixed_hash<H: Hasher + Default>(t: &Task, invlpgb: bool) -> u64 {
    let Task {
        id: _,
        mm,
        cpu: _,
        state,
        prog: _,
        us,
        kstack: _,
        gather,
        stack_info: _,
        measured,
        spurious_streak,
        spurious_va,
        rt,
        pid,
        pins,
        cpus_allowed_all,
    } = t;
    let mut h = H::default();
    (mm, state, us, gather, measured).hash(&mut h);
    (spurious_streak, spurious_va, rt, pins, cpus_allowed_all).hash(&mut h);
    if invlpgb {
        pid.hash(&mut h);
    }
    h.finish()
}

/// Hash a task's id-holding fields, renamed by `r`.
fn hash_task_ids<H: Hasher>(t: &Task, r: &Renaming, h: &mut H) {
    (r.task(t.id), r.cpu(t.cpu)).hash(h);
    r.prog(&t.prog).hash(h);
    t.kstack.len().hash(h);
    for f in &t.kstack {
        r.frame(f).hash(h);
    }
    r.flush_info(&t.stack_info).hash(h);
}
