//! `struct mmu_gather` (mm/mmu_gather.c, include/asm-generic/tlb.h):
//! batching, the flush stride, the range, `freed_tables`, the nested-flush
//! escalation of `tlb_finish_mmu`, and `tlb_remove_table_sync_one`.

use kernel::arch::x86::tlb::FlushTlbMmRange;
use kernel::mm::mmu_gather::{
    rcu_quiescent_state, tlb_end_vma, tlb_finish_mmu, tlb_finish_mmu_free, tlb_gather_mmu,
    tlb_remove_table_free, tlb_remove_table_sync_one, MmuGather, GATHER_CAPACITY, MAX_GATHER_BATCH,
    MAX_GATHER_BATCH_COUNT, MMU_GATHER_BUNDLE,
};
use kernel::world::{Flow, Frame};
use kernel::{Effects, World, TLB_FLUSH_ALL};
use machine::mem::FrameUse;
use machine::{Scenario, HPAGE_SHIFT, PAGE_SHIFT, PAGE_SIZE};

const VA: u64 = 0x7f00_0000_0000;

fn gather() -> MmuGather {
    let mut g = MmuGather::default();
    g.tlb_gather_mmu(1);
    g
}

/// The kernel's constants: MAX_GATHER_BATCH = (PAGE_SIZE - 2 * sizeof(void *))
/// / sizeof(void *) = (4096 - 16) / 8 = 510; MAX_GATHER_BATCH_COUNT = 10000 /
/// 510 = 19. Each batch moves on at `nr >= max - 1` (a slot is kept for a
/// two-entry page + nr_pages, since 6.9), so the gather holds 7 pages of
/// its 8-page bundle plus 509 in each of 19 batches: 7 + 19 * 509 = 9678
/// pages before `__tlb_remove_folio_pages_size` says "full" (the model had
/// 8 + 19 * 510 = 9698 until issue 35).
#[test]
fn batch_capacity_is_the_kernels() {
    assert_eq!(MAX_GATHER_BATCH, 510);
    assert_eq!(MAX_GATHER_BATCH_COUNT, 19);
    assert_eq!(GATHER_CAPACITY, 9678);
    let mut g = gather();
    for i in 0..(GATHER_CAPACITY - 1) as u64 {
        g.remove_page(1 + i as u32, VA + i * PAGE_SIZE);
    }
    assert!(!g.batch_full(), "one slot left");
    g.remove_page(1, VA);
    assert!(g.batch_full());
    assert_eq!(g.pages.len(), (MMU_GATHER_BUNDLE - 1) + 19 * 509);
}

/// `tlb_get_unmap_shift`: the smallest level cleared sets the stride.
#[test]
fn stride_is_the_smallest_level_cleared() {
    let g = gather();
    assert_eq!(g.tlb_get_unmap_shift(), PAGE_SHIFT, "nothing cleared");
    let mut g = gather();
    g.remove_huge_page(7, VA);
    assert_eq!(g.tlb_get_unmap_shift(), HPAGE_SHIFT, "PMD only: 2 MiB");
    g.remove_page(8, VA + (2 << 20));
    assert_eq!(g.tlb_get_unmap_shift(), PAGE_SHIFT, "PTE + PMD: 4 KiB");
    let mut g = gather();
    g.remove_pmd_table(9, 0);
    assert_eq!(g.tlb_get_unmap_shift(), 30, "PUD only: 1 GiB");
    g.reset_range();
    assert_eq!(g.tlb_get_unmap_shift(), PAGE_SHIFT, "reset clears levels");
}

