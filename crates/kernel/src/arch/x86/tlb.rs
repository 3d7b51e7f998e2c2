//! arch/x86/mm/tlb.c: TLB shootdowns, lazy TLB and PCID management.
//!
//! Generations: every flush request bumps `mm->context.tlb_gen`; each CPU
//! remembers in `cpu_tlbstate.ctxs[asid].tlb_gen` how far its TLB has caught
//! up. `flush_tlb_func` uses the pair to skip redundant work, to flush only
//! the requested pages when it is exactly one generation behind, and to fall
//! back to a full flush otherwise.

use crate::effects::{Effects, Label, Stat};
use crate::hw::memory_model::{self as mo, Loc, Order};
use crate::kernel_smp::{CallFunc, Cond, SmpCallFunctionManyCond};
use crate::world::{layout, Flow, FlushReason, Frame, World};
use crate::{MmId, TaskId, INIT_MM, TLB_FLUSH_ALL, TLB_GENERATION_INVALID};
use machine::scenario::FlushTlbInfoPlacement;
use machine::{Cost, CpuId};

/// `LOADED_MM_SWITCHING`: `cpu_tlbstate.loaded_mm` while CR3 is changing.
pub const LOADED_MM_SWITCHING: MmId = MmId::MAX;
/// `INIT_MM_CONTEXT`: `init_mm.context.ctx_id` is 1 (`last_mm_ctx_id`
/// starts at 1, so user mms get 2, 3, ...; ctx_id 0 matches no mm).
pub const INIT_MM_CTX_ID: u64 = 1;

/// `TLB_NR_DYN_ASIDS`.
pub const TLB_NR_DYN_ASIDS: usize = 6;
/// `HZ` worth of nanoseconds: `should_trim_cpumask` trims once a second.
const TRIM_INTERVAL_NS: u64 = 1_000_000_000;
/// Op id of the `flush_tlb_mm_range` span (registered first in every world).
pub const OP_FLUSH_TLB_MM_RANGE: u16 = 0;
/// `CONFIG_HZ` (the x86_64 distribution default): `jiffies` is simulated
/// ns / 1 ms. `INITIAL_JIFFIES & 0x1f` is 0 at HZ=1000, so starting at 0
/// keeps `consider_global_asid`'s sampling phase.
pub const HZ: u64 = 1000;
/// `invlpgb_count_max` = CPUID 0x80000008 `EDX[15:0]` + 1 (arch/x86/kernel/
/// cpu/amd.c); Zen 3/4 CPUID dumps report `EDX[15:0]` = 7, so 8 pages.
pub const INVLPGB_COUNT_MAX: u64 = 8;
/// `mm_active_cpus_exceeds(mm, 3)`: a global ASID from 4 active CPUs on.
pub const GLOBAL_ASID_THRESHOLD: usize = 3;

/// `struct tlb_context`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TlbContext {
    pub ctx_id: u64,
    pub tlb_gen: u64,
}

/// `struct tlb_state` plus `tlb_state_shared.is_lazy`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TlbState {
    pub loaded_mm: MmId,
    pub loaded_mm_asid: u16,
    pub next_asid: u16,
    pub is_lazy: bool,
    pub ctxs: [TlbContext; TLB_NR_DYN_ASIDS],
}

impl TlbState {
    /// Boot state: `init_mm` in ASID 0 (`initialize_tlbstate_and_flush`).
    pub fn new() -> Self {
        let mut ctxs = [TlbContext::default(); TLB_NR_DYN_ASIDS];
        ctxs[0] = TlbContext {
            ctx_id: INIT_MM_CTX_ID,
            tlb_gen: 1,
        };
        TlbState {
            loaded_mm: INIT_MM,
            loaded_mm_asid: 0,
            next_asid: 1,
            is_lazy: false,
            ctxs,
        }
    }
}

impl Default for TlbState {
    fn default() -> Self {
        Self::new()
    }
}

/// `struct flush_tlb_info`. `mm == None` is a kernel-range flush.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlushTlbInfo {
    pub mm: Option<MmId>,
    pub start: u64,
    pub end: u64,
    pub new_tlb_gen: u64,
    pub initiating_cpu: CpuId,
    pub stride_shift: u8,
    pub freed_tables: bool,
    pub trim_cpumask: bool,
}

/// Size of `struct flush_tlb_info`: 4 × u64 + u32 + 3 × u8 = 35 bytes,
/// padded to 40; `__aligned(64)` (the seed's stack variant, and the per-CPU
/// `DEFINE_PER_CPU_SHARED_ALIGNED` slot) rounds it up to one line.
pub const FLUSH_TLB_INFO_SIZE: u64 = 40;

/// Where the `flush_tlb_info` that a flush passes to its targets lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InfoRef {
    /// `this_cpu_ptr(&flush_tlb_info)` of that CPU.
    PerCpu(CpuId),
    /// `flush_tlb_mm_range`'s stack frame in that task.
    Stack(TaskId),
}

/// The cache lines a reader of `r` touches: start address and length.
pub fn info_lines(w: &World, r: InfoRef) -> (u64, u64) {
    match r {
        InfoRef::PerCpu(c) => (layout::percpu_flush_tlb_info(c), FLUSH_TLB_INFO_SIZE),
        InfoRef::Stack(t) => match w.cfg.flush_tlb_info {
            FlushTlbInfoPlacement::StackUnaligned => (
                layout::stack_frame(t) + w.cfg.flush_tlb_info_stack_offset,
                FLUSH_TLB_INFO_SIZE,
            ),
            _ => (layout::stack_frame(t), FLUSH_TLB_INFO_SIZE),
        },
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `get_cpu()`, `inc_mm_tlb_gen()`, `get_flush_tlb_info()`.
    Start,
    /// Pick `flush_tlb_multi` or a local `flush_tlb_func`.
    Dispatch,
    /// `put_flush_tlb_info()`, `put_cpu()`.
    Done,
    /// The same, after a step boundary: reached only when stores were
    /// still buffered at `Done` (a dropped barrier), so other CPUs and the
    /// drain can act before this CPU goes on to free pages.
    Put,
}

/// `flush_tlb_mm_range(mm, start, end, stride_shift, freed_tables)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlushTlbMmRange {
    pub mm: MmId,
    pub start: u64,
    pub end: u64,
    pub stride_shift: u8,
    pub freed_tables: bool,
    pub info: Option<InfoRef>,
    pub pc: Pc,
    /// INVLPGBs issued: `__tlbsync()` before `put_flush_tlb_info()`.
    pub tlbsync: bool,
    /// IPIs sent: `consider_global_asid()` after they were waited for.
    pub consider_global_asid: bool,
}

