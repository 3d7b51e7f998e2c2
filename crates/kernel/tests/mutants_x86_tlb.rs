//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `arch/x86/tlb.rs` mutated in full
//! (arch/x86/mm/tlb.c: `flush_tlb_mm_range`, `native_flush_tlb_multi`,
//! `should_flush_tlb`, `flush_tlb_func`, `switch_mm_irqs_off` and its
//! checker steps, the INVLPGB / global ASID paths). See docs/mutants.md.
//! Every expected value is derived in a comment from the kernel code the
//! function models.

mod common;

use common::traced;
use kernel::arch::x86::tlb::{
    flush_tlb_func, get_flush_tlb_info, inc_mm_tlb_gen, should_flush_tlb, switch_mm_irqs_off,
    FlushTlbMmRange, InfoRef,
};
use kernel::kernel_smp::{CallFunc, Cond};
use kernel::world::{Flow, Frame};
use kernel::{FlushReason, Label, MmId, TaskId, World, INIT_MM, TLB_FLUSH_ALL};
use machine::scenario::Arch;
use machine::tlb::TlbHit;
use machine::{CpuId, PAGE_SIZE};

const VA: u64 = 0x7f00_0000_0000;

/// An x86 world of `cpus` CPUs with `sets` applied, and `n` mms.
fn x86(cpus: u32, sets: &[&str], n: usize) -> (World, Vec<MmId>) {
    common::world_mms(Arch::X86, cpus, sets, n)
}

fn hit(owner: MmId, pfn: u32) -> TlbHit {
    common::tlb_hit(owner, pfn, true)
}

fn reason(w: &World, r: FlushReason) -> u64 {
    w.counters.tlb_flush[r as usize]
}

/// `cpu`'s current ASID slot.
fn asid(w: &World, cpu: CpuId) -> u16 {
    w.cpus[cpu as usize].tlbstate.loaded_mm_asid
}

/// Is `va` cached on `cpu` in its current ASID?
fn cached(w: &mut World, cpu: CpuId, va: u64) -> bool {
    let a = asid(w, cpu);
    w.cpus[cpu as usize].tlb.lookup(a, va).is_some()
}

/// What a `flush_tlb_mm_range` sent: the IPI mask and its condition.
#[derive(Debug, PartialEq, Eq)]
struct Sent {
    mask: Vec<CpuId>,
    cond: Cond,
}

/// Run `flush_tlb_mm_range(mm, start, end, stride_shift, freed_tables)`
/// on `cpu` for task `t` to its return. An IPI call is run in place, as
/// `smp_call_function_many_cond` with `SCF_RUN_LOCAL` would: every CPU of
/// the mask the condition picks (`should_flush_tlb` or all) runs
/// `flush_tlb_func(info)`, the initiator included.
#[allow(clippy::too_many_arguments)]
fn flush_mm_range(
    w: &mut World,
    cpu: CpuId,
    t: TaskId,
    mm: MmId,
    start: u64,
    end: u64,
    stride_shift: u32,
    freed_tables: bool,
) -> Option<Sent> {
    let mut f = FlushTlbMmRange::new(mm, start, end, stride_shift, freed_tables);
    let mut fx = traced();
    let mut sent = None;
    for _ in 0..10 {
        match f.step(w, cpu, t, &mut fx) {
            Flow::Call(Frame::SmpCallFunctionManyCond(c)) => {
                // get_cpu() held while the IPIs are out (seed (a) v7:
                // migrate_disable() only).
                let held = u32::from(!w.cfg.preemptible_flush);
                assert_eq!(w.cpus[cpu as usize].preempt_count, held);
                let CallFunc::FlushTlbFunc(info) = c.func else {
                    panic!("not flush_tlb_func: {:?}", c.func);
                };
                for target in c.mask.iter() {
                    if c.cond == Cond::Always || should_flush_tlb(w, target, info, &mut fx) {
                        flush_tlb_func(w, target, info, &mut fx);
                    }
                }
                sent = Some(Sent {
                    mask: c.mask.iter().collect(),
                    cond: c.cond,
                });
            }
            Flow::Return => {
                assert_eq!(w.cpus[cpu as usize].preempt_count, 0, "put_cpu()");
                return sent;
            }
            _ => {}
        }
    }
    panic!("flush_tlb_mm_range did not return");
}

/// A flush request of `mm` from CPU0 (task `t`) up to generation `gen`
/// for `[start, end)` in 4 KiB strides, in CPU0's per-CPU struct (or
/// `t`'s stack one with seed (a)).
fn info(w: &mut World, t: TaskId, mm: Option<MmId>, start: u64, end: u64, gen: u64) -> InfoRef {
    let r = get_flush_tlb_info(w, 0, t, mm, start, end, 12, false, gen, &mut traced());
    w.cpus[0].flush_info_busy = false;
    r
}

// ---------------------------------------------------------------------------
// INVLPGB: broadcast_tlb_flush, finish_asid_transition, the global ASID
// ---------------------------------------------------------------------------

/// The first global ASID: `allocate_global_asid` hands them out upwards
/// from `TLB_NR_DYN_ASIDS` (6).
const GLOBAL: u16 = 6;

/// An INVLPGB world of `cpus` CPUs: mm `a` has global ASID [`GLOBAL`]
/// and runs on CPUs 0 and 1 in it (`choose_new_asid` returns the global
/// ASID, no flush); mm `b` runs on the last CPU in a dynamic ASID, with
/// `VA` cached there. Task 0 (of `a`) initiates on CPU0.
fn invlpgb_world(cpus: u32) -> (World, MmId, MmId, TaskId) {
    let (mut w, mms) = x86(cpus, &["x86.invlpgb=true"], 2);
    let (a, b) = (mms[0], mms[1]);
    let t = w.spawn(a, 0, vec![], false);
    *w.mms[a as usize].global_asid = GLOBAL;
    let mut fx = traced();
    for c in 0..2 {
        assert!(!switch_mm_irqs_off(&mut w, c, a, &mut fx), "no flush");
        assert_eq!(asid(&w, c), GLOBAL);
    }
    let last = (cpus - 1) as CpuId;
    switch_mm_irqs_off(&mut w, last, b, &mut fx);
    let d = asid(&w, last);
    w.cpus[last as usize].tlb.fill(d, VA, hit(b, 9));
    (w, a, b, t)
}

/// Fill `pages` 4 KiB pages from `start` in ASID `asid` on CPUs 0 and 1.
fn fill_pages(w: &mut World, asid: u16, owner: MmId, start: u64, pages: u64) {
    for c in 0..2 {
        for i in 0..pages {
            w.cpus[c]
                .tlb
                .fill(asid, start + i * PAGE_SIZE, hit(owner, 1));
        }
    }
}

