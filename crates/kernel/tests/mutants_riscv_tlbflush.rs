//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `arch/riscv/tlbflush.rs` mutated in full
//! (arch/riscv/mm/tlbflush.c with seed (d), arch/riscv/include/asm/tlb.h's
//! `tlb_flush`, `exit_mmap`'s flush of an mm the model keeps, the SBI remote
//! fence and the unmap batch). See docs/mutants.md. Every expected value is
//! derived in a comment from the kernel code the function models.

mod common;

use kernel::arch::riscv::context::switch_mm as riscv_switch_mm;
use kernel::arch::riscv::tlbflush::{
    __ipi_flush_tlb_range_asid, arch_tlbbatch_add_pending, exit_mmap, local_flush_tlb_range_asid,
    tlb_flush, ArchTlbflushUnmapBatch, FlushTlbRange, FlushTlbRangeData, Pc, FLUSH_TLB_NO_ASID,
};
use kernel::effects::Charge;
use kernel::world::{Flow, Frame};
use kernel::{Effects, Label, MmId, World, INIT_MM, TLB_FLUSH_ALL};
use machine::scenario::Arch;
use machine::tlb::TlbHit;
use machine::{Cost, CpuId, CpuMask, PAGE_SIZE};

const VA: u64 = 0x4000_0000;
/// The hardware ASID given to the mms whose flushes are driven here.
const ASID: u16 = 5;
/// An ASID no mm of these worlds has.
const OTHER: u16 = 7;

/// A RISC-V world of `cpus` harts with `sets` applied, and `n` mms.
fn riscv(cpus: usize, sets: &[&str], n: usize) -> (World, Vec<MmId>) {
    common::world_mms(Arch::Riscv, cpus as u32, sets, n)
}

/// A 4-hart world with one mm of ASID [`ASID`] (16-bit ASIDs: generation
/// `1 << 16`, index 5) in the mm_cpumask of harts 0..=2.
fn world(sets: &[&str]) -> (World, MmId) {
    let (mut w, mm) = common::riscv_mm_on_harts_0_to_2(sets);
    *w.mms[mm as usize].context_id = (1 << 16) | u64::from(ASID);
    (w, mm)
}

fn hit(pfn: u32) -> TlbHit {
    common::tlb_hit(1, pfn, true)
}

use common::traced;

fn data(mm: Option<MmId>, asid: u32, start: u64, size: u64) -> FlushTlbRangeData {
    FlushTlbRangeData {
        mm,
        asid,
        start,
        size,
        stride: PAGE_SIZE,
    }
}

/// Step `f` on hart 0 to its return (a call of the IPI path is taken as
/// done: its frame returns at once): the IPI mask it sent, if any
/// (get_cpu() held while it sends, put_cpu() at the end).
fn drive(w: &mut World, f: &mut FlushTlbRange, fx: &mut Effects) -> Option<Vec<CpuId>> {
    let mut sent = None;
    for _ in 0..10 {
        match f.step(w, 0, 0, fx) {
            Flow::Call(Frame::SmpCallFunctionManyCond(c)) => {
                assert_eq!(w.cpus[0].preempt_count, 1);
                sent = Some(c.mask.iter().collect());
            }
            Flow::Return => {
                assert_eq!(w.cpus[0].preempt_count, 0);
                return sent;
            }
            _ => {}
        }
    }
    panic!("flush did not finish");
}

// ---------------------------------------------------------------------------
// local_flush_tlb_range_asid
// ---------------------------------------------------------------------------

