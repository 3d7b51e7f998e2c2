//! `World::task_perm`: the task renaming that goes with a CPU permutation
//! (the symmetry reduction's; `kernel::symmetry`). The k-th task of CPU
//! `c` (in id order) becomes the k-th task of CPU `perm[c]`, and a
//! permutation between CPUs holding different numbers of tasks applies to
//! no world.

mod common;

use kernel::user::UserOp;
use machine::scenario::Arch;

#[test]
fn tasks_follow_their_cpus_in_id_order() {
    let (mut w, mms) = common::world_mms(Arch::X86, 3, &[], 1);
    // CPU 0: task 0; CPU 1: tasks 1 and 3; CPU 2: tasks 2 and 4.
    for cpu in [0, 1, 2, 1, 2] {
        w.spawn(mms[0], cpu, vec![UserOp::Exit], true);
    }
    let ids: Vec<_> = w.tasks.iter().map(|t| (t.id, t.cpu)).collect();
    assert_eq!(ids, [(0, 0), (1, 1), (2, 2), (3, 1), (4, 2)]);
    // Swapping CPUs 1 and 2 swaps their first tasks (1 <-> 2) and their
    // second ones (3 <-> 4); task 0 stays.
    assert_eq!(w.task_perm(&[0, 2, 1]), Some(vec![0, 2, 1, 4, 3]));
    assert_eq!(w.task_perm(&[0, 1, 2]), Some(vec![0, 1, 2, 3, 4]));
    // CPU 0 holds one task, CPU 1 two: no renaming maps one onto the other.
    assert_eq!(w.task_perm(&[1, 0, 2]), None);
    assert_eq!(w.task_perm(&[2, 0, 1]), None);
    // Not a permutation of three CPUs.
    assert_eq!(w.task_perm(&[0, 1, 1]), None);
    assert_eq!(w.task_perm(&[0, 1]), None);
    assert_eq!(w.task_perm(&[0, 1, 3]), None);
}
