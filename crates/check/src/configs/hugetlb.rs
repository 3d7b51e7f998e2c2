//! hugetlb PMD sharing: the unshare of a PMD table a lazy CPU still caches.

use super::P;
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario};

/// Two mms map one hugetlb file at the same 1 GiB-aligned address and share
/// its PMD table. CPU1, a thread of mm A, touches the huge page (its walker
/// caches A's PUD entry -> the shared table) and exits, leaving CPU1 lazy in
/// A. CPU0 (A) and CPU2 (B) each unmap: the first unshares, the last user
/// clears the table's entries and frees it.
pub(super) fn hugetlb_unshare(s: &Scenario) -> Result<World, Error> {
    let mut s = s.clone();
    s.machine.cpus = s.machine.cpus.max(3);
    let mut w = World::new(&s)?;
    let len = machine::HPAGE_SIZE;
    let a = w.mm_alloc()?;
    let b = w.mm_alloc()?;
    w.add_vma_hugetlb(a, P, len);
    w.add_vma_hugetlb(b, P, len);
    let touch = UserOp::Touch {
        addr: P,
        write: true,
    };
    let unmap = UserOp::Munmap { start: P, len };
    w.spawn(a, 1, vec![touch.clone(), UserOp::Exit], true);
    w.spawn(a, 0, vec![touch.clone(), unmap.clone(), UserOp::Exit], true);
    w.spawn(b, 2, vec![touch, unmap, UserOp::Exit], true);
    Ok(w)
}

/// [`hugetlb_unshare`] with a second thread of the sharing process `a`
/// on CPU 3, touching the shared PMD's page like CPU 1's (the scale
/// variant: one more CPU the unshare must reach).
pub(super) fn hugetlb_unshare_4cpu(s: &Scenario) -> Result<World, Error> {
    let mut w = hugetlb_unshare(s)?;
    if w.cpus.len() < 4 {
        return Err(Error::Config(
            "x86_hugetlb_unshare_seed_4cpu needs machine.cpus >= 4".into(),
        ));
    }
    let a = (w.tasks.iter().find(|t| t.cpu == 1))
        .expect("hugetlb_unshare spawns a thread of the sharing process on CPU 1")
        .mm;
    let touch = UserOp::Touch {
        addr: P,
        write: true,
    };
    w.spawn(a, 3, vec![touch, UserOp::Exit], true);
    Ok(w)
}