/// `local_flush_tlb_range_asid(start, size, stride, asid)` below the
/// threshold: `local_flush_tlb_range_threshold_asid` issues one
/// `sfence.vma va, asid` for each of the `size / stride` pages from
/// `start`: a one-page flush drops that page, not the next one, and no
/// other ASID's entry of the page.
#[test]
fn a_one_page_flush_drops_that_page_only() {
    let (mut w, mm) = world(&[]);
    for va in [VA, VA + PAGE_SIZE] {
        w.cpus[0].tlb.fill(ASID, va, hit(1));
    }
    w.cpus[0].tlb.fill(OTHER, VA, hit(2));
    let mut fx = traced();
    local_flush_tlb_range_asid(
        &mut w,
        0,
        data(Some(mm), ASID.into(), VA, PAGE_SIZE),
        &mut fx,
    );
    let t = &mut w.cpus[0].tlb;
    assert!(t.lookup(ASID, VA).is_none());
    assert!(
        t.lookup(ASID, VA + PAGE_SIZE).is_some(),
        "the next page kept"
    );
    assert!(t.lookup(OTHER, VA).is_some(), "another ASID kept");
    assert_eq!((w.counters.sfence_vma, w.counters.full_flushes), (1, 0));
    let label = Label::SfenceVma {
        asid: ASID,
        va: VA,
        all: false,
    };
    assert!(fx.labels.contains(&label), "{:?}", fx.labels);
}

/// A kernel flush (`FLUSH_TLB_NO_ASID`) below the threshold is
/// `local_flush_tlb_page(va)` for each page in turn: `sfence.vma va` with no
/// ASID drops the page in every ASID. Two pages from `VA`: `VA` and
/// `VA + PAGE_SIZE` go in both ASIDs, `VA + 2 * PAGE_SIZE` and
/// `VA - PAGE_SIZE` stay; two `sfence.vma` counted.
#[test]
fn a_kernel_flush_walks_its_pages_in_every_asid() {
    let (mut w, _) = world(&[]);
    for va in [VA - PAGE_SIZE, VA, VA + PAGE_SIZE, VA + 2 * PAGE_SIZE] {
        w.cpus[0].tlb.fill(ASID, va, hit(1));
        w.cpus[0].tlb.fill(OTHER, va, hit(2));
    }
    let mut fx = Effects::default();
    let d = data(None, FLUSH_TLB_NO_ASID, VA, 2 * PAGE_SIZE);
    local_flush_tlb_range_asid(&mut w, 0, d, &mut fx);
    let t = &mut w.cpus[0].tlb;
    for asid in [ASID, OTHER] {
        assert!(t.lookup(asid, VA).is_none(), "asid {asid}");
        assert!(t.lookup(asid, VA + PAGE_SIZE).is_none(), "asid {asid}");
        assert!(t.lookup(asid, VA + 2 * PAGE_SIZE).is_some(), "asid {asid}");
        assert!(t.lookup(asid, VA - PAGE_SIZE).is_some(), "asid {asid}");
    }
    assert_eq!((w.counters.sfence_vma, w.counters.full_flushes), (2, 0));
}

// ---------------------------------------------------------------------------
// The mask-clearing patch after a whole-ASID flush
// ---------------------------------------------------------------------------

/// `riscv.cpumask_clear_on_flush_all`: after `local_flush_tlb_all_asid`,
/// `if (mm && mm != current->active_mm) cpumask_clear_cpu(cpu,
/// mm_cpumask(mm))`. Hart 0 runs A (A is its loaded mm): its bit stays;
/// hart 1 ran A and now runs B: its bit goes, counted once. Without the
/// patch no bit goes.
#[test]
fn a_whole_asid_flush_clears_the_bit_of_a_hart_that_left_the_mm() {
    for patch in [true, false] {
        let set = format!("riscv.cpumask_clear_on_flush_all={patch}");
        let (mut w, m) = riscv(3, &[set.as_str()], 2);
        let (a, b) = (m[0], m[1]);
        let mut fx = Effects::default();
        riscv_switch_mm(&mut w, 0, a, &mut fx);
        riscv_switch_mm(&mut w, 1, a, &mut fx);
        riscv_switch_mm(&mut w, 1, b, &mut fx);
        assert!(w.mms[a as usize].cpumask.test(0) && w.mms[a as usize].cpumask.test(1));
        let asid = u32::from(w.asids.idx(*w.mms[a as usize].context_id));
        let d = data(Some(a), asid, 0, TLB_FLUSH_ALL);
        local_flush_tlb_range_asid(&mut w, 0, d, &mut fx);
        assert!(
            w.mms[a as usize].cpumask.test(0),
            "hart 0 runs A (patch {patch})"
        );
        assert_eq!(w.counters.cpumask_cleared, 0, "patch {patch}");
        local_flush_tlb_range_asid(&mut w, 1, d, &mut fx);
        assert_eq!(w.mms[a as usize].cpumask.test(1), !patch, "hart 1 left A");
        assert_eq!(w.counters.cpumask_cleared, u64::from(patch));
        assert!(w.mms[b as usize].cpumask.test(1), "B's mask untouched");
    }
}

