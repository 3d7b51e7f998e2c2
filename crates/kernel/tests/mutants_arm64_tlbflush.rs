//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `arch/arm64/{context,fault,tlbflush}.rs`
//! mutated in full (arch/arm64/mm/context.c's `check_and_switch_context`
//! split into the checker's steps, arch/arm64/mm/fault.c's
//! `__ptep_set_access_flags` and `flush_tlb_fix_spurious_fault` under the
//! weak memory model, asm/tlbflush.h). See docs/mutants.md. Every expected
//! value is derived in a comment from the kernel code the function models.

mod common;

use kernel::arch::arm64::fault::{__ptep_set_access_flags, flush_tlb_fix_spurious_fault};
use kernel::hw::memory_model::{self as mo, Loc, MemoryModel};
use kernel::world::{Flow, Frame};
use kernel::{Effects, Label, MmId, TaskId, World, INIT_MM};
use machine::mem::{pte, FrameUse};
use machine::tlb::TlbHit;
use machine::{CpuId, Pfn, PAGE_SIZE};

const VA: u64 = 0x7f00_0000_0000;

fn arm64(cpus: u32, sets: &[&str]) -> World {
    common::world(machine::scenario::Arch::Arm64, cpus, sets)
}

use common::traced;

fn ro(pfn: Pfn) -> TlbHit {
    common::tlb_hit(1, pfn, false)
}

// ---------------------------------------------------------------------------
// arch/arm64/mm/context.c: check_and_switch_context in the checker's steps
// ---------------------------------------------------------------------------

/// `context_switch` → `switch_mm` on `cpu` (running task `t`) with
/// `split_steps`: the fast path's reads run here and push the rest of
/// `check_and_switch_context` on `t`'s stack (IRQs off until
/// `cpu_switch_mm`). Returns the frame's first program point.
fn begin(
    w: &mut World,
    cpu: CpuId,
    t: TaskId,
    next: MmId,
) -> kernel::arch::arm64::context::ContextPc {
    w.cpus[cpu as usize].curr = Some(t);
    let prev = w.cpus[cpu as usize].tlbstate.loaded_mm;
    let irqs = w.cpus[cpu as usize].irqs_off;
    kernel::arch::switch_mm(w, cpu, next, &mut Effects::default());
    assert_eq!(w.cpus[cpu as usize].irqs_off, irqs + 1, "IRQs off");
    assert_eq!(
        w.cpus[cpu as usize].tlbstate.loaded_mm, prev,
        "not switched yet"
    );
    match w.tasks[t as usize].kstack.last() {
        Some(Frame::Arm64CheckAndSwitchContext(f)) => {
            assert_eq!((f.prev, f.next), (prev, next));
            f.pc
        }
        _ => panic!("check_and_switch_context was not pushed"),
    }
}

/// One step of the frame `begin` pushed on `t`'s stack; popped when it
/// returns. The flow and the `SwitchMm` labels of the step.
fn step(w: &mut World, cpu: CpuId, t: TaskId) -> (Flow, Vec<(MmId, MmId, bool)>) {
    let mut fx = traced();
    let flow = match w.tasks[t as usize].kstack.last_mut() {
        Some(Frame::Arm64CheckAndSwitchContext(f)) => {
            let mut f = *f;
            let flow = f.step(w, cpu, &mut fx);
            *w.tasks[t as usize].kstack.last_mut().unwrap() = Frame::Arm64CheckAndSwitchContext(f);
            flow
        }
        _ => panic!("no check_and_switch_context frame"),
    };
    if matches!(flow, Flow::Return) {
        w.tasks[t as usize].kstack.pop();
    }
    let labels = fx
        .labels
        .iter()
        .filter_map(|l| match *l {
            Label::SwitchMm { from, to, flush } => Some((from, to, flush)),
            _ => None,
        })
        .collect();
    (flow, labels)
}

/// A whole split switch: `begin`, then steps until it returns (at most 2).
fn switch(w: &mut World, cpu: CpuId, t: TaskId, next: MmId) {
    begin(w, cpu, t, next);
    for _ in 0..2 {
        if matches!(step(w, cpu, t).0, Flow::Return) {
            return;
        }
    }
    panic!("the switch did not return");
}

