//! The copy-on-write containers behind `World::cpus`, `tasks`, `mms`,
//! `cfg`, `mem`: a clone shares elements until one side takes one `&mut`,
//! and the cached hash of an element is dropped whenever it is taken
//! `&mut`, so a fingerprint is never stale.
use kernel::cow::{CowBox, CowVec};
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

fn h<T: Hash>(x: &T) -> u64 {
    let mut s = FxHasher::default();
    x.hash(&mut s);
    s.finish()
}

/// A change through a clone is not seen by the original, and back.
#[test]
fn clones_do_not_share_changes() {
    let a: CowVec<Vec<u32>> = vec![vec![1], vec![2], vec![3]].into();
    let mut b = a.clone();
    b[1].push(20);
    assert_eq!(a[1], vec![2]);
    assert_eq!(b[1], vec![2, 20]);
    assert_eq!(a[0], b[0]);
    for x in b.iter_mut() {
        x.push(0);
    }
    assert_eq!(
        a.iter().cloned().collect::<Vec<_>>(),
        [vec![1], vec![2], vec![3]]
    );
    assert_ne!(a, b);
    let mut c = CowBox::new(vec![7u32]);
    let d = c.clone();
    c.push(8);
    assert_eq!(*d, vec![7]);
    assert_eq!(*c, vec![7, 8]);
}

/// The hash is that of the current contents after every `&mut` access:
/// a stale cached element hash would leave the first two unchanged.
#[test]
fn hash_follows_changes_through_every_mut_path() {
    let mut v: CowVec<Vec<u32>> = vec![vec![1], vec![2]].into();
    let before = h(&v);
    let shared = v.clone();
    v[0].push(5);
    assert_ne!(h(&v), before, "IndexMut");
    v[0].pop();
    assert_eq!(h(&v), before, "the same contents hash the same again");
    v.get_mut(1).unwrap().push(6);
    assert_ne!(h(&v), before, "get_mut");
    v.get_mut(1).unwrap().pop();
    for x in &mut v {
        x.push(9);
    }
    assert_ne!(h(&v), before, "iter_mut");
    assert_eq!(h(&shared), before, "the clone kept its elements and hashes");
    // The hash depends on the contents only, not on the sharing.
    let fresh: CowVec<Vec<u32>> = vec![vec![1, 9], vec![2, 9]].into();
    assert_eq!(h(&v), h(&fresh));
    let mut b = CowBox::new(3u64);
    let hb = h(&b);
    *b += 1;
    assert_ne!(h(&b), hb, "DerefMut");
    *b -= 1;
    assert_eq!(h(&b), hb);
}
