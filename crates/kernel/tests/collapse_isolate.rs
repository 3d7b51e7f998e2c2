//! mm/khugepaged.c `collapse_huge_page` against a GUP-fast FOLL_PIN
//! (issue 15 item 9): `hpage_collapse_scan_pmd` and, after the flush and
//! the sync, `__collapse_huge_page_isolate` check every page's refcount
//! against its mapcount (`is_refcount_suitable`); a pin fails the collapse
//! with `SCAN_PAGE_COUNT`, the PMD is put back, `MADV_COLLAPSE` returns
//! -EAGAIN. Schedules are chosen step by step, so the counts are exact.

use kernel::mm::gup::GUP_PIN_COUNTING_BIAS;
use kernel::mm::khugepaged::{Pc, ScanResult, EAGAIN};
use kernel::user::UserOp;
use kernel::world::{Frame, StepKind};
use kernel::{Effects, MmId, World};
use machine::mem::{pte, FrameUse};
use machine::{CpuId, Scenario, HPAGE_SIZE};

const P: u64 = 0x7f00_0000_0000;

/// CPU0 MADV_COLLAPSEs a populated 2 MiB; CPU1 pins its first page
/// (GUP-fast of one page), then unpins and exits.
fn world(sets: &[&str]) -> (World, MmId) {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    for kv in sets {
        s.set(kv).unwrap();
    }
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, P, HPAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + HPAGE_SIZE).unwrap();
    w.spawn(
        mm,
        0,
        vec![UserOp::MadviseCollapse {
            start: P,
            len: HPAGE_SIZE,
        }],
        true,
    );
    let gup = UserOp::GupFast {
        base: P,
        span: 512,
        pages: 1,
        stride: 1,
    };
    // Neither program ends in `exit()`: the tasks just leave, and the mm
    // is not torn down (`exit_mmap`) before the tests look at its PMD.
    w.spawn(mm, 1, vec![gup, UserOp::UnpinUserPages], true);
    (w, mm)
}

/// Take enabled steps that `allow` admits (the first such, in `enabled`
/// order) until `done` holds; panics if the schedule gets stuck.
fn drive(
    w: &mut World,
    allow: impl Fn(&World, CpuId, StepKind) -> bool,
    done: impl Fn(&World) -> bool,
) {
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    for _ in 0..10_000 {
        if done(w) {
            return;
        }
        w.enabled(&mut en);
        let Some(&(c, k)) = en.iter().find(|&&(c, k)| allow(w, c, k)) else {
            panic!(
                "stuck: nothing allowed among {en:?}; kstacks {:?} / {:?}; pcs {} {}",
                w.tasks[0].kstack, w.tasks[1].kstack, w.tasks[0].us.pc, w.tasks[1].us.pc
            );
        };
        fx.clear();
        w.step(c, k, &mut fx);
    }
    panic!("did not finish");
}

/// The collapse frame's program point on CPU0's task (task 0).
fn collapse_pc(w: &World) -> Option<Pc> {
    w.tasks[0].kstack.iter().find_map(|f| match f {
        Frame::CollapseHugePage(c) => Some(c.pc),
        _ => None,
    })
}

fn pmd(w: &World, mm: MmId) -> u64 {
    kernel::mm::gup::read_pmd(w, mm, P).unwrap().1
}

fn fails(w: &World, r: ScanResult) -> u64 {
    w.counters.collapse_fail[ScanResult::ALL.iter().position(|&x| x == r).unwrap()]
}

fn exited(w: &World, t: usize) -> bool {
    w.tasks[t].state == kernel::world::TaskState::Exited
}