fn has(w: &mut World, cpu: usize, asid: u16, va: u64) -> bool {
    w.cpus[cpu].tlb.lookup(asid, va).is_some()
}

/// `broadcast_tlb_flush` of 20 pages: `nr = clamp((end - addr) >>
/// stride_shift, 1, invlpgb_count_max)` pages an INVLPGB, `addr += nr <<
/// stride_shift` until `addr >= end`: 8 + 8 + 4 pages, 3 INVLPGBs, then
/// one `__tlbsync()` in `flush_tlb_mm_range`; no IPI (no CPU runs the mm
/// in a dynamic ASID). Every CPU's entries of the 20 pages in the global
/// ASID go; the page before and the page after stay, and so does another
/// ASID's entry of the same address. No IPI: `irq_tlb` stays 0.
#[test]
fn invlpgb_range_is_one_invlpgb_per_eight_pages_on_every_cpu() {
    let (mut w, a, b, t) = invlpgb_world(3);
    fill_pages(&mut w, GLOBAL, a, VA - PAGE_SIZE, 22);
    let end = VA + 20 * PAGE_SIZE;
    let sent = flush_mm_range(&mut w, 0, t, a, VA, end, 12, false);
    assert_eq!(sent, None, "no IPI");
    assert_eq!((w.counters.invlpgb, w.counters.tlbsync), (3, 1));
    assert_eq!(w.counters.irq_tlb, [0, 0, 0]);
    for c in 0..2 {
        assert!(
            has(&mut w, c, GLOBAL, VA - PAGE_SIZE),
            "CPU{c}: page before kept"
        );
        assert!(has(&mut w, c, GLOBAL, end), "CPU{c}: page after kept");
        for i in 0..20 {
            assert!(
                !has(&mut w, c, GLOBAL, VA + i * PAGE_SIZE),
                "CPU{c} page {i}"
            );
        }
    }
    assert!(cached(&mut w, 2, VA), "mm {b}'s dynamic ASID untouched");
    assert!(!*w.mms[a as usize].asid_transition);
}

/// The label names the mm and `(end - start) >> stride_shift` pages; a
/// whole-mm flush (`end == TLB_FLUSH_ALL`) is one INVLPGB of the PCID,
/// `pages` `TLB_FLUSH_ALL`, every entry of the global ASID gone on every
/// CPU, the dynamic ASID's kept.
#[test]
fn invlpgb_labels_and_the_whole_asid() {
    let (mut w, a, _, t) = invlpgb_world(3);
    let mut fx = traced();
    let r = info(&mut w, t, Some(a), VA, VA + 5 * PAGE_SIZE, 2);
    assert!(!kernel::arch::x86::tlb::broadcast_tlb_flush(
        &mut w, r, &mut fx
    ));
    let label = Label::Invlpgb { mm: a, pages: 5 };
    assert!(fx.labels.contains(&label), "{:?}", fx.labels);
    assert_eq!(w.counters.invlpgb, 1);

    let (mut w, a, _, t) = invlpgb_world(3);
    fill_pages(&mut w, GLOBAL, a, VA, 3);
    fill_pages(&mut w, GLOBAL, a, 0x1000, 1);
    let mut fx = traced();
    let r = info(&mut w, t, Some(a), 0, TLB_FLUSH_ALL, 2);
    assert!(!kernel::arch::x86::tlb::broadcast_tlb_flush(
        &mut w, r, &mut fx
    ));
    let label = Label::Invlpgb {
        mm: a,
        pages: TLB_FLUSH_ALL,
    };
    assert!(fx.labels.contains(&label), "{:?}", fx.labels);
    assert_eq!(w.counters.invlpgb, 1);
    for c in 0..2 {
        for va in [0x1000, VA, VA + 2 * PAGE_SIZE] {
            assert!(!has(&mut w, c, GLOBAL, va), "CPU{c} {va:#x}");
        }
    }
    assert!(cached(&mut w, 2, VA), "the dynamic ASID kept");
}

/// Strides: `if (info->stride_shift <= PMD_SHIFT)` the INVLPGB covers up
/// to 8 strides, else one stride each. Three 2 MiB pages (stride_shift 21
/// = PMD_SHIFT): one INVLPGB. Two 1 GiB pages (stride_shift 30): two.
#[test]
fn invlpgb_counts_strides_up_to_pmd_only() {
    let (mut w, a, _, t) = invlpgb_world(3);
    let huge = 1u64 << 21;
    let sent = flush_mm_range(&mut w, 0, t, a, VA, VA + 3 * huge, 21, false);
    assert_eq!(sent, None);
    assert_eq!((w.counters.invlpgb, w.counters.tlbsync), (1, 1));

    let (mut w, a, _, t) = invlpgb_world(3);
    let gig = 1u64 << 30;
    let sent = flush_mm_range(&mut w, 0, t, a, 4 * gig, 6 * gig, 30, false);
    assert_eq!(sent, None);
    assert_eq!((w.counters.invlpgb, w.counters.tlbsync), (2, 1));
}

/// `finish_asid_transition`: the mm was just given its global ASID
/// (`asid_transition` set) while CPUs 0 and 1 still run it in dynamic
/// ASIDs. The flush INVLPGBs the global ASID, then finds CPU1 in a dynamic
/// ASID: it returns true and `flush_tlb_mm_range` IPIs the whole
/// `mm_cpumask` unconditionally (`mm_in_asid_transition`). Each target's
/// `flush_tlb_func` sees `mm_needs_global_asid` and reloads CR3 with the
/// global ASID (`switch_mm_irqs_off`, no flush: INVLPGB keeps it current),
/// then returns (`is_global_asid`). The next flush finds every CPU in the
/// global ASID: the transition ends, no IPI.
#[test]
fn asid_transition_ipis_until_every_cpu_runs_the_global_asid() {
    let (mut w, mms) = x86(3, &["x86.invlpgb=true"], 1);
    let a = mms[0];
    let t = w.spawn(a, 0, vec![], false);
    let mut fx = traced();
    for c in 0..2 {
        switch_mm_irqs_off(&mut w, c, a, &mut fx);
        assert!(asid(&w, c) < GLOBAL);
    }
    *w.mms[a as usize].global_asid = GLOBAL;
    *w.mms[a as usize].asid_transition = true;
    let full = w.counters.full_flushes;
    let sent = flush_mm_range(&mut w, 0, t, a, VA, VA + PAGE_SIZE, 12, false);
    assert_eq!(
        sent,
        Some(Sent {
            mask: vec![0, 1],
            cond: Cond::Always
        })
    );
    assert_eq!((w.counters.invlpgb, w.counters.tlbsync), (1, 1));
    assert_eq!((asid(&w, 0), asid(&w, 1)), (GLOBAL, GLOBAL));
    assert_eq!(w.counters.full_flushes, full, "moved without a flush");
    assert_eq!(w.counters.irq_tlb, [0, 1, 0]);
    assert!(*w.mms[a as usize].asid_transition, "ends at the next flush");
    let sent = flush_mm_range(&mut w, 0, t, a, VA, VA + PAGE_SIZE, 12, false);
    assert_eq!(sent, None);
    assert!(!*w.mms[a as usize].asid_transition);
    assert_eq!(w.counters.irq_tlb, [0, 1, 0]);
}

