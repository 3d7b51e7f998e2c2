//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `mm/mmu_gather.rs` mutated in full
//! (mm/mmu_gather.c and include/asm-generic/tlb.h: the gather's range and
//! levels, `tlb_finish_mmu`, `tlb_flush_mmu_*`, the RCU table freeing,
//! `tlb_remove_table_sync_one` / `_sync_mm` / `_sync_rcu`,
//! `tlb_remove_table_one`, `tlb_end_vma` and invariant 3 at the free). See
//! docs/mutants.md. Every expected value is derived in a comment from the
//! kernel code the function models.

mod common;

use kernel::effects::Charge;
use kernel::kernel_smp::CallFunc;
use kernel::mm::mmu_gather::{
    check_unshared_table_reuse, rcu_quiescent_state, tlb_end_vma, tlb_flush_mmu_free_task,
    tlb_flush_mmu_tlbonly, tlb_gather_mmu, tlb_remove_table_free, tlb_remove_table_sync,
    tlb_remove_table_sync_mm, tlb_remove_table_sync_rcu, MmuGather, OnePc, TlbRemoveTableOne,
};
use kernel::world::{Flow, Frame};
use kernel::{Effects, Label, MmId, TaskId, World};
use machine::mem::FrameUse;
use machine::scenario::Arch;
use machine::{Cost, CpuId, Pfn, PAGE_SIZE};

const VA: u64 = 0x7f00_0000_0000;

/// An x86 world of `cpus` CPUs with `sets` applied and `n` new mms.
fn x86(cpus: u32, sets: &[&str], n: usize) -> (World, Vec<MmId>) {
    common::world_mms(Arch::X86, cpus, sets, n)
}

/// The sum of the charges of class `c` in `fx`.
fn cost(fx: &Effects, c: Cost) -> u32 {
    fx.charges
        .iter()
        .map(|ch| match ch {
            Charge::Cost(k, n) if *k == c => *n,
            _ => 0,
        })
        .sum()
}

/// A fresh page-table frame.
fn table(w: &mut World) -> Pfn {
    w.mem.alloc(FrameUse::Table(1)).unwrap()
}

/// A task of `mm` on CPU 0 whose gather (not fullmm) holds one PTE table
/// (`pte_free_tlb` of the table of `VA`'s 2 MiB region).
fn task_with_table(w: &mut World, mm: MmId) -> (TaskId, Pfn) {
    let t = w.spawn(mm, 0, vec![], false);
    tlb_gather_mmu(w, t, mm, false);
    let pt = table(w);
    w.tasks[t as usize].gather.remove_table(pt, VA);
    (t, pt)
}

// ---------------------------------------------------------------------------
// The gather's range
// ---------------------------------------------------------------------------

/// `pmd_free_tlb` → `tlb_flush_pud_range(tlb, address, PAGE_SIZE)`: the
/// range grows by one page at the PMD table's region, as for a PTE table
/// (`tlb_flush_pmd_range(tlb, address, PAGE_SIZE)`); the level cleared is
/// the PUD (stride 1 GiB), `freed_tables` is set and the table waits in
/// the batch. At region 1 GiB: `[1G, 1G + 4K)`. Kills
/// `remove_pmd_table`'s `region + PAGE_SIZE` → `region * PAGE_SIZE` (the
/// range would end at 4 TiB) and → `-` (it would end below its start);
/// `remove_pud_table` → `()` (nothing gathered: no level, no table).
#[test]
fn a_freed_pmd_or_pud_table_grows_the_range_by_one_page_at_its_region() {
    let region = 1u64 << 30;
    let mut g = MmuGather::default();
    g.tlb_gather_mmu(1);
    g.remove_pmd_table(7, region);
    assert_eq!((g.start, g.end), (region, region + PAGE_SIZE));
    assert!(g.freed_tables && g.cleared_puds && !g.cleared_pmds);
    assert_eq!(g.tables, [7]);
    assert_eq!(g.tlb_get_unmap_shift(), 30);
    // pud_free_tlb: the same (the model has no P4D level).
    let mut g = MmuGather::default();
    g.tlb_gather_mmu(1);
    g.remove_pud_table(8, region);
    assert_eq!((g.start, g.end), (region, region + PAGE_SIZE));
    assert!(g.freed_tables && g.cleared_puds);
    assert_eq!(g.tables, [8]);
}

// ---------------------------------------------------------------------------
// tlb_flush_mmu_free: the batches go after the flush
// ---------------------------------------------------------------------------

