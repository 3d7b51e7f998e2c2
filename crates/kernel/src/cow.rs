//! A vector whose elements are shared copy-on-write between clones, each
//! with its hash cached.
//!
//! Model machinery, not a model of anything in the kernel. The checker
//! clones a world for every transition and fingerprints every successor;
//! a step changes one or two CPUs, tasks or mms. With `World::cpus`,
//! `tasks` and `mms` in a [`CowVec`], a clone copies one pointer per
//! element, a step copies only the elements it takes `&mut` of, and the
//! fingerprint rehashes only those (the others keep the hash cached in
//! their shared slot). The simulator has one world: its elements are never
//! shared and `&mut` access costs a relaxed load and a store.

use machine::footprint::{self, Obj};
use rustc_hash::FxHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Index, IndexMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One element, the hash of its value and its id-free hash (each 0: not
/// computed since the last change).
pub struct Slot<T> {
    val: T,
    digest: AtomicU64,
    /// [`CowVec::id_free_digest`]'s cache.
    id_free: AtomicU64,
}

impl<T> Slot<T> {
    fn new(val: T) -> Self {
        Slot {
            val,
            digest: AtomicU64::new(0),
            id_free: AtomicU64::new(0),
        }
    }
}

impl<T: Clone> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Slot {
            val: self.val.clone(),
            digest: AtomicU64::new(self.digest.load(Ordering::Relaxed)),
            id_free: AtomicU64::new(self.id_free.load(Ordering::Relaxed)),
        }
    }
}

/// A `Vec<T>` whose clones share their elements until one is changed.
pub struct CowVec<T> {
    items: Vec<Arc<Slot<T>>>,
    /// The [`footprint`] kind its elements are recorded as (0: none).
    tag: u8,
    /// The [`footprint`] kind its length is recorded under (0: none): the
    /// object [`footprint::kind::LEN`] of that index.
    len_tag: u8,
}

impl<T> CowVec<T> {
    pub fn new() -> Self {
        CowVec {
            items: Vec::new(),
            tag: 0,
            len_tag: 0,
        }
    }

    /// Record accesses to the elements as objects of footprint kind `tag`
    /// (and to the length under that kind).
    pub fn tagged(mut self, tag: u8) -> Self {
        self.set_tag(tag);
        self
    }

    /// The footprint kind its elements are recorded as (0: none).
    pub fn tag(&self) -> u8 {
        self.tag
    }

    /// Record accesses to the elements as objects of footprint kind `tag`
    /// and to the length under that kind (0: none).
    pub fn set_tag(&mut self, tag: u8) {
        self.tag = tag;
        self.len_tag = tag;
    }

    /// Record accesses to the length under footprint kind `tag` (0: none)
    /// but none to the elements: for elements whose parts record their
    /// own accesses ([`Field`]).
    pub fn set_len_tag_only(&mut self, tag: u8) {
        self.tag = 0;
        self.len_tag = tag;
    }

    #[inline(always)]
    fn read_len(&self) {
        if self.len_tag != 0 {
            footprint::note(Obj::new(footprint::kind::LEN, self.len_tag as usize), false);
        }
    }

    #[inline(always)]
    fn read(&self, i: usize) {
        if self.tag != 0 {
            footprint::note(Obj::new(self.tag, i), false);
        }
    }

    #[inline(always)]
    fn wrote(&self, i: usize) {
        if self.tag != 0 {
            footprint::note(Obj::new(self.tag, i), true);
        }
    }

    /// Record a read of every element (a value derived from them all).
    pub fn note_read_all(&self) {
        self.touch_all(false);
    }

    /// Record an access to every element and to the length.
    fn touch_all(&self, write: bool) {
        if self.len_tag == 0 || !footprint::recording() {
            return;
        }
        self.read_len();
        if self.tag == 0 {
            return;
        }
        for i in 0..self.items.len() {
            if write {
                self.wrote(i)
            } else {
                self.read(i)
            }
        }
    }

    pub fn len(&self) -> usize {
        self.read_len();
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, val: T) {
        if self.len_tag != 0 {
            footprint::note(Obj::new(footprint::kind::LEN, self.len_tag as usize), true);
        }
        self.items.push(Arc::new(Slot::new(val)));
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.read(i);
        self.items.get(i).map(|s| &s.val)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator + Clone {
        self.touch_all(false);
        self.items.iter().map(|s| &s.val)
    }

    pub fn last(&self) -> Option<&T> {
        self.len();
        self.read(self.items.len().wrapping_sub(1));
        self.items.last().map(|s| &s.val)
    }

    /// `f` of element `i`, cached in its slot until the element is next
    /// taken `&mut` (not recorded as a read): the symmetry reduction's hash
    /// of the fields that hold no CPU or task id
    /// ([`crate::symmetry::canonical_fingerprint`]). Every call on one
    /// vector, and on its clones, must pass the same `f`.
    pub fn id_free_digest(&self, i: usize, f: impl FnOnce(&T) -> u64) -> u64 {
        let s = &self.items[i];
        let mut d = s.id_free.load(Ordering::Relaxed);
        if d == 0 {
            d = f(&s.val) | 1;
            s.id_free.store(d, Ordering::Relaxed);
        }
        d
    }
}

impl<T: Clone> CowVec<T> {
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.wrote(i);
        self.items.get_mut(i).map(unshare)
    }

