//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `arch/riscv/context.rs` (RISC-V `switch_mm`,
//! `set_mm_asid` / `set_mm_noasid`, the `mm_cpumask` helpers and
//! `riscv.cpumask_clear_threshold`'s trim) and `kernel_smp.rs`
//! (`smp_call_function_many_cond`, the IPI send and the call-function
//! interrupt). See docs/mutants.md. `arch/asid.rs`, the third file of the
//! set, was mutated later: its survivors are killed in
//! `mutants_asid_rwsem.rs`; `riscv_rollover_flushes_each_hart_once` drives
//! its rollover through RISC-V's `set_mm_asid`.

mod common;

use kernel::arch::riscv::context::{
    mm_cpumask_store, mm_cpumask_test_own, read_mm_cpumask, switch_mm as riscv_switch_mm,
};
use kernel::arch::riscv::tlbflush::{__ipi_flush_tlb_range_asid, FlushTlbRangeData};
use kernel::effects::Charge;
use kernel::hw::memory_model::{Loc, MemoryModel};
use kernel::kernel_smp::{
    native_send_call_func_ipi, sysvec_call_function, CallFunc, Cond, Pc, SmpCallFunctionManyCond,
};
use kernel::world::{Flow, Frame};
use kernel::{Effects, Label, MmId, World, INIT_MM, TLB_FLUSH_ALL};
use machine::scenario::Arch;
use machine::tlb::TlbHit;
use machine::{Cost, CpuId, CpuMask, PAGE_SIZE};

const VA: u64 = 0x4000_0000;
/// A kernel address (an entry of init_mm, kept under ASID 0 here).
const KVA: u64 = 0xffff_8880_0000_0000;

// ---------------------------------------------------------------------------
// arch/riscv/mm/context.c: switch_mm, set_mm_asid / set_mm_noasid, the
// mm_cpumask helpers and riscv.cpumask_clear_threshold's trim.
// ---------------------------------------------------------------------------

/// A RISC-V world of `cpus` harts with `sets` applied, and `n` mms.
fn riscv(cpus: usize, sets: &[&str], n: usize) -> (World, Vec<MmId>) {
    common::world_mms(Arch::Riscv, cpus as u32, sets, n)
}

fn hit(owner: MmId, pfn: u32) -> TlbHit {
    common::tlb_hit(owner, pfn, true)
}

fn in_mask(w: &World, mm: MmId, cpu: CpuId) -> bool {
    w.mms[mm as usize].cpumask.test(cpu)
}

use common::traced;

fn switch_labels(fx: &Effects) -> Vec<(MmId, MmId, bool)> {
    fx.labels
        .iter()
        .filter_map(|l| match *l {
            Label::SwitchMm { from, to, flush } => Some((from, to, flush)),
            _ => None,
        })
        .collect()
}

/// With ASIDs (the default 16 bits) a hart never leaves an mm's
/// mm_cpumask on a switch (its TLB may still hold the old ASID's entries),
/// it does not flush its TLB (each mm keeps its own ASID), and every real
/// switch writes satp once.
#[test]
fn riscv_with_asids_the_mask_only_grows_and_nothing_is_flushed() {
    let (mut w, m) = riscv(2, &[], 2);
    let (a, b) = (m[0], m[1]);
    let mut fx = traced();
    riscv_switch_mm(&mut w, 0, a, &mut fx);
    let asid_a = w.cpus[0].tlbstate.loaded_mm_asid;
    assert_ne!(asid_a, 0, "a user ASID, not init_mm's 0");
    w.cpus[0].tlb.fill(asid_a, VA, hit(a, 5));
    riscv_switch_mm(&mut w, 0, b, &mut fx);
    let asid_b = w.cpus[0].tlbstate.loaded_mm_asid;
    assert_ne!(asid_b, asid_a);
    assert_eq!(w.cpus[0].tlbstate.loaded_mm, b);
    assert!(in_mask(&w, a, 0), "no clear_bit of prev with ASIDs");
    assert!(in_mask(&w, b, 0));
    assert!(!in_mask(&w, a, 1) && !in_mask(&w, b, 1));
    assert!(
        w.cpus[0].tlb.lookup(asid_a, VA).is_some(),
        "A's entry survives under A's ASID"
    );
    let c = &w.counters;
    assert_eq!((c.cr3_writes, c.full_flushes, c.sfence_vma), (2, 0, 0));
    assert_eq!(c.cpumask_cleared, 0, "no trim without a threshold");
    assert_eq!(switch_labels(&fx), [(INIT_MM, a, false), (a, b, false)]);
    // Back to A: its ASID is still of this generation.
    riscv_switch_mm(&mut w, 0, a, &mut fx);
    assert_eq!(w.cpus[0].tlbstate.loaded_mm_asid, asid_a);
    assert_eq!(w.counters.cr3_writes, 3);
}