/// A CPU in the mask that has left the mm does not hold the transition
/// open (`loaded_mm != mm`); one caught switching (`LOADED_MM_SWITCHING`)
/// does: the kernel spins until it is done, the model IPIs.
#[test]
fn asid_transition_ends_when_no_cpu_runs_a_dynamic_asid() {
    let (mut w, a, b, t) = invlpgb_world(3);
    let mut fx = traced();
    switch_mm_irqs_off(&mut w, 2, a, &mut fx);
    switch_mm_irqs_off(&mut w, 2, b, &mut fx);
    assert!(w.mms[a as usize].cpumask.test(2), "left in the mask");
    *w.mms[a as usize].asid_transition = true;
    let r = info(&mut w, t, Some(a), VA, VA + PAGE_SIZE, 2);
    assert!(!kernel::arch::x86::tlb::broadcast_tlb_flush(
        &mut w, r, &mut fx
    ));
    assert!(!*w.mms[a as usize].asid_transition);

    *w.mms[a as usize].asid_transition = true;
    w.cpus[2].tlbstate.loaded_mm = kernel::arch::x86::tlb::LOADED_MM_SWITCHING;
    let r = info(&mut w, t, Some(a), VA, VA + PAGE_SIZE, 3);
    assert!(kernel::arch::x86::tlb::broadcast_tlb_flush(
        &mut w, r, &mut fx
    ));
    assert!(*w.mms[a as usize].asid_transition);
}

/// `consider_global_asid` after an IPI flush, with INVLPGB: `mm` on CPUs
/// `0..running` (running it, not lazy) of a 6-CPU world, a flush of one
/// page from CPU0 by task `pid` (tasks 0 and 1 are spawned: pid = task id)
/// at `now_ms` milliseconds (`jiffies` at HZ=1000). The mm's global ASID
/// after it, and the INVLPGBs issued: 1 if `invlpgb_flush_all_nonglobals`
/// ran (the first allocation resets the global ASID space), else 0.
fn consider(
    running: CpuId,
    pid: TaskId,
    now_ms: u64,
    setup: impl Fn(&mut World, MmId),
) -> (u16, u64) {
    let (mut w, mms) = x86(6, &["x86.invlpgb=true"], 1);
    let mm = mms[0];
    let tasks = [w.spawn(mm, 0, vec![], false), w.spawn(mm, 0, vec![], false)];
    assert_eq!(w.tasks[tasks[pid as usize] as usize].pid, pid);
    let mut fx = traced();
    for c in 0..running {
        switch_mm_irqs_off(&mut w, c, mm, &mut fx);
    }
    setup(&mut w, mm);
    w.now = now_ms * 1_000_000;
    let sent = flush_mm_range(
        &mut w,
        0,
        tasks[pid as usize],
        mm,
        VA,
        VA + PAGE_SIZE,
        12,
        false,
    );
    assert!(sent.is_some(), "an IPI flush");
    (*w.mms[mm as usize].global_asid, w.counters.invlpgb)
}

/// `mm_active_cpus_exceeds(mm, 3)`: 4 CPUs running the mm get it the
/// first global ASID, `TLB_NR_DYN_ASIDS` (6), with the reset's one INVLPGB,
/// when `(pid & 0x1f) == (jiffies & 0x1f)`: pid 1 at jiffies 33 (33 & 31
/// = 1) does; at jiffies 34, or pid 0 at 33, does not. 3 CPUs are not
/// more than 3.
#[test]
fn consider_global_asid_samples_pid_against_jiffies() {
    assert_eq!(consider(4, 1, 33, |_, _| {}), (GLOBAL, 1));
    assert_eq!(consider(4, 0, 32, |_, _| {}), (GLOBAL, 1));
    assert_eq!(consider(4, 1, 34, |_, _| {}), (0, 0));
    assert_eq!(consider(4, 0, 33, |_, _| {}), (0, 0));
    assert_eq!(consider(3, 1, 33, |_, _| {}), (0, 0));
    assert_eq!(consider(5, 1, 33, |_, _| {}), (GLOBAL, 1));
}

/// Only CPUs that have the mm loaded and are not lazy count: 4 in the
/// mask with one of them lazy, or one of them since switched to another
/// mm (left in the mask), are 3 active: no global ASID.
#[test]
fn consider_global_asid_counts_active_cpus_only() {
    let lazy = |w: &mut World, _| kernel::arch::x86::tlb::enter_lazy_tlb(w, 3, &mut traced());
    assert_eq!(consider(4, 1, 33, lazy), (0, 0));
    let left = |w: &mut World, mm: MmId| {
        let other = w.mm_alloc().unwrap();
        switch_mm_irqs_off(w, 3, other, &mut traced());
        assert!(w.mms[mm as usize].cpumask.test(3));
    };
    assert_eq!(consider(4, 1, 33, left), (0, 0));
    // A fifth CPU left lazy: still 4 active.
    let fifth = |w: &mut World, mm: MmId| {
        switch_mm_irqs_off(w, 4, mm, &mut traced());
        kernel::arch::x86::tlb::enter_lazy_tlb(w, 4, &mut traced());
    };
    assert_eq!(consider(4, 1, 33, fifth), (GLOBAL, 1));
}

/// `use_global_asid`: the next mm gets the next ASID up (7) without another reset of the ASID space.
#[test]
fn use_global_asid_hands_out_upwards_and_resets_once() {
    let (mut w, mms) = x86(6, &["x86.invlpgb=true"], 2);
    let mut fx = traced();
    let t0 = w.spawn(mms[0], 0, vec![], false);
    let t1 = w.spawn(mms[1], 0, vec![], false);
    // pid 0 and 1 at jiffies 32 and 33.
    for (i, (mm, t)) in [(mms[0], t0), (mms[1], t1)].into_iter().enumerate() {
        for c in 0..4 {
            switch_mm_irqs_off(&mut w, c, mm, &mut fx);
        }
        w.now = (32 + i as u64) * 1_000_000;
        flush_mm_range(&mut w, 0, t, mm, VA, VA + PAGE_SIZE, 12, false);
    }
    assert_eq!(*w.mms[mms[0] as usize].global_asid, GLOBAL);
    assert_eq!(*w.mms[mms[1] as usize].global_asid, GLOBAL + 1);
    assert!(*w.mms[mms[1] as usize].asid_transition);
    assert_eq!(w.counters.invlpgb, 1, "one reset");
}