/// `tlb_flush_mmu_free` → `tlb_batch_pages_flush` + `tlb_table_flush`: the
/// gathered page goes back (`put_page` of its last reference: freed),
/// priced `FreePage` 1 and labelled `FreePages { n: 1, first }`; the table
/// goes through `tlb_remove_table_free` (no RCU reader: freed at once),
/// priced `FreeTable` 1. Then `__tlb_reset_range`: the range, the levels,
/// `freed_tables` and `unshared_tables` start over, while
/// `fully_unshared_tables` survives (`tlb_flush_unshared_tables` reads it
/// at the finish). Kills `tlb_flush_mmu_free_task` → `()` (pass 2b), and
/// fails on `tlb_flush_mmu_free` → `()` and `free_batches` → `()` (the
/// suite catches those too).
#[test]
fn the_free_step_frees_both_batches_and_resets_the_range() {
    let (mut w, mms) = x86(2, &[], 1);
    let (t, pt) = task_with_table(&mut w, mms[0]);
    let page = w.mem.alloc(FrameUse::Anon).unwrap();
    let g = &mut w.tasks[t as usize].gather;
    g.remove_page(page, VA + (4 << 20));
    g.unshare_pmd_table(1 << 30, true);
    let mut fx = common::traced();
    tlb_flush_mmu_free_task(&mut w, t, &mut fx);
    assert_eq!(w.mem.usage(page), FrameUse::Free);
    assert_eq!(w.mem.usage(pt), FrameUse::Free);
    assert_eq!(
        (cost(&fx, Cost::FreePage), cost(&fx, Cost::FreeTable)),
        (1, 1)
    );
    assert!(fx.labels.contains(&Label::FreePages { n: 1, first: page }));
    assert!(fx.labels.contains(&Label::FreeTable { pfn: pt }));
    let g = &w.tasks[t as usize].gather;
    assert!(g.pages.is_empty() && g.tables.is_empty());
    assert_eq!((g.start, g.end), (u64::MAX, 0));
    assert!(!g.freed_tables && !g.unshared_tables);
    assert!(!g.cleared_ptes && !g.cleared_pmds && !g.cleared_puds);
    assert!(g.fully_unshared_tables, "kept for tlb_finish_mmu");
    assert!(!g.needs_flush());
}

/// `tlb_table_flush` does nothing without tables (`if (*batch)`): a gather
/// of pages only, freed while CPU 1 is in a read-side section, queues no
/// RCU batch (an empty one would count a table batch at CPU 1's quiescent
/// state); a gather with a table does queue one, on CPU 1. Fails on
/// `free_batches`' `!tlb.tables.is_empty()` with the `!` deleted (which
/// queues the empty batch and leaves the table in the gather; the suite
/// catches it too).
#[test]
fn only_a_gather_with_tables_queues_an_rcu_batch() {
    let (mut w, mms) = x86(2, &[], 1);
    let t = w.spawn(mms[0], 0, vec![], false);
    tlb_gather_mmu(&mut w, t, mms[0], false);
    let page = w.mem.alloc(FrameUse::Anon).unwrap();
    w.tasks[t as usize].gather.remove_page(page, VA);
    w.local_irq_disable(1);
    let mut fx = Effects::default();
    tlb_flush_mmu_free_task(&mut w, t, &mut fx);
    assert_eq!(
        w.mem.usage(page),
        FrameUse::Free,
        "pages need no grace period"
    );
    assert!(w.rcu_batches.is_empty());
    let pt = table(&mut w);
    w.tasks[t as usize].gather.remove_table(pt, VA);
    tlb_flush_mmu_free_task(&mut w, t, &mut fx);
    assert!(w.tasks[t as usize].gather.tables.is_empty());
    assert_eq!(w.rcu_batches.len(), 1);
    assert_eq!(w.rcu_batches[0].tables, [pt]);
    assert_eq!(w.mem.usage(pt), FrameUse::Table(1), "until CPU1's QS");
    rcu_quiescent_state(&mut w, 1, &mut fx);
    assert_eq!(w.mem.usage(pt), FrameUse::Free);
    assert_eq!(w.counters.rcu_table_batches, 1);
}

// ---------------------------------------------------------------------------
// RCU table freeing: who holds a batch back
// ---------------------------------------------------------------------------