/// Without ASIDs (`riscv.asid_bits=0`) every switch flushes the whole TLB
/// (`set_mm_noasid`: one local sfence.vma) and the hart leaves the previous
/// mm's mm_cpumask (nothing of it is left in its TLB).
#[test]
fn riscv_without_asids_every_switch_flushes_and_leaves_the_old_mask() {
    let (mut w, m) = riscv(2, &["riscv.asid_bits=0"], 2);
    let (a, b) = (m[0], m[1]);
    let mut fx = traced();
    riscv_switch_mm(&mut w, 0, a, &mut fx);
    assert_eq!(w.cpus[0].tlbstate.loaded_mm_asid, 0);
    w.cpus[0].tlb.fill(0, VA, hit(a, 5));
    riscv_switch_mm(&mut w, 0, b, &mut fx);
    assert_eq!(w.cpus[0].tlbstate.loaded_mm, b);
    assert!(w.cpus[0].tlb.lookup(0, VA).is_none(), "A's entry flushed");
    assert!(!in_mask(&w, a, 0), "left A's mask");
    assert!(in_mask(&w, b, 0));
    let c = &w.counters;
    assert_eq!((c.cr3_writes, c.full_flushes, c.sfence_vma), (2, 2, 2));
    assert_eq!(c.cpumask_cleared, 0, "no trim without ASIDs");
    assert_eq!(switch_labels(&fx), [(INIT_MM, a, true), (a, b, true)]);
    assert_eq!(w.asids.rollovers, 0);
    assert_eq!(*w.mms[b as usize].context_id, 0, "no ASID allocated");
}

/// `switch_mm` does nothing for the mm already loaded (no satp write, and
/// without ASIDs no flush) nor for init_mm (a kernel thread keeps satp).
#[test]
fn riscv_switch_to_the_loaded_mm_or_init_mm_does_nothing() {
    for sets in [&["riscv.asid_bits=0"][..], &[]] {
        let (mut w, m) = riscv(2, sets, 1);
        let a = m[0];
        let mut fx = Effects::default();
        riscv_switch_mm(&mut w, 0, a, &mut fx);
        let asid = w.cpus[0].tlbstate.loaded_mm_asid;
        w.cpus[0].tlb.fill(asid, VA, hit(a, 5));
        let before = w.counters.clone();
        let mut fx = traced();
        riscv_switch_mm(&mut w, 0, a, &mut fx);
        riscv_switch_mm(&mut w, 0, INIT_MM, &mut fx);
        assert!(fx.labels.is_empty(), "{sets:?}: {:?}", fx.labels);
        assert_eq!(w.counters.cr3_writes, before.cr3_writes, "{sets:?}");
        assert_eq!(w.counters.full_flushes, before.full_flushes, "{sets:?}");
        assert_eq!(w.cpus[0].tlbstate.loaded_mm, a, "{sets:?}");
        assert!(w.cpus[0].tlb.lookup(asid, VA).is_some(), "{sets:?}");
        assert!(in_mask(&w, a, 0), "{sets:?}");
        assert!(!in_mask(&w, INIT_MM, 0), "{sets:?}");
    }
}