// ---------------------------------------------------------------------------
// flush_tlb_mm_range: get_cpu / put_cpu, should_trim_cpumask
// ---------------------------------------------------------------------------

/// `flush_tlb_mm_range` holds `get_cpu()` from its start to its end
/// (checked in `flush_mm_range`: 1 while the IPIs are out, 0 after); seed
/// (a) v7 (`x86.preemptible_flush`, with the stack `flush_tlb_info`) keeps
/// preemption on throughout. A local-only flush (the mm on this CPU only)
/// runs `flush_tlb_func` here: one INVLPG, counted as a local mm shootdown.
#[test]
fn flush_tlb_mm_range_holds_get_cpu_unless_preemptible() {
    for sets in [
        &[][..],
        &[
            "x86.flush_tlb_info=stack_aligned",
            "x86.preemptible_flush=true",
        ][..],
    ] {
        let (mut w, mms) = x86(2, sets, 1);
        let mm = mms[0];
        let t = w.spawn(mm, 0, vec![], false);
        for c in 0..2 {
            switch_mm_irqs_off(&mut w, c, mm, &mut traced());
        }
        let sent = flush_mm_range(&mut w, 0, t, mm, VA, VA + PAGE_SIZE, 12, false);
        assert_eq!(sent.map(|s| s.mask), Some(vec![0, 1]), "{sets:?}");
        assert_eq!(w.counters.invlpg, 2, "{sets:?}");
    }
    let (mut w, mms) = x86(2, &[], 1);
    let mm = mms[0];
    let t = w.spawn(mm, 0, vec![], false);
    switch_mm_irqs_off(&mut w, 0, mm, &mut traced());
    let a = asid(&w, 0);
    w.cpus[0].tlb.fill(a, VA, hit(mm, 1));
    let sent = flush_mm_range(&mut w, 0, t, mm, VA, VA + PAGE_SIZE, 12, false);
    assert_eq!(sent, None, "no other CPU in mm_cpumask: no IPI");
    assert!(!cached(&mut w, 0, VA));
    assert_eq!(w.counters.invlpg, 1);
    assert_eq!(reason(&w, FlushReason::LocalMmShootdown), 1);
}

/// `should_trim_cpumask`: `if (time_after(jiffies, mm->context.next_trim_cpumask))`
/// set it to `jiffies + HZ` and trim: the flush then IPIs a CPU that left
/// the mm (its bit still set) so that `flush_tlb_func` clears the bit
/// (`should_flush_tlb` passes it on `trim_cpumask`). `mm_alloc` sets the
/// first deadline at now + 1 s. At 0.5 s and at exactly 1 s: no trim,
/// CPU2's bit stays; at 1.5 s: trimmed, the deadline moves to 2.5 s, and a
/// second flush at 1.5 s does not trim again.
#[test]
fn should_trim_cpumask_once_a_second() {
    let (mut w, mms) = x86(3, &[], 2);
    let (mm, other) = (mms[0], mms[1]);
    let t = w.spawn(mm, 0, vec![], false);
    let mut fx = traced();
    for c in 0..3 {
        switch_mm_irqs_off(&mut w, c, mm, &mut fx);
    }
    switch_mm_irqs_off(&mut w, 2, other, &mut fx);
    assert_eq!(*w.mms[mm as usize].next_trim_cpumask, 1_000_000_000);
    for now in [500_000_000, 1_000_000_000] {
        w.now = now;
        let sent = flush_mm_range(&mut w, 0, t, mm, VA, VA + PAGE_SIZE, 12, false).unwrap();
        assert_eq!(sent.mask, vec![0, 1, 2]);
        assert!(w.mms[mm as usize].cpumask.test(2), "{now}: not trimmed");
        assert_eq!(*w.mms[mm as usize].next_trim_cpumask, 1_000_000_000);
    }
    assert_eq!(w.counters.irq_tlb, [0, 2, 0]);
    w.now = 1_500_000_000;
    flush_mm_range(&mut w, 0, t, mm, VA, VA + PAGE_SIZE, 12, false);
    assert!(!w.mms[mm as usize].cpumask.test(2), "trimmed");
    assert_eq!(reason(&w, FlushReason::RemoteWrongCpu), 1);
    assert_eq!(*w.mms[mm as usize].next_trim_cpumask, 2_500_000_000);
    // CPU2 back in the mask but running `other`: the next flush, within
    // the second, leaves it there.
    w.mms[mm as usize].cpumask.set(2);
    flush_mm_range(&mut w, 0, t, mm, VA, VA + PAGE_SIZE, 12, false);
    assert!(w.mms[mm as usize].cpumask.test(2));
    assert_eq!(w.counters.irq_tlb, [0, 4, 1]);
}

// ---------------------------------------------------------------------------
// switch_mm_irqs_off in the checker's steps (split_steps)
// ---------------------------------------------------------------------------

/// `context_switch` → `switch_mm_irqs_off(next)` on `cpu` (running task
/// `t`) with `split_steps`: the first window runs here, with IRQs off,
/// and the rest is pushed on `t`'s stack. Whether a frame was pushed.
fn begin(w: &mut World, cpu: CpuId, t: TaskId, next: MmId) -> bool {
    w.cfg.split_steps = true;
    w.cpus[cpu as usize].curr = Some(t);
    let depth = w.tasks[t as usize].kstack.len();
    kernel::arch::switch_mm(w, cpu, next, &mut traced());
    let pushed = w.tasks[t as usize].kstack.len() == depth + 1;
    // IRQs stay off until the frame returns.
    assert_eq!(w.cpus[cpu as usize].irqs_off, u8::from(pushed));
    pushed
}

/// One step of the pushed `SwitchMmIrqsOff` frame (popped when it
/// returns): its flow and labels.
fn step(w: &mut World, cpu: CpuId, t: TaskId) -> (Flow, Vec<Label>) {
    let mut fx = traced();
    let mut f = match w.tasks[t as usize].kstack.last() {
        Some(Frame::SwitchMmIrqsOff(f)) => f.clone(),
        _ => panic!("no switch_mm_irqs_off frame"),
    };
    let flow = f.step(w, cpu, &mut fx);
    *w.tasks[t as usize].kstack.last_mut().unwrap() = Frame::SwitchMmIrqsOff(f);
    if matches!(flow, Flow::Return) {
        w.tasks[t as usize].kstack.pop();
    }
    (flow, fx.labels)
}

