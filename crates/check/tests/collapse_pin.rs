//! `x86_collapse_vs_pin`: every interleaving of CPU0's `MADV_COLLAPSE`
//! against CPU1's GUP-fast pin (held for one I/O). The old model had no
//! lasting pin and an isolate that could not fail: its only end was a
//! collapsed 2 MiB. Now the three ends of the kernel are all reachable,
//! each told apart by state the run leaves: MADV_COLLAPSE's return value,
//! the PMD, and `context.tlb_gen` (bumped only by the collapse's flush).

use check::configs::{build, CATALOGUE};
use check::fingerprint;
use kernel::mm::khugepaged::EAGAIN;
use kernel::world::TaskState;
use kernel::{Effects, World};
use machine::mem::pte;
use std::collections::HashSet;

#[derive(Debug, PartialEq, Eq, Hash)]
enum End {
    Collapsed,
    /// SCAN_PAGE_COUNT at `hpage_collapse_scan_pmd`: no flush.
    FailedAtScan,
    /// SCAN_PAGE_COUNT at `__collapse_huge_page_isolate`: flushed, synced,
    /// PMD restored.
    FailedAtIsolate,
}

/// The end a world shows, or None once the last exit is tearing the mm
/// down (`exit_mmap` cleared the PMD or freed its table: every end leaves
/// a present PMD, so nothing is left to tell them apart).
fn end(w: &World) -> Option<End> {
    let pmd = kernel::mm::gup::read_pmd(w, 1, 0x7f00_0000_0000)?.1;
    pte::present(pmd).then(|| end_of(w, pmd))
}

fn end_of(w: &World, pmd: u64) -> End {
    match (w.tasks[0].us.ret, *w.mms[1].tlb_gen) {
        (0, _) => {
            assert!(pte::huge(pmd));
            End::Collapsed
        }
        (r, 1) if r == -EAGAIN => {
            assert!(!pte::huge(pmd));
            End::FailedAtScan
        }
        (r, _) if r == -EAGAIN => {
            assert!(pte::present(pmd) && !pte::huge(pmd), "restored");
            End::FailedAtIsolate
        }
        (r, _) => panic!("MADV_COLLAPSE returned {r}"),
    }
}

#[test]
fn the_pin_race_reaches_every_end_and_no_violation() {
    let c = CATALOGUE
        .iter()
        .find(|c| c.name == "x86_collapse_vs_pin")
        .unwrap();
    let init = build(c, &[]).unwrap();
    let (mut seen, mut ends) = (HashSet::new(), HashSet::new());
    let (mut todo, mut en, mut fx) = (vec![init], Vec::new(), Effects::default());
    while let Some(w) = todo.pop() {
        if !seen.insert(fingerprint(&w)) {
            continue;
        }
        assert!(w.violations.is_empty(), "{:?}", w.violations);
        if w.tasks[0].state == TaskState::Exited {
            ends.extend(end(&w));
        }
        w.enabled(&mut en);
        for &(cpu, kind) in &en {
            let mut next = w.clone();
            fx.clear();
            next.step(cpu, kind, &mut fx);
            todo.push(next);
        }
    }
    assert_eq!(
        ends,
        HashSet::from([End::Collapsed, End::FailedAtScan, End::FailedAtIsolate])
    );
}