// ---------------------------------------------------------------------------
// asm/tlb.h: tlb_flush, and exit_mmap's flush_tlb_mm
// ---------------------------------------------------------------------------

/// asm/tlb.h `tlb_flush`: a gather that freed no page table flushes
/// `[tlb->start, tlb->end)` (`flush_tlb_mm_range`), not the whole mm; one
/// that freed a table flushes the mm (`flush_tlb_mm`), unless
/// `inject.riscv_leaf_only_table_flush`; an empty gather flushes nothing.
#[test]
fn tlb_flush_flushes_the_gathered_range_unless_tables_were_freed() {
    let size_of = |w: &mut World, t| match tlb_flush(w, t) {
        Flow::Call(Frame::RiscvFlushTlbRange(f)) => Some((f.mm, f.d.start, f.d.size)),
        Flow::Continue => None,
        _ => panic!("tlb_flush neither called __flush_tlb_range nor went on"),
    };
    for inject in [false, true] {
        let set = format!("inject.riscv_leaf_only_table_flush={inject}");
        let (mut w, m) = riscv(2, &[set.as_str()], 1);
        let mm = m[0];
        let t = w.spawn(mm, 0, vec![], false);
        w.tasks[t as usize].gather.tlb_gather_mmu(mm);
        assert_eq!(size_of(&mut w, t), None, "nothing gathered");
        let g = &mut w.tasks[t as usize].gather;
        g.remove_page(11, VA + PAGE_SIZE);
        g.remove_page(12, VA + 2 * PAGE_SIZE);
        assert_eq!(
            size_of(&mut w, t),
            Some((Some(mm), VA + PAGE_SIZE, 2 * PAGE_SIZE)),
            "pages only (inject {inject})"
        );
        w.tasks[t as usize].gather.remove_table(9, VA);
        let expect = if inject {
            (Some(mm), VA, 3 * PAGE_SIZE)
        } else {
            (Some(mm), 0, TLB_FLUSH_ALL)
        };
        assert_eq!(
            size_of(&mut w, t),
            Some(expect),
            "freed a table (inject {inject})"
        );
    }
}

/// kernel/exit.c → `exit_mmap` → `tlb_finish_mmu` (`fullmm`) → `flush_tlb_mm`
/// for an mm the model does not tear down: only the last user of a user mm
/// on RISC-V flushes, once (`us.sub` marks it done), the whole mm
/// (`__flush_tlb_range(mm, mm_cpumask(mm), 0, FLUSH_TLB_MAX_SIZE, ..)`).
#[test]
fn exit_mmap_flushes_the_mm_once_for_its_last_user_only() {
    // Last user of a RISC-V user mm: one whole-mm flush, then no more.
    let (mut w, m) = riscv(2, &[], 1);
    let t = w.spawn(m[0], 0, vec![], false);
    match exit_mmap(&mut w, t) {
        Some(Flow::Call(Frame::RiscvFlushTlbRange(f))) => {
            assert_eq!((f.mm, f.d.start, f.d.size), (Some(m[0]), 0, TLB_FLUSH_ALL));
            assert_eq!(f.pc, Pc::Start);
        }
        _ => panic!("the last user's exit flushes its mm"),
    }
    assert_eq!(w.tasks[t as usize].us.sub, 1);
    assert!(exit_mmap(&mut w, t).is_none(), "flushed already");
    // Another task still uses the mm: mmput drops a reference only.
    let (mut w, m) = riscv(2, &[], 1);
    let t = w.spawn(m[0], 0, vec![], false);
    w.spawn(m[0], 1, vec![], false);
    assert!(exit_mmap(&mut w, t).is_none(), "not the last user");
    assert_eq!(w.tasks[t as usize].us.sub, 0);
    // A kernel thread (init_mm) has no mm to tear down.
    let (mut w, _) = riscv(2, &[], 0);
    let k = w.spawn(INIT_MM, 0, vec![], false);
    assert!(exit_mmap(&mut w, k).is_none(), "init_mm");
    // Not RISC-V: the architecture's own exit path.
    for arch in [Arch::X86, Arch::Arm64] {
        let (mut w, mms) = common::world_mms(arch, 2, &[], 1);
        let mm = mms[0];
        let t = w.spawn(mm, 0, vec![], false);
        assert!(exit_mmap(&mut w, t).is_none(), "{arch:?}");
        assert_eq!(w.tasks[t as usize].us.sub, 0);
    }
}

