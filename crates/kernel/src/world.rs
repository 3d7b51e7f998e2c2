//! The world: every piece of modelled state, as plain data.
//!
//! ```text
//!  World ─┬─ cpus[]  : cpu_tlbstate, TLB, IRQ/preempt state, call_single_queue,
//!         │            per-CPU flush_tlb_info, runqueue, current task
//!         ├─ tasks[] : user program + kernel stack of Frames (paths in progress)
//!         ├─ mms[]   : mm_struct (pgd, mm_cpumask, context.tlb_gen, VMAs)
//!         └─ mem     : frames with generations, page-table pages
//! ```
//!
//! [`World::step`] advances one CPU by one globally visible action. The
//! simulator calls it in time order, the checker in every order.

use crate::arch::x86::tlb::{FlushTlbInfo, FlushTlbMmRange, TlbState};
use crate::cow::{Field, Tracked};
use crate::effects::{Effects, Label, Stat};
use crate::kernel_smp::{Csd, SmpCallFunctionManyCond};
use crate::mm::gup::GupFast;
use crate::mm::khugepaged::{CollapseHugePage, MadviseCollapse};
use crate::mm::madvise::MadviseDontneed;
use crate::mm::memory::PageFault;
use crate::mm::mmap::Munmap;
use crate::mm::mmu_gather::MmuGather;
use crate::user::{UserOp, UserState};
use crate::{MmId, TaskId, INIT_MM};
use machine::footprint::{kind, Obj};
use machine::mem::{FrameUse, PhysMem};
use machine::scenario::FlushTlbInfoPlacement;
use machine::tlb::Tlb;
use machine::{CpuId, CpuMask, Error, Pfn, Scenario, Time};
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Addresses of the shared kernel objects whose cache lines the model prices.
pub mod layout {
    use crate::{MmId, TaskId};
    use machine::CpuId;
    const MM_BASE: u64 = 0x1000_0000_0000;
    const PERCPU_BASE: u64 = 0x2000_0000_0000;
    const PERCPU_STRIDE: u64 = 0x10_0000;
    const STACK_BASE: u64 = 0x3000_0000_0000;
    const VMA_BASE: u64 = 0x4000_0000_0000;
    /// `THREAD_SIZE` (16 KiB kernel stacks).
    pub const THREAD_SIZE: u64 = 0x4000;

    /// `mm->context.tlb_gen`.
    pub fn mm_tlb_gen(mm: MmId) -> u64 {
        MM_BASE + mm as u64 * 0x1000
    }
    /// The byte of `mm_cpumask(mm)` that holds `cpu`.
    pub fn mm_cpumask(mm: MmId, cpu: CpuId) -> u64 {
        MM_BASE + mm as u64 * 0x1000 + 0x200 + cpu as u64 / 8
    }
    /// `DEFINE_PER_CPU_SHARED_ALIGNED(struct flush_tlb_info, flush_tlb_info)`.
    pub fn percpu_flush_tlb_info(cpu: CpuId) -> u64 {
        PERCPU_BASE + cpu as u64 * PERCPU_STRIDE
    }
    /// `cpu_tlbstate_shared` (is_lazy), read by remote `should_flush_tlb`.
    pub fn cpu_tlbstate_shared(cpu: CpuId) -> u64 {
        PERCPU_BASE + cpu as u64 * PERCPU_STRIDE + 0x100
    }
    /// `cpu_tlbstate.loaded_mm`, read by remote `should_flush_tlb`.
    pub fn cpu_tlbstate(cpu: CpuId) -> u64 {
        PERCPU_BASE + cpu as u64 * PERCPU_STRIDE + 0x140
    }
    /// `per_cpu(call_single_queue, cpu)`: the llist head.
    pub fn call_single_queue(cpu: CpuId) -> u64 {
        PERCPU_BASE + cpu as u64 * PERCPU_STRIDE + 0x180
    }
    /// `per_cpu_ptr(cfd->csd, target)` of `initiator` (32-byte csds, two per line).
    pub fn csd(initiator: CpuId, target: CpuId) -> u64 {
        PERCPU_BASE + initiator as u64 * PERCPU_STRIDE + 0x1000 + target as u64 * 32
    }
    /// `mm->mmap_lock` (`struct rw_semaphore`: `count` and `owner`).
    pub fn mmap_lock(mm: MmId) -> u64 {
        MM_BASE + mm as u64 * 0x1000 + 0x400
    }
    /// The `vm_refcnt` / `vm_lock_seq` line of the VMA starting at `start`.
    pub fn vma_lock(mm: MmId, start: u64) -> u64 {
        VMA_BASE + mm as u64 * 0x1_0000_0000 + ((start >> 12) & 0xff_ffff) * 64
    }
    /// The top of `task`'s kernel stack, where `flush_tlb_mm_range`'s frame sits.
    pub fn stack_frame(task: TaskId) -> u64 {
        STACK_BASE + task as u64 * THREAD_SIZE + THREAD_SIZE - 0x200
    }
}

/// A kernel path in progress on a task's stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Frame {
    PageFault(PageFault),
    Madvise(MadviseDontneed),
    Munmap(Munmap),
    FlushTlbMmRange(FlushTlbMmRange),
    SmpCallFunctionManyCond(SmpCallFunctionManyCond),
    GupFast(GupFast),
    MadviseCollapse(MadviseCollapse),
    CollapseHugePage(CollapseHugePage),
    Fork(crate::mm::fork::Fork),
    RiscvFlushTlbRange(crate::arch::riscv::tlbflush::FlushTlbRange),
    Vfree(crate::mm::vmalloc::Vfree),
    /// x86 `switch_mm_irqs_off` in its load/store/barrier steps (checker only).
    SwitchMmIrqsOff(crate::arch::x86::tlb::SwitchMmIrqsOff),
    /// arm64: a DSB run in the step after its TLBIs (checker only).
    Arm64Dsb(crate::arch::arm64::tlbflush::Dsb),
    /// arm64 `check_and_switch_context` after its fast-path reads (checker only).
    Arm64CheckAndSwitchContext(crate::arch::arm64::context::CheckAndSwitchContext),
    /// x86 `flush_tlb_kernel_range`.
    FlushTlbKernelRange(crate::arch::x86::tlb_kernel::FlushTlbKernelRange),
    /// x86 `arch_tlbbatch_flush`.
    ArchTlbbatchFlush(crate::arch::x86::tlb_kernel::ArchTlbbatchFlush),
    /// `tlb_remove_table`'s fallback when its batch page cannot be allocated.
    TlbRemoveTableOne(crate::mm::mmu_gather::TlbRemoveTableOne),
    /// `madvise(MADV_PAGEOUT)`: reclaim with batched unmap flushes.
    MadvisePageout(crate::mm::vmscan::MadvisePageout),
    /// Reclaim: `shrink_folio_list` over isolated folios (`MADV_PAGEOUT`, kswapd).
    ShrinkFolioList(crate::mm::vmscan::ShrinkFolioList),
    /// Page migration: `migrate_pages` → `migrate_pages_batch`.
    MigratePages(crate::mm::migrate::MigratePages),
}

/// What a frame's step asks the CPU loop to do next.
pub enum Flow {
    /// Local work only: keep going within this step.
    Continue,
    /// A visible action happened: end the step.
    Yield,
    /// Waiting for another CPU: end the step; not runnable until woken.
    Block,
    /// Call a nested path and keep going into it.
    Call(Frame),
    /// Call a nested path, but end the step first.
    CallYield(Frame),
    /// This path is finished: pop it and keep going in the caller.
    Return,
}

impl Frame {
    /// (Not inlined: in `World::run`'s loop, the paths' code would make
    /// every step, a user access too, set up the loop for all of them.)
    #[inline(never)]
    fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        match self {
            Frame::PageFault(f) => f.step(w, cpu, task, fx),
            Frame::Madvise(f) => f.step(w, cpu, task, fx),
            Frame::Munmap(f) => f.step(w, cpu, task, fx),
            Frame::FlushTlbMmRange(f) => f.step(w, cpu, task, fx),
            Frame::SmpCallFunctionManyCond(f) => f.step(w, cpu, fx),
            Frame::GupFast(f) => f.step(w, cpu, task, fx),
            Frame::MadviseCollapse(f) => f.step(w, cpu, task, fx),
            Frame::CollapseHugePage(f) => f.step(w, cpu, task, fx),
            Frame::Fork(f) => f.step(w, cpu, task, fx),
            Frame::RiscvFlushTlbRange(f) => f.step(w, cpu, task, fx),
            Frame::Vfree(f) => f.step(w, cpu, task, fx),
            Frame::SwitchMmIrqsOff(f) => f.step(w, cpu, fx),
            Frame::Arm64Dsb(f) => f.step(w, cpu, fx),
            Frame::Arm64CheckAndSwitchContext(f) => f.step(w, cpu, fx),
            Frame::FlushTlbKernelRange(f) => f.step(w, cpu, task, fx),
            Frame::ArchTlbbatchFlush(f) => f.step(w, cpu, task, fx),
            Frame::TlbRemoveTableOne(f) => f.step(w, cpu, task, fx),
            Frame::MadvisePageout(f) => f.step(w, cpu, task, fx),
            Frame::ShrinkFolioList(f) => f.step(w, cpu, task, fx),
            Frame::MigratePages(f) => f.step(w, cpu, task, fx),
        }
    }

    fn can_run(&self, w: &World, cpu: CpuId, task: TaskId) -> bool {
        match self {
            Frame::SmpCallFunctionManyCond(f) => f.can_run(w, cpu),
            // synchronize_rcu(): asleep until the grace period ends.
            Frame::TlbRemoveTableOne(f) => f.can_run(w, task),
            // lock_vma_under_rcu / mmap_read_lock / mmap_write_lock.
            Frame::PageFault(f) => f.can_run(w, task),
            Frame::Madvise(f) => f.can_run(w, task),
            Frame::Munmap(f) => f.can_run(w, task),
            Frame::CollapseHugePage(f) => f.can_run(w, task),
            Frame::Fork(f) => f.can_run(w, task),
            _ => true,
        }
    }
}

/// A task's kernel stack: the paths in progress, innermost last.
///
/// Each frame is boxed (model machinery): `World::run` takes the innermost
/// off for its step and puts it back, and a frame is written to at every
/// step, so moving it whole (up to 144 bytes) twice per step cost more than
/// the allocation when a path is called. The boxes of paths that returned
/// are kept (`SpareFrames`) for the next calls: a fault per page
/// allocated and freed one each. Compares, hashes and prints as the frames
/// themselves.
#[derive(Default, PartialEq, Eq, Hash)]
#[allow(clippy::vec_box)] // on purpose: see above
pub struct KStack {
    frames: Vec<Box<Frame>>,
    spare: SpareFrames,
}