/// A switch to a new mm, from init_mm: the first window stores
/// `loaded_mm = LOADED_MM_SWITCHING` and sets this CPU in `mm_cpumask`
/// (`cpumask_set_cpu`, the bit was clear); the next reads `tlb_gen` and
/// chooses ASID 1 (`next_asid` starts at 1; a new slot needs a flush);
/// the last loads CR3 with the flush and `loaded_mm = next`, then IRQs
/// back on. A switch to init_mm never touches init_mm's mask.
#[test]
fn split_switch_to_a_new_mm_takes_three_windows() {
    let (mut w, mms) = x86(2, &[], 1);
    let a = mms[0];
    let t = w.spawn(a, 0, vec![], false);
    let full = w.counters.full_flushes;
    assert!(begin(&mut w, 0, t, a));
    let ts = &w.cpus[0].tlbstate;
    assert_eq!(ts.loaded_mm, kernel::arch::x86::tlb::LOADED_MM_SWITCHING);
    assert!(w.mms[a as usize].cpumask.test(0), "cpumask_set_cpu");
    let (flow, labels) = step(&mut w, 0, t);
    assert!(matches!(flow, Flow::Yield));
    assert!(
        labels.contains(&Label::SwitchMmReadTlbGen { mm: a, gen: 1 }),
        "{labels:?}"
    );
    let (flow, labels) = step(&mut w, 0, t);
    assert!(matches!(flow, Flow::Return));
    let label = Label::SwitchMm {
        from: INIT_MM,
        to: a,
        flush: true,
    };
    assert!(labels.contains(&label), "{labels:?}");
    assert_eq!((w.cpus[0].tlbstate.loaded_mm, asid(&w, 0)), (a, 1));
    assert_eq!(w.counters.full_flushes, full + 1);
    assert_eq!(w.cpus[0].irqs_off, 0);
    assert!(w.tasks[t as usize].kstack.is_empty());

    // Back to init_mm: the same three windows, init_mm's mask untouched.
    assert!(begin(&mut w, 0, t, INIT_MM));
    assert!(!w.mms[INIT_MM as usize].cpumask.test(0));
    while !matches!(step(&mut w, 0, t).0, Flow::Return) {}
    assert_eq!(w.cpus[0].tlbstate.loaded_mm, INIT_MM);
    assert!(!w.mms[INIT_MM as usize].cpumask.test(0));
}

/// The same mm, not lazy: `if (prev == next && !was_lazy) return` in
/// the first window: nothing pushed, no CR3 write, IRQs back on.
#[test]
fn split_switch_to_the_same_mm_returns_at_once() {
    let (mut w, mms) = x86(2, &[], 1);
    let a = mms[0];
    let t = w.spawn(a, 0, vec![], false);
    switch_mm_irqs_off(&mut w, 0, a, &mut traced());
    let cr3 = w.counters.cr3_writes;
    assert!(!begin(&mut w, 0, t, a));
    assert_eq!(w.counters.cr3_writes, cr3);
    assert_eq!((w.cpus[0].tlbstate.loaded_mm, asid(&w, 0)), (a, 1));
}

/// Back from lazy mode to the same mm: `is_lazy` cleared, `smp_mb()`,
/// then `tlb_gen` read in the next window. Unchanged since the CPU's
/// slot caught up: return without a CR3 write. Bumped by a flush the
/// lazy CPU skipped: reload CR3 in the same ASID with a flush, the slot
/// at the new generation.
#[test]
fn split_switch_back_from_lazy_checks_the_generation() {
    for bumped in [false, true] {
        let (mut w, mms) = x86(2, &[], 1);
        let a = mms[0];
        let t = w.spawn(a, 0, vec![], false);
        switch_mm_irqs_off(&mut w, 0, a, &mut traced());
        kernel::arch::x86::tlb::enter_lazy_tlb(&mut w, 0, &mut traced());
        if bumped {
            inc_mm_tlb_gen(&mut w, a, &mut traced());
        }
        let (cr3, full) = (w.counters.cr3_writes, w.counters.full_flushes);
        assert!(begin(&mut w, 0, t, a), "bumped {bumped}");
        assert!(!w.cpus[0].tlbstate.is_lazy);
        let (flow, labels) = step(&mut w, 0, t);
        let gen = 1 + u64::from(bumped);
        assert!(labels.contains(&Label::SwitchMmReadTlbGen { mm: a, gen }));
        if !bumped {
            assert!(matches!(flow, Flow::Return));
            assert_eq!(w.counters.cr3_writes, cr3, "no CR3 write");
            continue;
        }
        assert!(matches!(flow, Flow::Yield));
        assert!(matches!(step(&mut w, 0, t).0, Flow::Return));
        assert_eq!(
            (w.counters.cr3_writes, w.counters.full_flushes),
            (cr3 + 1, full + 1)
        );
        assert_eq!(asid(&w, 0), 1, "same slot");
        assert_eq!(w.cpus[0].tlbstate.ctxs[1].tlb_gen, 2);
    }
}

/// The same mm after it was given a global ASID while this CPU ran it in
/// a dynamic one (`mm_needs_global_asid`): read `tlb_gen`, choose the
/// global ASID (no flush: INVLPGB keeps it current), load CR3.
#[test]
fn split_switch_moves_to_the_global_asid() {
    let (mut w, mms) = x86(2, &["x86.invlpgb=true"], 1);
    let a = mms[0];
    let t = w.spawn(a, 0, vec![], false);
    switch_mm_irqs_off(&mut w, 0, a, &mut traced());
    assert_eq!(asid(&w, 0), 1);
    *w.mms[a as usize].global_asid = GLOBAL;
    let full = w.counters.full_flushes;
    assert!(begin(&mut w, 0, t, a));
    assert_eq!(w.cpus[0].tlbstate.loaded_mm, a, "not LOADED_MM_SWITCHING");
    while !matches!(step(&mut w, 0, t).0, Flow::Return) {}
    assert_eq!((w.cpus[0].tlbstate.loaded_mm, asid(&w, 0)), (a, GLOBAL));
    assert_eq!(w.counters.full_flushes, full);
    // Running it in the global ASID: the same mm is a no-op again.
    assert!(!begin(&mut w, 0, t, a));
}

// ---------------------------------------------------------------------------
// get_flush_tlb_info, info_lines; the paravirt hook; the small predicates
// ---------------------------------------------------------------------------

