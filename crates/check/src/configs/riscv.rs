//! RISC-V: a deferred flush against a hart switching into the mm (seed d).

use super::P;
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

/// RISC-V, 2 harts: hart 0 writes P and madvises it away; on hart 1 a
/// thread of the same mm reads P, yields to a process of another mm, and
/// reads P again when it is switched back in.
pub(super) fn defer_vs_switch(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + PAGE_SIZE)?;
    w.spawn(
        mm,
        0,
        vec![
            UserOp::MadviseDontneed {
                start: P,
                len: PAGE_SIZE,
            },
            UserOp::Touch {
                addr: P,
                write: true,
            },
            UserOp::Exit,
        ],
        true,
    );
    let read = UserOp::Touch {
        addr: P,
        write: false,
    };
    for hart in 1..w.cpus.len() as u16 {
        w.spawn(
            mm,
            hart,
            vec![read.clone(), UserOp::Yield, read.clone(), UserOp::Exit],
            true,
        );
        let other = w.mm_alloc()?;
        w.spawn(other, hart, vec![UserOp::Yield, UserOp::Exit], true);
    }
    Ok(w)
}

/// RISC-V, 2 harts: hart 0 writes P and madvises it away; on hart 1 a
/// thread of the same mm first yields to a process of another mm and
/// reads P only when it is switched back in. No access of hart 1 falls
/// between its first switch into the mm and the madvise: only a
/// speculative walk (`machine.speculative_walks`) can cache P there.
pub(super) fn switch_then_read(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + PAGE_SIZE)?;
    let madvise = UserOp::MadviseDontneed {
        start: P,
        len: PAGE_SIZE,
    };
    w.spawn(mm, 0, vec![madvise, UserOp::Exit], true);
    let read = UserOp::Touch {
        addr: P,
        write: false,
    };
    w.spawn(mm, 1, vec![UserOp::Yield, read, UserOp::Exit], true);
    let other = w.mm_alloc()?;
    w.spawn(other, 1, vec![UserOp::Yield, UserOp::Exit], true);
    Ok(w)
}
