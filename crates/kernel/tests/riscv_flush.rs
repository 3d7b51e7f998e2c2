//! arch/riscv/mm/tlbflush.c step by step: `__flush_tlb_range` with and
//! without seed (d)'s deferral, the queue, its drain, and the per-page /
//! whole-ASID choice of `local_flush_tlb_range_asid`.

mod common;

use kernel::arch::riscv::tlbflush::{
    local_flush_tlb_range_asid, local_tlb_flush_queue_drain, FlushTlbRange, FlushTlbRangeData, Pc,
};
use kernel::effects::Charge;
use kernel::world::{layout, Flow, Frame};
use kernel::{Effects, Label, MmId, World, TLB_FLUSH_ALL};
use machine::tlb::TlbHit;
use machine::PAGE_SIZE;

const VA: u64 = 0x4000_0000;
/// An ASID no mm of these worlds has (a hart running something else).
const OTHER: u16 = 7;

/// A 4-hart RISC-V world with one mm in every hart's mm_cpumask 0..=2.
fn world(sets: &[&str]) -> (World, MmId) {
    common::riscv_mm_on_harts_0_to_2(sets)
}

fn hit(pfn: u32) -> TlbHit {
    common::tlb_hit(1, pfn, true)
}

/// Step the flush on hart 0 until it calls the IPI path or returns;
/// the program points it went through and the IPI mask it sent, if any.
fn drive(w: &mut World, f: &mut FlushTlbRange) -> (Vec<Pc>, Option<Vec<u16>>) {
    drive_traced(w, f, &mut Effects::default())
}

/// [`drive`] with `fx` (trace labels on if `fx.tracing`).
fn drive_traced(
    w: &mut World,
    f: &mut FlushTlbRange,
    fx: &mut Effects,
) -> (Vec<Pc>, Option<Vec<u16>>) {
    let mut pcs = vec![];
    for _ in 0..10 {
        pcs.push(f.pc);
        match f.step(w, 0, 0, fx) {
            Flow::Call(Frame::SmpCallFunctionManyCond(c)) => {
                // get_cpu() holds until the IPIs are done.
                assert_eq!(w.cpus[0].preempt_count, 1);
                return (pcs, Some(c.mask.iter().collect()));
            }
            Flow::Return => {
                assert_eq!(w.cpus[0].preempt_count, 0, "put_cpu() after get_cpu()");
                return (pcs, None);
            }
            _ => {}
        }
    }
    panic!("flush did not finish: {pcs:?}");
}

/// Upstream (no deferral): every other hart of mm_cpumask is IPI'd,
/// whatever it runs, and nothing is queued.
#[test]
fn upstream_ipis_the_whole_mask() {
    let (mut w, mm) = world(&[]);
    w.cpus[2].riscv.loaded_asid = OTHER;
    let mut f = FlushTlbRange::new(&w, Some(mm), VA, VA + PAGE_SIZE);
    assert_eq!((f.d.size, f.d.stride), (PAGE_SIZE, PAGE_SIZE));
    let (pcs, mask) = drive(&mut w, &mut f);
    assert_eq!(pcs, [Pc::Start, Pc::Send]);
    assert_eq!(mask, Some(vec![0, 1, 2]));
    assert!(w.cpus[2].riscv.queue.is_empty());
    assert_eq!(w.counters.deferred_flushes, 0);
}