// ---------------------------------------------------------------------------
// The flush IPI's drain of the deferred queue
// ---------------------------------------------------------------------------

/// Seed (d)'s `__ipi_flush_tlb_range_asid`: the IPI's own range, then, with
/// `need_tlb_flush` set, the whole queue (`local_tlb_flush_queue_drain`).
/// Hart 2 has the flush of `VA + PAGE_SIZE` queued: an IPI for `VA` drops
/// both, keeps `VA + 2 * PAGE_SIZE`, empties the queue and clears the flag.
#[test]
fn the_flush_ipi_drains_the_queue_when_need_tlb_flush_is_set() {
    let (mut w, mm) = world(&["riscv.defer_flush_to_context_switch=true"]);
    w.cpus[2].riscv.loaded_asid = ASID;
    for va in [VA, VA + PAGE_SIZE, VA + 2 * PAGE_SIZE] {
        w.cpus[2].tlb.fill(ASID, va, hit(1));
    }
    let queued = data(Some(mm), ASID.into(), VA + PAGE_SIZE, PAGE_SIZE);
    w.cpus[2].riscv.queue.push(queued);
    w.cpus[2].riscv.need_flush = true;
    let mut fx = Effects::default();
    let d = data(Some(mm), ASID.into(), VA, PAGE_SIZE);
    __ipi_flush_tlb_range_asid(&mut w, 2, d, &mut fx);
    let t = &mut w.cpus[2].tlb;
    assert!(t.lookup(ASID, VA).is_none(), "the IPI's page");
    assert!(t.lookup(ASID, VA + PAGE_SIZE).is_none(), "the queued page");
    assert!(t.lookup(ASID, VA + 2 * PAGE_SIZE).is_some());
    let h = &w.cpus[2].riscv;
    assert!(h.queue.is_empty() && !h.need_flush);
    let c = &w.counters;
    assert_eq!(
        (c.defer_drains, c.deferred_applied, c.sfence_vma),
        (1, 1, 2)
    );
}

// ---------------------------------------------------------------------------
// Seed (d): the targets kept in the IPI mask
// ---------------------------------------------------------------------------

/// `should_ipi_flush`: a target whose `loaded_asid` is the flush's ASID is
/// IPI'd, not queued. Hart 1 runs a task of the mm (counted
/// `defer_ipi_running`), hart 2 idles with the ASID still loaded
/// (`defer_ipi_loaded`); hart 3 is not in the mask. Nothing is deferred.
#[test]
fn a_target_running_the_asid_is_kept_and_counted_running() {
    let (mut w, mm) = world(&["riscv.defer_flush_to_context_switch=true"]);
    let t1 = w.spawn(mm, 1, vec![], false);
    w.cpus[1].curr = Some(t1);
    w.cpus[1].riscv.loaded_asid = ASID;
    w.cpus[2].riscv.loaded_asid = ASID;
    for round in 1..=2u64 {
        let mut f = FlushTlbRange::new(&w, Some(mm), VA, VA + PAGE_SIZE);
        assert_eq!(
            drive(&mut w, &mut f, &mut Effects::default()),
            Some(vec![0, 1, 2])
        );
        let c = &w.counters;
        assert_eq!((c.defer_ipi_running, c.defer_ipi_loaded), (round, round));
        assert_eq!((c.deferred_flushes, c.defer_enqueues), (0, 0));
    }
}

