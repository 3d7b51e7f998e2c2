//! x86 `flush_tlb_kernel_range` (arch/x86/mm/tlb.c) and `arch_tlbbatch_flush`:
//! which function goes to which CPUs, the `tlb_single_page_flush_ceiling`
//! switch to `do_flush_tlb_all`, where `flush_tlb_info` lives
//! (`x86.flush_tlb_info`), and what each target drops from its TLB.
//! Before issue 15 item 12 the model had neither: `flush_tlb_kernel_range`
//! was RISC-V only (x86 hit `unreachable!`), and nothing modelled
//! reclaim's batched flush.

use kernel::arch::x86::tlb::{switch_mm_irqs_off, InfoRef};
use kernel::arch::x86::tlb_kernel::{
    arch_tlbbatch_add_pending, ArchTlbbatchFlush, ArchTlbflushUnmapBatch, FlushTlbKernelRange,
};
use kernel::kernel_smp::{sysvec_call_function, CallFunc, Cond, SmpCallFunctionManyCond};
use kernel::world::{Flow, Frame};
use kernel::{Effects, World, INIT_MM, TLB_FLUSH_ALL, TLB_GENERATION_INVALID};
use machine::tlb::TlbHit;
use machine::{CpuMask, Scenario, PAGE_SIZE};

const KVA: u64 = 0x0000_c000_0000_0000;
/// The tag the model gives global kernel translations.
const KERNEL_TAG: u16 = kernel::hw::mmu::KERNEL_TLB_TAG;

fn world(sets: &[&str]) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = 4;
    for kv in sets {
        s.set(kv).unwrap();
    }
    World::new(&s).unwrap()
}

fn smp_call(f: Flow) -> SmpCallFunctionManyCond {
    match f {
        Flow::Call(Frame::SmpCallFunctionManyCond(f)) => f,
        _ => panic!("expected an smp_call_function_many_cond call"),
    }
}

/// Run `flush_tlb_kernel_range(KVA, KVA + pages)` from task `t` on CPU 0 up
/// to its `on_each_cpu`, which is returned.
fn kernel_flush(w: &mut World, t: u32, pages: u64) -> (FlushTlbKernelRange, Flow) {
    let mut f = FlushTlbKernelRange::new(KVA, KVA + pages * PAGE_SIZE);
    let mut fx = Effects::default();
    assert!(matches!(f.step(w, 0, t, &mut fx), Flow::Yield));
    assert_eq!(w.cpus[0].preempt_count, 1, "guard(preempt)");
    let flow = f.step(w, 0, t, &mut fx);
    (f, flow)
}

fn every_cpu(w: &World) -> CpuMask {
    let mut m = CpuMask::new(w.cpus.len());
    (0..w.cpus.len()).for_each(|c| m.set(c as u16));
    m
}

/// Up to the ceiling (33 pages): `on_each_cpu(do_kernel_range_flush, info)`
/// over every online CPU (this one runs it locally: `SCF_RUN_LOCAL`), with
/// `info->mm = NULL`, stride `PAGE_SHIFT` and no generation; one page
/// more and `get_flush_tlb_info` turns it into `TLB_FLUSH_ALL`, which is
/// `on_each_cpu(do_flush_tlb_all)`.
#[test]
fn ceiling_picks_do_flush_tlb_all() {
    let mut w = world(&[]);
    let t = w.spawn(INIT_MM, 0, vec![], false);
    let (f, flow) = kernel_flush(&mut w, t, 33);
    let call = smp_call(flow);
    assert_eq!(call.mask, every_cpu(&w));
    assert!(call.run_local);
    assert_eq!(call.cond, Cond::Always);
    assert_eq!(call.func, CallFunc::DoKernelRangeFlush(InfoRef::PerCpu(0)));
    let info = *w.flush_info(f.info.unwrap());
    assert_eq!(info.mm, None);
    assert_eq!((info.start, info.end), (KVA, KVA + 33 * PAGE_SIZE));
    assert_eq!(info.new_tlb_gen, TLB_GENERATION_INVALID);
    let mut w = world(&[]);
    let t = w.spawn(INIT_MM, 0, vec![], false);
    let (f, flow) = kernel_flush(&mut w, t, 34);
    assert_eq!(smp_call(flow).func, CallFunc::DoFlushTlbAll);
    assert_eq!(w.flush_info(f.info.unwrap()).end, TLB_FLUSH_ALL);
}

/// Seed (a) v7 patch 12/14 moves this `flush_tlb_info` to the caller's
/// stack as well: with `x86.flush_tlb_info = stack_aligned` the targets
/// read the task's frame, not CPU 0's per-CPU struct.
#[test]
fn info_follows_the_placement_switch() {
    for (placement, want) in [("percpu", None), ("stack_aligned", Some(()))] {
        let mut w = world(&[&format!("x86.flush_tlb_info={placement}")]);
        let t = w.spawn(INIT_MM, 0, vec![], false);
        let (f, _) = kernel_flush(&mut w, t, 1);
        let r = f.info.unwrap();
        match want {
            None => assert_eq!(r, InfoRef::PerCpu(0)),
            Some(()) => assert_eq!(r, InfoRef::Stack(t)),
        }
    }
}