impl FlushTlbMmRange {
    pub fn new(mm: MmId, start: u64, end: u64, stride_shift: u32, freed_tables: bool) -> Self {
        FlushTlbMmRange {
            mm,
            start,
            end,
            stride_shift: stride_shift as u8,
            freed_tables,
            info: None,
            pc: Pc::Start,
            tlbsync: false,
            consider_global_asid: false,
        }
    }

    /// arch/x86/mm/tlb.c: `flush_tlb_mm_range`.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Start => {
                fx.stat(Stat::OpBegin(task, OP_FLUSH_TLB_MM_RANGE));
                // Upstream: get_cpu() for the whole flush, wait included.
                // Seed (a) v7: migrate_disable() only; preemption stays on.
                if !w.cfg.preemptible_flush {
                    w.preempt_disable(cpu);
                }
                let new_tlb_gen = inc_mm_tlb_gen_on(w, cpu, self.mm, fx);
                self.info = Some(get_flush_tlb_info(
                    w,
                    cpu,
                    task,
                    Some(self.mm),
                    self.start,
                    self.end,
                    self.stride_shift,
                    self.freed_tables,
                    new_tlb_gen,
                    fx,
                ));
                self.pc = Pc::Dispatch;
                Flow::Yield
            }
            Pc::Dispatch => {
                let info = self.info.expect("info set at Start");
                self.pc = Pc::Done;
                let n = w.cfg.nr_cpus as u64;
                fx.lines(layout::mm_cpumask(self.mm, 0), n.div_ceil(8), false);
                if mm_global_asid(w, self.mm) != 0 {
                    // broadcast_tlb_flush: INVLPGB, then IPIs only while
                    // some CPU still runs the mm in a dynamic ASID.
                    self.tlbsync = true;
                    if broadcast_tlb_flush(w, info, fx) {
                        let mask = w.mms[self.mm as usize].cpumask.clone();
                        return flush_tlb_multi(w, mask, info, fx);
                    }
                    return Flow::Yield;
                }
                if w.mms[self.mm as usize].cpumask.any_but(cpu) {
                    let trim = should_trim_cpumask(w, self.mm);
                    set_info(w, info, |f| f.trim_cpumask = trim);
                    self.consider_global_asid = true;
                    let mask = w.mms[self.mm as usize].cpumask.clone();
                    return flush_tlb_multi(w, mask, info, fx);
                }
                if w.cpus[cpu as usize].tlbstate.loaded_mm == self.mm {
                    // local_irq_disable(); flush_tlb_func(info); local_irq_enable();
                    flush_tlb_func(w, cpu, info, fx);
                    return Flow::Yield;
                }
                Flow::Continue
            }
            Pc::Done if !w.membufs[cpu as usize].is_empty() => {
                self.pc = Pc::Put;
                Flow::Yield
            }
            Pc::Done | Pc::Put => {
                if std::mem::take(&mut self.tlbsync) {
                    // __tlbsync(): wait for the INVLPGBs issued above.
                    fx.cost(Cost::Tlbsync, 1);
                    w.counters.tlbsync += 1;
                }
                if std::mem::take(&mut self.consider_global_asid) {
                    consider_global_asid(w, cpu, task, self.mm, fx);
                }
                // put_flush_tlb_info(); put_cpu() / migrate_enable().
                if let Some(InfoRef::PerCpu(c)) = self.info {
                    w.cpus[c as usize].flush_info_busy = false;
                }
                if !w.cfg.preemptible_flush {
                    w.preempt_enable(cpu);
                }
                fx.stat(Stat::OpEnd(task, OP_FLUSH_TLB_MM_RANGE));
                Flow::Return
            }
        }
    }
}

/// arch/x86/include/asm/mmu_context.h: `inc_mm_tlb_gen`: `atomic64_inc_return`
/// on `mm->context.tlb_gen`, a full barrier that pairs with the read in
/// `switch_mm_irqs_off`.
pub fn inc_mm_tlb_gen(w: &mut World, mm: MmId, fx: &mut Effects) -> u64 {
    fx.cost(Cost::AtomicOp, 1);
    fx.write(layout::mm_tlb_gen(mm));
    let m = &mut w.mms[mm as usize];
    *m.tlb_gen += 1;
    fx.label(Label::IncMmTlbGen {
        mm,
        gen: *m.tlb_gen,
    });
    *m.tlb_gen
}