/// RISC-V rollover: 3-bit ASIDs on 2 harts (8 > 2 x 2, so the allocator is
/// on): ASIDs 1..=7 go to mms 0..=6; the 8th mm rolls the generation over
/// (`__new_context`), and the switching hart flushes its whole TLB once
/// (`set_mm_asid`'s `local_flush_tlb_all`). The other hart flushes at its
/// next switch, even to an mm that kept its ASID.
#[test]
fn riscv_rollover_flushes_each_hart_once() {
    let (mut w, m) = riscv(2, &["riscv.asid_bits=3"], 8);
    let mut fx = traced();
    riscv_switch_mm(&mut w, 1, m[0], &mut fx);
    for &mm in &m[1..7] {
        riscv_switch_mm(&mut w, 0, mm, &mut fx);
    }
    assert_eq!(w.asids.rollovers, 0);
    assert_eq!(w.counters.full_flushes, 0);
    assert_eq!(w.cpus[0].tlbstate.loaded_mm_asid, 7, "the last free ASID");
    w.cpus[0].tlb.fill(6, VA, hit(m[5], 5));
    fx.labels.clear();
    riscv_switch_mm(&mut w, 0, m[7], &mut fx);
    assert_eq!(w.asids.rollovers, 1);
    // flush_context kept the ASIDs active on the harts (7 on hart 0, 1 on
    // hart 1): the first free one is 2.
    assert_eq!(w.cpus[0].tlbstate.loaded_mm_asid, 2);
    assert_eq!(w.counters.full_flushes, 1, "hart 0 flushed once");
    assert!(w.cpus[0].tlb.lookup(6, VA).is_none());
    assert!(
        switch_labels(&fx).contains(&(m[6], m[7], true)),
        "{:?}",
        fx.labels
    );
    // Hart 1 still runs mm 0 (ASID 1, reserved across the rollover); its
    // next switch flushes.
    w.cpus[1].tlb.fill(1, VA, hit(m[0], 6));
    riscv_switch_mm(&mut w, 1, m[1], &mut fx);
    assert_eq!(w.counters.full_flushes, 2);
    assert!(w.cpus[1].tlb.lookup(1, VA).is_none());
    // mm 1's old ASID 2 went to mm 7: it gets the next free one.
    assert_eq!(w.cpus[1].tlbstate.loaded_mm_asid, 3);
    // Hart 0's next switch is not a rollover flush any more; mm 0 keeps
    // ASID 1 (reserved for it by hart 1 at the rollover).
    riscv_switch_mm(&mut w, 0, m[0], &mut fx);
    assert_eq!(w.counters.full_flushes, 2);
    assert_eq!(w.cpus[0].tlbstate.loaded_mm_asid, 1);
    assert_eq!(w.asids.rollovers, 1);
}