/// 2-bit ASIDs (1, 2, 3 for user mms), 2 CPUs, `split_steps`:
/// - CPU0 to A, then B: the slow path (a new mm is never of the current
///   generation), ASIDs 1 and 2, no flush, TTBR0 written each time.
/// - CPU0 back to A: A is of this generation and `active_asids` holds B's
///   id (not 0): the fast path, whose `cmpxchg` is pushed as its own step.
///   Left pending while CPU1 switches to C (ASID 3) and D: no ASID is
///   free, D's `new_context` rolls over: `flush_context` `xchg`es every
///   CPU's `active_asids` to 0 and marks a flush pending on every CPU;
///   CPU1's slow path flushes its TLB at once (`local_flush_tlb_all`).
/// - CPU0's `cmpxchg` then finds 0, not B's id: it fails, and the step
///   yields to the slow path (nothing switched yet); the slow path gives A
///   an ASID of the new generation and flushes CPU0's TLB (its pending
///   flush): two full flushes in all, five TTBR0 writes.
#[test]
fn split_switch_fast_path_cmpxchg_loses_to_a_rollover() {
    use kernel::arch::arm64::context::ContextPc;
    let mut w = arm64(2, &["arm64.asid_bits=2"]);
    w.cfg.split_steps = true;
    let m: Vec<MmId> = (0..4).map(|_| w.mm_alloc().unwrap()).collect();
    let (a, b, c, d) = (m[0], m[1], m[2], m[3]);
    let t0 = w.spawn(a, 0, vec![], false);
    let t1 = w.spawn(c, 1, vec![], false);
    let irqs = w.cpus[0].irqs_off;

    assert_eq!(begin(&mut w, 0, t0, a), ContextPc::SlowPath);
    let (flow, labels) = step(&mut w, 0, t0);
    assert!(matches!(flow, Flow::Return));
    assert_eq!(labels, [(INIT_MM, a, false)]);
    assert_eq!(w.cpus[0].irqs_off, irqs, "IRQs on after cpu_switch_mm");
    assert_eq!(
        (
            w.cpus[0].tlbstate.loaded_mm,
            w.cpus[0].tlbstate.loaded_mm_asid
        ),
        (a, 1)
    );
    switch(&mut w, 0, t0, b);
    assert_eq!(w.cpus[0].tlbstate.loaded_mm_asid, 2);
    assert_eq!((w.counters.cr3_writes, w.counters.full_flushes), (2, 0));

    // Back to A: the fast path; its cmpxchg would succeed now.
    assert_eq!(begin(&mut w, 0, t0, a), ContextPc::Cmpxchg);
    // CPU1: C takes ASID 3, D rolls the generation over.
    switch(&mut w, 1, t1, c);
    assert_eq!(w.cpus[1].tlbstate.loaded_mm_asid, 3);
    assert_eq!(w.asids.rollovers, 0);
    assert_eq!(begin(&mut w, 1, t1, d), ContextPc::SlowPath);
    let (flow, labels) = step(&mut w, 1, t1);
    assert!(matches!(flow, Flow::Return));
    assert_eq!(w.asids.rollovers, 1);
    assert_eq!(labels, [(c, d, true)], "CPU1 flushes at its rollover");
    assert_eq!((w.counters.cr3_writes, w.counters.full_flushes), (4, 1));

    // CPU0's cmpxchg finds active_asids zeroed: fails, no switch yet.
    let (flow, labels) = step(&mut w, 0, t0);
    assert!(
        matches!(flow, Flow::Yield),
        "the slow path is the next step"
    );
    assert!(labels.is_empty());
    assert_eq!(w.cpus[0].tlbstate.loaded_mm, b);
    assert_eq!(w.counters.cr3_writes, 4);
    // The slow path: a new-generation ASID for A, and CPU0's pending flush.
    let (flow, labels) = step(&mut w, 0, t0);
    assert!(matches!(flow, Flow::Return));
    assert_eq!(labels, [(b, a, true)]);
    let id = *w.mms[a as usize].context_id;
    assert!(w.asids.gen_match(id), "A is of the new generation");
    assert_eq!(
        (
            w.cpus[0].tlbstate.loaded_mm,
            w.cpus[0].tlbstate.loaded_mm_asid
        ),
        (a, w.asids.idx(id))
    );
    assert_eq!((w.counters.cr3_writes, w.counters.full_flushes), (5, 2));
    assert_eq!(w.cpus[0].irqs_off, irqs);
}

/// The fast path whose `cmpxchg` succeeds switches in that one step, with
/// the mm's ASID and no flush (`switch_mm_fastpath`).
#[test]
fn split_switch_fast_path_switches_in_one_step() {
    use kernel::arch::arm64::context::ContextPc;
    let mut w = arm64(2, &[]);
    w.cfg.split_steps = true;
    let (a, b) = (w.mm_alloc().unwrap(), w.mm_alloc().unwrap());
    let t = w.spawn(a, 0, vec![], false);
    switch(&mut w, 0, t, a);
    switch(&mut w, 0, t, b);
    assert_eq!(begin(&mut w, 0, t, a), ContextPc::Cmpxchg);
    let (flow, labels) = step(&mut w, 0, t);
    assert!(matches!(flow, Flow::Return), "switched in the cmpxchg step");
    assert_eq!(labels, [(b, a, false)]);
    assert_eq!(
        (
            w.cpus[0].tlbstate.loaded_mm,
            w.cpus[0].tlbstate.loaded_mm_asid
        ),
        (a, 1)
    );
    assert_eq!((w.counters.cr3_writes, w.counters.full_flushes), (3, 0));
    assert!(w.tasks[t as usize].kstack.is_empty());
}

// ---------------------------------------------------------------------------
// arch/arm64/mm/fault.c under the weak memory model
// ---------------------------------------------------------------------------

/// A 3-CPU world whose mm runs on CPUs 0 and 1; a PTE table whose entry 1
/// maps `page` read-only, cached by CPUs 0 and 1 with the pages around it.
/// `page` has bit 12 set, so a mask that clears bit 12 names another page.
fn wp_world(sets: &[&str]) -> (World, MmId, Pfn, u16, u64) {
    let mut w = arm64(3, sets);
    let mm = w.mm_alloc().unwrap();
    let mut fx = Effects::default();
    kernel::arch::switch_mm(&mut w, 0, mm, &mut fx);
    kernel::arch::switch_mm(&mut w, 1, mm, &mut fx);
    let asid = w.cpus[0].tlbstate.loaded_mm_asid;
    let table = w.mem.alloc(FrameUse::Table(1)).unwrap();
    w.mem.write(table, 1, pte::make(5, pte::PRESENT));
    let page = VA + PAGE_SIZE;
    for c in 0..2 {
        for va in [page - PAGE_SIZE, page, page + PAGE_SIZE] {
            w.cpus[c].tlb.fill(asid, va, ro(5));
        }
    }
    w.cfg.memory_model = MemoryModel::Weak;
    (w, mm, table, asid, page)
}

/// CPU0's write fault inside `page` (at `page + 0x123`, entry 1 of
/// `table`) upgrading its PTE to `entry` (`__ptep_set_access_flags` with
/// `dirty`): whether the PTE changed.
fn write_fault(
    w: &mut World,
    mm: MmId,
    table: Pfn,
    page: u64,
    entry: u64,
    fx: &mut Effects,
) -> bool {
    __ptep_set_access_flags(w, 0, mm, table, 1, page + 0x123, entry, true, fx)
}

fn cached(w: &mut World, cpu: usize, asid: u16, va: u64) -> bool {
    w.cpus[cpu].tlb.lookup(asid, va).is_some()
}