/// `tlb_remove_table_free` → `call_rcu`: a CPU with IRQs off is in an
/// RCU read-side section (GUP-fast's `local_irq_save`), so a batch freed
/// while only CPU 1 has IRQs off waits for CPU 1's quiescent state, and
/// CPU 2's (never in a section) does not free it. The same for a CPU with
/// preemption off only. Kills `rcu_readers`' `irqs_off > 0` → `< 0`
/// (pass 1 survivor `249:23`: CPU 1 would not count, the batch freed at
/// once; in `mmu_gather.rs`'s test CPU 3, with preemption off at the same
/// time, holds the batch just as long); also fails on its twin
/// `preempt_count > 0` → `< 0`, which that test catches too.
#[test]
fn one_reader_alone_holds_the_batch_back() {
    for irqs in [true, false] {
        let (mut w, mms) = x86(4, &[], 1);
        let mut fx = Effects::default();
        let in_use = w.mem.in_use();
        let t = table(&mut w);
        let reader: CpuId = if irqs { 1 } else { 3 };
        if irqs {
            w.local_irq_disable(reader);
        } else {
            w.preempt_disable(reader);
        }
        tlb_remove_table_free(&mut w, mms[0], vec![t], &mut fx);
        assert_eq!(w.mem.in_use(), in_use + 1, "held back (irqs {irqs})");
        assert_eq!(w.rcu_batches.len(), 1);
        let waiting: Vec<CpuId> = w.rcu_batches[0].waiting.iter().collect();
        assert_eq!(waiting, [reader]);
        rcu_quiescent_state(&mut w, 2, &mut fx);
        assert_eq!(w.mem.in_use(), in_use + 1, "CPU2 was not a reader");
        rcu_quiescent_state(&mut w, reader, &mut fx);
        assert_eq!(w.mem.in_use(), in_use, "freed at the reader's QS");
        assert!(w.rcu_batches.is_empty());
        assert_eq!(w.counters.rcu_table_batches, 1);
    }
}

/// `rcu_quiescent_state` walks every batch: two batches held back by
/// different CPUs; CPU 1's quiescent state frees the first (index 0) and
/// keeps the second (index 1 after the `swap_remove`), then CPU 2's frees
/// it. One batch per grace period, two counted. Fails on the loop's `i +=
/// 1` → `-= 1` (underflows on the kept batch) and → `*= 1` (never moves
/// on: a timeout), and `rcu_table_batches += 1` → `*=` (0 stays 0), which
/// the suite catches too (pass 1).
#[test]
fn each_quiescent_state_frees_the_batches_it_completes() {
    let (mut w, mms) = x86(4, &[], 1);
    let mut fx = Effects::default();
    let in_use = w.mem.in_use();
    let (t1, t2) = (table(&mut w), table(&mut w));
    w.local_irq_disable(2);
    tlb_remove_table_free(&mut w, mms[0], vec![t2], &mut fx);
    w.local_irq_disable(1);
    tlb_remove_table_free(&mut w, mms[0], vec![t1], &mut fx);
    // The second batch waits on CPUs 1 and 2, the first on 2 only.
    assert_eq!(w.rcu_batches.len(), 2);
    rcu_quiescent_state(&mut w, 1, &mut fx);
    assert_eq!(w.rcu_batches.len(), 2, "each still waits on CPU2");
    rcu_quiescent_state(&mut w, 2, &mut fx);
    assert!(w.rcu_batches.is_empty());
    assert_eq!(w.mem.in_use(), in_use);
    assert_eq!(w.counters.rcu_table_batches, 2);
}

// ---------------------------------------------------------------------------
// tlb_remove_table_sync_rcu (synchronize_rcu)
// ---------------------------------------------------------------------------