/// `riscv.cpumask_clear_threshold=2`: a hart that switched 2 times since
/// it last ran an mm flushes that mm's ASID locally (dropping what is
/// queued for it) and leaves its mm_cpumask; switching back to an mm
/// restarts its count.
#[test]
fn riscv_cpumask_clear_threshold_trims_the_mms_left_long_ago() {
    let (mut w, m) = riscv(
        2,
        &[
            "riscv.defer_flush_to_context_switch=true",
            "riscv.cpumask_clear_threshold=2",
        ],
        5,
    );
    let (a, b, c, d, e) = (m[0], m[1], m[2], m[3], m[4]);
    let mut fx = Effects::default();
    let asid = |w: &World, mm: MmId| w.asids.idx(*w.mms[mm as usize].context_id);
    riscv_switch_mm(&mut w, 0, a, &mut fx);
    riscv_switch_mm(&mut w, 0, b, &mut fx);
    let (asid_a, asid_b) = (asid(&w, a), asid(&w, b));
    w.cpus[0].tlb.fill(asid_a, VA, hit(a, 5));
    w.cpus[0].tlb.fill(asid_b, VA, hit(b, 6));
    // One switch since A, none since B: both stay.
    riscv_switch_mm(&mut w, 0, c, &mut fx);
    assert!(in_mask(&w, a, 0) && in_mask(&w, b, 0) && in_mask(&w, c, 0));
    assert_eq!((w.counters.cpumask_cleared, w.counters.sfence_vma), (0, 0));
    assert_eq!(w.cpus[0].riscv.recent, [(a, 1), (b, 0)]);
    // Flushes for A and B queued on hart 0 (their need_tlb_flush stores
    // not yet visible to it, so the switch's drain leaves them).
    let queued = |mm: MmId, asid: u16| FlushTlbRangeData {
        mm: Some(mm),
        asid: u32::from(asid),
        start: VA,
        size: PAGE_SIZE,
        stride: PAGE_SIZE,
    };
    w.cpus[0].riscv.queue = vec![queued(a, asid_a), queued(b, asid_b)];
    // Two switches since A: hart 0 flushes A's ASID and leaves A's mask.
    riscv_switch_mm(&mut w, 0, d, &mut fx);
    assert!(!in_mask(&w, a, 0), "A trimmed");
    assert!(in_mask(&w, b, 0) && in_mask(&w, c, 0) && in_mask(&w, d, 0));
    assert!(
        w.cpus[0].tlb.lookup(asid_a, VA).is_none(),
        "A's ASID flushed"
    );
    assert!(w.cpus[0].tlb.lookup(asid_b, VA).is_some(), "B's kept");
    assert_eq!(w.cpus[0].riscv.queue, [queued(b, asid_b)]);
    assert_eq!((w.counters.cpumask_cleared, w.counters.sfence_vma), (1, 1));
    assert_eq!(w.cpus[0].riscv.recent, [(b, 1), (c, 0)]);
    // Back to B before it is trimmed: its count starts over, C is trimmed
    // at the next switch and B is not.
    riscv_switch_mm(&mut w, 0, b, &mut fx);
    assert_eq!(w.cpus[0].riscv.recent, [(c, 1), (d, 0)]);
    riscv_switch_mm(&mut w, 0, e, &mut fx);
    assert!(!in_mask(&w, c, 0) && in_mask(&w, b, 0) && in_mask(&w, d, 0));
    assert_eq!((w.counters.cpumask_cleared, w.counters.sfence_vma), (2, 2));
    assert_eq!(w.cpus[0].riscv.recent, [(d, 1), (b, 0)]);
    // Back to A: the hart sets A's bit again.
    riscv_switch_mm(&mut w, 0, a, &mut fx);
    assert!(in_mask(&w, a, 0));
    assert_eq!(w.counters.cpumask_cleared, 3, "D trimmed");
    assert!(!in_mask(&w, d, 0));
    assert_eq!(w.counters.cr3_writes, 7);
}