/// Boxes of frames that returned (their frames dropped), to hold the next
/// ones called: not state (equal for any two stacks, hashed as nothing,
/// not cloned). A few: a path returns after the paths it called.
#[derive(Default)]
#[allow(clippy::vec_box)] // boxes to reuse, not values
struct SpareFrames(Vec<Box<std::mem::MaybeUninit<Frame>>>);

/// Spare boxes kept per stack (deeper than any path nests).
const SPARE_FRAMES: usize = 4;

impl Clone for SpareFrames {
    fn clone(&self) -> Self {
        SpareFrames(Vec::new())
    }
}
impl PartialEq for SpareFrames {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for SpareFrames {}
impl Hash for SpareFrames {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl KStack {
    pub fn with_capacity(n: usize) -> Self {
        KStack {
            frames: Vec::with_capacity(n),
            spare: SpareFrames(Vec::with_capacity(SPARE_FRAMES)),
        }
    }
    #[inline]
    pub fn push(&mut self, f: Frame) {
        let b = self.boxed(f);
        self.frames.push(b);
    }
    /// Push the frame `f` builds, built in its box (a frame built first
    /// is moved there whole: 144 bytes).
    #[inline]
    pub fn push_with(&mut self, f: impl FnOnce() -> Frame) {
        let b = self.spare.0.pop().unwrap_or_else(Box::new_uninit);
        let b = Box::write(b, f());
        self.frames.push(b);
    }
    pub fn pop(&mut self) -> Option<Frame> {
        self.frames.pop().map(|f| *f)
    }
    pub fn last(&self) -> Option<&Frame> {
        self.frames.last().map(|f| &**f)
    }
    pub fn last_mut(&mut self) -> Option<&mut Frame> {
        self.frames.last_mut().map(|f| &mut **f)
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Frame> + ExactSizeIterator {
        self.frames.iter().map(|f| &**f)
    }
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    pub fn clear(&mut self) {
        self.frames.clear();
    }
    /// `f` in a box: the spare one if there is one, else a new one.
    #[inline]
    fn boxed(&mut self, f: Frame) -> Box<Frame> {
        let b = self.spare.0.pop().unwrap_or_else(Box::new_uninit);
        Box::write(b, f)
    }
    /// Drop a frame that returned and keep its box for a next call.
    #[inline]
    fn recycle(&mut self, b: Box<Frame>) {
        // (A clone has no room for spares: it drops the box instead of
        // allocating the list, the checker's case.)
        if self.spare.0.len() == self.spare.0.capacity() {
            return;
        }
        let p = Box::into_raw(b);
        // SAFETY: `p` is the sole owner of a live frame, dropped here
        // once; `MaybeUninit<Frame>` has `Frame`'s layout, so the box
        // goes on as the same allocation, its contents uninitialised.
        let spare = unsafe {
            std::ptr::drop_in_place(p);
            Box::from_raw(p.cast::<std::mem::MaybeUninit<Frame>>())
        };
        self.spare.0.push(spare);
    }
}

/// A clone (the checker's, of a task a step changes) with room for one
/// more frame: the step puts back the frame it takes off, or calls one.
impl Clone for KStack {
    fn clone(&self) -> Self {
        let n = self.frames.len();
        let mut frames = Vec::with_capacity(if n == 0 { 0 } else { n + 1 });
        frames.extend(self.frames.iter().cloned());
        KStack {
            frames,
            spare: SpareFrames::default(),
        }
    }
}

impl std::fmt::Debug for KStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl FromIterator<Frame> for KStack {
    fn from_iter<I: IntoIterator<Item = Frame>>(it: I) -> Self {
        KStack {
            frames: it.into_iter().map(Box::new).collect(),
            spare: SpareFrames(Vec::new()),
        }
    }
}

impl<'a> IntoIterator for &'a KStack {
    type Item = &'a Frame;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Box<Frame>>, fn(&Box<Frame>) -> &Frame>;
    fn into_iter(self) -> Self::IntoIter {
        self.frames.iter().map(|f| &**f)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskState {
    Runnable,
    Running,
    /// In `clock_nanosleep` until its hrtimer fires.
    Sleeping,
    Exited,
}

/// `struct task_struct`: a user thread (or a kernel thread, with `mm == INIT_MM`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Task {
    pub id: TaskId,
    pub mm: MmId,
    pub cpu: CpuId,
    pub state: TaskState,
    pub prog: Arc<[UserOp]>,
    pub us: UserState,
    /// Kernel paths in progress, innermost last.
    pub kstack: KStack,
    /// The `struct mmu_gather` of the syscall in progress.
    pub gather: MmuGather,
    /// `flush_tlb_mm_range`'s on-stack `struct flush_tlb_info` (seed a).
    pub stack_info: FlushTlbInfo,
    /// Counts toward the run's end when it finishes its iterations.
    pub measured: bool,
    /// Spurious faults in a row at `spurious_va` (the livelock monitor).
    pub spurious_streak: u32,
    pub spurious_va: u64,
    /// A real-time task (SCHED_FIFO): it preempts others when it wakes.
    pub rt: bool,
    /// FOLL_PIN pins taken by this task's GUP-fast calls and not yet
    /// released (`unpin_user_pages`): each frame with the references taken.
    pub pins: Vec<(Pfn, u16)>,
    /// `current->pid`: data, not an id (CPU/task renaming keeps it), so
    /// `consider_global_asid`'s `(pid & 0x1f) == (jiffies & 0x1f)` sample
    /// stays sound under the checker's symmetry reduction.
    pub pid: u32,
    /// `p->cpus_ptr` is every CPU (`nr_cpus_allowed == nr_cpu_ids`): the
    /// fair class places the task (`sched::fair`). False: the task stays on
    /// the CPU it was given, as a benchmark's `sched_setaffinity` keeps it
    /// (what [`World::spawn`] gives; a fork child inherits its parent's).
    pub cpus_allowed_all: bool,
}

/// A virtual memory area (`struct vm_area_struct`), anonymous and private.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub writable: bool,
    /// A `MAP_SHARED` hugetlbfs mapping (2 MiB pages, PMD tables shareable).
    pub hugetlb: bool,
    /// A `MAP_SHARED` mapping of file `files[f]` from offset 0.
    pub file: Option<u32>,
    /// Write-locked by the `mmap_lock` writer (`vma_start_write`:
    /// `vm_lock_seq == mm_lock_seq`) until `mmap_write_unlock`.
    pub vm_write_locked: bool,
    /// Per-VMA read locks held (`lock_vma_under_rcu`, `vm_refcnt`).
    pub vm_readers: u16,
    /// `anon_vma_lock_write(vma->anon_vma)` held.
    pub anon_vma_locked: bool,
}

/// Page-table pages handed to `call_rcu` (mm/mmu_gather.c:
/// `tlb_remove_table_free`): freed once every CPU that was inside an RCU
/// read-side section (IRQs or preemption off: GUP-fast is one) when they
/// were queued has passed a quiescent state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RcuBatch {
    pub mm: MmId,
    pub tables: Vec<Pfn>,
    pub waiting: CpuMask,
    /// `synchronize_rcu()`: the task sleeping until this grace period ends
    /// (its `tables` are empty; it frees them itself afterwards).
    pub waiter: Option<TaskId>,
}

/// A PMD table shared between the mms that map the same hugetlbfs file
/// range (mm/hugetlb.c: `huge_pmd_share`; the table's `pt_share_count`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedPmd {
    /// 1 GiB-aligned address covered by the table.
    pub region: u64,
    pub table: Pfn,
    pub users: u32,
}

/// `struct mm_struct` with the x86 `mm_context_t` parts the flush paths use.
///
/// Each field is recorded as its own footprint object (`mm_field`): two
/// CPUs' steps that touch different parts of one mm (one takes the
/// `mmap_lock`, the other sets its bit in `mm_cpumask`) are independent.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Mm {
    pub id: Field<MmId>,
    /// `mm->context.ctx_id`: never reused.
    pub ctx_id: Field<u64>,
    /// `mm->context.tlb_gen`: bumped by every flush request.
    pub tlb_gen: Field<u64>,
    /// `mm->pgd`.
    pub pgd: Field<Pfn>,
    /// `mm_cpumask(mm)`.
    pub cpumask: Field<CpuMask>,
    pub vmas: Field<Vec<Vma>>,
    /// `mm->context.next_trim_cpumask` (ns).
    pub next_trim_cpumask: Field<Time>,
    /// `mmap_lock`: its writer, readers, hand-off bit and wait list
    /// ([`crate::mm::mmap_lock`]).
    pub mmap_lock: Field<crate::locking::rwsem::Rwsem>,
    /// PTE tables deposited under huge PMDs (`pmd_huge_pte`): (2 MiB address, table).
    pub deposited: Field<Vec<(u64, Pfn)>>,
    /// arm64/RISC-V `mm->context.id`: ASID generation | ASID (0 = none yet).
    pub context_id: Field<u64>,
    /// `mm->tlb_flush_pending`: mmu_gathers in progress on this mm
    /// (`inc_tlb_flush_pending` / `dec_tlb_flush_pending`).
    pub tlb_flush_pending: Field<u32>,
    /// x86 `mm->context.global_asid` (0 = none; INVLPGB only).
    pub global_asid: Field<u16>,
    /// x86 `mm->context.asid_transition`: some CPU may still run the mm
    /// in a dynamic ASID, so flushes keep sending IPIs.
    pub asid_transition: Field<bool>,
    /// kernel/fork.c `mm->mm_users`: the tasks using the mm that have not
    /// exited ([`World::spawn`] counts one up, [`World::task_exit`] down).
    /// `mmput`'s test reads it alone, not every task of the mm, so an exit
    /// depends on the other CPUs' exits only, not on all their steps.
    pub mm_users: Field<u32>,
    /// The CPUs whose current task uses this mm (`cpu_curr(c)->mm == mm`),
    /// kept by [`World::set_curr`]: a cache of `Cpu::curr`, not state.
    /// Read only for the CPUs to wake ([`Effects::wake`]), never into the
    /// world: not recorded in footprints.
    pub running: Field<Hint<CpuSet>>,
}