/// Upstream `__ptep_set_access_flags` of a write (`dirty`) under the weak
/// model: the PTE store goes to CPU0's buffer, `flush_tlb_page` of the
/// fault address's page: `dsb(ishst)` drains the PTE to memory, `TLBI
/// VALE1IS` of the page (the address rounded down), `dsb(ish)` completes it
/// on every CPU. Returns true (the PTE changed). Only that page goes, on
/// CPUs 0 and 1; the pages around it stay. The same entry again: no
/// change, false, no TLBI.
#[test]
fn weak_write_upgrade_broadcasts_the_page_of_the_fault() {
    let (mut w, mm, table, asid, page) = wp_world(&[]);
    let entry = pte::make(5, pte::PRESENT | pte::WRITE);
    let mut fx = Effects::default();
    assert!(write_fault(&mut w, mm, table, page, entry, &mut fx));
    assert_eq!(w.mem.read(table, 1), Some(entry), "dsb(ishst) drained it");
    assert!(w.membufs[0].is_empty(), "dsb(ish) completed the TLBI");
    for c in 0..2 {
        assert!(!cached(&mut w, c, asid, page), "CPU{c}");
        assert!(cached(&mut w, c, asid, page - PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, asid, page + PAGE_SIZE), "CPU{c}");
    }
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));
    let again = __ptep_set_access_flags(&mut w, 0, mm, table, 1, page, entry, true, &mut fx);
    assert!(!again, "the PTE already holds it");
    assert_eq!(w.counters.tlbi_is, 1);
}

/// The seed (`arm64.wp_reuse_flush=local`) under the weak model: `TLBI
/// VALE1` of the page on CPU0 only (`dsb(nsh)`): CPU1 keeps its stale
/// read-only entry.
#[test]
fn weak_write_upgrade_with_the_seed_flushes_this_cpu_only() {
    let (mut w, mm, table, asid, page) = wp_world(&["arm64.wp_reuse_flush=local"]);
    let entry = pte::make(5, pte::PRESENT | pte::WRITE);
    let mut fx = Effects::default();
    assert!(write_fault(&mut w, mm, table, page, entry, &mut fx));
    assert_eq!(w.mem.read(table, 1), Some(entry));
    assert!(w.membufs[0].is_empty());
    assert!(!cached(&mut w, 0, asid, page));
    assert!(cached(&mut w, 0, asid, page - PAGE_SIZE));
    assert!(cached(&mut w, 1, asid, page), "CPU1 keeps it");
    assert_eq!((w.counters.tlbi_local, w.counters.tlbi_is), (1, 0));
}

/// A young-only update (`dirty` false: `ptep_set_access_flags` from the
/// access-flag fault) needs no flush (fault.c: `if (dirty)
/// flush_tlb_page`): the PTE is written at once (the model keeps it
/// sequentially consistent), every cached entry stays, no TLBI.
#[test]
fn weak_young_update_writes_the_pte_and_flushes_nothing() {
    let (mut w, mm, table, asid, page) = wp_world(&[]);
    let entry = pte::make(5, pte::PRESENT | pte::ACCESSED);
    let mut fx = Effects::default();
    assert!(__ptep_set_access_flags(
        &mut w, 0, mm, table, 1, page, entry, false, &mut fx
    ));
    assert_eq!(w.mem.read(table, 1), Some(entry));
    assert!(w.membufs[0].is_empty());
    for c in 0..2 {
        assert!(cached(&mut w, c, asid, page), "CPU{c}");
    }
    assert_eq!((w.counters.tlbi_is, w.counters.tlbi_local), (0, 0));
}

/// The seed's `flush_tlb_fix_spurious_fault` (`local_flush_tlb_page_nonotify`):
/// under the weak model `dsb(nshst)` first, which drains this CPU's
/// buffered stores, then `TLBI VALE1` of the page on this CPU; under SC the
/// simulator's `local_flush_tlb_page` (one `TlbiLocal` label). Upstream
/// (`spurious_fault_flush = none`): nothing.
#[test]
fn spurious_fault_fix_is_a_local_tlbi_ordered_after_earlier_stores() {
    let (mut w, mm, table, asid, page) = wp_world(&["arm64.spurious_fault_flush=local"]);
    let loc = Loc::Pte { table, idx: 2 };
    let mut fx = Effects::default();
    mo::store(&mut w, 0, loc, 77, &mut fx);
    assert!(!w.membufs[0].is_empty(), "buffered");
    flush_tlb_fix_spurious_fault(&mut w, 0, mm, page + 0x10, &mut fx);
    assert!(w.membufs[0].is_empty(), "dsb(nshst) and dsb(nsh)");
    assert_eq!(w.mem.read(table, 2), Some(77));
    assert!(!cached(&mut w, 0, asid, page));
    assert!(cached(&mut w, 1, asid, page), "local only");
    assert_eq!(w.counters.tlbi_local, 1);
    // Under SC: the simulator's local flush, labelled.
    let (mut w, mm, _, asid, page) = wp_world(&["arm64.spurious_fault_flush=local"]);
    w.cfg.memory_model = MemoryModel::Sc;
    let mut fx = traced();
    flush_tlb_fix_spurious_fault(&mut w, 0, mm, page, &mut fx);
    assert!(!cached(&mut w, 0, asid, page));
    assert!(
        fx.labels.contains(&Label::TlbiLocal { asid, va: page }),
        "{:?}",
        fx.labels
    );
    assert_eq!(w.counters.tlbi_local, 1, "one TLBI VALE1");
    // Upstream: a no-op.
    let (mut w, mm, _, asid, page) = wp_world(&[]);
    flush_tlb_fix_spurious_fault(&mut w, 0, mm, page, &mut Effects::default());
    assert!(cached(&mut w, 0, asid, page));
    assert_eq!(w.counters.tlbi_local, 0);
}

// ---------------------------------------------------------------------------
// asm/tlbflush.h: flush_tlb_mm, flush_tlb_page, __flush_tlb_range
// ---------------------------------------------------------------------------

/// The ASID of the mm [`tlbi_world`] gives (16-bit ASIDs: generation
/// `1 << 16`, index 5).
const ASID: u16 = 5;

/// A 3-CPU arm64 world with an mm of ASID [`ASID`]; CPUs 0 and 1 cache
/// under it the page below `VA` and the `pages` pages from `VA`, and `VA`
/// under ASID 6 (another mm).
fn tlbi_world(pages: u64) -> (World, MmId) {
    let mut w = arm64(3, &[]);
    let mm = w.mm_alloc().unwrap();
    *w.mms[mm as usize].context_id = (1 << 16) | u64::from(ASID);
    for c in 0..2 {
        for i in 0..=pages {
            // i = 0: the page below VA.
            w.cpus[c]
                .tlb
                .fill(ASID, VA - PAGE_SIZE + i * PAGE_SIZE, ro(5));
        }
        w.cpus[c].tlb.fill(ASID + 1, VA, ro(6));
    }
    (w, mm)
}