/// The pin lands after the scan and before `pmdp_collapse_flush` (CPU0 is
/// stopped at `Pc::Flush`): the scan saw refcount == mapcount, the isolate
/// after the flush and the sync does not. The collapse fails with
/// SCAN_PAGE_COUNT: the PMD is the original table again, the new huge page
/// is freed, MADV_COLLAPSE returns -EAGAIN. The flush and the sync still
/// happened (one TLB IPI and one sync IPI to CPU1). The old model (GUP-fast
/// took no lasting reference, the isolate could not fail) collapsed it:
/// `collapses` = 1 and a huge PMD.
#[test]
fn a_pin_taken_after_the_scan_fails_the_isolate_and_the_pmd_is_restored() {
    let (mut w, mm) = world(&[]);
    let before = pmd(&w, mm);
    let table = pte::pfn(before);
    let page = w.mem.read(table, 0).map(pte::pfn).unwrap();
    drive(
        &mut w,
        |_, c, _| c == 0,
        |w| collapse_pc(w) == Some(Pc::Flush),
    );
    let in_use = w.mem.in_use();
    drive(&mut w, |_, c, _| c == 1, |w| !w.tasks[1].pins.is_empty());
    assert_eq!(w.tasks[1].pins, vec![(page, GUP_PIN_COUNTING_BIAS)]);
    assert_eq!(w.mem.ref_count(page), 1 + GUP_PIN_COUNTING_BIAS as u32);
    // CPU1 keeps its pin (it only takes interrupts) until CPU0 is done.
    drive(
        &mut w,
        |_, c, k| c == 0 || k == StepKind::TakeIrq,
        |w| exited(w, 0),
    );
    assert!(w.violations.is_empty(), "{:?}", w.violations);
    assert_eq!(w.counters.collapses, 0);
    assert_eq!(fails(&w, ScanResult::PageCount), 1);
    assert_eq!(w.counters.collapse_pmd_restored, 1);
    assert_eq!(w.counters.madv_collapse_eagain, 1);
    assert_eq!(w.tasks[0].us.ret, -EAGAIN);
    assert_eq!(pmd(&w, mm), before, "pmd_populate of the old table");
    assert_eq!(w.mem.usage(table), FrameUse::Table(1));
    assert_eq!(w.mem.in_use(), in_use - 1, "the new huge folio is put");
    // pmdp_collapse_flush's flush and tlb_remove_table_sync_one each
    // interrupted CPU1 once before the isolate looked.
    assert_eq!(w.counters.irq_tlb[1], 1);
    assert_eq!(w.counters.irq_cal[1], 2);
    // The pinner unpins: the page is still mapped, so it stays.
    drive(&mut w, |_, _, _| true, |w| exited(w, 1));
    assert_eq!(w.mem.ref_count(page), 1);
    assert_eq!(w.mem.usage(page), FrameUse::Anon);
}

/// A pin already held when `hpage_collapse_scan_pmd` looks: SCAN_PAGE_COUNT
/// at the scan, before any lock for write, flush or IPI; the PMD never
/// changes. The old model collapsed (no lasting pin, no refcount check).
#[test]
fn a_pin_held_at_the_scan_fails_it_without_a_flush() {
    let (mut w, mm) = world(&[]);
    let before = pmd(&w, mm);
    drive(&mut w, |_, c, _| c == 1, |w| !w.tasks[1].pins.is_empty());
    drive(&mut w, |_, c, _| c == 0, |w| exited(w, 0));
    assert_eq!(w.counters.collapses, 0);
    assert_eq!(fails(&w, ScanResult::PageCount), 1);
    assert_eq!(w.counters.collapse_pmd_restored, 0);
    assert_eq!(w.tasks[0].us.ret, -EAGAIN);
    assert_eq!(pmd(&w, mm), before);
    assert_eq!(w.counters.irq_tlb.iter().sum::<u64>(), 0);
    assert_eq!(w.counters.irq_cal.iter().sum::<u64>(), 0);
}

/// Unpinned before the collapse scans: it succeeds and MADV_COLLAPSE
/// returns 0; the 512 small pages are released (the GUP reference is gone).
#[test]
fn an_unpinned_range_collapses() {
    let (mut w, mm) = world(&[]);
    drive(&mut w, |_, c, _| c == 1, |w| exited(w, 1));
    let in_use = w.mem.in_use();
    drive(&mut w, |_, _, _| true, |w| exited(w, 0));
    assert!(w.violations.is_empty());
    assert_eq!(w.counters.collapses, 1);
    assert_eq!(w.counters.collapse_fail.iter().sum::<u64>(), 0);
    assert_eq!(w.tasks[0].us.ret, 0);
    assert!(pte::huge(pmd(&w, mm)));
    // + 1 huge page, - 512 small pages (the table is deposited, not freed).
    assert_eq!(w.mem.in_use(), in_use + 1 - 512);
}