/// The fields of [`Mm`] as footprint objects: field `f` of `World::mms[i]`
/// is object `i * 32 + f` of kind [`kind::MM_FIELD`].
pub mod mm_field {
    pub const ID: usize = 0;
    pub const CTX_ID: usize = 1;
    pub const TLB_GEN: usize = 2;
    pub const PGD: usize = 3;
    pub const CPUMASK: usize = 4;
    pub const VMAS: usize = 5;
    pub const NEXT_TRIM_CPUMASK: usize = 6;
    pub const MMAP_LOCK: usize = 7;
    pub const DEPOSITED: usize = 8;
    pub const CONTEXT_ID: usize = 9;
    pub const TLB_FLUSH_PENDING: usize = 10;
    pub const GLOBAL_ASID: usize = 11;
    pub const ASID_TRANSITION: usize = 12;
    pub const RUNNING: usize = 13;
    pub const MM_USERS: usize = 14;
    /// Each field's name, by number.
    pub const NAMES: [&str; 15] = [
        "id",
        "ctx_id",
        "tlb_gen",
        "pgd",
        "cpumask",
        "vmas",
        "next_trim_cpumask",
        "mmap_lock",
        "deposited",
        "context_id",
        "tlb_flush_pending",
        "global_asid",
        "asid_transition",
        "running",
        "mm_users",
    ];
}

impl Mm {
    /// A new mm: no VMA, no CPU in its mask, `tlb_gen` 1, untracked.
    pub fn new(id: MmId, ctx_id: u64, pgd: Pfn, nr_cpus: usize, next_trim_cpumask: Time) -> Mm {
        Mm {
            id: Field::new(id),
            ctx_id: Field::new(ctx_id),
            tlb_gen: Field::new(1),
            pgd: Field::new(pgd),
            cpumask: Field::new(CpuMask::new(nr_cpus)),
            vmas: Field::new(Vec::new()),
            next_trim_cpumask: Field::new(next_trim_cpumask),
            mmap_lock: Field::new(Default::default()),
            deposited: Field::new(Vec::new()),
            context_id: Field::new(0),
            tlb_flush_pending: Field::new(0),
            global_asid: Field::new(0),
            asid_transition: Field::new(false),
            mm_users: Field::new(0),
            running: Field::new(Hint(CpuSet::new(nr_cpus))),
        }
    }

    /// Record each field's accesses as its own object of `World::mms[i]`
    /// (`Some(i)`) or not at all (`None`). Every field is named here (and
    /// in `Clone`): a field added to `Mm` and left out fails to compile.
    pub fn track_footprints(&mut self, index: Option<usize>) {
        let obj = |f: usize| match index {
            Some(i) => Obj::new(kind::MM_FIELD, i * 32 + f),
            None => Obj(0),
        };
        let Mm {
            id,
            ctx_id,
            tlb_gen,
            pgd,
            cpumask,
            vmas,
            next_trim_cpumask,
            mmap_lock,
            deposited,
            context_id,
            tlb_flush_pending,
            global_asid,
            asid_transition,
            mm_users,
            running,
        } = self;
        id.track_as(obj(mm_field::ID));
        ctx_id.track_as(obj(mm_field::CTX_ID));
        tlb_gen.track_as(obj(mm_field::TLB_GEN));
        pgd.track_as(obj(mm_field::PGD));
        cpumask.track_as(obj(mm_field::CPUMASK));
        vmas.track_as(obj(mm_field::VMAS));
        next_trim_cpumask.track_as(obj(mm_field::NEXT_TRIM_CPUMASK));
        mmap_lock.track_as(obj(mm_field::MMAP_LOCK));
        deposited.track_as(obj(mm_field::DEPOSITED));
        context_id.track_as(obj(mm_field::CONTEXT_ID));
        tlb_flush_pending.track_as(obj(mm_field::TLB_FLUSH_PENDING));
        global_asid.track_as(obj(mm_field::GLOBAL_ASID));
        asid_transition.track_as(obj(mm_field::ASID_TRANSITION));
        mm_users.track_as(obj(mm_field::MM_USERS));
        // Never recorded: a cache read only to pick the CPUs to wake
        // (`Effects::wake`, the simulator's driver; a checker step's
        // world never depends on it), so two CPUs switching to the mm
        // (`World::set_curr`) stay independent.
        let _ = obj(mm_field::RUNNING);
        running.track_as(Obj(0));
    }
}

/// Each field copied with the object it is recorded as, nothing recorded
/// (the copy-on-write copy of a shared mm).
impl Clone for Mm {
    fn clone(&self) -> Mm {
        let Mm {
            id,
            ctx_id,
            tlb_gen,
            pgd,
            cpumask,
            vmas,
            next_trim_cpumask,
            mmap_lock,
            deposited,
            context_id,
            tlb_flush_pending,
            global_asid,
            asid_transition,
            mm_users,
            running,
        } = self;
        Mm {
            id: id.dup(),
            ctx_id: ctx_id.dup(),
            tlb_gen: tlb_gen.dup(),
            pgd: pgd.dup(),
            cpumask: cpumask.dup(),
            vmas: vmas.dup(),
            next_trim_cpumask: next_trim_cpumask.dup(),
            mmap_lock: mmap_lock.dup(),
            deposited: deposited.dup(),
            context_id: context_id.dup(),
            tlb_flush_pending: tlb_flush_pending.dup(),
            global_asid: global_asid.dup(),
            asid_transition: asid_transition.dup(),
            mm_users: mm_users.dup(),
            running: running.dup(),
        }
    }
}

/// A set of CPUs as plain bitmap words (model machinery, for caches such
/// as [`Mm::running`]: iterated on every unlock, which `CpuMask::iter`'s
/// chained iterators made cost more than the wake-ups it finds). CPUs
/// 0..64 in a word of its own, the rest in `more`: a machine of up to 64
/// CPUs (every checker configuration) clones it without allocating.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet {
    first: u64,
    more: Vec<u64>,
}

impl CpuSet {
    /// An empty set for `nr_cpus` CPUs.
    pub fn new(nr_cpus: usize) -> Self {
        CpuSet {
            first: 0,
            more: vec![0; nr_cpus.div_ceil(64).saturating_sub(1)],
        }
    }
    /// The word holding `cpu`'s bit.
    #[inline]
    fn word(&mut self, cpu: CpuId) -> &mut u64 {
        match cpu as usize / 64 {
            0 => &mut self.first,
            i => &mut self.more[i - 1],
        }
    }
    #[inline]
    pub fn set(&mut self, cpu: CpuId) {
        *self.word(cpu) |= 1 << (cpu % 64);
    }
    #[inline]
    pub fn clear(&mut self, cpu: CpuId) {
        *self.word(cpu) &= !(1 << (cpu % 64));
    }
    #[inline]
    pub fn test(&self, cpu: CpuId) -> bool {
        let w = match cpu as usize / 64 {
            0 => self.first,
            i => self.more[i - 1],
        };
        w & (1 << (cpu % 64)) != 0
    }
    /// `f(cpu)` for each CPU in the set, in ascending order.
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(CpuId)) {
        let mut word = |base: usize, mut w: u64| {
            while w != 0 {
                f(base as CpuId + w.trailing_zeros() as CpuId);
                w &= w - 1;
            }
        };
        word(0, self.first);
        for (i, &w) in self.more.iter().enumerate() {
            word((i + 1) * 64, w);
        }
    }
    /// The same set with every CPU `c` renamed to `perm[c]` (the checker's
    /// symmetry reduction).
    pub fn permuted(&self, perm: &[CpuId]) -> CpuSet {
        let mut p = CpuSet {
            first: 0,
            more: vec![0; self.more.len()],
        };
        self.for_each(|c| p.set(perm[c as usize]));
        p
    }
}

/// A cache of other fields of the world (model machinery, nothing in the
/// kernel): equal for any two worlds and hashed as nothing, like
/// [`Counters`], so the checker never tells two worlds apart by it. The
/// code that changes what it caches keeps it in step.
#[derive(Clone, Debug, Default)]
pub struct Hint<T>(pub T);