    /// Every element mutably: each shared one is copied first.
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> + ExactSizeIterator {
        self.touch_all(true);
        self.items.iter_mut().map(unshare)
    }
}

/// The value of `slot`, copied first if a clone shares it; its cached
/// hash is dropped (the caller may change it).
#[inline(always)]
fn unshare<T: Clone>(slot: &mut Arc<Slot<T>>) -> &mut T {
    let s = if Arc::strong_count(slot) == 1 {
        // SAFETY: this is the only Arc and no Weak exists (none is ever
        // made: the slots are private to this module), and `&mut slot`
        // keeps it so while the borrow lives: nothing else can reach the
        // value. (`Arc::make_mut` does the same after an atomic
        // compare-exchange, which the simulator would pay on every `&mut`
        // access.) The fence orders this after the last use by a clone
        // dropped on another thread.
        std::sync::atomic::fence(Ordering::Acquire);
        unsafe { &mut *(Arc::as_ptr(slot) as *mut Slot<T>) }
    } else {
        copy(slot)
    };
    *s.digest.get_mut() = 0;
    *s.id_free.get_mut() = 0;
    &mut s.val
}

/// A private copy of a shared slot (the checker's clones only).
#[cold]
#[inline(never)]
fn copy<T: Clone>(slot: &mut Arc<Slot<T>>) -> &mut Slot<T> {
    Arc::make_mut(slot)
}

impl<T> Default for CowVec<T> {
    fn default() -> Self {
        CowVec::new()
    }
}

impl<T> Clone for CowVec<T> {
    fn clone(&self) -> Self {
        CowVec {
            items: self.items.clone(),
            tag: self.tag,
            len_tag: self.len_tag,
        }
    }
}

impl<T> Index<usize> for CowVec<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        self.read(i);
        &self.items[i].val
    }
}

impl<T: Clone> IndexMut<usize> for CowVec<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        self.wrote(i);
        unshare(&mut self.items[i])
    }
}

impl<T> FromIterator<T> for CowVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(it: I) -> Self {
        let mut v = CowVec::new();
        for x in it {
            v.push(x);
        }
        v
    }
}

impl<T> From<Vec<T>> for CowVec<T> {
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}

impl<'a, T> IntoIterator for &'a CowVec<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Arc<Slot<T>>>, fn(&Arc<Slot<T>>) -> &T>;
    fn into_iter(self) -> Self::IntoIter {
        self.touch_all(false);
        self.items.iter().map(|s| &s.val)
    }
}

impl<'a, T: Clone> IntoIterator for &'a mut CowVec<T> {
    type Item = &'a mut T;
    type IntoIter =
        std::iter::Map<std::slice::IterMut<'a, Arc<Slot<T>>>, fn(&mut Arc<Slot<T>>) -> &mut T>;
    fn into_iter(self) -> Self::IntoIter {
        self.touch_all(true);
        self.items.iter_mut().map(unshare)
    }
}

impl<T: fmt::Debug> fmt::Debug for CowVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq> PartialEq for CowVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .items
                .iter()
                .zip(&other.items)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a.val == b.val)
    }
}

impl<T: Eq> Eq for CowVec<T> {}

/// The length, then each element's hash (an `FxHasher` over its value),
/// cached in its slot until the element is next taken `&mut`.
impl<T: Hash> Hash for CowVec<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_usize(self.items.len());
        for s in &self.items {
            h.write_u64(digest(s));
        }
    }
}

/// One value shared copy-on-write between clones, its hash cached: for
/// the large parts of a world that most steps do not change (the kernel
/// configuration, physical memory).
pub struct CowBox<T> {
    slot: Arc<Slot<T>>,
    /// The [`footprint`] object its accesses are recorded as (0: none).
    obj: Obj,
}

impl<T> CowBox<T> {
    pub fn new(val: T) -> Self {
        CowBox {
            slot: Arc::new(Slot::new(val)),
            obj: Obj(0),
        }
    }

    /// Record every access to the value as one to `obj` (`Obj(0)`: none).
    pub fn tagged(mut self, obj: Obj) -> Self {
        self.obj = obj;
        self
    }

    pub fn set_obj(&mut self, obj: Obj) {
        self.obj = obj;
    }
}

impl<T> From<T> for CowBox<T> {
    fn from(val: T) -> Self {
        CowBox::new(val)
    }
}

