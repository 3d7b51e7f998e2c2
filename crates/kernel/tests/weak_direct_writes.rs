//! Stores the model makes straight to memory (under a lock, or on paths the
//! checker does not buffer) and the weak memory of arm64 and RISC-V.
//!
//! A location the weak memory holds keeps its older values for the CPUs
//! whose views have not passed them, and its newest message is what memory
//! holds. A store written to memory alone broke that: loads kept returning
//! the older newest message, even to the CPU that made the store, until the
//! clean-up forgot the location, so what a load returned depended on when
//! the clean-up ran, and two steps of different CPUs gave different states
//! in the two orders (the footprint audit found it on
//! `arm64_collapse_targeted_3cpu`: a fault's `pmd_populate` after the
//! collapser's buffered PMD clear). `write_direct` makes such a store a
//! message of its CPU that every CPU's view reaches (the model made it
//! visible to all at once, and still does); `World::step` asserts in debug
//! builds that every held location's newest message is memory's value.

mod common;

use kernel::arch::riscv::tlbflush::local_tlb_flush_queue_drain;
use kernel::hw::memory_model::{self as mo, Loc, MemoryModel};
use kernel::mm::gup::read_pmd;
use kernel::mm::memory::pte_alloc_walk;
use kernel::{Effects, World};
use machine::mem::{pte, table_index};
use machine::scenario::Arch;
use machine::CpuId;

fn weak_world(arch: Arch, sets: &[&str]) -> World {
    let mut w = common::world(arch, 2, sets);
    w.cfg.memory_model = MemoryModel::Weak;
    w
}

/// The values `cpu` may load from `loc`, newest first.
fn loadable(w: &World, cpu: CpuId, loc: Loc) -> Vec<u64> {
    w.weak
        .choices(cpu, loc)
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}

fn consistent(w: &World) -> bool {
    w.weak.stale_newest(|loc| mo::read_mem(w, loc)).is_empty()
}

/// Seed (d): hart 1 reads `need_tlb_flush` set by hart 0's flush, then
/// clears it under the queue lock and applies the queue. Its own later
/// load must return its own 0 (a CPU never reads a value older than its
/// own store to the location, coherence), and the newest message is 0.
/// With the clear written to memory alone the only message left was hart
/// 0's 1: hart 1 read it again and drained an empty queue a second time.
#[test]
fn a_hart_reads_back_its_own_cleared_need_tlb_flush() {
    let mut w = weak_world(Arch::Riscv, &["riscv.defer_flush_to_context_switch=true"]);
    let flag = Loc::NeedTlbFlush(1);
    mo::store_now(&mut w, 0, flag, 1);
    assert_eq!(loadable(&w, 1, flag), [1, 0], "hart 1 may still read 0");
    let mut fx = Effects::default();
    local_tlb_flush_queue_drain(&mut w, 1, 1, &mut fx);
    assert_eq!(w.counters.defer_drains, 1, "it read 1: the queue drained");
    assert_eq!(mo::read_mem(&w, flag), 0);
    assert_eq!(loadable(&w, 1, flag), [0], "its own clear, nothing older");
    assert!(consistent(&w));
    local_tlb_flush_queue_drain(&mut w, 1, 1, &mut fx);
    assert_eq!(w.counters.defer_drains, 1, "no second drain");
}

/// A store straight to a location the weak memory does not hold is
/// memory's value for every CPU at once, and adds no message.
#[test]
fn a_direct_write_to_an_unheld_location_makes_no_message() {
    let mut w = weak_world(Arch::Riscv, &[]);
    mo::write_direct(&mut w, 1, Loc::NeedTlbFlush(1), 1);
    assert!(w.weak.is_empty());
    assert_eq!(mo::read_mem(&w, Loc::NeedTlbFlush(1)), 1);
}

/// arm64 with seed (b)'s targeted sync: the collapser (CPU 0) clears the
/// PMD through the weak memory, so the entry is held (CPU 1 may still read
/// the table it pointed to). A fault on CPU 1 then populates the empty PMD
/// with a new PTE table (`__pte_alloc` → `pmd_populate`, under the PMD
/// lock): that store is the newest message and, made straight to memory,
/// seen by both CPUs at once: neither loads the clear or the old table.
#[test]
fn a_faults_pmd_populate_is_the_newest_message_of_a_held_pmd() {
    let mut w = weak_world(Arch::Arm64, &["mm.targeted_table_sync=true"]);
    let mm = w.mm_alloc().unwrap();
    let va = 0x4000_0000;
    let old_table = pte_alloc_walk(&mut w, 0, mm, va).unwrap();
    let (pmd_table, old) = read_pmd(&w, mm, va).unwrap();
    assert_eq!(pte::pfn(old), old_table);
    let pmd = Loc::PageTable {
        table: pmd_table,
        index: table_index(va, 2),
    };
    mo::store_now(&mut w, 0, pmd, 0);
    assert_eq!(
        loadable(&w, 1, pmd),
        [0, old],
        "CPU 1 may read the old table"
    );
    let new_table = pte_alloc_walk(&mut w, 1, mm, va).unwrap();
    assert_ne!(new_table, old_table);
    let (_, new) = read_pmd(&w, mm, va).unwrap();
    assert_eq!(pte::pfn(new), new_table);
    assert!(consistent(&w), "{:?}", w.weak);
    assert_eq!(loadable(&w, 1, pmd), [new], "its own populate");
    assert_eq!(loadable(&w, 0, pmd), [new]);
}
