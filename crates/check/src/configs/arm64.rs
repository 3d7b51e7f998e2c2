//! arm64: the write-protect fault reuse race (seed c) and ASID rollover.

use super::P;
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

/// arm64, after fork + exec: P is mapped read-only (write-protected by the
/// fork) but exclusive again (the child is gone). Both threads read it
/// (caching the read-only entry), then write it: the first writer reuses
/// the page, the other must get rid of its stale entry.
pub(super) fn wp_reuse_race(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + PAGE_SIZE)?;
    let t = kernel::mm::memory::pte_table(&w, mm, P).expect("populated");
    let i = machine::mem::table_index(P, 1);
    let e = w.mem.read(t, i).unwrap_or(0);
    w.mem.write(t, i, e & !machine::mem::pte::WRITE);
    let prog = vec![
        UserOp::Touch {
            addr: P,
            write: false,
        },
        UserOp::Touch {
            addr: P,
            write: true,
        },
        UserOp::Exit,
    ];
    for c in 0..w.cpus.len() as u16 {
        w.spawn(mm, c, prog.clone(), true);
    }
    Ok(w)
}

/// Four processes, each with P populated, time-share CPU0: each reads P,
/// yields, reads P again and exits. With 2-bit ASIDs (1..=3 usable) the
/// fourth process's first switch finds no free ASID and rolls over.
pub(super) fn asid_rollover(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let read = UserOp::Touch {
        addr: P,
        write: false,
    };
    for _ in 0..4 {
        let mm = process_with_p(&mut w)?;
        w.spawn(
            mm,
            0,
            vec![read.clone(), UserOp::Yield, read.clone(), UserOp::Exit],
            true,
        );
    }
    Ok(w)
}

/// arm64 `check_and_switch_context`'s lockless fast path against a
/// rollover on the other CPU (2-bit ASIDs: 1..=3 usable). CPU1 switches
/// between processes X and Y (after their first switch each has an ASID,
/// so later switches take the fast path), then runs a thread of process B;
/// CPU0 runs A and B, whose first switch finds no free ASID and rolls the
/// generation over while CPU1 may be between its fast path's reads and
/// its `cmpxchg`.
pub(super) fn asid_fastpath_vs_rollover(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let read = UserOp::Touch {
        addr: P,
        write: false,
    };
    let (x, y) = (process_with_p(&mut w)?, process_with_p(&mut w)?);
    let (a, b) = (process_with_p(&mut w)?, process_with_p(&mut w)?);
    let switcher = vec![read.clone(), UserOp::Yield, read.clone(), UserOp::Exit];
    w.spawn(x, 1, switcher.clone(), true);
    w.spawn(y, 1, switcher, true);
    w.spawn(b, 1, vec![read.clone(), UserOp::Exit], true);
    let once = vec![read.clone(), UserOp::Yield, UserOp::Exit];
    w.spawn(a, 0, once.clone(), true);
    w.spawn(b, 0, once, true);
    Ok(w)
}

/// A new process (mm) with page P mapped and populated.
fn process_with_p(w: &mut World) -> Result<kernel::MmId, Error> {
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    kernel::mm::memory::populate_range(w, mm, P, P + PAGE_SIZE)?;
    Ok(mm)
}