fn tlbi_labels(fx: &Effects) -> Vec<(u16, u64, Option<u64>, u32)> {
    fx.labels
        .iter()
        .filter_map(|l| match *l {
            Label::TlbiIs {
                asid,
                va,
                pages,
                ops,
            } => Some((asid, va, pages, ops)),
            _ => None,
        })
        .collect()
}

/// `flush_tlb_mm`: `dsb(ishst); TLBI ASIDE1IS; dsb(ish)`: every CPU drops
/// every entry of the ASID, not another ASID's; one TLBI, one DSB ISH. An
/// mm that never ran (context id 0) has nothing to flush: no TLBI.
#[test]
fn flush_tlb_mm_is_one_aside1is_and_one_dsb() {
    let (mut w, mm) = tlbi_world(2);
    let mut fx = traced();
    kernel::arch::arm64::tlbflush::flush_tlb_mm(&mut w, mm, &mut fx);
    for c in 0..2 {
        for i in 0..3 {
            let va = VA - PAGE_SIZE + i * PAGE_SIZE;
            assert!(!cached(&mut w, c, ASID, va), "CPU{c} {va:#x}");
        }
        assert!(cached(&mut w, c, ASID + 1, VA), "CPU{c}: another ASID");
    }
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));
    assert_eq!(tlbi_labels(&fx), [(ASID, 0, None, 1)]);
    let never = w.mm_alloc().unwrap();
    kernel::arch::arm64::tlbflush::flush_tlb_mm(&mut w, never, &mut fx);
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));
}

/// `flush_tlb_page`: `__flush_tlb_range(vma, va, va + PAGE_SIZE,
/// PAGE_SIZE, true, 3)`: one `TLBI VALE1IS` of that page: both CPUs drop
/// it, keep the pages around it; one TLBI, one DSB ISH.
#[test]
fn flush_tlb_page_is_one_vale1is_of_that_page() {
    let (mut w, mm) = tlbi_world(2);
    let mut fx = traced();
    kernel::arch::arm64::tlbflush::flush_tlb_page(&mut w, mm, VA, &mut fx);
    for c in 0..2 {
        assert!(!cached(&mut w, c, ASID, VA), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA - PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA + PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, ASID + 1, VA), "CPU{c}");
    }
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));
    assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(1), 1)]);
}

/// With FEAT_TLBIRANGE (`arm64.range_tlbi`) `__flush_tlb_range` falls back
/// to `flush_tlb_mm` only for more than `MAX_TLBI_RANGE_PAGES` (2^21)
/// pages (`pages > MAX_TLBI_RANGE_PAGES`): two pages are one range op
/// (`(num + 1) << (5 * scale + 1)` = 2 at scale 0, num 0) that keeps the
/// pages around them; exactly 2^21 pages are one range op too (scale 3,
/// num 31) and keep the page below; 2^21 + 1 pages are the whole ASID.
#[test]
fn range_tlbi_covers_up_to_max_tlbi_range_pages() {
    use kernel::arch::arm64::tlbflush::{__flush_tlb_range, MAX_TLBI_RANGE_PAGES};
    let (mut w, mm) = tlbi_world(3);
    w.cfg.arm64.range_tlbi = true;
    let mut fx = traced();
    __flush_tlb_range(&mut w, mm, VA, VA + 2 * PAGE_SIZE, PAGE_SIZE, true, &mut fx);
    for c in 0..2 {
        assert!(!cached(&mut w, c, ASID, VA) && !cached(&mut w, c, ASID, VA + PAGE_SIZE));
        assert!(
            cached(&mut w, c, ASID, VA - PAGE_SIZE),
            "CPU{c}: below the range"
        );
        assert!(
            cached(&mut w, c, ASID, VA + 2 * PAGE_SIZE),
            "CPU{c}: above it"
        );
    }
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));
    assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(2), 1)]);

    let (mut w, mm) = tlbi_world(1);
    w.cfg.arm64.range_tlbi = true;
    let mut fx = traced();
    let end = VA + MAX_TLBI_RANGE_PAGES * PAGE_SIZE;
    __flush_tlb_range(&mut w, mm, VA, end, PAGE_SIZE, true, &mut fx);
    for c in 0..2 {
        assert!(!cached(&mut w, c, ASID, VA), "CPU{c}");
        assert!(
            cached(&mut w, c, ASID, VA - PAGE_SIZE),
            "CPU{c}: a range op, not the ASID"
        );
    }
    assert_eq!(
        tlbi_labels(&fx),
        [(ASID, VA, Some(MAX_TLBI_RANGE_PAGES), 1)]
    );
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));

    // One page more, from the second page of the address space: the ASID.
    let (mut w, mm) = tlbi_world(1);
    w.cfg.arm64.range_tlbi = true;
    let mut fx = traced();
    let end = PAGE_SIZE + (MAX_TLBI_RANGE_PAGES + 1) * PAGE_SIZE;
    __flush_tlb_range(&mut w, mm, PAGE_SIZE, end, PAGE_SIZE, true, &mut fx);
    assert!(!cached(&mut w, 1, ASID, VA - PAGE_SIZE), "the whole ASID");
    assert_eq!(tlbi_labels(&fx), [(ASID, 0, None, 1)]);
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));
}