/// Under RVWMO `cpumask_set_cpu` is a relaxed AMO: the switching hart sees
/// its own bit at once (store forwarding), the others not until it drains.
/// `__flush_tlb_range`'s read of the mask: memory, its own bit forwarded;
/// with tracing, the read of a bit another hart still buffers is labelled.
#[test]
fn riscv_mm_cpumask_bits_through_the_weak_model() {
    let (mut w, m) = riscv(3, &[], 1);
    let a = m[0];
    w.cfg.memory_model = MemoryModel::Weak;
    let mut fx = Effects::default();
    riscv_switch_mm(&mut w, 1, a, &mut fx);
    assert!(!in_mask(&w, a, 1), "hart 1's bit is still buffered");
    assert!(mm_cpumask_test_own(&w, 1, a, &mut fx), "forwarded");
    assert!(!mm_cpumask_test_own(&w, 0, a, &mut fx));
    assert!(!mm_cpumask_test_own(&w, 2, a, &mut fx));
    let mask = |w: &World, cpu: CpuId, fx: &mut Effects| -> Vec<CpuId> {
        read_mm_cpumask(w, cpu, a, fx).iter().collect()
    };
    assert_eq!(mask(&w, 1, &mut fx), [1], "its own bit, forwarded");
    let mut fx0 = traced();
    assert_eq!(mask(&w, 0, &mut fx0), Vec::<CpuId>::new(), "not yet seen");
    let past = Label::ReadPastBuffer {
        owner: 1,
        loc: Loc::MmCpumask { mm: a, cpu: 1 },
    };
    assert!(fx0.labels.contains(&past), "{:?}", fx0.labels);
    // Hart 0's own bit in memory but cleared in its buffer: not in its read.
    w.mms[a as usize].cpumask.set(0);
    mm_cpumask_store(&mut w, 0, a, false, &mut fx);
    assert!(in_mask(&w, a, 0));
    assert!(!mm_cpumask_test_own(&w, 0, a, &mut fx));
    assert_eq!(mask(&w, 0, &mut fx), Vec::<CpuId>::new());
    assert_eq!(mask(&w, 2, &mut fx), [0], "memory's bit for the others");
    // Under SC the bit is in memory at once.
    let (mut w, m) = riscv(3, &[], 1);
    riscv_switch_mm(&mut w, 1, m[0], &mut fx);
    assert!(in_mask(&w, m[0], 1));
    assert_eq!(
        read_mm_cpumask(&w, 0, m[0], &mut fx)
            .iter()
            .collect::<Vec<_>>(),
        [1]
    );
}

/// The mask-clearing patch (`riscv.cpumask_clear_on_flush_all`): a
/// whole-ASID flush on a hart not running the mm clears its bit, counted
/// once; a hart whose bit is not set clears (and counts) nothing.
#[test]
fn riscv_clear_on_flush_all_counts_only_a_set_bit() {
    let (mut w, m) = riscv(3, &["riscv.cpumask_clear_on_flush_all=true"], 2);
    let (a, b) = (m[0], m[1]);
    let mut fx = Effects::default();
    riscv_switch_mm(&mut w, 1, a, &mut fx);
    riscv_switch_mm(&mut w, 1, b, &mut fx);
    assert!(in_mask(&w, a, 1));
    let d = FlushTlbRangeData {
        mm: Some(a),
        asid: u32::from(w.asids.idx(*w.mms[a as usize].context_id)),
        start: 0,
        size: TLB_FLUSH_ALL,
        stride: PAGE_SIZE,
    };
    // Hart 2 never ran A: nothing to clear.
    __ipi_flush_tlb_range_asid(&mut w, 2, d, &mut fx);
    assert_eq!(w.counters.cpumask_cleared, 0);
    assert!(!in_mask(&w, a, 2));
    // Hart 1 left A for B: its bit goes.
    __ipi_flush_tlb_range_asid(&mut w, 1, d, &mut fx);
    assert_eq!(w.counters.cpumask_cleared, 1);
    assert!(!in_mask(&w, a, 1));
}
// ---------------------------------------------------------------------------
// kernel/smp.c: smp_call_function_many_cond, the IPI send and the handler.
// ---------------------------------------------------------------------------

fn world_of(arch: Arch, cpus: usize) -> World {
    world_with(arch, cpus, &[])
}

fn world_with(arch: Arch, cpus: usize, sets: &[&str]) -> World {
    common::world(arch, cpus as u32, sets)
}

fn mask_of(n: usize, cpus: &[CpuId]) -> CpuMask {
    let mut m = CpuMask::new(n);
    for &c in cpus {
        m.set(c);
    }
    m
}

/// `IpiSend` charges of one step.
fn ipi_sends(fx: &Effects) -> u32 {
    fx.charges
        .iter()
        .map(|c| match *c {
            Charge::Cost(Cost::IpiSend, n) => n,
            _ => 0,
        })
        .sum()
}

/// An entry at `KVA` in `cpu`'s TLB (`do_flush_tlb_all` drops it).
fn fill_kernel_entry(w: &mut World, cpu: CpuId) {
    w.cpus[cpu as usize].tlb.fill(0, KVA, hit(INIT_MM, 9));
}

fn cached(w: &mut World, cpu: CpuId) -> bool {
    w.cpus[cpu as usize].tlb.lookup(0, KVA).is_some()
}