/// `tlb_remove_table_sync_rcu()`: `synchronize_rcu()` (priced once as
/// `SynchronizeRcu`, counted in `table_sync_rcu`); with no other CPU in a
/// read-side section the grace period needs no one: no sleep, no batch.
/// With CPU 1's IRQs off, the caller (CPU 0) registers a grace period with
/// itself as the waiter, waiting on CPU 1 only (not on itself: it is the
/// one calling `synchronize_rcu`, even with preemption off here), and
/// must sleep; CPU 1's quiescent state ends it: the waiter's CPU is woken,
/// nothing is freed (its batch has no tables) and no table batch is
/// counted. Kills `tlb_remove_table_sync_rcu` → `true` / `false` and its
/// `table_sync_rcu += 1` → `-=` / `*=`; fails on `rcu_readers`' `c.id !=
/// except` → `==` (only the caller would count), which the suite catches.
#[test]
fn sync_rcu_waits_for_the_other_readers_only() {
    let (mut w, mms) = x86(4, &[], 1);
    let (t, _) = task_with_table(&mut w, mms[0]);
    let mut fx = common::traced();
    assert!(!tlb_remove_table_sync_rcu(&mut w, 0, t, &mut fx));
    assert_eq!(w.counters.table_sync_rcu, 1);
    assert_eq!(w.counters.table_sync_rcu_skipped, 0);
    assert_eq!(cost(&fx, Cost::SynchronizeRcu), 1);
    assert!(fx.labels.contains(&Label::TableSyncRcu { skipped: false }));
    assert!(w.rcu_batches.is_empty());
    // The caller itself in an atomic section: not a reader it waits for.
    w.preempt_disable(0);
    assert!(!tlb_remove_table_sync_rcu(&mut w, 0, t, &mut fx));
    assert!(w.rcu_batches.is_empty());
    w.preempt_enable(0);
    w.local_irq_disable(1);
    assert!(tlb_remove_table_sync_rcu(&mut w, 0, t, &mut fx));
    assert_eq!(w.counters.table_sync_rcu, 3);
    assert_eq!(cost(&fx, Cost::SynchronizeRcu), 3);
    assert_eq!(w.rcu_batches.len(), 1);
    let b = &w.rcu_batches[0];
    assert_eq!((b.mm, b.waiter), (mms[0], Some(t)));
    assert!(b.tables.is_empty());
    assert_eq!(b.waiting.iter().collect::<Vec<_>>(), [1]);
    let cpu = w.tasks[t as usize].cpu;
    fx.wakes.clear();
    rcu_quiescent_state(&mut w, 1, &mut fx);
    assert!(w.rcu_batches.is_empty());
    assert_eq!(fx.wakes.iter().map(|x| x.0).collect::<Vec<_>>(), [cpu]);
    assert_eq!(
        w.counters.rcu_table_batches, 0,
        "a waiter, not a table batch"
    );
}

/// Seed (b) patch 1/2: `tlb_remove_table_sync_rcu()` returns early when
/// `tlb_table_flush_implies_ipi_broadcast()` (here forced): no grace
/// period, no sleep even with a reader, counted as skipped, nothing priced.
/// Kills `table_sync_rcu_skipped += 1` → `-=` / `*=` and `→ true`.
#[test]
fn sync_rcu_skipped_under_the_seed() {
    let (mut w, mms) = x86(4, &["mm.force_skip_table_sync=true"], 1);
    let (t, _) = task_with_table(&mut w, mms[0]);
    w.local_irq_disable(1);
    let mut fx = common::traced();
    assert!(!tlb_remove_table_sync_rcu(&mut w, 0, t, &mut fx));
    assert_eq!(
        (w.counters.table_sync_rcu, w.counters.table_sync_rcu_skipped),
        (0, 1)
    );
    assert_eq!(cost(&fx, Cost::SynchronizeRcu), 0);
    assert!(fx.labels.contains(&Label::TableSyncRcu { skipped: true }));
    assert!(w.rcu_batches.is_empty());
}

// ---------------------------------------------------------------------------
// tlb_remove_table_one (the batch page allocation failed, no PT_RECLAIM)
// ---------------------------------------------------------------------------

