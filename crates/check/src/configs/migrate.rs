//! Page migration against GUP-fast and a concurrent access (issue 35 item
//! 5): `migrate_pages_batch` unmaps a page another CPU has cached and may
//! be pinning, flushes the batch (`try_to_unmap_flush`), then moves it
//! (refcount check, copy, PTE to the new frame) and frees the old frame.

use super::P;
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

/// CPU0 runs `migratepages` (another process) migrating page P from node
/// 0 to node 1; CPU1, a thread of the process, writes P (caching its
/// translation), pins it with GUP-fast, reads it, unpins it and reads it
/// again. Needs a machine with two NUMA nodes (`machine.topology =
/// two_nodes`).
pub(super) fn migrate_vs_gup(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    if w.cfg.topology.nr_nodes() < 2 {
        return Err(Error::Config(
            "migrate_vs_gup needs 2 NUMA nodes (machine.topology = \"two_nodes\")".into(),
        ));
    }
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + PAGE_SIZE)?;
    let tool = w.mm_alloc()?;
    let migrate = UserOp::MigratePages {
        mm,
        start: P,
        len: PAGE_SIZE,
        from: 0,
        to: 1,
    };
    w.spawn(tool, 0, vec![migrate, UserOp::Exit], true);
    let touch = |write| UserOp::Touch { addr: P, write };
    let pin = UserOp::GupFast {
        base: P,
        span: 1,
        pages: 1,
        stride: 1,
    };
    let prog = vec![
        touch(true),
        pin,
        touch(false),
        UserOp::UnpinUserPages,
        touch(false),
        UserOp::Exit,
    ];
    w.spawn(mm, 1, prog, false);
    Ok(w)
}