/// `on_each_cpu_mask(mask, do_flush_tlb_all)` from CPU 0 with CPU 0 not in
/// the mask: one csd queued and one IPI per target (their queues were
/// empty), the function runs on the targets when they take the interrupt,
/// never on the initiator; the initiator waits until both have unlocked.
#[test]
fn smp_call_runs_the_function_on_the_mask_only() {
    let mut w = world_of(Arch::X86, 4);
    for c in 0..4 {
        fill_kernel_entry(&mut w, c);
    }
    let mut call =
        SmpCallFunctionManyCond::new(mask_of(4, &[1, 2]), CallFunc::DoFlushTlbAll, Cond::Always);
    let mut fx = Effects::default();
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(call.pc, Pc::Wait);
    assert!(cached(&mut w, 0), "CPU 0 is not in the mask: no local run");
    assert_eq!(call.queued.iter().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(w.cpus[0].cfd_locked.iter().collect::<Vec<_>>(), [1, 2]);
    let c = &w.counters;
    assert_eq!((c.csd_queued, c.ipis_sent), (2, 2));
    assert_eq!(fx.ipis.iter().map(|i| i.0).collect::<Vec<_>>(), [1, 2]);
    assert!(w.cpus[1].ipi_pending && w.cpus[2].ipi_pending);
    assert!(!w.cpus[3].ipi_pending && !w.cpus[0].ipi_pending);
    assert_eq!(w.cpus[3].call_single_queue.len(), 0);
    // Nothing has run remotely yet.
    assert!(cached(&mut w, 1) && cached(&mut w, 2) && cached(&mut w, 3));
    assert!(!call.can_run(&w, 0), "csd_lock_wait spins");
    // CPU 2 takes the interrupt: runs it, unlocks; CPU 1 still locked, so
    // the initiator (not spinning in csd_lock) is not woken.
    let mut fx2 = Effects::default();
    sysvec_call_function(&mut w, 2, &mut fx2);
    assert!(!cached(&mut w, 2));
    assert!(!w.cpus[2].ipi_pending);
    assert_eq!(w.counters.irq_cal, [0, 0, 1, 0]);
    assert!(fx2.wakes.is_empty(), "CPU 1's csd still locked");
    assert!(!call.can_run(&w, 0));
    let mut fx1 = Effects::default();
    sysvec_call_function(&mut w, 1, &mut fx1);
    assert!(!cached(&mut w, 1));
    assert_eq!(fx1.wakes.iter().map(|x| x.0).collect::<Vec<_>>(), [0]);
    assert!(call.can_run(&w, 0));
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Return));
    assert!(cached(&mut w, 0) && cached(&mut w, 3), "outside the mask");
    assert_eq!(w.counters.irq_cal, [0, 1, 1, 0]);
    assert_eq!(w.counters.full_flushes, 2);
    assert_eq!(w.cpus[0].preempt_count, 0);
}

/// A target whose call_single_queue is not empty gets the csd queued
/// behind the earlier one but no second IPI (`llist_add` returned false);
/// one interrupt runs both (in queueing order) and unlocks both initiators.
#[test]
fn smp_call_no_second_ipi_to_a_non_empty_queue() {
    let mut w = world_of(Arch::X86, 3);
    let one = mask_of(3, &[2]);
    let mut a =
        SmpCallFunctionManyCond::new(one.clone(), CallFunc::TlbRemoveTableSmpSync, Cond::Always);
    let mut b = SmpCallFunctionManyCond::new(one, CallFunc::DoFlushTlbAll, Cond::Always);
    let mut fx = Effects::default();
    assert!(matches!(a.step(&mut w, 0, &mut fx), Flow::Block));
    assert!(matches!(b.step(&mut w, 1, &mut fx), Flow::Block));
    assert_eq!(w.counters.csd_queued, 2);
    assert_eq!(w.counters.ipis_sent, 1, "the second found the queue busy");
    assert_eq!(w.cpus[2].call_single_queue.len(), 2);
    let mut fx2 = Effects::default();
    sysvec_call_function(&mut w, 2, &mut fx2);
    assert_eq!(w.counters.irq_cal, [0, 0, 1], "one interrupt");
    assert!(w.cpus[2].call_single_queue.is_empty());
    let mut woken: Vec<CpuId> = fx2.wakes.iter().map(|x| x.0).collect();
    woken.sort();
    assert_eq!(woken, [0, 1]);
    assert!(a.can_run(&w, 0) && b.can_run(&w, 1));
}