/// `inject.collapse_skip_refcount_check`: the same schedule as the first
/// test collapses the pinned page; the monitor's invariant 9 names it.
#[test]
fn skipping_the_refcount_check_is_caught() {
    let (mut w, _) = world(&["inject.collapse_skip_refcount_check=true"]);
    drive(
        &mut w,
        |_, c, _| c == 0,
        |w| collapse_pc(w) == Some(Pc::Flush),
    );
    drive(&mut w, |_, c, _| c == 1, |w| !w.tasks[1].pins.is_empty());
    drive(
        &mut w,
        |_, c, k| c == 0 || k == StepKind::TakeIrq,
        |w| exited(w, 0),
    );
    assert_eq!(w.counters.collapses, 1);
    assert_eq!(w.violations.len(), 1);
    assert_eq!(w.violations[0].invariant, 9);
    // The report names the pinner: CPU1's task (id 1), not "a task".
    assert!(
        w.violations[0].what.contains("task 1 still pins it"),
        "{}",
        w.violations[0].what
    );
}

/// Drive as `drive` does, adding up the charges of `class` on the way.
fn charged(
    w: &mut World,
    class: machine::Cost,
    allow: impl Fn(CpuId, StepKind) -> bool,
    done: impl Fn(&World) -> bool,
) -> u32 {
    let (mut en, mut fx, mut n) = (Vec::new(), Effects::default(), 0);
    while !done(w) {
        w.enabled(&mut en);
        let &(c, k) = en.iter().find(|&&(c, k)| allow(c, k)).expect("not stuck");
        fx.clear();
        w.step(c, k, &mut fx);
        n += fx
            .charges
            .iter()
            .map(|ch| match ch {
                kernel::effects::Charge::Cost(c, k) if *c == class => *k,
                _ => 0,
            })
            .sum::<u32>();
    }
    n
}

/// A scan stopped by a pin is priced as the PTE walk alone
/// (`collapse_scan`); any other attempt as the fitted set-up
/// (`collapse_setup`, scan + allocation + locks), once each.
#[test]
fn a_scan_stopped_by_a_pin_costs_the_walk_not_the_set_up() {
    use machine::Cost::{CollapseScan, CollapseSetup};
    for (class, pinned, want) in [
        (CollapseScan, true, 1),
        (CollapseSetup, true, 0),
        (CollapseScan, false, 0),
        (CollapseSetup, false, 1),
    ] {
        let (mut w, _) = world(&[]);
        if pinned {
            drive(&mut w, |_, c, _| c == 1, |w| !w.tasks[1].pins.is_empty());
        }
        let cpu0 = |c, k| c == 0 || k == StepKind::TakeIrq;
        let n = charged(&mut w, class, cpu0, |w| exited(w, 0));
        assert_eq!(n, want, "{class:?}, pinned {pinned}");
    }
}