// ---------------------------------------------------------------------------
// SBI remote fences
// ---------------------------------------------------------------------------

/// `riscv.rfence=sbi`: `sbi_remote_sfence_vma_asid(cmask, ..)`: one ecall;
/// every hart of the mask runs the `sfence.vma` (hart 0's own included),
/// hart 3 (not in the mask) keeps its entry. The ecall names the two other
/// harts (`SbiRfence { harts: 2 }`, two `SbiRfenceHart` charges).
#[test]
fn the_sbi_rfence_flushes_the_mask_and_counts_the_other_harts() {
    let (mut w, mm) = world(&["riscv.rfence=sbi"]);
    for c in 0..4 {
        w.cpus[c].tlb.fill(ASID, VA, hit(1));
    }
    let mut fx = traced();
    let mut f = FlushTlbRange::new(&w, Some(mm), VA, VA + PAGE_SIZE);
    assert_eq!(drive(&mut w, &mut f, &mut fx), None, "an ecall, no IPI");
    for c in 0..3 {
        assert!(w.cpus[c].tlb.lookup(ASID, VA).is_none(), "hart {c}");
    }
    assert!(
        w.cpus[3].tlb.lookup(ASID, VA).is_some(),
        "hart 3 not in the mask"
    );
    assert!(
        fx.labels.contains(&Label::SbiRfence { harts: 2 }),
        "{:?}",
        fx.labels
    );
    let per_hart = fx
        .charges
        .iter()
        .filter_map(|c| match c {
            Charge::Cost(Cost::SbiRfenceHart, n) => Some(*n),
            _ => None,
        })
        .sum::<u32>();
    assert_eq!(per_hart, 2);
    assert_eq!((w.counters.sbi_rfence, w.counters.sfence_vma), (1, 3));
}

// ---------------------------------------------------------------------------
// The unmap batch (reclaim's deferred flush)
// ---------------------------------------------------------------------------

/// `arch_tlbbatch_add_pending` ORs each mm's `mm_cpumask` into the batch;
/// `arch_tlbbatch_flush` is `__flush_tlb_range(&batch->cpumask,
/// FLUSH_TLB_NO_ASID, 0, FLUSH_TLB_MAX_SIZE, PAGE_SIZE)`: A on {0, 2} and
/// B on {1} give an IPI to {0, 1, 2} (hart 3 never ran either), every ASID
/// flushed; each batch flush counted once.
#[test]
fn the_unmap_batch_flushes_the_union_of_the_masks() {
    let (mut w, m) = riscv(4, &[], 2);
    let (a, b) = (m[0], m[1]);
    w.mms[a as usize].cpumask.set(0);
    w.mms[a as usize].cpumask.set(2);
    w.mms[b as usize].cpumask.set(1);
    for round in 1..=2u64 {
        let mut batch = ArchTlbflushUnmapBatch {
            cpumask: CpuMask::new(4),
        };
        arch_tlbbatch_add_pending(&w, &mut batch, a);
        arch_tlbbatch_add_pending(&w, &mut batch, b);
        assert_eq!(batch.cpumask.iter().collect::<Vec<_>>(), [0, 1, 2]);
        let mut f = FlushTlbRange::tlbbatch(&mut w, batch);
        assert_eq!(w.counters.tlbbatch_flushes, round);
        assert_eq!(
            (f.mm, f.d.asid, f.d.size),
            (None, FLUSH_TLB_NO_ASID, TLB_FLUSH_ALL)
        );
        assert_eq!(
            drive(&mut w, &mut f, &mut Effects::default()),
            Some(vec![0, 1, 2])
        );
    }
}