impl<T> PartialEq for Hint<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<T> Eq for Hint<T> {}
impl<T> Hash for Hint<T> {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

/// `/proc/interrupts` rows and `tlb:tlb_flush` reasons, and other counters.
/// Observations only: equal for any two worlds, so the checker ignores them.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// TLB row: `irq_tlb_count`, per CPU.
    pub irq_tlb: Vec<u64>,
    /// CAL row: `irq_call_count`, per CPU.
    pub irq_cal: Vec<u64>,
    /// RES row: `irq_resched_count`, per CPU.
    pub irq_res: Vec<u64>,
    /// `tlb:tlb_flush` events by [`FlushReason`].
    pub tlb_flush: [u64; FlushReason::ALL.len()],
    pub page_faults: u64,
    pub spurious_faults: u64,
    pub tlb_hits: u64,
    pub tlb_misses: u64,
    pub invlpg: u64,
    pub full_flushes: u64,
    pub cr3_writes: u64,
    pub ipis_sent: u64,
    /// `smp_call_function_many_cond`: csds queued (one per remote target
    /// that passed `cond_func`); an IPI goes only where the queue was empty.
    pub csd_queued: u64,
    /// Remote wake-ups queued on the target's wake list (`ttwu_queue_wakelist`:
    /// a `sched_ttwu_pending` entry on its `call_single_queue`), and those
    /// whose idle target polled so no IPI was sent (`sched_wake_idle_without_ipi`).
    pub ttwu_wakelist: u64,
    pub wake_idle_without_ipi: u64,
    /// Call-function IPIs sent for wake-list entries (the queue was empty
    /// and the idle task did not poll).
    pub ttwu_ipis: u64,
    /// `lru_add_drain_all` calls, and the per-CPU drain works they ran
    /// (the local one inline, each remote one in its CPU's kworker).
    pub lru_add_drain_all: u64,
    pub lru_drain_works: u64,
    /// Tasks moved to another CPU's runqueue: by the fair class's balancing
    /// (`sched::fair`) or by the `machine.migrate_pct` noise knob.
    pub sched_migrations: u64,
    /// Of those, pulled by `sched_balance_newidle` / by the periodic and
    /// nohz idle balance at the tick.
    pub sched_newidle_pulls: u64,
    pub sched_balance_pulls: u64,
    /// Forks whose child `sched_balance_fork` placed on another CPU than
    /// the parent's; wake-ups `select_task_rq_fair` moved.
    pub sched_fork_remote: u64,
    pub sched_wake_migrations: u64,
    pub segv: u64,
    pub violations_dropped: u64,
    /// `tlb_remove_table_sync_one()` calls that IPI'd / returned early.
    pub table_sync_ipi: u64,
    pub table_sync_skipped: u64,
    /// Seed (b) step 2: `tlb_remove_table_sync_mm()` calls (each reads every
    /// CPU's `active_lockless_pt_walk_mm`; those that IPI'd also count in
    /// `table_sync_ipi`).
    pub table_sync_targeted: u64,
    pub invlpgb: u64,
    pub tlbsync: u64,
    /// Flushes `kvm_flush_tlb_multi` left to the host (preempted vCPUs).
    pub kvm_deferred_flushes: u64,
    pub vcpu_preemptions: u64,
    pub gup_fast: u64,
    pub gup_fast_backoff: u64,
    pub collapses: u64,
    /// `collapse_huge_page` / `hpage_collapse_scan_pmd` failures by
    /// [`ScanResult`](crate::mm::khugepaged::ScanResult) (the `mm_collapse_huge_page` tracepoint's status).
    pub collapse_fail: [u64; crate::mm::khugepaged::ScanResult::ALL.len()],
    /// Of those, failures after `pmdp_collapse_flush` (the isolate's): the
    /// PMD was restored (`pmd_populate`), the flush and sync were spent.
    pub collapse_pmd_restored: u64,
    /// `MADV_COLLAPSE` calls that returned -EAGAIN (`madvise_collapse_errno`).
    pub madv_collapse_eagain: u64,
    /// Faults and `MADV_DONTNEED`s that took the per-VMA lock, and those
    /// that fell back to `mmap_read_lock` (`VMA_LOCK_SUCCESS` / `VMA_LOCK_RETRY`-like).
    pub vma_lock_success: u64,
    pub vma_lock_fallback: u64,
    /// kernel/locking/lock_events_list.h-like: `rwsem_sleep_reader` /
    /// `rwsem_sleep_writer`, the `down_read` / `down_write` calls that
    /// queued (`mmap_lock`, `i_mmap_rwsem`); `rwsem_wlock_handoff`, the
    /// hand-off bits set by writers that waited past `RWSEM_WAIT_TIMEOUT`.
    pub rwsem_sleep_reader: u64,
    pub rwsem_sleep_writer: u64,
    pub rwsem_wlock_handoff: u64,
    /// FOLL_PIN pins taken by GUP-fast.
    pub gup_pins: u64,
    /// `huge_pmd_unshare` calls that dropped a shared PMD table.
    pub pmd_unshares: u64,
    pub pmd_shares: u64,
    /// Page-table batches freed after an RCU grace period.
    pub rcu_table_batches: u64,
    /// arm64: broadcast TLBI operations, `DSB ISH` completions, local TLBIs.
    pub tlbi_is: u64,
    pub dsb_ish: u64,
    pub tlbi_local: u64,
    /// Write faults on write-protected PTEs resolved by reuse / by copy.
    pub wp_reuse: u64,
    pub wp_copy: u64,
    pub forks: u64,
    /// Spurious-fault streaks that hit the livelock bound.
    pub spurious_livelocks: u64,
    /// RISC-V: local `sfence.vma`s, SBI remote-fence calls, deferred flushes
    /// queued and applied, harts cleared from `mm_cpumask`.
    pub sfence_vma: u64,
    pub sbi_rfence: u64,
    pub deferred_flushes: u64,
    pub deferred_applied: u64,
    pub deferred_overflows: u64,
    /// Seed (d): targets still IPI'd because they run the mm now / only
    /// have its ASID loaded (idle or a kernel thread after it).
    pub defer_ipi_running: u64,
    pub defer_ipi_loaded: u64,
    pub cpumask_cleared: u64,
    /// `huge_pmd_unshare` calls that left the table to its last user
    /// (`tlb->fully_unshared_tables`).
    pub pmd_fully_unshared: u64,
    /// Seed (d): entries queued, and drains (`local_tlb_flush_queue_drain`)
    /// at `switch_mm` or in a flush IPI.
    pub defer_enqueues: u64,
    pub defer_drains: u64,
    /// x86 `flush_tlb_kernel_range` and `arch_tlbbatch_flush` calls.
    pub kernel_range_flushes: u64,
    pub tlbbatch_flushes: u64,
    /// PT_RECLAIM: empty PTE tables `zap_pte_range` unhooked and freed.
    pub pt_reclaimed: u64,
    /// `tlb_remove_table_sync_rcu()` calls that waited for a grace period /
    /// returned early (seed b patch 1/2).
    pub table_sync_rcu: u64,
    pub table_sync_rcu_skipped: u64,
    /// Reclaim (`/proc/vmstat`-like): folios freed (`pgsteal`), folios
    /// `shrink_folio_list` kept mapped (no swap, shared, pinned),
    /// `pageout()`s (`pswpout`), swap-ins (`pswpin`).
    pub pgsteal: u64,
    pub reclaim_kept: u64,
    pub pswpout: u64,
    pub pswpin: u64,
    /// `try_to_unmap_one`'s PTEs: flush deferred to the batch
    /// (`set_tlb_ubc_flush_pending`) / flushed on the spot (`ptep_clear_flush`).
    pub tlb_ubc_pending: u64,
    pub ptep_clear_flush: u64,
    /// Page migration (`/proc/vmstat`): folios migrated (`pgmigrate_success`)
    /// and not (`pgmigrate_fail`: pinned); faults that slept in
    /// `migration_entry_wait`.
    pub pgmigrate_success: u64,
    pub pgmigrate_fail: u64,
    pub migration_entry_wait: u64,
}

impl PartialEq for Counters {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Counters {}
impl Hash for Counters {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

/// `enum tlb_flush_reason` (include/linux/mm_types.h), as the tracepoint names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushReason {
    TaskSwitch,
    RemoteShootdown,
    LocalShootdown,
    LocalMmShootdown,
    RemoteSendIpi,
    RemoteWrongCpu,
}

impl FlushReason {
    pub const ALL: [FlushReason; 6] = [
        FlushReason::TaskSwitch,
        FlushReason::RemoteShootdown,
        FlushReason::LocalShootdown,
        FlushReason::LocalMmShootdown,
        FlushReason::RemoteSendIpi,
        FlushReason::RemoteWrongCpu,
    ];
    pub fn name(self) -> &'static str {
        match self {
            FlushReason::TaskSwitch => "task_switch",
            FlushReason::RemoteShootdown => "remote_shootdown",
            FlushReason::LocalShootdown => "local_shootdown",
            FlushReason::LocalMmShootdown => "local_mm_shootdown",
            FlushReason::RemoteSendIpi => "remote_send_ipi",
            FlushReason::RemoteWrongCpu => "remote_wrong_cpu",
        }
    }
}

/// A broken safety invariant (KERNEL_FACTS.md "Safety invariants").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Violation {
    /// Invariant number, 1..=8.
    pub invariant: u8,
    pub cpu: CpuId,
    pub addr: u64,
    pub what: String,
}

/// `struct cpu`: one CPU's architectural and kernel per-CPU state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cpu {
    pub id: CpuId,
    /// Nesting of IRQ-off windows that span steps (0 = IRQs on).
    pub irqs_off: u8,
    /// `preempt_count()`.
    pub preempt_count: u32,
    pub tlbstate: TlbState,
    pub tlb: Tlb,
    /// `per_cpu(call_single_queue)`: entries waiting for the IPI handler.
    pub call_single_queue: Vec<Csd>,
    /// CALL_FUNCTION_VECTOR pending in the local APIC.
    pub ipi_pending: bool,
    /// As an initiator: targets whose csd is still locked (`csd_lock_wait`).
    pub cfd_locked: CpuMask,
    pub curr: Option<TaskId>,
    pub rq: VecDeque<TaskId>,
    /// The per-CPU `flush_tlb_info`.
    pub flush_info: FlushTlbInfo,
    /// This vCPU is descheduled by the host (`steal_time.preempted`).
    pub vcpu_preempted: bool,
    /// `KVM_VCPU_FLUSH_TLB` set in its steal-time area: flush on next entry.
    pub kvm_flush_pending: bool,
    /// arm64/RISC-V ASID allocator state of this CPU.
    pub asid: crate::arch::asid::CpuAsid,
    /// RISC-V: this hart's deferred-flush state (seed d).
    pub riscv: crate::arch::riscv::tlbflush::HartTlbState,
    /// `TIF_NEED_RESCHED`: a higher-priority task woke; switch at the next
    /// point where preemption is allowed.
    pub need_resched: bool,
    /// The per-CPU `flush_tlb_info` is in use by a flush in progress (monitor).
    pub flush_info_busy: bool,
    /// Seed (b) step 2: `per_cpu(active_lockless_pt_walk_mm)`, the mm this
    /// CPU's GUP-fast walk has published (as memory holds it; a buffered
    /// publication sits in the CPU's store buffer).
    pub active_lockless_pt_walk_mm: Option<MmId>,
    /// Seed (b) step 2: a syncing CPU has read this CPU's
    /// `active_lockless_pt_walk_mm` line since this CPU last wrote it, so the
    /// next write must take the line back (priced, not a state of the kernel).
    pub walk_line_shared: bool,
    /// The fair class's balancing state of this CPU's runqueue.
    pub fair: crate::sched::fair::FairRq,
    /// mm/swap.c `cpu_fbatches.lru_add`: folios in this CPU's LRU add
    /// batch (`crate::mm::swap`).
    pub lru_add: u8,
    /// `lru_add_drain_work` queued on this CPU and not yet run.
    pub lru_drain_work: bool,
    /// This CPU's kworker is runnable (woken for the drain work).
    pub kworker_runnable: bool,
    /// The task sleeping in `flush_work` of this CPU's drain work.
    pub lru_drain_waiter: Option<TaskId>,
}