fn kernel_entry(w: &mut World, cpu: usize, va: u64) {
    w.cpus[cpu].tlb.fill(
        KERNEL_TAG,
        va,
        TlbHit {
            pfn: 9,
            frame_gen: 0,
            writable: true,
            huge: false,
            owner: INIT_MM,
        },
    );
}

/// A target takes the call-function IPI: `do_kernel_range_flush` drops
/// the global entry of each page of the range (one INVLPG each) and
/// leaves the rest; it counts in CAL, never in the TLB row (only
/// `flush_tlb_func` bumps `irq_tlb_count`).
#[test]
fn targets_drop_the_range_and_count_in_cal_only() {
    let mut w = world(&[]);
    let t = w.spawn(INIT_MM, 0, vec![], false);
    for c in 0..4 {
        kernel_entry(&mut w, c, KVA);
        kernel_entry(&mut w, c, KVA + PAGE_SIZE);
        kernel_entry(&mut w, c, KVA + 40 * PAGE_SIZE);
    }
    let (_, flow) = kernel_flush(&mut w, t, 2);
    let mut call = smp_call(flow);
    let mut fx = Effects::default();
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Block));
    assert_eq!(w.counters.ipis_sent, 3, "every other online CPU");
    for c in 1..4u16 {
        sysvec_call_function(&mut w, c, &mut fx);
    }
    for c in 0..4 {
        assert!(w.cpus[c].tlb.lookup(KERNEL_TAG, KVA).is_none());
        assert!(w.cpus[c].tlb.lookup(KERNEL_TAG, KVA + PAGE_SIZE).is_none());
        assert!(w.cpus[c]
            .tlb
            .lookup(KERNEL_TAG, KVA + 40 * PAGE_SIZE)
            .is_some());
    }
    assert_eq!(w.counters.invlpg, 8, "2 pages on each of 4 CPUs");
    assert_eq!(w.counters.irq_cal, [0, 1, 1, 1]);
    assert_eq!(w.counters.irq_tlb, [0, 0, 0, 0]);
}

/// `arch_tlbbatch_add_pending` bumps the mm's generation and collects its
/// `mm_cpumask`; `arch_tlbbatch_flush` then sends `flush_tlb_multi` to that
/// mask with a `TLB_FLUSH_ALL`, `mm = NULL` info (lazy CPUs filtered:
/// `freed_tables` is false), and empties the batch. A batch with only
/// this CPU flushes locally, no IPI.
#[test]
fn tlbbatch_flush_ipis_the_collected_mask() {
    let mut w = world(&[]);
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, 0, vec![], false);
    let mut fx = Effects::default();
    for c in [0, 2] {
        switch_mm_irqs_off(&mut w, c, mm, &mut fx);
    }
    let gen = *w.mms[mm as usize].tlb_gen;
    let mut batch = ArchTlbflushUnmapBatch {
        cpumask: CpuMask::new(4),
        unmapped_pages: false,
    };
    arch_tlbbatch_add_pending(&mut w, &mut batch, mm, &mut fx);
    assert_eq!(*w.mms[mm as usize].tlb_gen, gen + 1);
    assert!(batch.unmapped_pages);
    assert_eq!(batch.cpumask.iter().collect::<Vec<_>>(), [0, 2]);
    let mut f = ArchTlbbatchFlush::new(batch);
    assert!(matches!(f.step(&mut w, 0, t, &mut fx), Flow::Yield));
    let call = smp_call(f.step(&mut w, 0, t, &mut fx));
    assert_eq!(call.mask.iter().collect::<Vec<_>>(), [0, 2]);
    assert_eq!(call.cond, Cond::ShouldFlushTlb);
    assert!(f.batch.cpumask.is_empty(), "cpumask_clear(&batch->cpumask)");
    assert_eq!(w.counters.tlbbatch_flushes, 1);
    let info = *w.flush_info(f.info.unwrap());
    assert_eq!((info.mm, info.end), (None, TLB_FLUSH_ALL));
    assert!(!info.freed_tables);
    assert!(matches!(f.step(&mut w, 0, t, &mut fx), Flow::Return));
    assert_eq!(w.cpus[0].preempt_count, 0);
    // Only this CPU: flush_tlb_func here, no IPI.
    let mut batch = ArchTlbflushUnmapBatch {
        cpumask: CpuMask::new(4),
        unmapped_pages: false,
    };
    batch.cpumask.set(0);
    let mut f = ArchTlbbatchFlush::new(batch);
    f.step(&mut w, 0, t, &mut fx);
    let before = w.counters.full_flushes;
    assert!(matches!(f.step(&mut w, 0, t, &mut fx), Flow::Yield));
    assert_eq!(w.counters.ipis_sent, 0);
    assert_eq!(w.counters.full_flushes, before + 1, "a local full flush");
}