/// `smp_call_function(func, wait=1)`: every other CPU, not this one (no
/// `SCF_RUN_LOCAL`), with its own `preempt_disable()` held from the first
/// step until the call returns.
#[test]
fn smp_call_function_holds_preemption_and_skips_itself() {
    let mut w = world_of(Arch::X86, 3);
    for c in 0..3 {
        fill_kernel_entry(&mut w, c);
    }
    let mut call = SmpCallFunctionManyCond::smp_call_function(3, CallFunc::DoFlushTlbAll);
    let mut fx = Effects::default();
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(w.cpus[0].preempt_count, 1, "preempt_disable() held");
    assert!(cached(&mut w, 0), "not run on the caller");
    assert_eq!(w.counters.csd_queued, 2);
    sysvec_call_function(&mut w, 1, &mut fx);
    sysvec_call_function(&mut w, 2, &mut fx);
    assert!(!cached(&mut w, 1) && !cached(&mut w, 2));
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Return));
    assert_eq!(w.cpus[0].preempt_count, 0, "preempt_enable() at return");
    assert!(cached(&mut w, 0));
    // on_each_cpu_mask (not smp_call_function) takes no preemption of its
    // own (its callers hold it); with the caller in its mask it runs there
    // too, at once.
    let mut call =
        SmpCallFunctionManyCond::new(mask_of(3, &[0, 1]), CallFunc::DoFlushTlbAll, Cond::Always);
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(w.cpus[0].preempt_count, 0);
    assert!(!cached(&mut w, 0), "SCF_RUN_LOCAL");
    sysvec_call_function(&mut w, 1, &mut fx);
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Return));
    assert_eq!(w.cpus[0].preempt_count, 0);
}

/// `native_send_call_func_ipi`: on x86 every online CPU but this one is one
/// ICR write (the all-but-self shorthand); any other mask, and every
/// mask on arm64 and RISC-V, is one send per target. Each target is
/// counted and marked pending either way.
#[test]
fn ipi_send_shorthand_only_for_all_but_self_on_x86() {
    let cases: [(Arch, usize, &[CpuId], u32); 6] = [
        (Arch::X86, 4, &[1, 2, 3], 1),
        (Arch::X86, 4, &[1, 3], 2),
        (Arch::X86, 4, &[2], 1),
        (Arch::X86, 2, &[1], 1),
        (Arch::Arm64, 4, &[1, 2, 3], 3),
        (Arch::Riscv, 4, &[1, 2, 3], 3),
    ];
    for (arch, n, targets, sends) in cases {
        let mut w = world_of(arch, n);
        let mut fx = traced();
        native_send_call_func_ipi(&mut w, 0, &mask_of(n, targets), &mut fx);
        let what = format!("{arch:?} {n} CPUs -> {targets:?}");
        assert_eq!(ipi_sends(&fx), sends, "{what}");
        assert_eq!(w.counters.ipis_sent, targets.len() as u64, "{what}");
        let got: Vec<CpuId> = fx.ipis.iter().map(|x| x.0).collect();
        assert_eq!(got, targets, "{what}");
        for c in 0..n as CpuId {
            assert_eq!(
                w.cpus[c as usize].ipi_pending,
                targets.contains(&c),
                "{what}"
            );
        }
        let label = Label::SendIpis {
            n: targets.len() as u32,
            first: targets[0],
        };
        assert!(fx.labels.contains(&label), "{what}: {:?}", fx.labels);
    }
    // An empty mask sends nothing.
    let mut w = world_of(Arch::X86, 4);
    let mut fx = Effects::default();
    native_send_call_func_ipi(&mut w, 0, &CpuMask::new(4), &mut fx);
    assert_eq!((ipi_sends(&fx), w.counters.ipis_sent), (0, 0));
}