/// arch/x86/include/asm/mmu_context.h: `inc_mm_tlb_gen` on `cpu`, under
/// the checker's memory model: the locked increment drains `cpu`'s store
/// buffer and is visible at once. With the barrier dropped
/// (`inc_mm_tlb_gen.atomic64_inc_return`) it is a plain load and a
/// buffered store, so `should_flush_tlb`'s later reads can pass it.
pub fn inc_mm_tlb_gen_on(w: &mut World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> u64 {
    if !mo::dropped(w, mo::INC_MM_TLB_GEN) {
        mo::barrier(w, cpu, None, Order::Full, fx);
        return inc_mm_tlb_gen(w, mm, fx);
    }
    fx.label(Label::BarrierDropped {
        name: mo::INC_MM_TLB_GEN,
    });
    fx.cost(Cost::AtomicOp, 1);
    fx.write(layout::mm_tlb_gen(mm));
    let gen = mo::load(w, cpu, Loc::MmTlbGen(mm), fx) + 1;
    mo::store(w, cpu, Loc::MmTlbGen(mm), gen, fx);
    fx.label(Label::IncMmTlbGen { mm, gen });
    gen
}

/// arch/x86/mm/tlb.c: `get_flush_tlb_info` / `init_flush_tlb_info`: fill the
/// per-CPU struct (upstream) or the caller's stack struct (seed a), turning
/// ranges over `tlb_single_page_flush_ceiling` pages into a full flush.
/// `mm == None`: a kernel-range or batched-unmap flush (`info->mm = NULL`).
#[allow(clippy::too_many_arguments)]
pub fn get_flush_tlb_info(
    w: &mut World,
    cpu: CpuId,
    task: TaskId,
    mm: Option<MmId>,
    mut start: u64,
    mut end: u64,
    stride_shift: u8,
    freed_tables: bool,
    new_tlb_gen: u64,
    fx: &mut Effects,
) -> InfoRef {
    if end != TLB_FLUSH_ALL && (end - start) >> stride_shift > w.cfg.tlb_single_page_flush_ceiling {
        start = 0;
        end = TLB_FLUSH_ALL;
    }
    let info = FlushTlbInfo {
        mm,
        start,
        end,
        new_tlb_gen,
        initiating_cpu: cpu,
        stride_shift,
        freed_tables,
        trim_cpumask: false,
    };
    let r = match w.cfg.flush_tlb_info {
        FlushTlbInfoPlacement::Percpu => InfoRef::PerCpu(cpu),
        _ => InfoRef::Stack(task),
    };
    if let InfoRef::PerCpu(c) = r {
        // Monitor: only one flush may use a CPU's struct at a time; with
        // preemption on, a preempting flush on this CPU overwrites it while
        // the first one's targets may still read it.
        if std::mem::replace(&mut w.cpus[c as usize].flush_info_busy, true) {
            w.violation(
                2,
                cpu,
                start,
                format!(
                    "CPU{cpu}: a flush by task {task} overwrote the per-CPU flush_tlb_info while a preempted flush on this CPU was still waiting for its targets to read it"
                ),
            );
        }
    }
    set_info(w, r, |f| *f = info);
    fx.cost(Cost::FlushInfoInit, 1);
    let (addr, len) = info_lines(w, r);
    fx.lines(addr, len, true);
    r
}

fn set_info(w: &mut World, r: InfoRef, f: impl FnOnce(&mut FlushTlbInfo)) {
    match r {
        InfoRef::PerCpu(c) => f(&mut w.cpus[c as usize].flush_info),
        InfoRef::Stack(t) => f(&mut w.tasks[t as usize].stack_info),
    }
}

/// arch/x86/mm/tlb.c: `should_trim_cpumask`: once per `HZ`, let a flush clear
/// CPUs that no longer run the mm from `mm_cpumask`.
fn should_trim_cpumask(w: &mut World, mm: MmId) -> bool {
    let now = w.now;
    let m = &mut w.mms[mm as usize];
    if now > *m.next_trim_cpumask {
        *m.next_trim_cpumask = now + TRIM_INTERVAL_NS;
        true
    } else {
        false
    }
}

/// arch/x86/mm/tlb.c: `native_pv_tlb_init` (seed b): enable
/// `tlb_ipi_broadcast_key` at boot only if `pv_ops.mmu.flush_tlb_multi ==
/// native_flush_tlb_multi` and the CPU has no INVLPGB.
pub fn native_pv_tlb_init(s: &machine::Scenario) -> bool {
    s.x86.paravirt == machine::scenario::Paravirt::None && !s.x86.invlpgb
}

/// arch/x86/mm/tlb.c: `flush_tlb_multi` → `__flush_tlb_multi`: the
/// paravirt hook, `native_flush_tlb_multi` or the backend's.
pub fn flush_tlb_multi(
    w: &mut World,
    mask: machine::CpuMask,
    info: InfoRef,
    fx: &mut Effects,
) -> Flow {
    match w.cfg.paravirt {
        machine::scenario::Paravirt::None => native_flush_tlb_multi(w, mask, info),
        machine::scenario::Paravirt::Kvm => kvm_flush_tlb_multi(w, mask, info, fx),
    }
}

/// arch/x86/kernel/kvm.c: `kvm_flush_tlb_multi`: a preempted vCPU gets
/// `KVM_VCPU_FLUSH_TLB` in its steal-time area instead of an IPI (the host
/// flushes it on the next VM entry); the rest go to `native_flush_tlb_multi`.
pub fn kvm_flush_tlb_multi(
    w: &mut World,
    mask: machine::CpuMask,
    info: InfoRef,
    fx: &mut Effects,
) -> Flow {
    let mut flushmask = mask.clone();
    for c in mask.iter() {
        fx.cost(Cost::KvmSteal, 1);
        let cpu = &mut w.cpus[c as usize];
        if cpu.vcpu_preempted {
            cpu.kvm_flush_pending = true;
            flushmask.clear(c);
            w.counters.kvm_deferred_flushes += 1;
            fx.label(Label::KvmDeferFlush { cpu: c });
        }
    }
    native_flush_tlb_multi(w, flushmask, info)
}

/// The host side of a vCPU resuming (arch/x86/kvm/x86.c: `record_steal_time`
/// → `kvm_vcpu_flush_tlb_guest` when the guest set `KVM_VCPU_FLUSH_TLB`).
pub fn kvm_vcpu_resume(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    let c = &mut w.cpus[cpu as usize];
    c.vcpu_preempted = false;
    let flushed = std::mem::take(&mut c.kvm_flush_pending);
    if flushed {
        c.tlb.flush_all();
        w.counters.full_flushes += 1;
        fx.cost(Cost::FlushTlbLocal, 1);
    }
    fx.label(Label::VcpuResume { flushed });
}

/// `is_global_asid`: ASIDs from `TLB_NR_DYN_ASIDS` up are global.
pub fn is_global_asid(asid: u16) -> bool {
    asid as usize >= TLB_NR_DYN_ASIDS
}

/// arch/x86/include/asm/tlbflush.h: `mm_global_asid` (0 without INVLPGB).
pub fn mm_global_asid(w: &World, mm: MmId) -> u16 {
    if !w.cfg.invlpgb || mm == INIT_MM || mm == LOADED_MM_SWITCHING {
        return 0;
    }
    *w.mms[mm as usize].global_asid
}

/// arch/x86/include/asm/tlbflush.h: `mm_in_asid_transition`.
pub fn mm_in_asid_transition(w: &World, mm: Option<MmId>) -> bool {
    w.cfg.invlpgb && mm.is_some_and(|m| *w.mms[m as usize].asid_transition)
}

/// arch/x86/mm/tlb.c: `mm_needs_global_asid`: the mm has a global ASID
/// but this CPU still runs it in dynamic ASID `asid`.
fn mm_needs_global_asid(w: &World, mm: MmId, asid: u16) -> bool {
    let global = mm_global_asid(w, mm);
    global != 0 && asid != global
}

/// arch/x86/mm/tlb.c: `mm_active_cpus_exceeds`: more than `threshold` CPUs
/// in `mm_cpumask` have the mm loaded and are not lazy.
fn mm_active_cpus_exceeds(
    w: &World,
    me: CpuId,
    mm: MmId,
    threshold: usize,
    fx: &mut Effects,
) -> bool {
    let mask = &w.mms[mm as usize].cpumask;
    if mask.iter().count() <= threshold {
        return false;
    }
    let mut count = 0;
    for c in mask.iter() {
        if mo::load(w, me, Loc::LoadedMm(c), fx) as MmId != mm
            || mo::load(w, me, Loc::IsLazy(c), fx) != 0
        {
            continue;
        }
        count += 1;
        if count > threshold {
            return true;
        }
    }
    false
}

/// arch/x86/mm/tlb.c: `consider_global_asid`: after an IPI flush, once in
/// a while (`(pid & 0x1f) == (jiffies & 0x1f)`), give an mm active on
/// more than 3 CPUs a global ASID (`use_global_asid`).
fn consider_global_asid(w: &mut World, cpu: CpuId, task: TaskId, mm: MmId, fx: &mut Effects) {
    if !w.cfg.invlpgb {
        return;
    }
    let jiffies = w.now / (1_000_000_000 / HZ);
    if u64::from(w.tasks[task as usize].pid) & 0x1f != jiffies & 0x1f {
        return;
    }
    if mm_active_cpus_exceeds(w, cpu, mm, GLOBAL_ASID_THRESHOLD, fx) {
        use_global_asid(w, mm, fx);
    }
}

/// arch/x86/mm/tlb.c: `use_global_asid` → `allocate_global_asid`,
/// `mm_assign_global_asid` (`asid_transition` set before the ASID is
/// published). Global ASIDs are handed out upwards from
/// `TLB_NR_DYN_ASIDS`. `last_global_asid` starts at `MAX_ASID_AVAILABLE`,
/// so the first allocation runs `reset_global_asid_space`
/// (`invlpgb_flush_all_nonglobals`); the model never frees a global ASID,
/// so never wraps and never resets again.
fn use_global_asid(w: &mut World, mm: MmId, fx: &mut Effects) {
    // guard(raw_spinlock_irqsave)(&global_asid_lock)
    fx.cost(Cost::AtomicOp, 1);
    if *w.mms[mm as usize].global_asid != 0 {
        return;
    }
    let last = w.mms.iter().map(|m| *m.global_asid).max().unwrap_or(0);
    if last == 0 {
        // allocate_global_asid: last_global_asid >= MAX_ASID_AVAILABLE - 1
        crate::arch::x86::tlb_kernel::invlpgb_flush_all_nonglobals(w, fx);
    }
    let asid = last.max(TLB_NR_DYN_ASIDS as u16 - 1) + 1;
    let m = &mut w.mms[mm as usize];
    *m.asid_transition = true;
    *m.global_asid = asid;
    fx.label(Label::UseGlobalAsid { mm, asid });
}

/// arch/x86/mm/tlb.c: `finish_asid_transition`: true when some CPU still
/// runs the mm in a dynamic ASID (the caller then IPIs the whole mask and
/// `flush_tlb_func` moves it over); when none does, the transition ends.
/// The kernel spins while a CPU is `LOADED_MM_SWITCHING`; the model, one
/// step, sends the IPI then (as it would if that CPU ended in a dynamic ASID).
fn finish_asid_transition(w: &mut World, me: CpuId, mm: MmId, fx: &mut Effects) -> bool {
    if !mm_in_asid_transition(w, Some(mm)) {
        return false;
    }
    let global = mm_global_asid(w, mm);
    for c in w.mms[mm as usize].cpumask.iter() {
        let loaded = mo::load(w, me, Loc::LoadedMm(c), fx) as MmId;
        if loaded == LOADED_MM_SWITCHING
            || (loaded == mm && w.cpus[c as usize].tlbstate.loaded_mm_asid != global)
        {
            return true;
        }
    }
    *w.mms[mm as usize].asid_transition = false;
    false
}

/// arch/x86/mm/tlb.c: `broadcast_tlb_flush`: INVLPGB the mm's global ASID
/// on every CPU at once, one instruction per `invlpgb_count_max` strides
/// (or one for the whole ASID); then `finish_asid_transition`. Returns
/// whether that still needs the IPIs. No CPU takes an interrupt otherwise,
/// so nothing waits for IRQ-off windows to end. The caller issues TLBSYNC.
pub fn broadcast_tlb_flush(w: &mut World, r: InfoRef, fx: &mut Effects) -> bool {
    let f = *w.flush_info(r);
    let Some(mm) = f.mm else { return false };
    let asid = mm_global_asid(w, mm);
    let mut n = 0u64;
    if f.end == TLB_FLUSH_ALL {
        w.cpus.iter_mut().for_each(|c| c.tlb.flush_asid(asid));
        n = 1;
    } else {
        let shift = u64::from(f.stride_shift);
        let mut addr = f.start;
        loop {
            let mut nr = 1;
            if shift <= u64::from(machine::HPAGE_SHIFT) {
                nr = ((f.end - addr) >> shift).clamp(1, INVLPGB_COUNT_MAX);
            }
            let range = (addr, addr + (nr << shift), 1 << shift);
            w.cpus
                .iter_mut()
                .for_each(|c| c.tlb.flush_range(asid, range, false));
            n += 1;
            addr += nr << shift;
            if addr >= f.end {
                break;
            }
        }
    }
    fx.cost(Cost::Invlpgb, n as u32);
    w.counters.invlpgb += n;
    let pages = if f.end == TLB_FLUSH_ALL {
        TLB_FLUSH_ALL
    } else {
        (f.end - f.start) >> f.stride_shift
    };
    fx.label(Label::Invlpgb { mm, pages });
    finish_asid_transition(w, f.initiating_cpu, mm, fx)
}

/// arch/x86/mm/tlb.c: `native_flush_tlb_multi`: trace `TLB_REMOTE_SEND_IPI`,
/// then IPI every CPU in the mask when page tables were freed (lazy CPUs
/// may walk them speculatively), else only those `should_flush_tlb` picks.
pub fn native_flush_tlb_multi(w: &mut World, mask: machine::CpuMask, info: InfoRef) -> Flow {
    w.counters.tlb_flush[FlushReason::RemoteSendIpi as usize] += 1;
    let f = *w.flush_info(info);
    // Injected bug `lazy_skip_on_freed_tables`: filter lazy CPUs even then.
    let every = f.freed_tables && !w.cfg.inject.lazy_skip_on_freed_tables;
    let cond = if every || mm_in_asid_transition(w, f.mm) {
        Cond::Always
    } else {
        Cond::ShouldFlushTlb
    };
    Flow::Call(Frame::SmpCallFunctionManyCond(
        SmpCallFunctionManyCond::new(mask, CallFunc::FlushTlbFunc(info), cond),
    ))
}

/// arch/x86/mm/tlb.c: `should_flush_tlb`: is `cpu` worth an IPI for `info`?
/// Reads the target's `loaded_mm`, `smp_rmb()`, then `is_lazy` (so
/// `is_lazy` is at least as new as `loaded_mm`: `switch_mm_irqs_off`
/// stores them in the other order); a CPU caught switching
/// (`LOADED_MM_SWITCHING`) may hold either mm and is flushed (both from
/// fea4e317f9e7).
pub fn should_flush_tlb(w: &World, cpu: CpuId, info: InfoRef, fx: &mut Effects) -> bool {
    let f = w.flush_info(info);
    let me = f.initiating_cpu;
    let loaded_mm = mo::load(w, me, Loc::LoadedMm(cpu), fx) as MmId;
    if mo::dropped(w, mo::SHOULD_FLUSH_TLB_SMP_RMB) {
        // x86: smp_rmb() is barrier(); loads stay in order under TSO.
        fx.label(Label::BarrierDropped {
            name: mo::SHOULD_FLUSH_TLB_SMP_RMB,
        });
    }
    fx.read(layout::cpu_tlbstate_shared(cpu));
    if mo::load(w, me, Loc::IsLazy(cpu), fx) != 0 {
        return false;
    }
    let Some(mm) = f.mm else {
        return true;
    };
    fx.read(layout::cpu_tlbstate(cpu));
    loaded_mm == LOADED_MM_SWITCHING || loaded_mm == mm || f.trim_cpumask
}

/// arch/x86/mm/tlb.c: `flush_tlb_func`: bring this CPU's TLB up to date
/// with `mm->context.tlb_gen`, partially if exactly one generation behind on
/// a range, fully otherwise. Runs with IRQs off (IPI handler or local call).
pub fn flush_tlb_func(w: &mut World, cpu: CpuId, r: InfoRef, fx: &mut Effects) {
    fx.cost(Cost::FlushTlbFuncFixed, 1);
    let (addr, len) = info_lines(w, r);
    fx.lines(addr, len, false);
    let f = *w.flush_info(r);
    let c = cpu as usize;
    let local = f.initiating_cpu == cpu;
    let loaded_mm = w.cpus[c].tlbstate.loaded_mm;
    let asid = w.cpus[c].tlbstate.loaded_mm_asid;
    if !local {
        w.counters.irq_tlb[c] += 1;
    }
    let fmm = f.mm.unwrap_or(INIT_MM);
    if f.mm.is_some() && fmm != loaded_mm {
        // The CPU was left in the mm_cpumask of the target mm. Clear it.
        w.mms[fmm as usize].cpumask.clear(cpu);
        fx.write(layout::mm_cpumask(fmm, cpu));
        w.counters.tlb_flush[FlushReason::RemoteWrongCpu as usize] += 1;
        fx.label(Label::FlushTlbFuncSkip {
            mm: fmm,
            why: "mm not loaded: cleared from mm_cpumask",
        });
        return;
    }
    if loaded_mm == INIT_MM {
        return;
    }
    // Reload the ASID if moving to a global one; that one INVLPGB keeps current.
    if mm_needs_global_asid(w, loaded_mm, asid) {
        switch_mm_irqs_off(w, cpu, loaded_mm, fx);
    }
    if is_global_asid(w.cpus[c].tlbstate.loaded_mm_asid) {
        return;
    }
    if mo::load(w, cpu, Loc::IsLazy(cpu), fx) != 0 {
        // Lazy: switch to init_mm rather than flush, so the paging-structure
        // caches cannot walk freed tables speculatively.
        switch_mm_irqs_off(w, cpu, INIT_MM, fx);
        return;
    }
    let local_tlb_gen = w.cpus[c].tlbstate.ctxs[asid as usize].tlb_gen;
    if f.new_tlb_gen != TLB_GENERATION_INVALID && f.new_tlb_gen <= local_tlb_gen {
        fx.label(Label::FlushTlbFuncSkip {
            mm: fmm,
            why: "already up to date with this request",
        });
        return;
    }
    fx.read(layout::mm_tlb_gen(loaded_mm));
    let mm_tlb_gen = mo::load(w, cpu, Loc::MmTlbGen(loaded_mm), fx);
    let reason = if !local {
        FlushReason::RemoteShootdown
    } else if f.mm.is_none() {
        FlushReason::LocalShootdown
    } else {
        FlushReason::LocalMmShootdown
    };
    if local_tlb_gen == mm_tlb_gen {
        w.counters.tlb_flush[reason as usize] += 1;
        fx.label(Label::FlushTlbFuncSkip {
            mm: fmm,
            why: "caught up by a concurrent flush",
        });
        return;
    }
    if local_tlb_gen > mm_tlb_gen {
        w.violation(
            4,
            cpu,
            0,
            format!("CPU{cpu} tlb_gen {local_tlb_gen} is ahead of mm{loaded_mm}'s {mm_tlb_gen}"),
        );
    }
    let nr_invalidate;
    if !local && w.cfg.inject.skip_flush_in_flush_tlb_func {
        // Injected bug: catch the generation up without touching the TLB.
        nr_invalidate = 0;
    } else if f.end != TLB_FLUSH_ALL
        && f.new_tlb_gen == local_tlb_gen + 1
        && f.new_tlb_gen == mm_tlb_gen
    {
        // Partial flush: one INVLPG per stride.
        let stride = 1u64 << f.stride_shift;
        let n = f.end.saturating_sub(f.start).div_ceil(stride) as u32;
        w.cpus[c]
            .tlb
            .flush_range(asid, (f.start, f.end, stride), false);
        w.counters.invlpg += n as u64;
        fx.cost(Cost::Invlpg, n);
        nr_invalidate = n as u64;
    } else {
        w.cpus[c].tlb.flush_asid(asid);
        w.counters.full_flushes += 1;
        fx.cost(Cost::FlushTlbLocal, 1);
        nr_invalidate = TLB_FLUSH_ALL;
    }
    w.cpus[c].tlbstate.ctxs[asid as usize].tlb_gen = mm_tlb_gen;
    w.counters.tlb_flush[reason as usize] += 1;
    fx.label(Label::FlushTlbFunc {
        mm: loaded_mm,
        local,
        pages: nr_invalidate,
    });
}

/// arch/x86/mm/tlb.c: `choose_new_asid`: reuse the slot that already holds
/// `next`'s context, else take the next of `TLB_NR_DYN_ASIDS` round-robin.
fn choose_new_asid(w: &mut World, cpu: CpuId, next: MmId, next_tlb_gen: u64) -> (u16, bool) {
    if !w.cfg.pcid {
        return (0, true);
    }
    // Global ASIDs are always up to date (INVLPGB).
    let global = mm_global_asid(w, next);
    if global != 0 {
        return (global, false);
    }
    let ctx_id = *w.mms[next as usize].ctx_id;
    let ts = &mut w.cpus[cpu as usize].tlbstate;
    for (asid, ctx) in ts.ctxs.iter().enumerate() {
        if ctx.ctx_id == ctx_id {
            return (asid as u16, ctx.tlb_gen < next_tlb_gen);
        }
    }
    let mut asid = ts.next_asid;
    ts.next_asid += 1;
    if asid as usize >= TLB_NR_DYN_ASIDS {
        asid = 0;
        ts.next_asid = 1;
    }
    (asid, true)
}

/// arch/x86/mm/tlb.c: `switch_mm_irqs_off`: load `next`, flushing its ASID
/// slot if it is behind `next->context.tlb_gen`; returning from lazy mode to
/// the same mm checks the generation too.
pub fn switch_mm_irqs_off(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) -> bool {
    // Run as one step: its CR3 write serializes, so nothing stays buffered.
    mo::barrier(w, cpu, None, Order::Full, fx);
    let c = cpu as usize;
    let prev = w.cpus[c].tlbstate.loaded_mm;
    let prev_asid = w.cpus[c].tlbstate.loaded_mm_asid;
    let was_lazy = w.cpus[c].tlbstate.is_lazy;
    if was_lazy {
        fx.write(layout::cpu_tlbstate_shared(cpu));
    }
    w.cpus[c].tlbstate.is_lazy = false;
    let (new_asid, need_flush, next_tlb_gen);
    if prev == next && mm_needs_global_asid(w, next, prev_asid) {
        // Moving to the mm's global ASID.
        fx.read(layout::mm_tlb_gen(next));
        next_tlb_gen = *w.mms[next as usize].tlb_gen;
        (new_asid, need_flush) = choose_new_asid(w, cpu, next, next_tlb_gen);
    } else if prev == next {
        if is_global_asid(prev_asid) || !was_lazy {
            return false;
        }
        // Back from lazy mode: smp_mb(), then is the TLB still current?
        fx.read(layout::mm_tlb_gen(next));
        next_tlb_gen = *w.mms[next as usize].tlb_gen;
        if w.cpus[c].tlbstate.ctxs[prev_asid as usize].tlb_gen == next_tlb_gen {
            return false;
        }
        new_asid = prev_asid;
        need_flush = true;
    } else {
        // Start receiving IPIs, then read tlb_gen (pairs with inc_mm_tlb_gen).
        if next != INIT_MM && !w.mms[next as usize].cpumask.test(cpu) {
            w.mms[next as usize].cpumask.set(cpu);
            fx.write(layout::mm_cpumask(next, cpu));
        }
        fx.read(layout::mm_tlb_gen(next));
        next_tlb_gen = *w.mms[next as usize].tlb_gen;
        (new_asid, need_flush) = choose_new_asid(w, cpu, next, next_tlb_gen);
    }
    load_new_mm_cr3(w, cpu, prev, next, new_asid, need_flush, next_tlb_gen, fx);
    need_flush
}

/// arch/x86/mm/tlb.c: the tail of `switch_mm_irqs_off`: record the ASID
/// slot's generation, `load_new_mm_cr3` (flushing the slot when asked),
/// then `loaded_mm = next` after the CR3 write.
#[allow(clippy::too_many_arguments)]
fn load_new_mm_cr3(
    w: &mut World,
    cpu: CpuId,
    prev: MmId,
    next: MmId,
    new_asid: u16,
    need_flush: bool,
    next_tlb_gen: u64,
    fx: &mut Effects,
) {
    let c = cpu as usize;
    let ctx_id = *w.mms[next as usize].ctx_id;
    let ts = &mut w.cpus[c].tlbstate;
    if need_flush {
        ts.ctxs[new_asid as usize] = TlbContext {
            ctx_id,
            tlb_gen: next_tlb_gen,
        };
        w.cpus[c].tlb.flush_asid(new_asid);
        w.counters.full_flushes += 1;
        fx.cost(Cost::FlushTlbLocal, 1);
    } else {
        fx.cost(Cost::Cr3Write, 1);
    }
    w.counters.cr3_writes += 1;
    w.counters.tlb_flush[FlushReason::TaskSwitch as usize] += 1;
    let ts = &mut w.cpus[c].tlbstate;
    ts.loaded_mm = next;
    ts.loaded_mm_asid = new_asid;
    fx.write(layout::cpu_tlbstate(cpu));
    fx.label(Label::SwitchMm {
        from: prev,
        to: next,
        flush: need_flush,
    });
}

/// arch/x86/mm/tlb.c: `enter_lazy_tlb`: a kernel thread (or idle) keeps the
/// previous user mm loaded and only marks the CPU lazy.
pub fn enter_lazy_tlb(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    let ts = &mut w.cpus[cpu as usize].tlbstate;
    if ts.loaded_mm == INIT_MM {
        return;
    }
    let mm = ts.loaded_mm;
    // __schedule took the rq lock (a locked op), so the buffer is empty;
    // the store is then made visible at once: a later is_lazy = true only
    // makes flushers IPI this CPU more, never less.
    mo::barrier(w, cpu, None, Order::Full, fx);
    w.cpus[cpu as usize].tlbstate.is_lazy = true;
    fx.write(layout::cpu_tlbstate_shared(cpu));
    fx.label(Label::EnterLazy { mm });
}

/// arch/x86/include/asm/tlb.h: `tlb_flush`: `flush_tlb_mm_range(tlb->mm,
/// start, end, tlb_get_unmap_shift(tlb), tlb->freed_tables)`, the whole mm
/// (`TLB_FLUSH_ALL`) for `fullmm`. The stride is what makes a PMD-only zap
/// (a THP, a hugetlb page) one INVLPG per 2 MiB rather than 512 pages over
/// the ceiling. Seed (b) passes `freed_tables || unshared_tables` so lazy
/// CPUs are IPI'd on unshare too; `mm.unshare_without_lazy_ipi` drops that
/// again (unsafe with the skip, by the seed's argument).
pub fn tlb_flush(w: &World, task: TaskId) -> Flow {
    let g = &w.tasks[task as usize].gather;
    if !g.needs_flush() {
        return Flow::Continue;
    }
    let (start, end) = if g.fullmm {
        (0, TLB_FLUSH_ALL)
    } else {
        (g.start, g.end)
    };
    // Upstream passes freed_tables only; seed (b) patch 2/2 adds
    // unshared_tables, unless the unsafe variant drops it again.
    let m = &w.cfg.mm;
    let seed = m.skip_redundant_table_sync || m.force_skip_table_sync;
    let unshared = g.unshared_tables && seed && !m.unshare_without_lazy_ipi;
    Flow::Call(Frame::FlushTlbMmRange(FlushTlbMmRange::new(
        g.mm,
        start,
        end,
        g.tlb_get_unmap_shift(),
        g.freed_tables || unshared,
    )))
}

/// Program points of [`SwitchMmIrqsOff`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwitchPc {
    /// `is_lazy = false`; then either the lazy return's `smp_mb()`, or
    /// `loaded_mm = LOADED_MM_SWITCHING` and `cpumask_set_cpu` (a locked
    /// op) or, with the bit already set, `smp_mb()`. One step: until the
    /// barrier its stores are only in this CPU's buffer, invisible to the
    /// others, so a step boundary before it would add nothing they can see
    /// but a drain of `LOADED_MM_SWITCHING` (which only makes flushers IPI
    /// this CPU more).
    Start,
    /// `atomic64_read(&next->context.tlb_gen)`, `choose_new_asid`.
    ReadTlbGen,
    /// Back from lazy mode to the same mm: read `tlb_gen`.
    LazyReadTlbGen,
    /// `load_new_mm_cr3` (serializing), `loaded_mm = next`.
    LoadCr3,
}

