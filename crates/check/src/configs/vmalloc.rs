//! Kernel-range flushes: vfree against a CPU reading the vmalloc'd object.

use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario};

/// RISC-V: hart 0 vmallocs a page, vfrees it and vmallocs again; hart 1,
/// running its own process, reads the object in system calls. The area
/// has `VM_FLUSH_RESET_PERMS` (module or BPF memory), so `vfree` purges the
/// lazy areas and flushes before it returns (`vm_reset_perms` →
/// `_vm_unmap_aliases` → `__purge_vmap_area_lazy`) and the second vmalloc
/// gets the same address back: the flush is what keeps hart 1's global
/// entry from reaching the freed page. (A plain vfree would leave the
/// area lazy, below `lazy_max_pages()`, and the address unused.)
pub(super) fn vmalloc_vs_reader(s: &Scenario) -> Result<World, Error> {
    world(s, true)
}

/// The same with a plain `vfree`: the area stays on the lazy list
/// (`vmap_lazy_nr` = 2 pages, far below `lazy_max_pages()`), nothing is
/// flushed, and the second vmalloc gets the next address, which no CPU
/// has cached: hart 1's stale entry names an address nobody uses.
pub(super) fn vfree_lazy_vs_reader(s: &Scenario) -> Result<World, Error> {
    world(s, false)
}

fn world(s: &Scenario, reset_perms: bool) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let alloc = UserOp::Vmalloc {
        obj: 0,
        pages: 1,
        reset_perms,
    };
    let mm = w.mm_alloc()?;
    w.spawn(
        mm,
        0,
        vec![alloc.clone(), UserOp::Vfree { obj: 0 }, alloc, UserOp::Exit],
        true,
    );
    let other = w.mm_alloc()?;
    let read = UserOp::KernelRead { obj: 0 };
    w.spawn(
        other,
        1,
        vec![read.clone(), read.clone(), read, UserOp::Exit],
        true,
    );
    Ok(w)
}