/// Kernel configuration the paths read (switches, static keys, tunables).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelCfg {
    pub nr_cpus: u32,
    pub pcid: bool,
    pub tlb_single_page_flush_ceiling: u64,
    pub flush_tlb_info: FlushTlbInfoPlacement,
    pub flush_tlb_info_stack_offset: u64,
    /// Injected bugs (`[inject]`), for testing the monitor.
    pub inject: machine::scenario::InjectCfg,
    pub invlpgb: bool,
    pub paravirt: machine::scenario::Paravirt,
    /// Generic mm switches (seed b and its unsafe variants).
    pub mm: machine::scenario::MmCfg,
    /// `tlb_ipi_broadcast_key`, decided once at boot by `native_pv_tlb_init`.
    pub tlb_ipi_broadcast_key: bool,
    /// `CONFIG_PT_RECLAIM` (`mm.pt_reclaim` resolved for the arch).
    pub pt_reclaim: bool,
    /// `ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH` (`<arch>.batched_unmap` of `arch`).
    pub batched_unmap: bool,
    /// vCPUs can be preempted by the host (`x86.vcpu_run_us > 0`).
    pub vcpu_preemption: bool,
    pub arch: machine::scenario::Arch,
    /// Seed (a) v7: the flush waits with preemption enabled.
    pub preemptible_flush: bool,
    /// `machine.preemption = full`: kernel code is preemptible where
    /// `preempt_count() == 0`.
    pub preempt_full: bool,
    pub arm64: machine::scenario::Arm64Cfg,
    pub riscv: machine::scenario::RiscvCfg,
    /// The checker's memory model (SC in the simulator): where stores
    /// wait in store buffers ([`crate::hw::memory_model`]).
    pub memory_model: crate::hw::memory_model::MemoryModel,
    /// Run x86 `switch_mm_irqs_off` as separate load/store/barrier steps
    /// (the checker; the simulator runs it as one step).
    pub split_steps: bool,
    /// Checker, `machine.speculative_walks`: the page addresses the
    /// programs touch, which a CPU's walker may cache at any moment
    /// ([`StepKind::SpecWalk`]); empty otherwise.
    pub spec_targets: Vec<u64>,
    /// `machine.speculative_walks` (checker only).
    pub speculative_walks: bool,
    /// The scheduling domains the fair class places tasks on.
    pub topology: machine::Topology,
    /// The idle task polls (`TIF_POLLING_NRFLAG` kept while idle: x86
    /// MWAIT idle): a wake-up queued on an idle CPU's wake list needs no
    /// IPI (`send_call_function_single_ipi`). The cost profile's `[idle]
    /// polls`, set by the simulator; false (HLT/WFI) otherwise.
    pub idle_polls: bool,
    /// The per-CPU LRU batches and `lru_add_drain_all`'s drain work
    /// (`crate::mm::swap`): on, but for the checker (they hold no
    /// translation; `tlblab check` leaves them out).
    pub lru_batches: bool,
}

/// Which kind of step to run on a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// Advance whatever the CPU is running.
    Run,
    /// Take the pending call-function IPI.
    TakeIrq,
    /// The host deschedules this vCPU (any time, even with IRQs off).
    VcpuPreempt,
    /// The host runs this vCPU again.
    VcpuResume,
    /// The scheduler tick preempts the task in user mode, optionally moving
    /// it to another CPU's runqueue.
    Tick { migrate_to: Option<CpuId> },
    /// The CPU's hrtimer interrupt: wake the task whose sleep has ended.
    TimerIrq,
    /// The hardware drains slot `slot` of the CPU's store buffer to memory
    /// (checker memory models other than SC only).
    Drain { slot: u8 },
    /// The hardware walker caches target `target` of
    /// [`KernelCfg::spec_targets`] in this CPU's TLB (checker,
    /// `machine.speculative_walks`).
    SpecWalk { target: u8 },
    /// Step `on` with its loads returning the messages `picks` names
    /// (checker, weak model: [`crate::effects::Picks`]; `on` alone reads
    /// the newest value of every location).
    Picked { on: PickedOn, picks: u64 },
}

/// A step whose loads may return older messages, being varied: CPU,
/// step, and its index among the enabled steps.
#[derive(Clone, Copy)]
struct Pick {
    c: CpuId,
    on: PickedOn,
    base: usize,
}

/// The steps whose loads the checker may let return older messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PickedOn {
    Run,
    TakeIrq,
    TimerIrq,
}

impl PickedOn {
    fn of(kind: StepKind) -> Option<PickedOn> {
        match kind {
            StepKind::Run => Some(PickedOn::Run),
            StepKind::TakeIrq => Some(PickedOn::TakeIrq),
            StepKind::TimerIrq => Some(PickedOn::TimerIrq),
            _ => None,
        }
    }
    pub fn kind(self) -> StepKind {
        match self {
            PickedOn::Run => StepKind::Run,
            PickedOn::TakeIrq => StepKind::TakeIrq,
            PickedOn::TimerIrq => StepKind::TimerIrq,
        }
    }
}

/// The modelled machine and kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    pub cfg: crate::cow::CowBox<KernelCfg>,
    /// Time as the driver last set it (ns), for `jiffies`-based decisions.
    pub now: Time,
    pub cpus: crate::cow::CowVec<Cpu>,
    pub tasks: crate::cow::CowVec<Task>,
    pub mms: crate::cow::CowVec<Mm>,
    pub mem: crate::cow::CowBox<PhysMem>,
    /// Names of measured operations (index = op id in [`Stat`]).
    pub op_names: crate::cow::CowBox<Vec<String>>,
    /// Measured tasks that have not finished. Never recorded in a
    /// footprint ([`World::track_footprints`]): no step reads it.
    pub measuring: Tracked<u32>,
    pub violations: Tracked<Vec<Violation>>,
    pub counters: Counters,
    /// Shareable hugetlb PMD tables (one hugetlbfs file, mapped at the same address).
    pub hugetlb_pmds: Tracked<Vec<SharedPmd>>,
    /// The hugetlbfs file's `i_mmap_rwsem`, held for write by an unmap
    /// (`__hugetlb_zap_begin` .. `__hugetlb_zap_end`): unshare, flush and sync
    /// finish before another mm's unmap can touch the shared table. Queued
    /// writers take it in order ([`crate::locking::rwsem`]).
    pub hugetlb_i_mmap_rwsem: Tracked<crate::locking::rwsem::Rwsem>,
    /// Page-table batches waiting for an RCU grace period (`tlb_remove_table_rcu`).
    pub rcu_batches: Tracked<Vec<RcuBatch>>,
    /// arm64/RISC-V: the ASID allocator.
    pub asids: crate::cow::CowBox<crate::arch::asid::AsidAllocator>,
    /// Page-cache pages of each file (tmpfs-like: always resident).
    pub files: crate::cow::CowBox<Vec<Vec<Pfn>>>,
    pub(crate) next_ctx_id: Tracked<u64>,
    /// Per-CPU store buffers of the checker's memory model (empty under SC).
    pub membufs: crate::cow::CowVec<crate::hw::memory_model::StoreBuffer>,
    /// Checker, weak model: the old messages loads may still return, and
    /// every CPU's views ([`crate::hw::weak_mem`]).
    pub weak: crate::hw::weak_mem::WeakMem,
    /// Which CPUs' paging-structure caches may hold each table (the
    /// invariant-3 monitor's index).
    pub psc_index: Tracked<Hint<crate::hw::psc_index::PscIndex>>,
    /// The sum over CPUs of `irqs_off + preempt_count`: zero when no CPU is
    /// in an RCU read-side section, which `call_rcu` asks at every freed
    /// page-table batch. Kept by [`World::local_irq_disable`] and its kin.
    pub atomic_nesting: Tracked<Hint<u32>>,
    /// Which CPUs' TLBs may hold a translation of each ASID (the CPUs a
    /// broadcast TLBI of one address can change). Kept by
    /// `hw::mmu::tlb_fill`.
    pub tlb_filled: Tracked<Hint<crate::hw::filled_index::FilledIndex>>,
    /// The vmap allocator: vmalloc'd areas and the lazily freed ones
    /// (`vmap_lazy_nr`).
    pub vmap: Tracked<crate::mm::vmalloc::VmapAreas>,
}

/// The world's fields recorded as one footprint object each
/// ([`machine::footprint::kind::FIELD`]).
pub mod field {
    pub const MEASURING: usize = 1;
    pub const VIOLATIONS: usize = 2;
    pub const HUGETLB_PMDS: usize = 3;
    pub const HUGETLB_I_MMAP_RWSEM: usize = 4;
    pub const RCU_BATCHES: usize = 5;
    pub const ASIDS: usize = 6;
    pub const FILES: usize = 7;
    pub const NEXT_CTX_ID: usize = 8;
    pub const PSC_INDEX: usize = 9;
    pub const ATOMIC_NESTING: usize = 10;
    pub const TLB_FILLED: usize = 11;
    pub const OP_NAMES: usize = 12;
    /// The weak memory's order of messages (every new message).
    pub const WEAK_ORDER: usize = 13;
    pub const VMAP: usize = 14;
}

/// Violations kept in full; later ones are only counted.
pub const MAX_VIOLATIONS: usize = 64;