/// arch/x86/mm/tlb.c: `switch_mm_irqs_off` as the checker runs it, one
/// step per window the kernel has, so a flush on another CPU can run
/// between this CPU's stores and its `tlb_gen` read, and a buffered store
/// can still be in the store buffer when the flusher reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SwitchMmIrqsOff {
    pub next: MmId,
    pub prev: MmId,
    pub pc: SwitchPc,
    pub new_asid: u16,
    pub need_flush: bool,
    pub next_tlb_gen: u64,
}

/// `context_switch` → `switch_mm_irqs_off(next)` with `split_steps`: IRQs
/// off (as in `context_switch`) and the path pushed on the incoming task's
/// stack; it runs before anything else the task does.
pub fn switch_mm_irqs_off_begin(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) {
    // __schedule took the rq lock (a locked op): nothing is buffered here.
    mo::barrier(w, cpu, None, Order::Full, fx);
    let t = w.cpus[cpu as usize]
        .curr
        .expect("context_switch picked a task");
    fx.label(Label::SwitchMmBegin {
        from: w.cpus[cpu as usize].tlbstate.loaded_mm,
        to: next,
    });
    w.local_irq_disable(cpu);
    let mut f = SwitchMmIrqsOff {
        next,
        prev: next,
        pc: SwitchPc::Start,
        new_asid: 0,
        need_flush: false,
        next_tlb_gen: 0,
    };
    // The first window runs in the context-switch step itself.
    if let Flow::Yield = f.step(w, cpu, fx) {
        w.tasks[t as usize].kstack.push(Frame::SwitchMmIrqsOff(f));
    }
}