/// With INVLPGB, `arch_tlbbatch_flush` of a batch with `unmapped_pages`
/// is one `invlpgb_flush_all_nonglobals()` (+ TLBSYNC) and no IPI, even
/// with other CPUs in the batch.
#[test]
fn tlbbatch_flush_with_invlpgb_broadcasts() {
    let mut w = world(&["x86.invlpgb=true"]);
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, 0, vec![], false);
    let mut fx = Effects::default();
    for c in [0, 1, 2, 3] {
        switch_mm_irqs_off(&mut w, c, mm, &mut fx);
    }
    let mut batch = ArchTlbflushUnmapBatch {
        cpumask: CpuMask::new(4),
        unmapped_pages: false,
    };
    arch_tlbbatch_add_pending(&mut w, &mut batch, mm, &mut fx);
    let mut f = ArchTlbbatchFlush::new(batch);
    f.step(&mut w, 0, t, &mut fx);
    assert!(matches!(f.step(&mut w, 0, t, &mut fx), Flow::Yield));
    assert_eq!((w.counters.invlpgb, w.counters.tlbsync), (1, 1));
    assert_eq!(w.counters.ipis_sent, 0);
    assert!(!f.batch.unmapped_pages);
}

/// Past the ceiling every target runs `do_flush_tlb_all`: the whole TLB,
/// global kernel entries included, one `full_flushes` each (4 CPUs).
#[test]
fn past_the_ceiling_every_cpu_drops_every_entry() {
    let mut w = world(&[]);
    let t = w.spawn(INIT_MM, 0, vec![], false);
    for c in 0..4 {
        kernel_entry(&mut w, c, KVA + 40 * PAGE_SIZE);
    }
    let (_, flow) = kernel_flush(&mut w, t, 34);
    let mut call = smp_call(flow);
    let mut fx = Effects::default();
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Block));
    for c in 1..4u16 {
        sysvec_call_function(&mut w, c, &mut fx);
    }
    for c in 0..4 {
        let tlb = &mut w.cpus[c].tlb;
        assert!(tlb.lookup(KERNEL_TAG, KVA + 40 * PAGE_SIZE).is_none());
    }
    assert_eq!(w.counters.full_flushes, 4);
    assert_eq!(w.counters.invlpg, 0);
}

/// With INVLPGB the kernel range is broadcast, no IPI: one INVLPGB per
/// `INVLPGB_COUNT_MAX` (8) pages, rounded up (33 pages: 5), then one
/// TLBSYNC; past the ceiling one INVLPGB for everything. Every CPU drops
/// the range's global entries and keeps the others.
#[test]
fn invlpgb_flushes_the_kernel_range_without_ipis() {
    for (pages, invlpgb) in [(1u64, 1u64), (8, 1), (9, 2), (33, 5), (34, 1)] {
        let mut w = world(&["x86.invlpgb=true"]);
        let t = w.spawn(INIT_MM, 0, vec![], false);
        for c in 0..4 {
            kernel_entry(&mut w, c, KVA);
            kernel_entry(&mut w, c, KVA + 8 * PAGE_SIZE);
            kernel_entry(&mut w, c, KVA + 40 * PAGE_SIZE);
        }
        let (_, flow) = kernel_flush(&mut w, t, pages);
        assert!(matches!(flow, Flow::Yield), "{pages} pages");
        assert_eq!(w.counters.ipis_sent, 0);
        assert_eq!((w.counters.invlpgb, w.counters.tlbsync), (invlpgb, 1));
        for c in 0..4 {
            let tlb = &mut w.cpus[c].tlb;
            assert!(tlb.lookup(KERNEL_TAG, KVA).is_none(), "{pages} pages");
            let ninth = tlb.lookup(KERNEL_TAG, KVA + 8 * PAGE_SIZE).is_some();
            assert_eq!(ninth, pages < 9, "{pages} pages: the 9th page");
            let kept = tlb.lookup(KERNEL_TAG, KVA + 40 * PAGE_SIZE).is_some();
            assert_eq!(kept, pages < 34, "{pages} pages");
        }
    }
}

/// After the targets ran it, `put_flush_tlb_info` frees the per-CPU
/// struct and `guard(preempt)` ends: preemptible again, and the next
/// flush from this CPU can take the struct.
#[test]
fn done_frees_the_info_and_ends_the_preempt_guard() {
    let mut w = world(&[]);
    let t = w.spawn(INIT_MM, 0, vec![], false);
    let (mut f, flow) = kernel_flush(&mut w, t, 2);
    assert!(w.cpus[0].flush_info_busy);
    let mut call = smp_call(flow);
    let mut fx = Effects::default();
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Block));
    for c in 1..4u16 {
        sysvec_call_function(&mut w, c, &mut fx);
    }
    assert!(matches!(call.step(&mut w, 0, &mut fx), Flow::Return));
    assert!(matches!(f.step(&mut w, 0, t, &mut fx), Flow::Return));
    assert_eq!(w.cpus[0].preempt_count, 0);
    assert!(!w.cpus[0].flush_info_busy);
    assert_eq!(w.counters.kernel_range_flushes, 1);
}