impl World {
    /// An idle machine as the scenario describes it, with `init_mm` loaded everywhere.
    pub fn new(s: &Scenario) -> Result<World, Error> {
        let n = s.machine.cpus as usize;
        let frames = (s.machine.memory.0 / machine::PAGE_SIZE).min(u32::MAX as u64 - 1) as u32;
        let mut mem = PhysMem::new(frames);
        let kernel_pgd = mem.alloc(FrameUse::Table(4))?;
        let m = &s.machine;
        let cfg = KernelCfg {
            nr_cpus: m.cpus,
            pcid: m.pcid,
            tlb_single_page_flush_ceiling: s.x86.tlb_single_page_flush_ceiling as u64,
            flush_tlb_info: s.x86.flush_tlb_info,
            flush_tlb_info_stack_offset: s.x86.flush_tlb_info_stack_offset as u64,
            inject: s.inject.clone(),
            invlpgb: s.x86.invlpgb,
            paravirt: s.x86.paravirt,
            mm: s.mm.clone(),
            tlb_ipi_broadcast_key: crate::arch::x86::tlb::native_pv_tlb_init(s),
            pt_reclaim: s.pt_reclaim(),
            batched_unmap: s.batched_unmap(),
            vcpu_preemption: s.x86.vcpu_run_us > 0,
            arch: m.arch,
            preemptible_flush: s.x86.preemptible_flush,
            preempt_full: m.preemption == machine::scenario::Preemption::Full,
            arm64: s.arm64.clone(),
            riscv: machine::scenario::RiscvCfg {
                // asids_init: too few ASIDs for the CPUs → no allocator.
                asid_bits: if s.riscv_use_asid() {
                    s.riscv.asid_bits
                } else {
                    0
                },
                ..s.riscv.clone()
            },
            memory_model: Default::default(),
            split_steps: false,
            spec_targets: Vec::new(),
            speculative_walks: s.machine.speculative_walks,
            topology: machine::Topology::build(m.topology, m.arch, m.cpus),
            idle_polls: false,
            lru_batches: true,
        };
        if !s.inject.drop_barrier.is_empty()
            && crate::hw::memory_model::find_barrier(&s.inject.drop_barrier).is_none()
        {
            let names: Vec<&str> = crate::hw::memory_model::BARRIERS
                .iter()
                .map(|b| b.name)
                .collect();
            return Err(Error::Config(format!(
                "inject.drop_barrier: unknown barrier '{}' (known: {})",
                s.inject.drop_barrier,
                names.join(", ")
            )));
        }
        let cpus: Vec<Cpu> = (0..n)
            .map(|i| Cpu {
                id: i as CpuId,
                irqs_off: 0,
                preempt_count: 0,
                tlbstate: TlbState::new(),
                tlb: {
                    let t = Tlb::new(m.tlb_entries, m.tlb_ways, m.psc_entries);
                    // (What the monitor's index of tables reads.)
                    if crate::hw::psc_index::PscIndex::wanted(n) {
                        t.keep_table_slots()
                    } else {
                        t
                    }
                },
                call_single_queue: Vec::new(),
                ipi_pending: false,
                cfd_locked: CpuMask::new(n),
                curr: None,
                rq: VecDeque::new(),
                flush_info: FlushTlbInfo::default(),
                vcpu_preempted: false,
                kvm_flush_pending: false,
                asid: Default::default(),
                riscv: Default::default(),
                need_resched: false,
                flush_info_busy: false,
                active_lockless_pt_walk_mm: None,
                walk_line_shared: false,
                fair: Default::default(),
                lru_add: 0,
                lru_drain_work: false,
                kworker_runnable: false,
                lru_drain_waiter: None,
            })
            .collect();
        let init_mm = Mm::new(
            INIT_MM,
            crate::arch::x86::tlb::INIT_MM_CTX_ID,
            kernel_pgd,
            n,
            0,
        );
        Ok(World {
            cfg: cfg.into(),
            now: 0,
            cpus: cpus.into(),
            tasks: Default::default(),
            mms: vec![init_mm].into(),
            mem: mem.into(),
            op_names: vec!["flush_tlb_mm_range".to_string()].into(),
            measuring: Tracked::new(field::MEASURING, 0),
            violations: Tracked::new(field::VIOLATIONS, Vec::new()),
            counters: Counters {
                irq_tlb: vec![0; n],
                irq_cal: vec![0; n],
                irq_res: vec![0; n],
                ..Counters::default()
            },
            hugetlb_pmds: Tracked::new(field::HUGETLB_PMDS, Vec::new()),
            hugetlb_i_mmap_rwsem: Tracked::new(field::HUGETLB_I_MMAP_RWSEM, Default::default()),
            vmap: Tracked::new(field::VMAP, Default::default()),
            rcu_batches: Tracked::new(field::RCU_BATCHES, Vec::new()),
            // Shared between clones and its hash cached: the 8 KiB map of
            // 16-bit ASIDs changes only when an mm gets a new ASID.
            asids: crate::cow::CowBox::new(crate::arch::asid::AsidAllocator::new(match m.arch {
                machine::scenario::Arch::Riscv => s.riscv.asid_bits.max(1),
                machine::scenario::Arch::Arm64 => s.arm64.asid_bits,
                // x86 allocates no ASIDs (PCIDs are per CPU): the smallest
                // map, not 8 KiB cloned and hashed with every checker state.
                machine::scenario::Arch::X86 => 1,
            })),
            files: Vec::new().into(),
            // INIT_MM_CONTEXT has ctx_id 1; last_mm_ctx_id starts at 1, so
            // the first user mm gets 2 (ctx_id 0 matches no mm).
            next_ctx_id: Tracked::new(field::NEXT_CTX_ID, 2),
            membufs: vec![Default::default(); n].into(),
            weak: Default::default(),
            psc_index: Tracked::new(
                field::PSC_INDEX,
                Hint(crate::hw::psc_index::PscIndex::new(n)),
            ),
            atomic_nesting: Tracked::new(field::ATOMIC_NESTING, Hint(0)),
            tlb_filled: Tracked::new(
                field::TLB_FILLED,
                Hint(crate::hw::filled_index::FilledIndex::new(n)),
            ),
        })
    }

    /// `mm_alloc()`: a new address space with an empty PGD (`context.tlb_gen` starts at 1).
    pub fn mm_alloc(&mut self) -> Result<MmId, Error> {
        let pgd = self.mem.alloc(FrameUse::Table(4))?;
        let id = self.mms.len() as MmId;
        let mut mm = Mm::new(
            id,
            *self.next_ctx_id,
            pgd,
            self.cpus.len(),
            self.now + 1_000_000_000,
        );
        // (Tracked as the others are: the vector records its length only.)
        if self.cpus.tag() != 0 {
            mm.track_footprints(Some(id as usize));
        }
        self.mms.push(mm);
        *self.next_ctx_id += 1;
        Ok(id)
    }

    /// Add an anonymous private VMA to `mm` (what `mmap` does before any fault).
    pub fn add_vma(&mut self, mm: MmId, start: u64, len: u64) {
        self.mms[mm as usize].vmas.push(Vma {
            start,
            end: start + len,
            writable: true,
            hugetlb: false,
            file: None,
            vm_write_locked: false,
            vm_readers: 0,
            anon_vma_locked: false,
        });
    }

    /// Add a shared hugetlbfs VMA (`mmap(MAP_SHARED)` of a hugetlbfs file).
    pub fn add_vma_hugetlb(&mut self, mm: MmId, start: u64, len: u64) {
        self.mms[mm as usize].vmas.push(Vma {
            start,
            end: start + len,
            writable: true,
            hugetlb: true,
            file: None,
            vm_write_locked: false,
            vm_readers: 0,
            anon_vma_locked: false,
        });
    }

    /// Add a shared file mapping (`mmap(MAP_SHARED, fd)`) of `files[file]`.
    pub fn add_vma_file(&mut self, mm: MmId, start: u64, len: u64, file: u32) {
        self.mms[mm as usize].vmas.push(Vma {
            start,
            end: start + len,
            writable: true,
            hugetlb: false,
            file: Some(file),
            vm_write_locked: false,
            vm_readers: 0,
            anon_vma_locked: false,
        });
    }

    /// A file of `pages` pages, all in the page cache (each page holds one
    /// reference for the cache, so unmapping never frees it). Returns its id.
    pub fn create_file(&mut self, pages: u32) -> Result<u32, Error> {
        let mut v = Vec::with_capacity(pages as usize);
        for _ in 0..pages {
            v.push(self.mem.alloc(FrameUse::Anon)?);
        }
        self.files.push(v);
        Ok(self.files.len() as u32 - 1)
    }

    /// Register a measured-operation name; returns its id.
    pub fn op_id(&mut self, name: &str) -> u16 {
        if let Some(i) = self.op_names.iter().position(|n| n == name) {
            return i as u16;
        }
        self.op_names.push(name.to_string());
        (self.op_names.len() - 1) as u16
    }

    /// Create a task of `mm` pinned to `cpu`, running `prog`.
    pub fn spawn(&mut self, mm: MmId, cpu: CpuId, prog: Vec<UserOp>, measured: bool) -> TaskId {
        let id = self.tasks.len() as TaskId;
        self.tasks.push(Task {
            id,
            mm,
            cpu,
            state: TaskState::Runnable,
            prog: prog.into(),
            us: UserState::default(),
            kstack: KStack::with_capacity(4),
            gather: MmuGather::default(),
            stack_info: FlushTlbInfo::default(),
            measured,
            spurious_streak: 0,
            spurious_va: 0,
            rt: false,
            pid: id as u32,
            pins: Vec::new(),
            cpus_allowed_all: false,
        });
        if self.cfg.speculative_walks {
            self.note_spec_targets(id);
        }
        self.cpus[cpu as usize].rq.push_back(id);
        *self.mms[mm as usize].mm_users += 1;
        if measured {
            *self.measuring += 1;
        }
        id
    }

    /// `machine.speculative_walks`: the pages task `t`'s program touches
    /// become speculative-walk targets (at most 8 in all).
    fn note_spec_targets(&mut self, t: TaskId) {
        let prog = self.tasks[t as usize].prog.clone();
        for op in prog.iter() {
            if let crate::user::UserOp::Touch { addr, .. } = op {
                let page = addr & !(machine::PAGE_SIZE - 1);
                let targets = &mut self.cfg.spec_targets;
                if !targets.contains(&page) && targets.len() < 8 {
                    targets.push(page);
                }
            }
        }
    }

    /// Record a broken invariant.
    pub fn violation(&mut self, invariant: u8, cpu: CpuId, addr: u64, what: String) {
        if self.violations.len() < MAX_VIOLATIONS {
            self.violations.push(Violation {
                invariant,
                cpu,
                addr,
                what,
            });
        } else {
            self.counters.violations_dropped += 1;
        }
    }

    /// Can `cpu` make progress now without an interrupt?
    #[inline(always)]
    pub fn can_run(&self, cpu: CpuId) -> bool {
        let c = &self.cpus[cpu as usize];
        if c.vcpu_preempted {
            return false;
        }
        if (c.need_resched || c.kworker_runnable) && (c.curr.is_none() || self.can_preempt(cpu)) {
            return true;
        }
        match c.curr {
            // (A polling idle CPU woken with entries on its queue and no
            // IPI: send_call_function_single_ipi.)
            None => !c.rq.is_empty() || (!c.ipi_pending && !c.call_single_queue.is_empty()),
            Some(t) => {
                let task = &self.tasks[t as usize];
                match task.kstack.last() {
                    Some(f) => f.can_run(self, cpu, t),
                    None => crate::user::can_run(self, task),
                }
            }
        }
    }

    /// include/linux/irqflags.h: `local_irq_disable` (or `_save`) on `cpu`,
    /// for a window that spans steps. The count only.
    pub fn local_irq_disable(&mut self, cpu: CpuId) {
        self.cpus[cpu as usize].irqs_off += 1;
        self.nesting(1);
    }

    /// include/linux/irqflags.h: `local_irq_enable` (or `_restore`) on `cpu`.
    pub fn local_irq_enable(&mut self, cpu: CpuId) {
        self.cpus[cpu as usize].irqs_off -= 1;
        self.nesting(-1);
    }

