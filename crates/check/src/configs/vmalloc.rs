//! Kernel-range flushes: vfree against a CPU reading the vmalloc'd object.

use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario};

/// RISC-V: hart 0 vmallocs a page, vfrees it and vmallocs the address
/// again; hart 1, running its own process, reads the object in system calls.
pub(super) fn vmalloc_vs_reader(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let va = 0x0000_c000_0000_0000;
    let mm = w.mm_alloc()?;
    w.spawn(
        mm,
        0,
        vec![
            UserOp::Vmalloc { va },
            UserOp::Vfree { va },
            UserOp::Vmalloc { va },
            UserOp::Exit,
        ],
        true,
    );
    let other = w.mm_alloc()?;
    w.spawn(
        other,
        1,
        vec![
            UserOp::KernelRead { va },
            UserOp::KernelRead { va },
            UserOp::KernelRead { va },
            UserOp::Exit,
        ],
        true,
    );
    Ok(w)
}