/// The range is the union of what was cleared; a freed PTE table grows it
/// by one page only (`pte_free_tlb` -> `tlb_flush_pmd_range(addr, PAGE_SIZE)`),
/// a huge page by 2 MiB, an unshared PMD table by its whole 1 GiB.
#[test]
fn range_and_freed_tables() {
    let mut g = gather();
    assert!(!g.needs_flush(), "an empty gather flushes nothing");
    g.remove_page(3, VA + 5 * PAGE_SIZE);
    g.remove_page(4, VA + 2 * PAGE_SIZE);
    assert_eq!((g.start, g.end), (VA + 2 * PAGE_SIZE, VA + 6 * PAGE_SIZE));
    assert!(!g.freed_tables);
    g.remove_table(5, VA + (4 << 20));
    assert!(g.freed_tables);
    assert_eq!(g.end, VA + (4 << 20) + PAGE_SIZE);
    assert_eq!(g.tables, [5]);
    g.remove_huge_page(6, VA + (8 << 20));
    assert_eq!(g.end, VA + (10 << 20));
    assert!(g.needs_flush());
    // __tlb_reset_range: range, levels and freed_tables start over; the
    // batches wait for the free.
    g.reset_range();
    assert!(!g.needs_flush() && !g.freed_tables);
    assert_eq!(g.pages, [3, 4, 6]);
    assert_eq!(g.tables, [5]);
    let mut g = gather();
    g.unshare_pmd_table(1 << 30, true);
    assert_eq!((g.start, g.end), (1 << 30, 2 << 30));
    assert!(g.unshared_tables && g.fully_unshared_tables && !g.freed_tables);
    g.reset_range();
    assert!(g.fully_unshared_tables, "survives __tlb_reset_range");
}

/// A fullmm gather with freed_tables needs a flush even with an empty range
/// (the nested escalation); fullmm alone does not.
#[test]
fn fullmm_needs_flush_only_with_freed_tables() {
    let mut g = MmuGather::default();
    g.tlb_gather_mmu_fullmm(1);
    assert!(g.fullmm && !g.needs_flush());
    g.freed_tables = true;
    assert!(g.needs_flush());
}

fn x86_world(sets: &[&str]) -> World {
    let mut s = Scenario::default();
    s.machine.cpus = 4;
    for kv in sets {
        s.set(kv).unwrap();
    }
    World::new(&s).unwrap()
}

fn flush_frame(f: Flow) -> FlushTlbMmRange {
    match f {
        Flow::Call(Frame::FlushTlbMmRange(f)) => f,
        _ => panic!("expected a flush_tlb_mm_range call"),
    }
}

/// `tlb_finish_mmu`: with two gathers on one mm in flight
/// (`mm_tlb_flush_nested`), the one that finishes first flushes the whole
/// mm with freed_tables, whatever it gathered; alone, it flushes its range.
#[test]
fn nested_gathers_escalate_to_a_full_flush() {
    let mut w = x86_world(&[]);
    let mut fx = Effects::default();
    let mm = w.mm_alloc().unwrap();
    let a = w.spawn(mm, 0, vec![], false);
    let b = w.spawn(mm, 1, vec![], false);
    tlb_gather_mmu(&mut w, a, mm, false);
    tlb_gather_mmu(&mut w, b, mm, false);
    assert_eq!(*w.mms[mm as usize].tlb_flush_pending, 2);
    w.tasks[a as usize].gather.remove_page(0, VA);
    let f = flush_frame(tlb_finish_mmu(&mut w, a, &mut fx));
    assert_eq!((f.start, f.end), (0, TLB_FLUSH_ALL));
    assert!(f.freed_tables, "nested: tlb->freed_tables = 1");
    // The gather held page frame 0 only as a marker: drop it before the free.
    w.tasks[a as usize].gather.pages.clear();
    tlb_finish_mmu_free(&mut w, a, &mut fx);
    assert_eq!(*w.mms[mm as usize].tlb_flush_pending, 1);
    // b is alone now: its own range, PTE stride, no freed_tables.
    w.tasks[b as usize].gather.remove_page(0, VA + PAGE_SIZE);
    let f = flush_frame(tlb_finish_mmu(&mut w, b, &mut fx));
    assert_eq!((f.start, f.end), (VA + PAGE_SIZE, VA + 2 * PAGE_SIZE));
    assert_eq!(f.stride_shift as u32, PAGE_SHIFT);
    assert!(!f.freed_tables);
    w.tasks[b as usize].gather.pages.clear();
    tlb_finish_mmu_free(&mut w, b, &mut fx);
    assert_eq!(*w.mms[mm as usize].tlb_flush_pending, 0);
    // Nothing gathered and not nested: no flush at all.
    tlb_gather_mmu(&mut w, a, mm, false);
    assert!(matches!(tlb_finish_mmu(&mut w, a, &mut fx), Flow::Continue));
}