/// Where `tlb_flush_mmu_tlbonly` goes: `tlb_remove_table_one` (the frame
/// [`TlbRemoveTableOne`], at its invalidate) only when the batch page
/// allocation failed (`mm.table_batch_alloc_fail`), `CONFIG_PT_RECLAIM` is
/// off (with it the fallback is `call_rcu`, the batch path) and the
/// gather holds a table (`tlb_remove_table` was called); else the
/// ordinary flush (x86 `tlb_flush`: `flush_tlb_mm_range` of the range,
/// `freed_tables` if a table was gathered). Kills the four mutants of
/// that condition (`&&` → `||` twice, each `!` deleted; the suite catches
/// the second `&&` → `||` too: it sends every table-less gather there).
#[test]
fn tlb_remove_table_one_only_when_the_batch_page_fails_without_pt_reclaim() {
    // (alloc fails, PT_RECLAIM, a table gathered) → tlb_remove_table_one?
    for (fail, reclaim, tables, one) in [
        (true, false, true, true),
        (true, false, false, false),
        (true, true, true, false),
        (false, false, true, false),
        (false, true, false, false),
    ] {
        let sets = [
            format!("mm.table_batch_alloc_fail={fail}"),
            format!("mm.pt_reclaim={}", if reclaim { "on" } else { "off" }),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (mut w, mms) = x86(2, &sets, 1);
        let t = w.spawn(mms[0], 0, vec![], false);
        tlb_gather_mmu(&mut w, t, mms[0], false);
        if tables {
            let pt = table(&mut w);
            w.tasks[t as usize].gather.remove_table(pt, VA);
        } else {
            w.tasks[t as usize].gather.remove_page(0, VA);
        }
        let case = format!("fail {fail} reclaim {reclaim} tables {tables}");
        match tlb_flush_mmu_tlbonly(&mut w, t, &mut Effects::default()) {
            Flow::Call(Frame::TlbRemoveTableOne(f)) => {
                assert!(one, "{case}");
                assert_eq!(f.pc, OnePc::Invalidate, "{case}");
            }
            Flow::Call(Frame::FlushTlbMmRange(f)) => {
                assert!(!one, "{case}");
                assert_eq!((f.mm, f.start), (mms[0], VA), "{case}");
                assert_eq!(f.end, VA + PAGE_SIZE, "{case}");
                assert_eq!(f.freed_tables, tables, "{case}");
            }
            _ => panic!("neither tlb_remove_table_one nor a flush: {case}"),
        }
    }
}

/// `tlb_remove_table_one`, no reader: `tlb_table_invalidate` (the gather's
/// flush, x86: `flush_tlb_mm_range` with `freed_tables`), then
/// `tlb_remove_table_sync_rcu()`: no one to wait for, so the table is
/// freed at once by the gather's free step (`tables_synced`), with CPU 1
/// now in a read-side section that began after the grace period, which a
/// `call_rcu` would have waited for. The frame never blocks, so it is
/// always runnable. Kills `TlbRemoveTableOne::can_run` → `false` and,
/// through the free, `tables_synced`' effect.
#[test]
fn tlb_remove_table_one_without_readers_frees_at_the_gathers_free() {
    let (mut w, mms) = x86(
        4,
        &["mm.table_batch_alloc_fail=true", "mm.pt_reclaim=off"],
        1,
    );
    let (t, pt) = task_with_table(&mut w, mms[0]);
    let mut fx = Effects::default();
    let mut one = TlbRemoveTableOne {
        pc: OnePc::Invalidate,
    };
    assert!(one.can_run(&w, t));
    match one.step(&mut w, 0, t, &mut fx) {
        Flow::Call(Frame::FlushTlbMmRange(f)) => {
            assert!(f.freed_tables);
            assert_eq!((f.start, f.end), (VA, VA + PAGE_SIZE));
        }
        _ => panic!("tlb_table_invalidate: a flush_tlb_mm_range"),
    }
    assert_eq!(one.pc, OnePc::Sync);
    assert!(one.can_run(&w, t));
    assert!(matches!(one.step(&mut w, 0, t, &mut fx), Flow::Return));
    assert!(w.tasks[t as usize].gather.tables_synced);
    assert_eq!(w.counters.table_sync_rcu, 1);
    assert!(w.rcu_batches.is_empty());
    // A reader that came after the grace period does not hold it back.
    w.local_irq_disable(1);
    assert_eq!(w.mem.usage(pt), FrameUse::Table(1));
    tlb_flush_mmu_free_task(&mut w, t, &mut fx);
    assert_eq!(w.mem.usage(pt), FrameUse::Free, "freed at once");
    assert!(w.rcu_batches.is_empty());
    assert!(!w.tasks[t as usize].gather.tables_synced, "taken");
}

/// `tlb_remove_table_one` with CPU 1 in a read-side section (GUP-fast with
/// IRQs off): after the invalidate, `synchronize_rcu()` must sleep
/// (`Flow::Block`, at `Wait`) and the frame cannot run while its grace
/// period is pending; CPU 1's quiescent state ends it, the frame runs
/// again and returns with `tables_synced`. Another task's grace period does
/// not hold this one. Kills `can_run` → `true` / `false`, `pc != Wait` →
/// `==`, `||` → `&&`, the `!` deleted, and `b.waiter == Some(task)` →
/// `!=`, and `tlb_remove_table_sync_rcu` → `false` (no sleep).
#[test]
fn tlb_remove_table_one_sleeps_until_the_readers_leave() {
    let (mut w, mms) = x86(
        4,
        &["mm.table_batch_alloc_fail=true", "mm.pt_reclaim=off"],
        1,
    );
    let (t, _) = task_with_table(&mut w, mms[0]);
    let other = w.spawn(mms[0], 2, vec![], false);
    let mut fx = Effects::default();
    let mut one = TlbRemoveTableOne {
        pc: OnePc::Invalidate,
    };
    assert!(matches!(
        one.step(&mut w, 0, t, &mut fx),
        Flow::Call(Frame::FlushTlbMmRange(_))
    ));
    w.local_irq_disable(1);
    assert!(matches!(one.step(&mut w, 0, t, &mut fx), Flow::Block));
    assert_eq!(one.pc, OnePc::Wait);
    assert!(!one.can_run(&w, t), "asleep in synchronize_rcu");
    assert!(!w.tasks[t as usize].gather.tables_synced);
    // The frame of another task at Wait is not held by t's grace period.
    let other_one = TlbRemoveTableOne { pc: OnePc::Wait };
    assert!(other_one.can_run(&w, other));
    w.local_irq_enable(1);
    rcu_quiescent_state(&mut w, 1, &mut fx);
    assert!(one.can_run(&w, t), "the grace period ended");
    assert!(matches!(one.step(&mut w, 0, t, &mut fx), Flow::Return));
    assert!(w.tasks[t as usize].gather.tables_synced);
}

// ---------------------------------------------------------------------------
// tlb_remove_table_sync: _one or _mm
// ---------------------------------------------------------------------------

/// The sync a page-table operation ends with: seed (b) step 2
/// (`mm.targeted_table_sync`) calls `tlb_remove_table_sync_mm(mm)`
/// (counted in `table_sync_targeted`), unless step 1's early return
/// applies (`tlb_table_flush_implies_ipi_broadcast`: then
/// `tlb_remove_table_sync_one` returns at once, counted skipped); without
/// step 2, `tlb_remove_table_sync_one()`: the IPI to every other CPU.
/// Kills `tlb_remove_table_sync`'s `&&` → `||` and its `!` deleted.
#[test]
fn table_sync_is_targeted_only_with_step_2_and_no_skip() {
    // (targeted, forced skip) → (targeted, skipped, broadcast IPI)
    for (targeted, skip, want) in [
        (false, false, (0, 0, 1)),
        (true, false, (1, 0, 0)),
        (true, true, (0, 1, 0)),
        (false, true, (0, 1, 0)),
    ] {
        let sets = [
            format!("mm.targeted_table_sync={targeted}"),
            format!("mm.force_skip_table_sync={skip}"),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (mut w, mms) = x86(4, &sets, 1);
        let f = tlb_remove_table_sync(&mut w, 0, mms[0], &mut Effects::default());
        let c = &w.counters;
        let got = (
            c.table_sync_targeted,
            c.table_sync_skipped,
            c.table_sync_ipi,
        );
        assert_eq!(got, want, "targeted {targeted} skip {skip}");
        // Nobody walks: the targeted sync and the skip both go on at once;
        // sync_one calls the broadcast.
        assert_eq!(
            matches!(f, Flow::Call(Frame::SmpCallFunctionManyCond(_))),
            want.2 == 1
        );
    }
}

/// `tlb_remove_table_sync_mm(mm)` on CPU 0 of 4: `smp_mb()` (priced
/// `LocklessWalkMb`), then read every other CPU's
/// `active_lockless_pt_walk_mm` (one cache line each, missed together: 1
/// transfer + 2 concurrent) and IPI, without running it locally, only
/// the CPUs walking `mm`. CPU 1 walks `b`, CPU 2 walks `a` (mm id `b - 1`),
/// CPU 3 none, CPU 0 (the caller) is not read even if it names `b`. So
/// the mask is {1}: one IPI'd sync, one targeted sync, label `walkers: 1`;
/// CPUs 1-3's lines are now shared, CPU 0's not. The variable holds
/// `mm + 1` (0 = none): comparing with `b * 1` would pick CPU 2, with
/// `b - 1` nobody (mm 0 is init_mm, which GUP-fast never walks). Kills
/// `c != cpu` → `==`, `== mm + 1` → `!=`, `+` → `-` / `*`, both counters'
/// `+=` → `-=` / `*=`, the cost's `n > 1` → `==` / `<`, and the barrier's
/// `!dropped` → `dropped`.
#[test]
fn sync_mm_ipis_the_other_cpus_walking_the_mm() {
    let (mut w, mms) = x86(4, &["mm.targeted_table_sync=true"], 2);
    let (a, b) = (mms[0], mms[1]);
    assert_eq!(b, a + 1);
    w.cpus[0].active_lockless_pt_walk_mm = Some(b);
    w.cpus[1].active_lockless_pt_walk_mm = Some(b);
    w.cpus[2].active_lockless_pt_walk_mm = Some(a);
    let mut fx = common::traced();
    let f = match tlb_remove_table_sync_mm(&mut w, 0, b, &mut fx) {
        Flow::Call(Frame::SmpCallFunctionManyCond(f)) => f,
        _ => panic!("a walker of b: an IPI"),
    };
    assert_eq!(f.mask.iter().collect::<Vec<_>>(), [1]);
    assert!(!f.run_local);
    assert_eq!(f.func, CallFunc::TlbRemoveTableSmpSync);
    assert_eq!(
        (w.counters.table_sync_targeted, w.counters.table_sync_ipi),
        (1, 1)
    );
    assert!(fx.labels.contains(&Label::TableSyncMm { walkers: 1 }));
    let shared: Vec<bool> = w.cpus.iter().map(|c| c.walk_line_shared).collect();
    assert_eq!(shared, [false, true, true, true]);
    assert_eq!(cost(&fx, Cost::LocklessWalkMb), 1);
    assert_eq!(cost(&fx, Cost::CacheLineTransfer), 1);
    assert_eq!(cost(&fx, Cost::CacheLineConcurrent), 2);
    // Nobody walks a: no IPI, counted targeted only.
    let mut fx = common::traced();
    w.cpus[2].active_lockless_pt_walk_mm = None;
    assert!(matches!(
        tlb_remove_table_sync_mm(&mut w, 0, a, &mut fx),
        Flow::Continue
    ));
    assert_eq!(
        (w.counters.table_sync_targeted, w.counters.table_sync_ipi),
        (2, 1)
    );
    assert!(fx.labels.contains(&Label::TableSyncMm { walkers: 0 }));
}

/// The cache-line price of `tlb_remove_table_sync_mm` follows the number of
/// other CPUs: alone (1 CPU) it reads no other CPU's line: no transfer; with
/// 2, one line, one transfer and nothing concurrent. With the `smp_mb()`
/// dropped (`inject.drop_barrier`), it is not priced. Kills `n > 1` → `>=`
/// and the `!` of `!dropped` deleted.
#[test]
fn sync_mm_prices_one_transfer_per_sync_with_other_cpus() {
    for (cpus, transfer) in [(1, 0), (2, 1)] {
        let (mut w, mms) = x86(cpus, &["mm.targeted_table_sync=true"], 1);
        let mut fx = Effects::default();
        tlb_remove_table_sync_mm(&mut w, 0, mms[0], &mut fx);
        assert_eq!(cost(&fx, Cost::CacheLineTransfer), transfer, "{cpus} CPUs");
        assert_eq!(cost(&fx, Cost::CacheLineConcurrent), 0, "{cpus} CPUs");
        assert_eq!(cost(&fx, Cost::LocklessWalkMb), 1);
    }
    let (mut w, mms) = x86(2, &["mm.targeted_table_sync=true"], 1);
    w.cfg.inject.drop_barrier = kernel::hw::memory_model::TLB_REMOVE_TABLE_SYNC_MM_SMP_MB.into();
    let mut fx = Effects::default();
    tlb_remove_table_sync_mm(&mut w, 0, mms[0], &mut fx);
    assert_eq!(cost(&fx, Cost::LocklessWalkMb), 0, "the barrier dropped");
}

// ---------------------------------------------------------------------------
// tlb_end_vma
// ---------------------------------------------------------------------------

/// `tlb_end_vma`: `if (tlb->fullmm || IS_ENABLED(CONFIG_MMU_GATHER_MERGE_VMAS))
/// return;`: a fullmm gather (exit_mmap) never flushes per VMA, on arm64
/// too (which does not merge VMAs): the range stays for `tlb_finish_mmu`.
/// Kills `fullmm || arch == X86` → `&&`.
#[test]
fn end_vma_of_a_fullmm_gather_keeps_the_range_on_arm64() {
    let (mut w, mms) = common::world_mms(Arch::Arm64, 2, &[], 1);
    let mm = mms[0];
    let t = w.spawn(mm, 0, vec![], false);
    tlb_gather_mmu(&mut w, t, mm, true);
    w.tasks[t as usize].gather.remove_page(0, VA);
    let mut fx = Effects::default();
    kernel::arch::switch_mm(&mut w, 0, mm, &mut fx);
    assert!(matches!(tlb_end_vma(&mut w, t, &mut fx), Flow::Continue));
    let g = &w.tasks[t as usize].gather;
    assert_eq!((g.start, g.end), (VA, VA + PAGE_SIZE), "range kept");
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (0, 0));
}

// ---------------------------------------------------------------------------
// Invariant 3 at the free
// ---------------------------------------------------------------------------

/// A 4-CPU x86 world: mm `a` runs on CPUs 0 and 1, `b` on CPU 2; CPU 3
/// idle in init_mm. `t` is a page-table frame CPU 1 caches in its
/// paging-structure cache under the ASID it runs `a` in.
fn cached_on_cpu1() -> (World, MmId, MmId, Pfn) {
    let (mut w, mms) = x86(4, &[], 2);
    let (a, b) = (mms[0], mms[1]);
    let mut fx = Effects::default();
    kernel::arch::switch_mm(&mut w, 0, a, &mut fx);
    kernel::arch::switch_mm(&mut w, 1, a, &mut fx);
    kernel::arch::switch_mm(&mut w, 2, b, &mut fx);
    let t = table(&mut w);
    let gen = w.mem.gen(t);
    let asid = w.cpus[1].tlbstate.loaded_mm_asid;
    w.cpus[1].tlb.psc_fill(asid, VA, t, gen);
    assert!(w.cpus[1].tlb.psc_holds(asid, t));
    (w, a, b, t)
}

/// Invariant 3 when a page-table page is freed (`__tlb_remove_table`): a
/// CPU that still caches it under its loaded ASID is reported, and only
/// that CPU: CPU 1, running `a`; CPUs 0, 2 and 3 hold nothing. Fails on
/// (the suite catches each of them too, in pass 1: `sim/tests/flush_paths.rs`,
/// `kernel/tests/mmap_lock.rs`) `check_table_unreachable` → `()`, `check_table_uncached`
/// → `()`, `Some(loaded_mm) != except` → `==` (with no exception no CPU
/// would count), the `!` of `!flushed_on_entry` deleted (a CPU not
/// preempted would be taken as flushed), and the first `&&` → `||` (every
/// CPU would be reported).
#[test]
fn freeing_a_cached_table_reports_the_cpu_that_caches_it() {
    let (mut w, a, _, t) = cached_on_cpu1();
    tlb_remove_table_free(&mut w, a, vec![t], &mut Effects::default());
    assert_eq!(w.mem.usage(t), FrameUse::Free);
    let v = &w.violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!((v[0].invariant, v[0].cpu), (3, 1));
    assert_eq!(
        v[0].what,
        format!("page-table frame {t} of mm{a} freed while CPU1 (running mm{a}) still caches it in its paging-structure cache")
    );
}

/// `record_steal_time` → `kvm_vcpu_flush_tlb_guest`: a vCPU the host
/// preempted with `KVM_VCPU_FLUSH_TLB` set runs nothing before its TLB is
/// flushed, so its cached pointer cannot be walked: no report. Preempted
/// without the flush request (or the request without a preemption) it
/// can: reported. Kills `vcpu_preempted && kvm_flush_pending` → `||`
/// (pass 1 survivor `321:49`); fails on the second `&&` (before
/// `psc_holds`) → `||` too, which the suite catches.
#[test]
fn a_preempted_vcpu_with_a_flush_pending_is_not_reported() {
    for (preempted, pending) in [(true, true), (true, false), (false, true)] {
        let (mut w, a, _, t) = cached_on_cpu1();
        w.cpus[1].vcpu_preempted = preempted;
        w.cpus[1].kvm_flush_pending = pending;
        tlb_remove_table_free(&mut w, a, vec![t], &mut Effects::default());
        let cpus: Vec<CpuId> = w.violations.iter().map(|v| v.cpu).collect();
        let want: &[CpuId] = if preempted && pending { &[] } else { &[1] };
        assert_eq!(cpus, want, "preempted {preempted} pending {pending}");
    }
}

/// mm/hugetlb.c, seed (b)'s hazard: the last user of an unshared hugetlb
/// PMD table reuses it. CPUs running that user (`except`) may cache it,
/// they are its owner now; any CPU caching it under another mm is
/// reported. CPU 1 caches `t` while running `a`: reuse by `a` reports
/// nothing; reuse by `b` reports CPU 1. The table is not freed. Kills
/// `check_unshared_table_reuse` → `()` and `!= except` → `==` (CPU 1
/// would be exempt from `b`'s check and reported in `a`'s).
#[test]
fn unshared_table_reuse_reports_the_cpus_of_other_mms_only() {
    let (mut w, a, b, t) = cached_on_cpu1();
    check_unshared_table_reuse(&mut w, a, t);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
    check_unshared_table_reuse(&mut w, b, t);
    let v = &w.violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!((v[0].invariant, v[0].cpu), (3, 1));
    assert_eq!(
        v[0].what,
        format!("hugetlb PMD table frame {t}, unshared by another mm, reused by its last user mm{b} while CPU1 (running mm{a}) still caches it in its paging-structure cache")
    );
    assert_eq!(w.mem.usage(t), FrameUse::Table(1), "not freed");
}