/// Without FEAT_TLBIRANGE: `end - start >= MAX_DVM_OPS * stride` (2 MiB of
/// 4 KiB strides) is the whole ASID; a one-page range high in the address
/// space (where `end + start` would pass 2 MiB) is one `TLBI VALE1IS`.
/// 511 pages are 511 TLBIs and one DSB.
#[test]
fn without_range_tlbi_a_small_range_high_up_is_per_page() {
    use kernel::arch::arm64::tlbflush::__flush_tlb_range;
    let (mut w, mm) = tlbi_world(2);
    let mut fx = traced();
    __flush_tlb_range(&mut w, mm, VA, VA + PAGE_SIZE, PAGE_SIZE, true, &mut fx);
    assert!(!cached(&mut w, 0, ASID, VA));
    assert!(cached(&mut w, 0, ASID, VA + PAGE_SIZE));
    assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(1), 1)]);
    let mut fx = traced();
    __flush_tlb_range(
        &mut w,
        mm,
        VA,
        VA + 511 * PAGE_SIZE,
        PAGE_SIZE,
        true,
        &mut fx,
    );
    assert!(cached(&mut w, 0, ASID, VA - PAGE_SIZE));
    assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(511), 511)]);
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (512, 2));
}

// ---------------------------------------------------------------------------
// Under the checker's weak model: TLBIs in flight until a DSB
// ---------------------------------------------------------------------------

fn buffered_tlbis(fx: &Effects) -> Vec<u64> {
    fx.labels
        .iter()
        .filter_map(|l| match *l {
            Label::StoreBuffered {
                loc: Loc::Tlbi { va, .. },
                ..
            } => Some(va),
            _ => None,
        })
        .collect()
}

/// `__flush_tlb_range` under the weak model (`flush_tlb_range_weak`): up
/// to `STORE_BUFFER_DEPTH` (4) pages, one `TLBI VALE1IS` per page goes
/// into CPU0's buffer (in flight), `va = start + i * PAGE_SIZE`, and the
/// `dsb(ish)` (no store buffered before it) completes them: the 4 pages go
/// on both CPUs, the pages around stay; 4 TLBIs, 1 DSB. 5 pages complete
/// as issued (`__flush_tlb_range`: one `TlbiIs` label, nothing buffered).
#[test]
fn weak_range_flush_puts_up_to_four_tlbis_in_flight() {
    use kernel::arch::arm64::tlbflush::flush_tlb_range_weak;
    let (mut w, mm) = tlbi_world(5);
    w.cfg.memory_model = MemoryModel::Weak;
    let mut fx = traced();
    let dsb = flush_tlb_range_weak(&mut w, 0, mm, VA, VA + 4 * PAGE_SIZE, true, &mut fx);
    assert!(dsb.is_none(), "nothing buffered at the dsb(ish): done here");
    let pages: Vec<u64> = (0..4).map(|i| VA + i * PAGE_SIZE).collect();
    assert_eq!(buffered_tlbis(&fx), pages);
    assert!(tlbi_labels(&fx).is_empty());
    assert!(w.membufs[0].is_empty(), "completed by the dsb(ish)");
    for c in 0..2 {
        for &va in &pages {
            assert!(!cached(&mut w, c, ASID, va), "CPU{c} {va:#x}");
        }
        assert!(cached(&mut w, c, ASID, VA - PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA + 4 * PAGE_SIZE), "CPU{c}");
    }
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (4, 1));

    let (mut w, mm) = tlbi_world(5);
    w.cfg.memory_model = MemoryModel::Weak;
    let mut fx = traced();
    let dsb = flush_tlb_range_weak(&mut w, 0, mm, VA, VA + 5 * PAGE_SIZE, true, &mut fx);
    assert!(dsb.is_none());
    assert!(
        buffered_tlbis(&fx).is_empty(),
        "5 pages: completed as issued"
    );
    assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(5), 5)]);
    assert!(cached(&mut w, 0, ASID, VA - PAGE_SIZE));
    assert!(!cached(&mut w, 1, ASID, VA + 4 * PAGE_SIZE));
}

/// The write upgrade's broadcast under the weak model goes through CPU0's
/// buffer as one in-flight TLBI of the page (not a completed
/// `__flush_tlb_range`).
#[test]
fn weak_write_upgrade_tlbi_is_buffered_then_completed() {
    let (mut w, mm, table, asid, page) = wp_world(&[]);
    let entry = pte::make(5, pte::PRESENT | pte::WRITE);
    let mut fx = traced();
    assert!(write_fault(&mut w, mm, table, page, entry, &mut fx));
    assert_eq!(buffered_tlbis(&fx), [page]);
    assert!(tlbi_labels(&fx).is_empty());
    assert!(!cached(&mut w, 1, asid, page));
}

/// arm64's unmap batch (`arch_tlbbatch_add_pending` →
/// `__flush_tlb_range_nosync`): `TLBI VALE1IS` of the page goes out at
/// once (under SC it is done: both CPUs drop the page, keep the next);
/// counted in the batch for the one `DSB ISH` of `arch_tlbbatch_flush`,
/// which prices the batch's TLBIs (`Dvm(2)`). An mm that never ran issues
/// nothing but is still counted. Under the weak model the TLBI stays in
/// CPU0's buffer until that DSB.
#[test]
fn unmap_batch_tlbis_go_out_at_once_and_one_dsb_waits_for_them() {
    use kernel::arch::arm64::tlbflush::{
        arch_tlbbatch_add_pending, arch_tlbbatch_flush, arch_tlbbatch_should_defer,
        ArchTlbflushUnmapBatch,
    };
    use kernel::effects::Charge;
    assert!(arch_tlbbatch_should_defer());
    let (mut w, mm) = tlbi_world(2);
    let never = w.mm_alloc().unwrap();
    let mut batch = ArchTlbflushUnmapBatch::default();
    let mut fx = traced();
    arch_tlbbatch_add_pending(&mut w, 0, &mut batch, mm, VA, &mut fx);
    arch_tlbbatch_add_pending(&mut w, 0, &mut batch, never, VA, &mut fx);
    assert_eq!(batch.tlbis, 2);
    for c in 0..2 {
        assert!(!cached(&mut w, c, ASID, VA), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA + PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA - PAGE_SIZE), "CPU{c}");
    }
    assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(1), 1)]);
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 0));
    let mut fx = Effects::default();
    arch_tlbbatch_flush(&mut w, 0, batch, &mut fx);
    assert_eq!(fx.charges, [Charge::Dvm(2)]);
    assert_eq!((w.counters.dsb_ish, w.counters.tlbbatch_flushes), (1, 1));

    let (mut w, mm) = tlbi_world(2);
    w.cfg.memory_model = MemoryModel::Weak;
    let mut batch = ArchTlbflushUnmapBatch::default();
    let mut fx = Effects::default();
    arch_tlbbatch_add_pending(&mut w, 0, &mut batch, mm, VA, &mut fx);
    assert!(cached(&mut w, 1, ASID, VA), "in flight");
    arch_tlbbatch_flush(&mut w, 0, batch, &mut fx);
    assert!(w.membufs[0].is_empty());
    for c in 0..2 {
        assert!(!cached(&mut w, c, ASID, VA), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA + PAGE_SIZE), "CPU{c}");
    }
}