/// `get_flush_tlb_info`: `if (end != TLB_FLUSH_ALL && ((end - start) >>
/// stride_shift) > tlb_single_page_flush_ceiling)` the request becomes a
/// full flush (`start = 0, end = TLB_FLUSH_ALL`). The ceiling is 33
/// pages: 33 pages from VA stay a range, 34 do not; 34 2 MiB pages at
/// stride_shift 21 do not either, 33 do. The struct is this CPU's per-CPU
/// one (upstream), filled in.
#[test]
fn get_flush_tlb_info_turns_ranges_past_the_ceiling_into_full_flushes() {
    let (mut w, mms) = x86(2, &[], 1);
    let mm = mms[0];
    let t = w.spawn(mm, 1, vec![], false);
    for (pages, shift, full) in [
        (33, 12, false),
        (34, 12, true),
        (33, 21, false),
        (34, 21, true),
    ] {
        let end = VA + (pages << shift);
        let r = get_flush_tlb_info(
            &mut w,
            1,
            t,
            Some(mm),
            VA,
            end,
            shift as u8,
            true,
            7,
            &mut traced(),
        );
        assert_eq!(r, InfoRef::PerCpu(1));
        w.cpus[1].flush_info_busy = false;
        let f = *w.flush_info(r);
        let want = if full { (0, TLB_FLUSH_ALL) } else { (VA, end) };
        assert_eq!((f.start, f.end), want, "{pages} pages << {shift}");
        assert_eq!(
            (
                f.mm,
                f.new_tlb_gen,
                f.initiating_cpu,
                f.stride_shift,
                f.freed_tables
            ),
            (Some(mm), 7, 1, shift as u8, true)
        );
    }
}

/// `info_lines`: the per-CPU struct at that CPU's slot, the stack one at
/// the task's frame, at `flush_tlb_info_stack_offset` (32) within its line
/// when only 8-byte aligned; 40 bytes each.
#[test]
fn info_lines_follow_the_placement() {
    use kernel::arch::x86::tlb::{info_lines, FLUSH_TLB_INFO_SIZE};
    use kernel::world::layout;
    assert_eq!(FLUSH_TLB_INFO_SIZE, 40);
    for (placement, offset) in [("stack_aligned", 0), ("stack_unaligned", 32)] {
        let (mut w, mms) = x86(2, &[&format!("x86.flush_tlb_info={placement}")], 1);
        let t = w.spawn(mms[0], 0, vec![], false);
        let t = w.spawn(mms[0], 0, vec![], false).max(t);
        let r = info(&mut w, t, Some(mms[0]), VA, VA + PAGE_SIZE, 2);
        assert_eq!(r, InfoRef::Stack(t));
        assert_eq!(info_lines(&w, r), (layout::stack_frame(t) + offset, 40));
    }
    let (w, _) = x86(2, &[], 0);
    let pc = layout::percpu_flush_tlb_info(1);
    assert_eq!(info_lines(&w, InfoRef::PerCpu(1)), (pc, 40));
}

/// `native_pv_tlb_init` (seed b): the IPI-broadcast key only on bare
/// metal (`pv_ops.mmu.flush_tlb_multi == native_flush_tlb_multi`) without
/// INVLPGB.
#[test]
fn native_pv_tlb_init_wants_native_and_no_invlpgb() {
    use kernel::arch::x86::tlb::native_pv_tlb_init;
    use machine::scenario::Paravirt;
    for (pv, invlpgb, want) in [
        (Paravirt::None, false, true),
        (Paravirt::None, true, false),
        (Paravirt::Kvm, false, false),
        (Paravirt::Kvm, true, false),
    ] {
        let mut s = machine::Scenario::default();
        s.x86.paravirt = pv;
        s.x86.invlpgb = invlpgb;
        assert_eq!(native_pv_tlb_init(&s), want, "{pv:?} {invlpgb}");
    }
}

/// `kvm_flush_tlb_multi`: a preempted vCPU (CPU1) gets
/// `KVM_VCPU_FLUSH_TLB` instead of an IPI: out of the mask, its flush
/// pending, counted and labelled; the others go to
/// `native_flush_tlb_multi`. When it resumes, the host flushes its whole
/// TLB once (`kvm_vcpu_flush_tlb_guest`); a second resume flushes nothing.
#[test]
fn kvm_defers_the_flush_of_a_preempted_vcpu_to_its_resume() {
    use kernel::arch::x86::tlb::{flush_tlb_multi, kvm_vcpu_resume};
    let (mut w, mms) = x86(3, &["x86.paravirt=kvm"], 1);
    let mm = mms[0];
    let t = w.spawn(mm, 0, vec![], false);
    for c in 0..3 {
        switch_mm_irqs_off(&mut w, c, mm, &mut traced());
    }
    let a = asid(&w, 1);
    w.cpus[1].tlb.fill(a, VA, hit(mm, 1));
    w.cpus[1].vcpu_preempted = true;
    let r = info(&mut w, t, Some(mm), VA, VA + PAGE_SIZE, 2);
    let mut fx = traced();
    let mask = w.mms[mm as usize].cpumask.clone();
    let Flow::Call(Frame::SmpCallFunctionManyCond(c)) = flush_tlb_multi(&mut w, mask, r, &mut fx)
    else {
        panic!("no IPI call");
    };
    assert_eq!(c.mask.iter().collect::<Vec<_>>(), vec![0, 2]);
    assert!(w.cpus[1].kvm_flush_pending);
    assert_eq!(w.counters.kvm_deferred_flushes, 1);
    assert!(fx.labels.contains(&Label::KvmDeferFlush { cpu: 1 }));
    assert_eq!(reason(&w, FlushReason::RemoteSendIpi), 1);

    let full = w.counters.full_flushes;
    let mut fx = traced();
    kvm_vcpu_resume(&mut w, 1, &mut fx);
    assert!(!w.cpus[1].vcpu_preempted && !w.cpus[1].kvm_flush_pending);
    assert!(!cached(&mut w, 1, VA));
    assert_eq!(w.counters.full_flushes, full + 1);
    assert!(fx.labels.contains(&Label::VcpuResume { flushed: true }));
    let mut fx = traced();
    kvm_vcpu_resume(&mut w, 1, &mut fx);
    assert_eq!(w.counters.full_flushes, full + 1);
    assert!(fx.labels.contains(&Label::VcpuResume { flushed: false }));
}