    /// include/linux/preempt.h: `preempt_disable` (`get_cpu`) on `cpu`.
    pub fn preempt_disable(&mut self, cpu: CpuId) {
        self.cpus[cpu as usize].preempt_count += 1;
        self.nesting(1);
    }

    /// include/linux/preempt.h: `preempt_enable` (`put_cpu`) on `cpu`: the
    /// count only; the preemption point is the caller's next step.
    pub fn preempt_enable(&mut self, cpu: CpuId) {
        self.cpus[cpu as usize].preempt_count -= 1;
        self.nesting(-1);
    }

    /// Keep [`World::atomic_nesting`] in step with a count of a CPU that
    /// the caller changed: a sum, so no footprint of its own (updates by
    /// different CPUs commute; the CPU's element records the change, and
    /// [`World::any_cpu_atomic`] reads every CPU's).
    fn nesting(&mut self, by: i32) {
        machine::footprint::paused(|| {
            let n = &mut self.atomic_nesting.0;
            *n = n.wrapping_add_signed(by);
        });
    }

    /// Is some CPU in an RCU read-side section (IRQs or preemption off)?
    pub fn any_cpu_atomic(&self) -> bool {
        // (What the sum stands for, for a footprint: every CPU's counts.)
        self.cpus.note_read_all();
        debug_assert_eq!(
            self.atomic_nesting.0,
            self.cpus
                .iter()
                .map(|c| c.irqs_off as u32 + c.preempt_count)
                .sum::<u32>(),
            "an IRQ or preemption count changed outside World::local_irq_disable and kin"
        );
        machine::footprint::paused(|| self.atomic_nesting.0 != 0)
    }

    /// May the task running on `cpu` be preempted now? In user mode, IRQs
    /// and preemption on; in the kernel too with `machine.preemption = full`.
    pub fn can_preempt(&self, cpu: CpuId) -> bool {
        let c = &self.cpus[cpu as usize];
        match c.curr {
            Some(t) => {
                let task = &self.tasks[t as usize];
                (task.kstack.is_empty() || self.cfg.preempt_full)
                    && task.state != TaskState::Exited
                    && c.irqs_off == 0
                    && c.preempt_count == 0
                    && !c.vcpu_preempted
            }
            None => false,
        }
    }

    /// Can the hrtimer interrupt be taken on `cpu` now (IRQs on)?
    pub fn can_take_timer(&self, cpu: CpuId) -> bool {
        let c = &self.cpus[cpu as usize];
        c.irqs_off == 0 && !c.vcpu_preempted
    }

    /// Would `cpu` take a pending IPI now?
    pub fn can_take_irq(&self, cpu: CpuId) -> bool {
        let c = &self.cpus[cpu as usize];
        c.ipi_pending && c.irqs_off == 0 && !c.vcpu_preempted
    }

    /// The steps enabled now, for exhaustive exploration.
    pub fn enabled(&self, out: &mut Vec<(CpuId, StepKind)>) {
        self.enabled_with(out, None);
    }

    /// [`World::enabled`], and in `trials` (one per step) the world after
    /// each step that was run to find the [`StepKind::Picked`] variants
    /// (`None` for the others): the search takes those as the successors
    /// instead of running the steps again.
    pub fn enabled_with_trials(
        &self,
        out: &mut Vec<(CpuId, StepKind)>,
        trials: &mut Vec<Option<World>>,
    ) {
        self.enabled_with(out, Some(trials));
    }

    fn enabled_with(
        &self,
        out: &mut Vec<(CpuId, StepKind)>,
        mut trials: Option<&mut Vec<Option<World>>>,
    ) {
        self.enabled_base(out);
        if let Some(t) = trials.as_deref_mut() {
            t.clear();
            t.resize_with(out.len(), || None);
        }
        if !self.weak.is_empty() {
            self.enabled_picks(out, trials);
        }
    }

    /// The first entries of [`World::enabled`]: every step but the
    /// [`StepKind::Picked`] variants, which follow them there. Found
    /// without running a step, so a path's choice below this list's length
    /// is replayed without the cost of finding the variants.
    pub fn enabled_base(&self, out: &mut Vec<(CpuId, StepKind)>) {
        out.clear();
        // Only configurations with sleeping tasks have timers to choose.
        let any_asleep = self.tasks.iter().any(|t| t.state == TaskState::Sleeping);
        for c in 0..self.cpus.len() as CpuId {
            self.enabled_on(c, any_asleep, out);
        }
    }

    /// Can any step be taken? (What [`World::enabled`] would say is not
    /// empty, without running steps to find the [`StepKind::Picked`]
    /// variants: each varies a step that is enabled itself.)
    pub fn any_enabled(&self) -> bool {
        let any_asleep = self.tasks.iter().any(|t| t.state == TaskState::Sleeping);
        let mut out = Vec::new();
        (0..self.cpus.len() as CpuId).any(|c| {
            self.enabled_on(c, any_asleep, &mut out);
            !out.is_empty()
        })
    }

    /// The steps CPU `c` may take (without the [`StepKind::Picked`]
    /// variants), appended to `out`.
    fn enabled_on(&self, c: CpuId, any_asleep: bool, out: &mut Vec<(CpuId, StepKind)>) {
        if self.can_run(c) {
            out.push((c, StepKind::Run));
        }
        if self.can_take_irq(c) {
            out.push((c, StepKind::TakeIrq));
        }
        // A sleeping task's hrtimer may expire at any moment.
        if any_asleep && self.can_take_timer(c) && self.sleeping_on(c) {
            out.push((c, StepKind::TimerIrq));
        }
        // The hardware may drain a buffered store at any moment.
        for slot in crate::hw::memory_model::drain_choices(self, c) {
            out.push((c, StepKind::Drain { slot: slot as u8 }));
        }
        // The walker may cache a translation of the loaded mm at any
        // moment (checker, machine.speculative_walks).
        for (i, &va) in self.cfg.spec_targets.iter().enumerate() {
            if crate::hw::mmu::speculative_walk_fills(self, c, va) {
                out.push((c, StepKind::SpecWalk { target: i as u8 }));
            }
        }
        // Under KVM the host may deschedule a vCPU at any point, even
        // with IRQs off, and run it again later.
        if self.cfg.paravirt == machine::scenario::Paravirt::Kvm && self.cfg.vcpu_preemption {
            let p = self.cpus[c as usize].vcpu_preempted;
            out.push((
                c,
                if p {
                    StepKind::VcpuResume
                } else {
                    StepKind::VcpuPreempt
                },
            ));
        }
    }

    /// Record what each step reads and writes ([`World::step_footprint`])
    /// or not (the simulator: not even a test per access beyond a flag).
    pub fn track_footprints(&mut self, on: bool) {
        let tag = |k: u8| if on { k } else { 0 };
        let obj = |k: u8, i: usize| Obj::new(tag(k), i);
        self.cpus.set_tag(tag(kind::CPU));
        self.tasks.set_tag(tag(kind::TASK));
        // An mm's fields record their own accesses (`Mm::track_footprints`).
        self.mms.set_len_tag_only(tag(kind::MM));
        for (i, m) in self.mms.iter_mut().enumerate() {
            m.track_footprints(on.then_some(i));
        }
        self.membufs.set_tag(tag(kind::MEMBUF));
        // The configuration is never written by a step: were it, that
        // step would conflict with every other.
        self.cfg.set_obj(obj(kind::ALL, 0));
        self.op_names.set_obj(obj(kind::FIELD, field::OP_NAMES));
        self.files.set_obj(obj(kind::FIELD, field::FILES));
        self.mem.track_footprints(on);
        // `measuring` is left out: no step reads it (the checker's deadlock
        // test reads it between steps, the simulator at its end), and its
        // updates are counts up and down (a measured task spawned, done or
        // exited), which commute: two exits are not dependent through it.
        self.violations.track(on);
        self.hugetlb_pmds.track(on);
        self.hugetlb_i_mmap_rwsem.track(on);
        self.vmap.track(on);
        self.rcu_batches.track(on);
        self.asids.set_obj(obj(kind::FIELD, field::ASIDS));
        self.next_ctx_id.track(on);
        self.psc_index.track(on);
        self.atomic_nesting.track(on);
        self.tlb_filled.track(on);
    }

    /// Is a task asleep on `cpu`? Reads (for a footprint) the tasks
    /// whose CPU is `cpu` only: a task comes to a CPU by a step that also
    /// writes that CPU (its runqueue) or by going to sleep there.
    fn sleeping_on(&self, cpu: CpuId) -> bool {
        let on: Vec<usize> = machine::footprint::paused(|| {
            (self.tasks.iter().enumerate())
                .filter(|(_, t)| t.cpu == cpu)
                .map(|(i, _)| i)
                .collect()
        });
        // (A task asleep in the kernel, flush_work's waiter, has no timer.)
        on.into_iter().any(|i| {
            let t = &self.tasks[i];
            t.state == TaskState::Sleeping && t.kstack.is_empty()
        })
    }

    /// What the step `kind` of `cpu` reads and writes from this state
    /// (which it then takes), with what decides which steps `cpu` may
    /// take: the checker's partial-order reduction judges two steps
    /// independent by it ([`machine::footprint`]). The weak memory's
    /// clean-up after the step is left out (a function of the state).
    pub fn step_footprint(
        &mut self,
        cpu: CpuId,
        kind: StepKind,
        fx: &mut Effects,
    ) -> machine::footprint::Footprint {
        machine::footprint::start();
        self.enabled_on(cpu, true, &mut Vec::new());
        if let StepKind::Picked { .. } = kind {
            self.weak.stale_for(cpu);
        }
        self.step(cpu, kind, fx);
        machine::footprint::take()
    }

    /// What decides which steps `cpu` may take, read from this state:
    /// the footprint of a CPU with no step enabled, which a step of
    /// another CPU may enable (the checker's dynamic partial-order
    /// reduction races it against the steps taken before).
    pub fn guard_footprint(&self, cpu: CpuId) -> machine::footprint::Footprint {
        machine::footprint::start();
        self.enabled_on(cpu, true, &mut Vec::new());
        machine::footprint::take()
    }

    /// Weak model: for each step whose CPU may read an older message,
    /// the same step with every other combination of messages its loads
    /// can return ([`StepKind::Picked`]), found by running it.
    fn enabled_picks(
        &self,
        out: &mut Vec<(CpuId, StepKind)>,
        mut trials: Option<&mut Vec<Option<World>>>,
    ) {
        let n = out.len();
        for i in 0..n {
            let (c, kind) = out[i];
            let Some(on) = PickedOn::of(kind) else {
                continue;
            };
            if !self.weak.stale_for(c) {
                continue;
            }
            let p = Pick { c, on, base: i };
            self.pick_vectors(p, 0, 0, out, trials.as_deref_mut());
        }
    }