// ---------------------------------------------------------------------------
// asm/tlb.h: tlb_flush; asm/mmu_context.h: switch_mm
// ---------------------------------------------------------------------------

/// arm64 `tlb_flush` of a gather that cleared two PTEs and freed no table:
/// `__flush_tlb_range(vma, start, end, tlb_get_unmap_size(tlb) = PAGE_SIZE,
/// last_level = true)`: two `TLBI VALE1IS` (one `TlbiIs` label of 2 pages)
/// under SC; under the weak model two TLBIs through CPU0's buffer. The
/// pages around stay. A `fullmm` gather (exit) that freed no table
/// flushes nothing; one that freed tables is `flush_tlb_mm`.
#[test]
fn tlb_flush_of_a_pte_gather_is_per_page_and_fullmm_only_for_tables() {
    use kernel::arch::arm64::tlbflush::tlb_flush;
    for weak_model in [false, true] {
        let (mut w, mm) = tlbi_world(3);
        let t = w.spawn(mm, 0, vec![], false);
        if weak_model {
            w.cfg.memory_model = MemoryModel::Weak;
        }
        let g = &mut w.tasks[t as usize].gather;
        g.tlb_gather_mmu(mm);
        g.remove_page(11, VA);
        g.remove_page(12, VA + PAGE_SIZE);
        let mut fx = traced();
        assert!(matches!(tlb_flush(&mut w, t, &mut fx), Flow::Yield));
        if weak_model {
            assert_eq!(buffered_tlbis(&fx), [VA, VA + PAGE_SIZE]);
            assert!(tlbi_labels(&fx).is_empty());
        } else {
            assert!(buffered_tlbis(&fx).is_empty());
            assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(2), 2)]);
        }
        for c in 0..2 {
            assert!(!cached(&mut w, c, ASID, VA) && !cached(&mut w, c, ASID, VA + PAGE_SIZE));
            assert!(cached(&mut w, c, ASID, VA - PAGE_SIZE), "CPU{c}");
            assert!(cached(&mut w, c, ASID, VA + 2 * PAGE_SIZE), "CPU{c}");
        }
        assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (2, 1));
    }
    for freed in [false, true] {
        let (mut w, mm) = tlbi_world(2);
        let t = w.spawn(mm, 0, vec![], false);
        let g = &mut w.tasks[t as usize].gather;
        g.tlb_gather_mmu_fullmm(mm);
        g.remove_page(11, VA);
        if freed {
            g.remove_table(9, VA);
        }
        let mut fx = traced();
        assert!(matches!(tlb_flush(&mut w, t, &mut fx), Flow::Yield));
        assert_eq!(cached(&mut w, 1, ASID, VA), !freed, "fullmm, freed {freed}");
        assert_eq!(cached(&mut w, 1, ASID, VA + PAGE_SIZE), !freed);
        let expect = if freed {
            vec![(ASID, 0, None, 1)]
        } else {
            vec![]
        };
        assert_eq!(tlbi_labels(&fx), expect);
    }
}

/// arm64 `switch_mm` (SC, one step): to init_mm it loads the reserved TTBR0
/// (no user ASID, no TTBR0 write counted); a switch whose
/// `check_and_switch_context` rolled the ASIDs over flushes this CPU
/// (`local_flush_tlb_all`, one full flush) and returns true. 2-bit ASIDs:
/// A, B, C take 1, 2, 3 on CPU0; D rolls over.
#[test]
fn switch_mm_to_init_mm_and_across_a_rollover() {
    use kernel::arch::arm64::tlbflush::switch_mm;
    let mut w = arm64(2, &["arm64.asid_bits=2"]);
    let m: Vec<MmId> = (0..4).map(|_| w.mm_alloc().unwrap()).collect();
    let mut fx = traced();
    assert!(!switch_mm(&mut w, 0, m[0], &mut fx));
    assert_eq!(
        (
            w.cpus[0].tlbstate.loaded_mm,
            w.cpus[0].tlbstate.loaded_mm_asid
        ),
        (m[0], 1)
    );
    assert!(!switch_mm(&mut w, 0, INIT_MM, &mut fx));
    assert_eq!(
        (
            w.cpus[0].tlbstate.loaded_mm,
            w.cpus[0].tlbstate.loaded_mm_asid
        ),
        (INIT_MM, 0)
    );
    assert_eq!(w.counters.cr3_writes, 1);
    w.cpus[0].tlb.fill(1, VA, ro(5));
    assert!(!switch_mm(&mut w, 0, m[1], &mut fx));
    assert!(!switch_mm(&mut w, 0, m[2], &mut fx));
    assert_eq!(w.counters.full_flushes, 0);
    assert!(switch_mm(&mut w, 0, m[3], &mut fx), "D's switch rolls over");
    assert_eq!(w.asids.rollovers, 1);
    assert_eq!((w.counters.full_flushes, w.counters.cr3_writes), (1, 4));
    assert!(!cached(&mut w, 0, 1, VA), "local_flush_tlb_all");
}

// ---------------------------------------------------------------------------
// The weak model with the leading DSB dropped: the completing DSB waits
// for the next step (pass 1 of docs/mutants.md at 7f59eb2)
// ---------------------------------------------------------------------------