/// `mm_global_asid` is 0 without X86_FEATURE_INVLPGB whatever the mm
/// holds, and for init_mm and `LOADED_MM_SWITCHING` (not an mm);
/// `mm_in_asid_transition` is false without INVLPGB.
#[test]
fn global_asid_only_with_invlpgb_and_a_user_mm() {
    use kernel::arch::x86::tlb::{mm_global_asid, mm_in_asid_transition, LOADED_MM_SWITCHING};
    for invlpgb in [false, true] {
        let sets = [&*format!("x86.invlpgb={invlpgb}")];
        let (mut w, mms) = x86(2, &sets, 1);
        let mm = mms[0];
        for m in [INIT_MM, mm] {
            *w.mms[m as usize].global_asid = GLOBAL;
            *w.mms[m as usize].asid_transition = true;
        }
        let want = if invlpgb { GLOBAL } else { 0 };
        assert_eq!(mm_global_asid(&w, mm), want);
        assert_eq!(mm_global_asid(&w, INIT_MM), 0);
        assert_eq!(mm_global_asid(&w, LOADED_MM_SWITCHING), 0);
        assert_eq!(mm_in_asid_transition(&w, Some(mm)), invlpgb);
        assert!(!mm_in_asid_transition(&w, None));
    }
}

/// asm/tlb.h `tlb_flush`: `flush_tlb_mm_range(mm, start, end,
/// tlb_get_unmap_shift(tlb), freed_tables)`, the whole mm for `fullmm`;
/// seed (b) passes `freed_tables || unshared_tables` when the seed is on
/// (`skip_redundant_table_sync` or `force_skip_table_sync`), unless
/// `unshare_without_lazy_ipi` drops it again; nothing for an empty gather.
#[test]
fn tlb_flush_passes_the_gather_and_the_seed_s_unshare() {
    use kernel::arch::x86::tlb::tlb_flush;
    let cases: [(&[&str], bool, bool, bool); 7] = [
        (&[], false, true, false),
        (&["mm.skip_redundant_table_sync=true"], false, true, true),
        (&["mm.force_skip_table_sync=true"], false, true, true),
        (
            &[
                "mm.skip_redundant_table_sync=true",
                "mm.unshare_without_lazy_ipi=true",
            ],
            false,
            true,
            false,
        ),
        (&["mm.skip_redundant_table_sync=true"], false, false, false),
        (&[], true, false, true),
        (&["mm.skip_redundant_table_sync=true"], true, true, true),
    ];
    for (sets, freed, unshared, want) in cases {
        let (mut w, mms) = x86(2, sets, 1);
        let t = w.spawn(mms[0], 0, vec![], false);
        let g = &mut w.tasks[t as usize].gather;
        g.mm = mms[0];
        g.start = VA;
        g.end = VA + 2 * PAGE_SIZE;
        g.cleared_pmds = true;
        g.freed_tables = freed;
        g.unshared_tables = unshared;
        let Flow::Call(Frame::FlushTlbMmRange(f)) = tlb_flush(&w, t) else {
            panic!("no flush");
        };
        let case = format!("{sets:?} freed {freed} unshared {unshared}");
        assert_eq!(
            (f.mm, f.start, f.end, f.stride_shift),
            (mms[0], VA, VA + 2 * PAGE_SIZE, 21),
            "{case}"
        );
        assert_eq!(f.freed_tables, want, "{case}");
    }
    let (mut w, mms) = x86(2, &[], 1);
    let t = w.spawn(mms[0], 0, vec![], false);
    assert!(matches!(tlb_flush(&w, t), Flow::Continue), "empty gather");
    let g = &mut w.tasks[t as usize].gather;
    (g.mm, g.fullmm, g.start, g.end) = (mms[0], true, VA, VA + PAGE_SIZE);
    let Flow::Call(Frame::FlushTlbMmRange(f)) = tlb_flush(&w, t) else {
        panic!("no flush");
    };
    assert_eq!((f.start, f.end), (0, TLB_FLUSH_ALL));
}

// ---------------------------------------------------------------------------
// inc_mm_tlb_gen_on; flush_tlb_func and should_flush_tlb cases; the switch
// ---------------------------------------------------------------------------

/// `inc_mm_tlb_gen` is `atomic64_inc_return`: a full barrier, then the
/// mm's generation one up (1 → 2). With the barrier dropped
/// (`inject.drop_barrier=inc_mm_tlb_gen.atomic64_inc_return`) it is a
/// plain load and store of the same value, labelled `BarrierDropped`.
#[test]
fn inc_mm_tlb_gen_on_is_one_up_with_or_without_its_barrier() {
    use kernel::arch::x86::tlb::inc_mm_tlb_gen_on;
    for dropped in [false, true] {
        let sets: &[&str] = if dropped {
            &["inject.drop_barrier=inc_mm_tlb_gen.atomic64_inc_return"]
        } else {
            &[]
        };
        let (mut w, mms) = x86(2, sets, 1);
        let mm = mms[0];
        let mut fx = traced();
        assert_eq!(
            inc_mm_tlb_gen_on(&mut w, 0, mm, &mut fx),
            2,
            "dropped {dropped}"
        );
        assert_eq!(*w.mms[mm as usize].tlb_gen, 2);
        assert!(fx.labels.contains(&Label::IncMmTlbGen { mm, gen: 2 }));
        let label = Label::BarrierDropped {
            name: "inc_mm_tlb_gen.atomic64_inc_return",
        };
        assert_eq!(fx.labels.contains(&label), dropped);
        assert_eq!(inc_mm_tlb_gen_on(&mut w, 0, mm, &mut fx), 3);
    }
}

/// A whole-mm request (`end == TLB_FLUSH_ALL`) exactly one generation
/// behind is not a partial flush (`f->end != TLB_FLUSH_ALL` fails): the
/// whole ASID is flushed, no INVLPG, labelled `pages: TLB_FLUSH_ALL`.
#[test]
fn a_whole_mm_request_one_behind_is_a_full_flush() {
    let (mut w, mms) = x86(2, &[], 1);
    let mm = mms[0];
    let t = w.spawn(mm, 0, vec![], false);
    for c in 0..2 {
        switch_mm_irqs_off(&mut w, c, mm, &mut traced());
    }
    let a = asid(&w, 1);
    w.cpus[1].tlb.fill(a, VA, hit(mm, 1));
    let gen = inc_mm_tlb_gen(&mut w, mm, &mut traced());
    let r = info(&mut w, t, Some(mm), 0, TLB_FLUSH_ALL, gen);
    let (full, mut fx) = (w.counters.full_flushes, traced());
    flush_tlb_func(&mut w, 1, r, &mut fx);
    assert_eq!((w.counters.invlpg, w.counters.full_flushes), (0, full + 1));
    assert!(!cached(&mut w, 1, VA));
    let label = Label::FlushTlbFunc {
        mm,
        local: false,
        pages: TLB_FLUSH_ALL,
    };
    assert!(fx.labels.contains(&label), "{:?}", fx.labels);
    assert_eq!(w.cpus[1].tlbstate.ctxs[a as usize].tlb_gen, gen);
}