/// `tlb_end_vma`: x86 selects MMU_GATHER_MERGE_VMAS (no flush per VMA); arm64
/// does not, so it flushes at every VMA end and resets the range.
#[test]
fn end_vma_flushes_on_arm64_only() {
    let mut fx = Effects::default();
    let mut w = x86_world(&[]);
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, 0, vec![], false);
    tlb_gather_mmu(&mut w, t, mm, false);
    w.tasks[t as usize].gather.remove_page(0, VA);
    assert!(matches!(tlb_end_vma(&mut w, t, &mut fx), Flow::Continue));
    assert!(
        w.tasks[t as usize].gather.needs_flush(),
        "x86 keeps the range"
    );
    let mut w = x86_world(&["machine.arch=arm64"]);
    let mm = w.mm_alloc().unwrap();
    let t = w.spawn(mm, 0, vec![], false);
    tlb_gather_mmu(&mut w, t, mm, false);
    w.tasks[t as usize].gather.remove_page(0, VA);
    // An mm that never ran has no ASID, so no TLB can hold its entries:
    // the flush returns without a TLBI.
    tlb_end_vma(&mut w, t, &mut fx);
    assert_eq!(w.counters.tlbi_is, 0);
    kernel::arch::switch_mm(&mut w, 0, mm, &mut fx);
    w.tasks[t as usize].gather.remove_page(0, VA);
    tlb_end_vma(&mut w, t, &mut fx);
    assert_eq!(w.counters.tlbi_is, 1, "one page: one TLBI VALE1IS");
    assert_eq!(w.counters.dsb_ish, 1);
    assert!(!w.tasks[t as usize].gather.needs_flush(), "range reset");
}

/// `tlb_remove_table_sync_one`: an IPI broadcast (counted) unless seed (b)'s
/// skip applies, which needs the static key (native flush, no INVLPGB), or
/// the unsafe forced skip.
#[test]
fn table_sync_skips_only_under_the_static_key() {
    let mut fx = Effects::default();
    for (sets, skipped) in [
        (&[][..], false),
        (&["mm.skip_redundant_table_sync=true"][..], true),
        (
            &["mm.skip_redundant_table_sync=true", "x86.invlpgb=true"][..],
            false,
        ),
        (
            &["mm.skip_redundant_table_sync=true", "x86.paravirt=kvm"][..],
            false,
        ),
        (
            &["mm.force_skip_table_sync=true", "x86.invlpgb=true"][..],
            true,
        ),
    ] {
        let mut w = x86_world(sets);
        let f = tlb_remove_table_sync_one(&mut w, &mut fx);
        assert_eq!(matches!(f, Flow::Continue), skipped, "{sets:?}");
        assert_eq!(
            matches!(f, Flow::Call(Frame::SmpCallFunctionManyCond(_))),
            !skipped
        );
        let c = &w.counters;
        assert_eq!(
            (c.table_sync_skipped, c.table_sync_ipi),
            (skipped as u64, !skipped as u64)
        );
    }
}

/// `tlb_remove_table_free` → `call_rcu`: tables wait for every CPU in an
/// RCU read-side section (IRQs or preemption off) at the time; each
/// quiescent state clears one CPU, the last frees the batch.
#[test]
fn table_free_waits_for_rcu_readers() {
    let mut fx = Effects::default();
    let mut w = x86_world(&[]);
    let mm = w.mm_alloc().unwrap();
    let in_use = w.mem.in_use();
    let t1 = w.mem.alloc(FrameUse::Table(1)).unwrap();
    let t2 = w.mem.alloc(FrameUse::Table(1)).unwrap();
    w.local_irq_disable(1);
    w.preempt_disable(3);
    tlb_remove_table_free(&mut w, mm, vec![t1, t2], &mut fx);
    assert_eq!(w.mem.in_use(), in_use + 2, "held back by CPU1 and CPU3");
    rcu_quiescent_state(&mut w, 1, &mut fx);
    assert_eq!(w.mem.in_use(), in_use + 2, "CPU3 still in its section");
    rcu_quiescent_state(&mut w, 3, &mut fx);
    assert_eq!(w.mem.in_use(), in_use);
    assert_eq!(w.counters.rcu_table_batches, 1);
    // No reader: freed at once, no batch.
    let t3 = w.mem.alloc(FrameUse::Table(1)).unwrap();
    w.local_irq_enable(1);
    w.preempt_enable(3);
    tlb_remove_table_free(&mut w, mm, vec![t3], &mut fx);
    assert_eq!(w.mem.in_use(), in_use);
    assert_eq!(w.counters.rcu_table_batches, 1);
}