/// [`tlbi_world`] under the weak model with barrier `drop` removed
/// (`inject.drop_barrier`, a checker configuration), and CPU0's buffered
/// clear of a PTE (entry 0 of a new table, `pte::PRESENT` in memory):
/// the zap's store that the dropped `dsb(*st)` would have drained.
fn weak_world_with_a_buffered_pte_clear(pages: u64, drop: &str) -> (World, MmId, Pfn, u64) {
    let (mut w, mm) = tlbi_world(pages);
    w.cfg.memory_model = MemoryModel::Weak;
    w.cfg.inject.drop_barrier = drop.into();
    let table = w.mem.alloc(FrameUse::Table(1)).unwrap();
    let old = pte::make(5, pte::PRESENT);
    w.mem.write(table, 0, old);
    mo::store(
        &mut w,
        0,
        Loc::Pte { table, idx: 0 },
        0,
        &mut Effects::default(),
    );
    assert_eq!(w.membufs[0].entries.len(), 1, "the clear is buffered");
    (w, mm, table, old)
}

/// Pins `store_buffered` and `Dsb::step`: without `dsb(ishst)` the `dsb(ish)` runs steps later.
#[test]
fn weak_range_flush_without_dsb_ishst_defers_its_dsb_ish() {
    // `flush_tlb_range_weak` with `dsb(ishst)` dropped: the PTE clear is
    // still buffered at the `dsb(ish)` (a store, not a TLBI), so the DSB is
    // returned to run later: its first step yields, its second drains.
    use kernel::arch::arm64::tlbflush::{flush_tlb_range_weak, Dsb};
    use kernel::hw::memory_model::Order;
    let (mut w, mm, table, old) =
        weak_world_with_a_buffered_pte_clear(3, mo::FLUSH_TLB_RANGE_DSB_ISHST);
    let mut fx = traced();
    let dsb = flush_tlb_range_weak(&mut w, 0, mm, VA, VA + 2 * PAGE_SIZE, true, &mut fx);
    assert!(fx.labels.contains(&Label::BarrierDropped {
        name: mo::FLUSH_TLB_RANGE_DSB_ISHST
    }));
    // The clear is still buffered behind no DSB: the dsb(ish) is deferred.
    let mut dsb = dsb.expect("a store is buffered at the dsb(ish)");
    assert_eq!(
        dsb,
        Dsb {
            name: mo::FLUSH_TLB_RANGE_DSB_ISH,
            order: Order::Full,
            yielded: false,
        }
    );
    assert_eq!(buffered_tlbis(&fx), [VA, VA + PAGE_SIZE]);
    assert_eq!(w.membufs[0].entries.len(), 3, "the clear and two TLBIs");
    assert_eq!(w.mem.read(table, 0), Some(old));
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (2, 1));
    // Its first step only ends the step: the window in which other CPUs'
    // walkers run with the TLBIs in flight.
    let mut fx = traced();
    assert!(matches!(dsb.step(&mut w, 0, &mut fx), Flow::Yield));
    assert_eq!(w.membufs[0].entries.len(), 3, "nothing completed yet");
    for c in 0..2 {
        assert!(cached(&mut w, c, ASID, VA), "CPU{c}: still in flight");
    }
    // The next step executes the dsb(ish): the clear reaches memory, the
    // TLBIs complete on every CPU; the pages around stay.
    assert!(matches!(dsb.step(&mut w, 0, &mut fx), Flow::Return));
    assert!(w.membufs[0].is_empty());
    assert_eq!(w.mem.read(table, 0), Some(0));
    for c in 0..2 {
        assert!(!cached(&mut w, c, ASID, VA), "CPU{c}");
        assert!(!cached(&mut w, c, ASID, VA + PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA - PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, ASID, VA + 2 * PAGE_SIZE), "CPU{c}");
    }
}

/// Pins `store_buffered` in `local_flush_tlb_page_weak`: without `dsb(nshst)` its `dsb(nsh)` waits.
#[test]
fn weak_local_flush_without_dsb_nshst_defers_its_dsb_nsh() {
    // The returned `dsb(nsh)`, two steps later, drains the store and
    // completes the `TLBI VALE1` of the page (the address rounded down) on
    // this CPU only.
    use kernel::arch::arm64::tlbflush::{local_flush_tlb_page_weak, Dsb};
    use kernel::hw::memory_model::Order;
    let (mut w, mm, table, old) =
        weak_world_with_a_buffered_pte_clear(2, mo::LOCAL_FLUSH_DSB_NSHST);
    let mut fx = traced();
    let dsb = local_flush_tlb_page_weak(&mut w, 0, mm, VA + 0x10, &mut fx);
    let mut dsb = dsb.expect("a store is buffered at the dsb(nsh)");
    assert_eq!(
        dsb,
        Dsb {
            name: mo::LOCAL_FLUSH_DSB_NSH,
            order: Order::NonShareable,
            yielded: false,
        }
    );
    assert_eq!(buffered_tlbis(&fx), [VA]);
    assert_eq!(w.mem.read(table, 0), Some(old));
    assert_eq!(w.counters.tlbi_local, 1);
    assert!(matches!(dsb.step(&mut w, 0, &mut fx), Flow::Yield));
    assert!(cached(&mut w, 0, ASID, VA), "in flight");
    assert!(matches!(dsb.step(&mut w, 0, &mut fx), Flow::Return));
    assert!(w.membufs[0].is_empty());
    assert_eq!(w.mem.read(table, 0), Some(0));
    assert!(!cached(&mut w, 0, ASID, VA));
    assert!(cached(&mut w, 0, ASID, VA + PAGE_SIZE));
    assert!(cached(&mut w, 1, ASID, VA), "local: CPU1 keeps it");
}