/// Seed (d): hart 1 runs the mm's ASID (kept, IPI'd), hart 2 runs another
/// (queued, dropped from the mask): enqueue, fence, re-check, send.
#[test]
fn deferral_queues_for_harts_not_running_the_asid() {
    let (mut w, mm) = world(&["riscv.defer_flush_to_context_switch=true"]);
    let mut f = FlushTlbRange::new(&w, Some(mm), VA, VA + 2 * PAGE_SIZE);
    let asid = f.d.asid as u16;
    w.cpus[1].riscv.loaded_asid = asid;
    w.cpus[2].riscv.loaded_asid = OTHER;
    let mut fx = Effects {
        tracing: true,
        ..Effects::default()
    };
    let (pcs, mask) = drive_traced(&mut w, &mut f, &mut fx);
    assert_eq!(pcs, [Pc::Start, Pc::Enqueue, Pc::CheckLoaded, Pc::Send]);
    // The trace names the one hart the flush was deferred for.
    let read = Label::ReadLoadedAsid {
        deferring: 1,
        ordered: true,
    };
    assert!(fx.labels.contains(&read), "{:?}", fx.labels);
    // The enqueue writes hart 2's queue, the per-CPU line after its
    // call_single_queue (what the cache model prices).
    let queue_line = Charge::Line {
        addr: (layout::call_single_queue(2) + 0x40) & !63,
        write: true,
        batch: false,
    };
    assert!(fx.charges.contains(&queue_line), "{:?}", fx.charges);
    assert_eq!(mask, Some(vec![0, 1]));
    assert_eq!(f.deferred.iter().collect::<Vec<_>>(), [2]);
    let c = &w.counters;
    assert_eq!(
        (c.deferred_flushes, c.defer_enqueues, c.defer_ipi_loaded),
        (1, 1, 1)
    );
    let h = &w.cpus[2].riscv;
    assert!(h.need_flush);
    assert_eq!(h.queue.len(), 1);
    assert_eq!(h.queue[0].size, 2 * PAGE_SIZE);
    // Hart 2 switches to the mm: the drain applies the queued flush.
    w.cpus[2].tlb.fill(asid, VA + PAGE_SIZE, hit(9));
    local_tlb_flush_queue_drain(&mut w, 2, asid, &mut Effects::default());
    assert!(w.cpus[2].tlb.lookup(asid, VA + PAGE_SIZE).is_none());
    assert!(w.cpus[2].riscv.queue.is_empty() && !w.cpus[2].riscv.need_flush);
    assert_eq!(
        (w.counters.defer_drains, w.counters.deferred_applied),
        (1, 1)
    );
    // Nothing queued: a second drain is a no-op.
    local_tlb_flush_queue_drain(&mut w, 2, asid, &mut Effects::default());
    assert_eq!(w.counters.defer_drains, 1);
}

/// `riscv.flush_queue_depth`: a full queue enqueues nothing and the hart
/// stays in the IPI mask (`deferred_overflows`).
#[test]
fn full_queue_keeps_the_ipi() {
    let (mut w, mm) = world(&[
        "riscv.defer_flush_to_context_switch=true",
        "riscv.flush_queue_depth=2",
    ]);
    w.cpus[1].riscv.loaded_asid = OTHER;
    w.cpus[2].riscv.loaded_asid = OTHER;
    for (i, expect) in [vec![0], vec![0], vec![0, 1, 2]].into_iter().enumerate() {
        let mut f = FlushTlbRange::new(&w, Some(mm), VA, VA + PAGE_SIZE);
        let (_, mask) = drive(&mut w, &mut f);
        // Only hart 0 left: a local flush, no IPI call.
        let sent = mask.unwrap_or_else(|| vec![0]);
        assert_eq!(sent, expect, "flush {i}");
    }
    assert_eq!(w.counters.deferred_overflows, 2);
    assert_eq!(w.cpus[1].riscv.queue.len(), 2);
}

