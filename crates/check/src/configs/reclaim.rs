//! Reclaim's batched unmap flush against a concurrent access (issue 35
//! item 5): kswapd frees a page whose translation another CPU may still
//! hold; `try_to_unmap_flush` must run before the free.

use super::P;
use kernel::user::UserOp;
use kernel::{World, INIT_MM};
use machine::{Error, Scenario, PAGE_SIZE};

/// kswapd (a kernel thread on CPU0) reclaims page P twice; CPU1, a thread
/// of the process, writes P and then reads it three times (faulting it
/// back in from swap when it was reclaimed).
pub(super) fn kswapd_vs_reader(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, PAGE_SIZE);
    let pass = UserOp::Kswapd {
        mm,
        start: P,
        len: PAGE_SIZE,
    };
    w.spawn(INIT_MM, 0, vec![pass.clone(), pass, UserOp::Exit], true);
    let touch = |write| UserOp::Touch { addr: P, write };
    let reads = [touch(true), touch(false), touch(false), touch(false)];
    w.spawn(mm, 1, [&reads[..], &[UserOp::Exit]].concat(), false);
    Ok(w)
}