    /// Depth first over the loads' choices: `given` fixes the positions
    /// before `from` (and leaves the rest newest); each alternative at a
    /// later position is a new vector. The world after each run goes to
    /// `trials` when asked: the vector 0 is step `p.base` itself.
    fn pick_vectors(
        &self,
        p: Pick,
        given: u64,
        from: u8,
        out: &mut Vec<(CpuId, StepKind)>,
        mut trials: Option<&mut Vec<Option<World>>>,
    ) {
        let mut w = self.clone();
        let mut fx = Effects::default();
        let kind = StepKind::Picked {
            on: p.on,
            picks: given,
        };
        w.step(p.c, kind, &mut fx);
        let picks = fx.picks;
        if given != 0 {
            out.push((p.c, kind));
        }
        if let Some(t) = trials.as_deref_mut() {
            match given {
                0 => t[p.base] = Some(w),
                _ => t.push(Some(w)),
            }
        }
        for i in from..picks.pos {
            for j in 1..picks.arity(i) as u64 {
                let g = given | (j << (4 * i as u32));
                self.pick_vectors(p, g, i + 1, out, trials.as_deref_mut());
            }
        }
    }

    /// Run one step on `cpu`.
    pub fn step(&mut self, cpu: CpuId, kind: StepKind, fx: &mut Effects) {
        fx.picks = Default::default();
        match kind {
            StepKind::Drain { slot } => {
                // Hardware only: no kernel code runs, no quiescent state.
                crate::hw::memory_model::drain(self, cpu, slot as usize, fx);
            }
            StepKind::SpecWalk { target } => {
                let va = self.cfg.spec_targets[target as usize];
                crate::hw::mmu::speculative_walk(self, cpu, va, fx);
            }
            StepKind::Picked { on, picks } => {
                fx.picks.given = picks;
                self.step_kernel(cpu, on.kind(), fx);
            }
            _ => self.step_kernel(cpu, kind, fx),
        }
        if cfg!(debug_assertions) {
            // What the weak memory holds agrees with memory: a store the
            // step made straight to memory went in as a message
            // (`memory_model::write_direct`), else loads would go on
            // returning the older newest message (tests/weak_direct_writes.rs).
            // (Not part of the step's footprint.)
            let stale = machine::footprint::paused(|| {
                let mem = |loc| crate::hw::memory_model::read_mem(self, loc);
                self.weak.stale_newest(mem)
            });
            assert!(
                stale.is_empty(),
                "after {kind:?} on CPU{cpu}: memory left its newest message behind \
                 (location, newest message, memory): {stale:?}"
            );
        }
        if !self.weak.is_empty() {
            // A clean-up as a function of the whole state: it reads every
            // view, and which CPUs have tasks (a fork onto an idle CPU
            // changes that), and may fold any location's messages into
            // memory. When it changes something, the step conflicts with
            // every other; else it adds nothing. (The two orders the
            // footprint audit once found differing through it were a store
            // made straight to memory without a message, since fixed:
            // with that alone the catalogue's audit finds none.)
            let recording = machine::footprint::recording();
            let before = recording.then(|| self.weak.clone());
            machine::footprint::paused(|| {
                let mut task_ctx = vec![false; self.cpus.len()];
                for t in self.tasks.iter().filter(|t| t.state != TaskState::Exited) {
                    task_ctx[t.cpu as usize] = true;
                }
                self.weak.gc(&task_ctx)
            });
            if before.is_some_and(|b| b != self.weak) {
                use machine::footprint::{kind, Obj};
                machine::footprint::write(|| Obj::new(kind::ALL, 0));
            }
        }
    }

    fn step_kernel(&mut self, cpu: CpuId, kind: StepKind, fx: &mut Effects) {
        self.dispatch(cpu, kind, fx);
        if !self.rcu_batches.is_empty() {
            let c = &self.cpus[cpu as usize];
            if c.irqs_off == 0 && c.preempt_count == 0 && !c.vcpu_preempted {
                crate::mm::mmu_gather::rcu_quiescent_state(self, cpu, fx);
            }
        }
    }

    fn dispatch(&mut self, cpu: CpuId, kind: StepKind, fx: &mut Effects) {
        match kind {
            StepKind::TakeIrq => crate::kernel_smp::sysvec_call_function(self, cpu, fx),
            StepKind::Run => self.run(cpu, fx),
            StepKind::VcpuPreempt => {
                self.cpus[cpu as usize].vcpu_preempted = true;
                self.counters.vcpu_preemptions += 1;
                fx.label(Label::VcpuPreempt);
            }
            StepKind::VcpuResume => crate::arch::x86::tlb::kvm_vcpu_resume(self, cpu, fx),
            StepKind::Tick { migrate_to } => {
                crate::sched::core::scheduler_tick(self, cpu, migrate_to, fx)
            }
            StepKind::TimerIrq => crate::sched::core::hrtimer_wakeup(self, cpu, fx),
            StepKind::Drain { .. } | StepKind::Picked { .. } | StepKind::SpecWalk { .. } => {
                unreachable!("handled in step")
            }
        }
    }

    fn run(&mut self, cpu: CpuId, fx: &mut Effects) {
        if self.cpus[cpu as usize].need_resched
            && self.cpus[cpu as usize].curr.is_some()
            && self.can_preempt(cpu)
        {
            // preempt_schedule(): the woken higher-priority task runs now.
            crate::sched::core::preempt(self, cpu, fx);
            return;
        }
        let Some(t) = self.cpus[cpu as usize].curr else {
            let c = &self.cpus[cpu as usize];
            if !c.ipi_pending && !c.call_single_queue.is_empty() {
                // do_idle: a polling idle loop left on need_resched runs
                // the queue itself (flush_smp_call_function_queue), no
                // interrupt taken.
                crate::kernel_smp::flush_smp_call_function_queue(self, cpu, fx);
            }
            if self.cpus[cpu as usize].kworker_runnable {
                // The woken kworker runs first (it was queued first).
                crate::mm::swap::kworker_run(self, cpu, fx);
                return;
            }
            crate::sched::core::schedule(self, cpu, fx);
            return;
        };
        if self.cpus[cpu as usize].kworker_runnable && self.can_preempt(cpu) {
            // The kworker woken here preempts the task (wakeup preemption).
            crate::mm::swap::kworker_run(self, cpu, fx);
            return;
        }
        // The frame being run, off the kernel stack (None: the user
        // program, or pop the stack next). It stays off while its path
        // continues or calls (the next move would pop it or its child
        // straight back: the same stack, without moving the frames) and
        // goes back on before the step ends. (Boxed: only pointers move.)
        let mut top: Option<Box<Frame>> = None;
        // Bounded: every path yields after at most a handful of local moves.
        for _ in 0..256 {
            if top.is_none() && !self.tasks[t as usize].kstack.is_empty() {
                top = self.tasks[t as usize].kstack.frames.pop();
            }
            let flow = match &mut top {
                Some(f) => f.step(self, cpu, t, fx),
                None => crate::user::step_user(self, cpu, t, fx),
            };
            match flow {
                Flow::Continue => {}
                Flow::Yield | Flow::Block => {
                    if let Some(f) = top {
                        self.tasks[t as usize].kstack.frames.push(f);
                    }
                    return;
                }
                Flow::Call(child) => {
                    let stack = &mut self.tasks[t as usize].kstack;
                    let child = stack.boxed(child);
                    if let Some(f) = top.replace(child) {
                        stack.frames.push(f);
                    }
                }
                Flow::CallYield(child) => {
                    let stack = &mut self.tasks[t as usize].kstack;
                    stack.frames.extend(top);
                    stack.push(child);
                    return;
                }
                Flow::Return => {
                    if let Some(f) = top.take() {
                        self.tasks[t as usize].kstack.recycle(f);
                    }
                    if self.cpus[cpu as usize].curr != Some(t) {
                        return;
                    }
                }
            }
        }
        unreachable!("CPU{cpu}: a step did not yield within 256 moves");
    }

    /// `rq->curr = next` (kernel/sched/core.c: `__schedule`, or the task
    /// leaving the CPU), with each mm's [`Mm::running`] kept in step.
    pub fn set_curr(&mut self, cpu: CpuId, next: Option<TaskId>) {
        if let Some(prev) = self.cpus[cpu as usize].curr {
            let mm = self.tasks[prev as usize].mm;
            self.mms[mm as usize].running.0.clear(cpu);
        }
        if let Some(next) = next {
            let mm = self.tasks[next as usize].mm;
            self.mms[mm as usize].running.0.set(cpu);
        }
        self.cpus[cpu as usize].curr = next;
    }

    /// The `flush_tlb_info` behind a reference, as a reader sees it now.
    pub fn flush_info(&self, r: crate::arch::x86::tlb::InfoRef) -> &FlushTlbInfo {
        match r {
            crate::arch::x86::tlb::InfoRef::PerCpu(c) => &self.cpus[c as usize].flush_info,
            crate::arch::x86::tlb::InfoRef::Stack(t) => &self.tasks[t as usize].stack_info,
        }
    }

    /// A task leaves the CPU for good (`do_exit` → `__schedule` → idle).
    pub fn task_exit(&mut self, cpu: CpuId, t: TaskId, fx: &mut Effects) {
        let mm = self.tasks[t as usize].mm;
        *self.mms[mm as usize].mm_users -= 1;
        let task = &mut self.tasks[t as usize];
        task.state = TaskState::Exited;
        if task.measured {
            *self.measuring -= 1;
            fx.stat(Stat::Done(t));
        }
        fx.label(Label::Exit);
        self.set_curr(cpu, None);
        crate::sched::core::schedule(self, cpu, fx);
    }

    /// Rough host memory this world needs, in bytes (checked before a run).
    pub fn estimate_bytes(s: &Scenario, frames: u64, tables: u64, tasks: u64) -> u64 {
        let cpus = s.machine.cpus as u64;
        let per_cpu = s.machine.tlb_entries as u64 * 40
            + s.machine.psc_entries as u64 * 40
            + 1024
            + cpus / 8 * 2;
        cpus * per_cpu + frames * 24 + tables * 4200 + tasks * (512 + cpus / 8)
    }
}