/// A collapse that finds, at `mmap_write_lock`, that a racing collapse made
/// the PMD huge already: `check_pmd_still_valid` → `find_pmd_or_thp_or_none`
/// returns `SCAN_PMD_MAPPED`, which `madvise_collapse` counts as done
/// (return 0). The model used to report `SCAN_PMD_NULL` and -EINVAL.
#[test]
fn a_racing_collapse_that_made_the_pmd_huge_counts_as_done() {
    use kernel::mm::mmap_lock::{mmap_read_lock, mmap_read_unlock};
    let (mut w, mm) = world(&[]);
    w.tasks[1].us.pc = 2; // CPU1's task just exits: only CPU0 collapses.
    let mut fx = Effects::default();
    // Another task holds mmap_lock for read: the scan shares it, the
    // collapse then sleeps in mmap_write_lock, queued (Pc::LockWait).
    assert!(mmap_read_lock(&mut w, mm, 1, &mut fx));
    drive(
        &mut w,
        |_, c, k| c == 0 && k == StepKind::Run,
        |w| collapse_pc(w) == Some(Pc::LockWait) && !w.can_run(0),
    );
    // Meanwhile the range became huge (a racing collapse installed it).
    let (pmd_table, _) = kernel::mm::gup::read_pmd(&w, mm, P).expect("a PMD");
    let huge = w.mem.alloc(FrameUse::Anon).unwrap();
    let idx = machine::mem::table_index(P, 2);
    w.mem.write(
        pmd_table,
        idx,
        pte::make(huge, pte::PRESENT | pte::HUGE | pte::WRITE | pte::USER),
    );
    mmap_read_unlock(&mut w, mm, &mut fx);
    drive(
        &mut w,
        |_, c, k| c == 0 && k == StepKind::Run,
        |w| w.tasks[0].kstack.is_empty() && w.tasks[0].us.pc >= 1,
    );
    assert_eq!(w.tasks[0].us.ret, 0, "SCAN_PMD_MAPPED: the range is done");
    let pmd_null = ScanResult::ALL
        .iter()
        .position(|r| *r == ScanResult::PmdNull)
        .unwrap();
    assert_eq!(w.counters.collapse_fail[pmd_null], 0);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// `tlb_remove_table_sync_one` → `smp_call_function`, which runs with
/// preemption disabled (kernel/smp.c: `preempt_disable()` around
/// `smp_call_function_many`): while CPU0 waits for CPU1 to run the sync,
/// its preempt count is up (so it is not preempted there and counts as an
/// RCU reader), and it is back to zero once the call returns. The model
/// waited preemptibly until issue 35.
#[test]
fn the_sync_waits_with_preemption_off() {
    use kernel::kernel_smp::{CallFunc, Pc as SmpPc};
    let (mut w, _) = world(&["machine.preemption=full"]);
    w.tasks[1].us.pc = 2; // CPU1 only answers IPIs.
    let sync_waiting = |w: &World| {
        w.tasks[0].kstack.iter().any(|f| {
            matches!(f, Frame::SmpCallFunctionManyCond(s)
                if s.func == CallFunc::TlbRemoveTableSmpSync && s.pc == SmpPc::Wait)
        })
    };
    drive(&mut w, |_, c, k| c == 0 && k == StepKind::Run, sync_waiting);
    assert!(
        w.cpus[0].preempt_count > 0,
        "the wait runs with preemption off"
    );
    drive(
        &mut w,
        |_, c, k| c == 1 || k == StepKind::Run,
        |w| !sync_waiting(w),
    );
    let in_call = |w: &World| {
        w.tasks[0]
            .kstack
            .iter()
            .any(|f| matches!(f, Frame::SmpCallFunctionManyCond(_)))
    };
    drive(
        &mut w,
        |_, c, k| c == 0 && k == StepKind::Run,
        |w| !in_call(w),
    );
    assert_eq!(
        w.cpus[0].preempt_count, 0,
        "preempt_enable() after the call"
    );
}

/// Seed (b) step 2 (`mm.targeted_table_sync`), where the PMD stores go
/// through the store buffer: the restore (`pmd_populate` under the PMD
/// lock) reaches memory before `mmap_write_unlock` frees the lock, both
/// releases (on x86 locked instructions). The schedule of the first test
/// under x86-TSO, CPU0's buffer never drained by a `Drain` step, and
/// CPU0's task then reads the range back: its walk (which does not look
/// in the store buffer) finds the old table with every page present, no
/// fault. The old model left the restore buffered past the unlock: the
/// walk found the PMD empty, the fault installed a second PTE table
/// (zeroed page included), and the late restore then overwrote it.
#[test]
fn the_restored_pmd_is_in_memory_before_the_unlock() {
    let (mut w, mm) = world(&["mm.targeted_table_sync=true"]);
    w.cfg.memory_model = kernel::hw::memory_model::MemoryModel::Tso;
    w.tasks[0].prog = vec![
        UserOp::MadviseCollapse {
            start: P,
            len: HPAGE_SIZE,
        },
        UserOp::Touch {
            addr: P,
            write: false,
        },
    ]
    .into();
    let before = pmd(&w, mm);
    let in_use = w.mem.in_use();
    let no_drain = |k: StepKind| !matches!(k, StepKind::Drain { .. });
    drive(
        &mut w,
        |_, c, k| c == 0 && no_drain(k),
        |w| collapse_pc(w) == Some(Pc::Flush),
    );
    drive(&mut w, |_, c, _| c == 1, |w| !w.tasks[1].pins.is_empty());
    drive(
        &mut w,
        |_, c, k| (c == 0 && no_drain(k)) || k == StepKind::TakeIrq,
        |w| exited(w, 0),
    );
    assert_eq!(w.counters.collapse_pmd_restored, 1);
    assert_eq!(w.counters.page_faults, 0, "the read hit the old table");
    assert_eq!(pmd(&w, mm), before);
    assert_eq!(w.mem.in_use(), in_use, "no second table, no new page");
}