impl<T> Clone for CowBox<T> {
    fn clone(&self) -> Self {
        CowBox {
            slot: self.slot.clone(),
            obj: self.obj,
        }
    }
}

impl<T> std::ops::Deref for CowBox<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // (A box recorded as `ALL`, the configuration, records writes only.)
        if self.obj.0 != 0 && self.obj.kind() != footprint::kind::ALL {
            footprint::note(self.obj, false);
        }
        &self.slot.val
    }
}

impl<T: Clone> std::ops::DerefMut for CowBox<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        if self.obj.0 != 0 {
            footprint::note(self.obj, true);
        }
        unshare(&mut self.slot)
    }
}

impl<T: fmt::Debug> fmt::Debug for CowBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slot.val.fmt(f)
    }
}

impl<T: PartialEq> PartialEq for CowBox<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.slot, &other.slot) || self.slot.val == other.slot.val
    }
}

impl<T: Eq> Eq for CowBox<T> {}

/// The value's hash (an `FxHasher` over it), cached until it is next taken `&mut`.
impl<T: Hash> Hash for CowBox<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(digest(&self.slot));
    }
}

/// The cached hash of a slot's value (never 0), computed if it is not.
#[inline]
fn digest<T: Hash>(s: &Slot<T>) -> u64 {
    let mut d = s.digest.load(Ordering::Relaxed);
    if d == 0 {
        let mut fx = FxHasher::default();
        s.val.hash(&mut fx);
        d = fx.finish() | 1;
        s.digest.store(d, Ordering::Relaxed);
    }
    d
}

/// A field of the world recorded as one [`footprint`] object: while
/// tracked, every access through it is a read or write of field `field`
/// ([`footprint::kind::FIELD`]). Compares, hashes and prints as its value.
#[derive(Clone, Default)]
pub struct Tracked<T> {
    val: T,
    field: u32,
    on: bool,
}

impl<T> Tracked<T> {
    /// `val`, field `field`, not tracked until [`Tracked::track`].
    pub fn new(field: usize, val: T) -> Self {
        Tracked {
            val,
            field: field as u32,
            on: false,
        }
    }

    pub fn track(&mut self, on: bool) {
        self.on = on;
    }

    pub fn tracked(&self) -> bool {
        self.on
    }

    fn obj(&self) -> Obj {
        Obj::new(footprint::kind::FIELD, self.field as usize)
    }
}

impl<T> std::ops::Deref for Tracked<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        if self.on {
            footprint::note(self.obj(), false);
        }
        &self.val
    }
}

impl<T> std::ops::DerefMut for Tracked<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        if self.on {
            footprint::note(self.obj(), true);
        }
        &mut self.val
    }
}

impl<T: PartialEq> PartialEq for Tracked<T> {
    fn eq(&self, other: &Self) -> bool {
        self.val == other.val
    }
}

impl<T: Eq> Eq for Tracked<T> {}

impl<T: Hash> Hash for Tracked<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.val.hash(h)
    }
}

impl<T: fmt::Debug> fmt::Debug for Tracked<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.val.fmt(f)
    }
}

/// A part of a vector's element recorded as its own [`footprint`] object
/// (its containing [`CowVec`] then records the length only:
/// [`CowVec::set_len_tag_only`]): while tracked, every access through it
/// is a read or write of that object. Compares, hashes and prints as its
/// value. It is not `Clone`: `x.field.clone()` clones the value, through
/// a recorded read, and the element that holds it copies it with
/// [`Field::dup`], keeping the object.
pub struct Field<T> {
    val: T,
    /// The object its accesses are recorded as (`Obj(0)`: none).
    obj: Obj,
}

impl<T> Field<T> {
    /// `val`, not tracked until [`Field::track_as`].
    pub fn new(val: T) -> Self {
        Field { val, obj: Obj(0) }
    }

    /// Record accesses as ones to `obj` (`Obj(0)`: none).
    pub fn track_as(&mut self, obj: Obj) {
        self.obj = obj;
    }

    /// A copy of the value and the object, recording nothing (for the
    /// `Clone` of the element that holds it).
    pub fn dup(&self) -> Self
    where
        T: Clone,
    {
        Field {
            val: self.val.clone(),
            obj: self.obj,
        }
    }
}

impl<T> std::ops::Deref for Field<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        if self.obj.0 != 0 {
            footprint::note(self.obj, false);
        }
        &self.val
    }
}

impl<T> std::ops::DerefMut for Field<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        if self.obj.0 != 0 {
            footprint::note(self.obj, true);
        }
        &mut self.val
    }
}

impl<T: PartialEq> PartialEq for Field<T> {
    fn eq(&self, other: &Self) -> bool {
        self.val == other.val
    }
}

impl<T: Eq> Eq for Field<T> {}

impl<T: Hash> Hash for Field<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.val.hash(h)
    }
}

impl<T: fmt::Debug> fmt::Debug for Field<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.val.fmt(f)
    }
}