/// Deferral is only a replacement for `on_each_cpu_mask`: with SBI remote
/// fences nothing is deferred, nor is a kernel-range flush (`mm` None)
/// unless the unsafe `riscv.defer_kernel_flush` is set.
#[test]
fn sbi_and_kernel_flushes_are_not_deferred() {
    let (mut w, mm) = world(&[
        "riscv.defer_flush_to_context_switch=true",
        "riscv.rfence=sbi",
    ]);
    w.cpus[2].riscv.loaded_asid = OTHER;
    let mut f = FlushTlbRange::new(&w, Some(mm), VA, VA + PAGE_SIZE);
    let (pcs, mask) = drive(&mut w, &mut f);
    assert_eq!(pcs, [Pc::Start, Pc::Send, Pc::Done]);
    assert_eq!(mask, None, "SBI: an ecall, not kernel IPIs");
    assert_eq!(w.counters.sbi_rfence, 1);
    assert_eq!(w.counters.deferred_flushes, 0);
    let (mut w, _) = world(&["riscv.defer_flush_to_context_switch=true"]);
    w.cpus[2].riscv.loaded_asid = OTHER;
    let mut f = FlushTlbRange::new(&w, None, VA, VA + PAGE_SIZE);
    assert_eq!(f.cmask.weight(), 4, "kernel flush: every online hart");
    let (pcs, mask) = drive(&mut w, &mut f);
    assert_eq!(pcs, [Pc::Start, Pc::Send]);
    assert_eq!(mask, Some(vec![0, 1, 2, 3]));
    let (mut w, _) = world(&[
        "riscv.defer_flush_to_context_switch=true",
        "riscv.defer_kernel_flush=true",
    ]);
    w.cpus[2].riscv.loaded_asid = OTHER;
    let mut f = FlushTlbRange::new(&w, None, VA, VA + PAGE_SIZE);
    let (_, mask) = drive(&mut w, &mut f);
    // No hart's loaded_asid is FLUSH_TLB_NO_ASID, so every other hart gets
    // the kernel flush queued, even those running (the v1 bug): hart 0
    // flushes locally and sends nothing.
    assert_eq!(mask, None, "UNSAFE variant defers the kernel flush");
    assert_eq!(w.counters.deferred_flushes, 3);
}

/// `riscv.unordered_enqueue` reads loaded_asid first, then enqueues.
#[test]
fn unordered_enqueue_reads_first() {
    let (mut w, mm) = world(&[
        "riscv.defer_flush_to_context_switch=true",
        "riscv.unordered_enqueue=true",
    ]);
    w.cpus[2].riscv.loaded_asid = OTHER;
    let mut f = FlushTlbRange::new(&w, Some(mm), VA, VA + PAGE_SIZE);
    let (pcs, mask) = drive(&mut w, &mut f);
    assert_eq!(
        pcs,
        [Pc::Start, Pc::ReadLoadedFirst, Pc::EnqueueLate, Pc::Send]
    );
    assert_eq!(mask, Some(vec![0, 1]));
    assert_eq!(w.counters.deferred_flushes, 1);
}

/// `local_flush_tlb_range_asid`: pages up to the threshold one sfence.vma
/// each (leaf entries of that ASID only), beyond it one whole-ASID flush.
#[test]
fn per_page_or_whole_asid() {
    let (mut w, mm) = world(&["riscv.tlb_flush_all_threshold=2"]);
    let mut fx = Effects::default();
    let d = |size| FlushTlbRangeData {
        mm: Some(mm),
        asid: 3,
        start: VA,
        size,
        stride: PAGE_SIZE,
    };
    let far = VA + (1 << 30);
    for va in [VA, VA + PAGE_SIZE, VA + 2 * PAGE_SIZE, far] {
        w.cpus[0].tlb.fill(3, va, hit(1));
    }
    w.cpus[0].tlb.fill(4, VA, hit(2));
    local_flush_tlb_range_asid(&mut w, 0, d(2 * PAGE_SIZE), &mut fx);
    assert_eq!(w.counters.sfence_vma, 2);
    assert_eq!(w.counters.full_flushes, 0);
    let t = &mut w.cpus[0].tlb;
    assert!(t.lookup(3, VA).is_none() && t.lookup(3, VA + PAGE_SIZE).is_none());
    assert!(
        t.lookup(3, VA + 2 * PAGE_SIZE).is_some(),
        "outside the range"
    );
    assert!(t.lookup(4, VA).is_some(), "another ASID");
    local_flush_tlb_range_asid(&mut w, 0, d(3 * PAGE_SIZE), &mut fx);
    assert_eq!((w.counters.sfence_vma, w.counters.full_flushes), (3, 1));
    assert!(w.cpus[0].tlb.lookup(3, far).is_none(), "whole ASID");
    assert!(w.cpus[0].tlb.lookup(4, VA).is_some());
    local_flush_tlb_range_asid(&mut w, 0, d(TLB_FLUSH_ALL), &mut fx);
    assert_eq!(w.counters.full_flushes, 2, "TLB_FLUSH_ALL: whole ASID");
}