/// A call made while an earlier one from the same CPU still has csds
/// locked spins in `csd_lock()` on exactly the targets of its mask still
/// locked (the label counts them); the unlock of such a target wakes the
/// spinning CPU even while a csd of the earlier call is still locked
/// elsewhere (`csd_lock_waits_for`).
#[test]
fn csd_lock_spinner_is_woken_by_the_target_it_waits_for() {
    let mut w = world_of(Arch::X86, 4);
    let mm = w.mm_alloc().unwrap();
    let mut fx = Effects::default();
    let mut first = SmpCallFunctionManyCond::new(
        mask_of(4, &[1, 2]),
        CallFunc::TlbRemoveTableSmpSync,
        Cond::Always,
    );
    assert!(matches!(first.step(&mut w, 0, &mut fx), Flow::Block));
    // The second call wants CPUs 1 and 3: of those only CPU 1's csd is locked.
    let mut second = SmpCallFunctionManyCond::new(
        mask_of(4, &[1, 3]),
        CallFunc::TlbRemoveTableSmpSync,
        Cond::Always,
    );
    let mut fx = traced();
    assert!(matches!(second.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(second.pc, Pc::CsdLock);
    assert_eq!(second.csd_busy.iter().collect::<Vec<_>>(), [1]);
    assert!(
        fx.labels.contains(&Label::CsdLockWait { n: 1 }),
        "{:?}",
        fx.labels
    );
    assert!(!second.can_run(&w, 0));
    // The task on CPU 0 is the one spinning in csd_lock().
    let t = w.spawn(mm, 0, vec![], false);
    w.cpus[0].curr = Some(t);
    w.tasks[t as usize]
        .kstack
        .push(Frame::SmpCallFunctionManyCond(second.clone()));
    // CPU 1 unlocks first: CPU 2's csd is still locked, but CPU 1 is what
    // csd_lock() spins on.
    let mut fx1 = Effects::default();
    sysvec_call_function(&mut w, 1, &mut fx1);
    assert_eq!(w.cpus[0].cfd_locked.iter().collect::<Vec<_>>(), [2]);
    assert_eq!(fx1.wakes.iter().map(|x| x.0).collect::<Vec<_>>(), [0]);
    assert!(second.can_run(&w, 0));
}

/// With no target queued (the mask holds only the initiator) the call runs
/// the function locally and returns in the same step: there is nothing to
/// wait for. `inject.no_ipi_wait` (the bug it injects) returns at once
/// although targets were queued.
#[test]
fn smp_call_returns_at_once_when_nothing_is_queued() {
    let mut w = world_of(Arch::X86, 3);
    for c in 0..3 {
        fill_kernel_entry(&mut w, c);
    }
    let mut fx = Effects::default();
    let mut call =
        SmpCallFunctionManyCond::new(mask_of(3, &[0]), CallFunc::DoFlushTlbAll, Cond::Always);
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Return));
    assert!(!cached(&mut w, 0), "run locally");
    assert!(cached(&mut w, 1) && cached(&mut w, 2));
    let c = &w.counters;
    assert_eq!((c.csd_queued, c.ipis_sent), (0, 0));
    assert!(w.cpus[0].cfd_locked.is_empty());
    let mut w = world_with(Arch::X86, 3, &["inject.no_ipi_wait=true"]);
    let mut call = SmpCallFunctionManyCond::new(
        mask_of(3, &[1, 2]),
        CallFunc::TlbRemoveTableSmpSync,
        Cond::Always,
    );
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Return));
    assert_eq!(w.counters.csd_queued, 2);
    assert_eq!(w.cpus[0].cfd_locked.iter().collect::<Vec<_>>(), [1, 2]);
}