/// Pins `defer_dsb`: a write upgrade without `dsb(ishst)` pushes its `dsb(ish)` on the task.
#[test]
fn weak_write_upgrade_pushes_a_deferred_dsb_on_the_faulting_task() {
    // The DSB runs in the faulting task's next step; with the barrier in
    // place the flush completes at once and nothing is pushed.
    use kernel::arch::arm64::tlbflush::Dsb;
    use kernel::hw::memory_model::Order;
    for drop in [false, true] {
        let (mut w, mm, table, asid, page) = wp_world(&[]);
        if drop {
            w.cfg.inject.drop_barrier = mo::FLUSH_TLB_RANGE_DSB_ISHST.into();
        }
        let t = w.spawn(mm, 0, vec![], false);
        w.cpus[0].curr = Some(t);
        let entry = pte::make(5, pte::PRESENT | pte::WRITE);
        let mut fx = Effects::default();
        assert!(write_fault(&mut w, mm, table, page, entry, &mut fx));
        let stack = &w.tasks[t as usize].kstack;
        if !drop {
            assert!(stack.is_empty(), "completed in this step");
            assert!(!cached(&mut w, 1, asid, page));
            continue;
        }
        let expect = Dsb {
            name: mo::FLUSH_TLB_RANGE_DSB_ISH,
            order: Order::Full,
            yielded: false,
        };
        assert!(
            stack.len() == 1 && matches!(stack.last(), Some(Frame::Arm64Dsb(d)) if *d == expect),
            "the dsb(ish) is pushed"
        );
        assert!(cached(&mut w, 1, asid, page), "the TLBI is in flight");
    }
}

/// Pins `tlbi_ops`' guard: past `MAX_TLBI_RANGE_PAGES`, what scales 3..0 leave is one op a page.
#[test]
fn tlbi_ops_past_max_tlbi_range_pages_counts_the_rest_per_page() {
    // `__flush_tlb_range` never asks so (it takes the whole ASID past
    // `MAX_TLBI_RANGE_PAGES`); the guard keeps the count finite.
    use kernel::arch::arm64::tlbflush::{tlbi_ops, MAX_TLBI_RANGE_PAGES as MAX};
    // Scale 3's largest op, then a single-page op.
    assert_eq!(tlbi_ops(MAX + 1, true), 2);
    // Each scale's largest op: 32 << (5 * scale + 1) pages; the rest one
    // op a page.
    let rest = 2 * MAX - MAX - (1 << 16) - (1 << 11) - (1 << 6);
    assert_eq!(tlbi_ops(2 * MAX, true), 4 + rest);
}

/// Pins `tlb_flush`'s `last_level`: only a gather that freed a table drops the walk caches.
#[test]
fn tlb_flush_drops_walk_caches_only_when_tables_were_freed() {
    use kernel::arch::arm64::tlbflush::tlb_flush;
    // asm/tlb.h: `last_level = !tlb->freed_tables`: `TLBI VALE1IS` (leaf
    // entries only) for a zap that freed no table, `TLBI VAE1IS` (the walk
    // cache too) on every CPU for one that did.
    for freed in [false, true] {
        let (mut w, mm) = tlbi_world(1);
        let t = w.spawn(mm, 0, vec![], false);
        for c in 0..2 {
            w.cpus[c].tlb.psc_fill(ASID, VA, 9, 0);
        }
        let g = &mut w.tasks[t as usize].gather;
        g.tlb_gather_mmu(mm);
        g.remove_page(11, VA);
        if freed {
            g.remove_table(9, VA);
        }
        let mut fx = traced();
        assert!(matches!(tlb_flush(&mut w, t, &mut fx), Flow::Yield));
        for c in 0..2 {
            assert!(!cached(&mut w, c, ASID, VA), "CPU{c}, freed {freed}");
            assert!(cached(&mut w, c, ASID, VA - PAGE_SIZE), "CPU{c}");
            let walk = w.cpus[c].tlb.psc_lookup(ASID, VA).is_some();
            assert_eq!(walk, !freed, "CPU{c}'s walk cache, freed {freed}");
        }
        assert_eq!(tlbi_labels(&fx), [(ASID, VA, Some(1), 1)]);
    }
}

/// Pins `tlbi_ops`: `(num + 1) << (5 * scale + 1)` pages per range op, scales 3..0, odd page alone.
#[test]
fn range_tlbi_op_count_is_the_encodings_decomposition() {
    use kernel::arch::arm64::tlbflush::tlbi_ops;
    // Without FEAT_TLBIRANGE one op a page.
    assert_eq!(tlbi_ops(5, false), 5);
    // 1: the single-page op; 2: scale 0, num 0; 3: that and a single.
    assert_eq!(tlbi_ops(1, true), 1);
    assert_eq!(tlbi_ops(2, true), 1);
    assert_eq!(tlbi_ops(3, true), 2);
    // 64 = scale 1, num 0; 66 = that and scale 0, num 0; 512 = scale 1,
    // num 7; 513 = that and a single; 2048 = scale 2, num 0.
    assert_eq!(tlbi_ops(64, true), 1);
    assert_eq!(tlbi_ops(66, true), 2);
    assert_eq!(tlbi_ops(512, true), 1);
    assert_eq!(tlbi_ops(513, true), 2);
    assert_eq!(tlbi_ops(2048, true), 1);
    // 2^21 - 1 = 31 << 16 + 31 << 11 + 31 << 6 + 31 << 1 + 1: num 30 at
    // each of scales 3, 2, 1, 0, then a single: 5 ops.
    assert_eq!(tlbi_ops((1 << 21) - 1, true), 5);
    assert_eq!(tlbi_ops(0, true), 0);
}

/// Pins `end - start >= MAX_DVM_OPS * stride` high in the address space: 512 pages are the ASID.
#[test]
fn without_range_tlbi_512_pages_high_up_are_the_whole_asid() {
    use kernel::arch::arm64::tlbflush::{__flush_tlb_range, MAX_DVM_OPS};
    // Without FEAT_TLBIRANGE, `MAX_DVM_OPS` strides from `VA` (where
    // `end / start` is 1): `flush_tlb_mm`, one `TLBI ASIDE1IS`, so the page
    // below the range goes too, on every CPU; another ASID's entry stays.
    let (mut w, mm) = tlbi_world(1);
    let mut fx = traced();
    let end = VA + MAX_DVM_OPS * PAGE_SIZE;
    __flush_tlb_range(&mut w, mm, VA, end, PAGE_SIZE, true, &mut fx);
    assert_eq!(tlbi_labels(&fx), [(ASID, 0, None, 1)]);
    for c in 0..2 {
        assert!(!cached(&mut w, c, ASID, VA - PAGE_SIZE), "CPU{c}");
        assert!(cached(&mut w, c, ASID + 1, VA), "CPU{c}");
    }
    assert_eq!((w.counters.tlbi_is, w.counters.dsb_ish), (1, 1));
}