/// `should_flush_tlb(cpu, info)`: never a lazy CPU; for a kernel flush
/// (`info->mm == NULL`) every other CPU; else a CPU running the mm, one
/// caught switching (`LOADED_MM_SWITCHING`), or any when trimming the
/// mask; not one that runs another mm.
#[test]
fn should_flush_tlb_picks_the_cpus_that_may_cache_the_mm() {
    use kernel::arch::x86::tlb::{enter_lazy_tlb, LOADED_MM_SWITCHING};
    // CPU1 runs mm, CPU2 runs mm lazily, CPU3 runs other, CPU4 is switching.
    let (mut w, mms) = x86(5, &[], 2);
    let (mm, other) = (mms[0], mms[1]);
    let t = w.spawn(mm, 0, vec![], false);
    let mut fx = traced();
    for c in 0..3 {
        switch_mm_irqs_off(&mut w, c, mm, &mut fx);
    }
    enter_lazy_tlb(&mut w, 2, &mut fx);
    switch_mm_irqs_off(&mut w, 3, other, &mut fx);
    w.cpus[4].tlbstate.loaded_mm = LOADED_MM_SWITCHING;
    let picked = |w: &World, r: InfoRef| -> Vec<CpuId> {
        (1..5)
            .filter(|&c| should_flush_tlb(w, c, r, &mut traced()))
            .collect()
    };
    let r = info(&mut w, t, Some(mm), VA, VA + PAGE_SIZE, 2);
    assert_eq!(picked(&w, r), vec![1, 4]);
    w.cpus[0].flush_info.trim_cpumask = true;
    assert_eq!(
        picked(&w, r),
        vec![1, 3, 4],
        "trim: CPU3 too, not the lazy one"
    );
    let r = info(&mut w, t, None, VA, VA + PAGE_SIZE, 0);
    assert_eq!(
        picked(&w, r),
        vec![1, 3, 4],
        "a kernel flush: all but the lazy one"
    );
}

/// `switch_mm_irqs_off` → `load_new_mm_cr3`: every CR3 load is one
/// `cr3_writes` and one `TLB_FLUSH_ON_TASK_SWITCH`; a new slot (ASID 1,
/// then 2: `next_asid` round-robin) is loaded with a flush and recorded
/// as `(ctx_id, tlb_gen)`; a slot still current (back to `a`) without.
/// Without PCID every switch is ASID 0 with a flush.
#[test]
fn every_cr3_load_is_a_task_switch_flush_event() {
    for pcid in [true, false] {
        let (mut w, mms) = x86(1, &[&format!("machine.pcid={pcid}")], 2);
        let (a, b) = (mms[0], mms[1]);
        let base = (
            w.counters.cr3_writes,
            reason(&w, FlushReason::TaskSwitch),
            w.counters.full_flushes,
        );
        let mut fx = traced();
        let flushes: Vec<bool> = [a, b, a]
            .into_iter()
            .map(|m| switch_mm_irqs_off(&mut w, 0, m, &mut fx))
            .collect();
        let asids = if pcid { [1, 2, 1] } else { [0, 0, 0] };
        assert_eq!(flushes, [true, true, !pcid], "pcid {pcid}");
        assert_eq!(asid(&w, 0), asids[2]);
        let n = if pcid { 2 } else { 3 };
        assert_eq!(
            (
                w.counters.cr3_writes,
                reason(&w, FlushReason::TaskSwitch),
                w.counters.full_flushes
            ),
            (base.0 + 3, base.1 + 3, base.2 + n)
        );
        if pcid {
            let ctx = w.cpus[0].tlbstate.ctxs[2];
            assert_eq!((ctx.ctx_id, ctx.tlb_gen), (*w.mms[b as usize].ctx_id, 1));
        }
    }
}

/// `switch_mm_irqs_off` to the mm already loaded: not lazy, `return`
/// (no CR3 load, no `TLB_FLUSH_ON_TASK_SWITCH`), even with its slot
/// behind the mm (a flush in flight: `inc_mm_tlb_gen` done, its IPI still
/// to come, which will flush); back from lazy mode with the slot current,
/// `return` too; behind (a flush skipped the lazy CPU), reload CR3 in the
/// same ASID with a flush. In a global ASID, back from lazy mode:
/// `return` (INVLPGB kept it current). Only a move to the mm's global
/// ASID (`mm_needs_global_asid`, tested above) reloads CR3 for the same
/// mm otherwise.
#[test]
fn a_switch_to_the_loaded_mm_loads_cr3_only_when_behind() {
    use kernel::arch::x86::tlb::enter_lazy_tlb;
    let (mut w, mms) = x86(1, &[], 1);
    let a = mms[0];
    let mut fx = traced();
    switch_mm_irqs_off(&mut w, 0, a, &mut fx);
    let events = |w: &World| (w.counters.cr3_writes, reason(w, FlushReason::TaskSwitch));
    let base = events(&w);
    assert!(!switch_mm_irqs_off(&mut w, 0, a, &mut fx), "not lazy");
    w.cpus[0].tlb.fill(1, VA, hit(a, 1));
    inc_mm_tlb_gen(&mut w, a, &mut fx);
    assert!(
        !switch_mm_irqs_off(&mut w, 0, a, &mut fx),
        "not lazy, behind"
    );
    assert!(cached(&mut w, 0, VA), "left to the IPI");
    // The IPI's flush_tlb_func catches the slot up.
    w.cpus[0].tlbstate.ctxs[1].tlb_gen = 2;
    enter_lazy_tlb(&mut w, 0, &mut fx);
    assert!(!switch_mm_irqs_off(&mut w, 0, a, &mut fx), "lazy, current");
    assert!(!w.cpus[0].tlbstate.is_lazy);
    assert_eq!(events(&w), base, "no CR3 load");
    enter_lazy_tlb(&mut w, 0, &mut fx);
    inc_mm_tlb_gen(&mut w, a, &mut fx);
    let full = w.counters.full_flushes;
    assert!(switch_mm_irqs_off(&mut w, 0, a, &mut fx), "lazy, behind");
    assert_eq!(events(&w), (base.0 + 1, base.1 + 1));
    assert_eq!((asid(&w, 0), w.counters.full_flushes), (1, full + 1));
    assert_eq!(w.cpus[0].tlbstate.ctxs[1].tlb_gen, 3);

    let (mut w, a, _, _) = invlpgb_world(2);
    enter_lazy_tlb(&mut w, 0, &mut fx);
    inc_mm_tlb_gen(&mut w, a, &mut fx);
    let base = events(&w);
    assert!(!switch_mm_irqs_off(&mut w, 0, a, &mut fx), "global ASID");
    assert_eq!((events(&w), asid(&w, 0)), (base, GLOBAL));
}