impl SwitchMmIrqsOff {
    /// arch/x86/mm/tlb.c: `switch_mm_irqs_off`, one window per step.
    pub fn step(&mut self, w: &mut World, cpu: CpuId, fx: &mut Effects) -> Flow {
        let (c, next) = (cpu as usize, self.next);
        match self.pc {
            SwitchPc::Start => {
                self.prev = mo::load(w, cpu, Loc::LoadedMm(cpu), fx) as MmId;
                let was_lazy = mo::load(w, cpu, Loc::IsLazy(cpu), fx) != 0;
                if was_lazy {
                    mo::store(w, cpu, Loc::IsLazy(cpu), 0, fx);
                    fx.write(layout::cpu_tlbstate_shared(cpu));
                }
                let asid = w.cpus[c].tlbstate.loaded_mm_asid;
                if self.prev == next && mm_needs_global_asid(w, next, asid) {
                    // Moving to the mm's global ASID: read tlb_gen, choose.
                    self.pc = SwitchPc::ReadTlbGen;
                    return Flow::Yield;
                }
                if self.prev == next {
                    if is_global_asid(asid) || !was_lazy {
                        return self.finish(w, cpu);
                    }
                    // "The barrier synchronizes with the tlb_gen increment
                    // in the TLB shootdown code."
                    mo::barrier(w, cpu, Some(mo::SWITCH_MM_LAZY_SMP_MB), Order::Full, fx);
                    self.pc = SwitchPc::LazyReadTlbGen;
                    return Flow::Yield;
                }
                // "Indicate that CR3 is about to change."
                mo::store(w, cpu, Loc::LoadedMm(cpu), LOADED_MM_SWITCHING as u64, fx);
                fx.write(layout::cpu_tlbstate(cpu));
                let bit = Loc::MmCpumask { mm: next, cpu };
                if next != INIT_MM && mo::load(w, cpu, bit, fx) == 0 {
                    // cpumask_set_cpu: lock bts, a full barrier.
                    mo::store(w, cpu, bit, 1, fx);
                    fx.write(layout::mm_cpumask(next, cpu));
                    mo::barrier(w, cpu, Some(mo::SWITCH_MM_CPUMASK_SET_CPU), Order::Full, fx);
                } else {
                    mo::barrier(w, cpu, Some(mo::SWITCH_MM_SMP_MB), Order::Full, fx);
                }
                self.pc = SwitchPc::ReadTlbGen;
                Flow::Yield
            }
            SwitchPc::ReadTlbGen => {
                fx.read(layout::mm_tlb_gen(next));
                self.next_tlb_gen = mo::load(w, cpu, Loc::MmTlbGen(next), fx);
                fx.label(Label::SwitchMmReadTlbGen {
                    mm: next,
                    gen: self.next_tlb_gen,
                });
                (self.new_asid, self.need_flush) = choose_new_asid(w, cpu, next, self.next_tlb_gen);
                self.pc = SwitchPc::LoadCr3;
                Flow::Yield
            }
            SwitchPc::LazyReadTlbGen => {
                fx.read(layout::mm_tlb_gen(next));
                self.next_tlb_gen = mo::load(w, cpu, Loc::MmTlbGen(next), fx);
                fx.label(Label::SwitchMmReadTlbGen {
                    mm: next,
                    gen: self.next_tlb_gen,
                });
                let asid = w.cpus[c].tlbstate.loaded_mm_asid;
                if w.cpus[c].tlbstate.ctxs[asid as usize].tlb_gen == self.next_tlb_gen {
                    return self.finish(w, cpu);
                }
                (self.new_asid, self.need_flush) = (asid, true);
                self.pc = SwitchPc::LoadCr3;
                Flow::Yield
            }
            SwitchPc::LoadCr3 => {
                // write_cr3 is serializing: the store buffer drains first.
                mo::barrier(w, cpu, None, Order::Full, fx);
                load_new_mm_cr3(
                    w,
                    cpu,
                    self.prev,
                    next,
                    self.new_asid,
                    self.need_flush,
                    self.next_tlb_gen,
                    fx,
                );
                self.finish(w, cpu)
            }
        }
    }

    /// `local_irq_enable()` after `context_switch`.
    fn finish(&self, w: &mut World, cpu: CpuId) -> Flow {
        w.local_irq_enable(cpu);
        Flow::Return
    }
}
