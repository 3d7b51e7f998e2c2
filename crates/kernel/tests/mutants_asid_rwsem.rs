//! Issue 34 item 4, mutants over the whole model: tests that kill the
//! cargo-mutants survivors of `arch/asid.rs`, the ASID allocator of arm64
//! (arch/arm64/mm/context.c) and RISC-V (arch/riscv/mm/context.c). See
//! docs/mutants.md. Every expected ASID below is derived step by step from
//! the kernel's algorithm:
//!
//! - `new_context`: an mm with an ASID of an older generation keeps its
//!   number if some CPU reserved it at the rollover
//!   (`check_update_reserved_asid`) or if the number is still free in the
//!   new generation (`!__test_and_set_bit(asid, asid_map)`); else the
//!   first free number from `cur_idx` on (`find_next_zero_bit`); none
//!   free: `asid_generation += 1 << bits` and `flush_context`, then the
//!   first free number from 1.
//! - `flush_context`: the map is rebuilt from bit 0 (init_mm) and each
//!   CPU's `active_asids` (`xchg`ed to 0), or its `reserved_asids` when
//!   the active one is already 0 (it rolled over before without
//!   switching since); every CPU has a TLB flush pending.
//! - `check_and_switch_context`: fast path when this CPU's
//!   `active_asids` is not 0 and the mm's context id is of this
//!   generation (the `cmpxchg` of `active_asids` then succeeds); else the
//!   slow path under `cpu_asid_lock`, which takes the pending flush.
//!
//! The second half does the same for `locking/rwsem.rs`
//! (kernel/locking/rwsem.c, the rw-semaphore of `mmap_lock` and
//! `i_mmap_rwsem`): who gets the lock, who is woken and in which order,
//! when the hand-off bit is set, each derived from `rwsem_down_read_slowpath`,
//! `rwsem_down_write_slowpath`, `rwsem_try_write_lock` and `rwsem_mark_wake`.

mod common;

use kernel::arch::asid::{
    asid_for_switch, fast_path_cmpxchg, fast_path_reads, flush_context, slow_path, AsidAllocator,
};
use kernel::hw::memory_model::{Loc, MemoryModel};
use kernel::locking::rwsem::{jiffies, Rwsem, MAX_READERS_WAKEUP, RWSEM_WAIT_TIMEOUT};
use kernel::{Effects, Label, MmId, TaskId, World};
use machine::scenario::Arch;

use common::{traced, world_mms as world};

/// The `new_context` labels of `fx` as (mm, asid, rollover), then cleared.
fn new_contexts(fx: &mut Effects) -> Vec<(MmId, u16, bool)> {
    let v = fx
        .labels
        .iter()
        .filter_map(|l| match *l {
            Label::NewContext { mm, asid, rollover } => Some((mm, asid, rollover)),
            _ => None,
        })
        .collect();
    fx.labels.clear();
    v
}

fn ctx(w: &World, mm: MmId) -> u64 {
    *w.mms[mm as usize].context_id
}

fn active(w: &World) -> Vec<u64> {
    w.cpus.iter().map(|c| c.asid.active).collect()
}

fn reserved(w: &World) -> Vec<u64> {
    w.cpus.iter().map(|c| c.asid.reserved).collect()
}

fn pending(w: &World) -> Vec<bool> {
    w.cpus.iter().map(|c| c.asid.flush_pending).collect()
}

/// `asid2idx`, `asid_gen_match` and the initial state of `asids_init`:
/// generation `1 << bits` (`ASID_FIRST_VERSION`), only ASID 0 (init_mm's,
/// the reserved TTBR0) taken, allocation starting at 1.
#[test]
fn allocator_initial_state_idx_and_gen_match() {
    let a = AsidAllocator::new(2);
    assert_eq!((a.generation, a.cur_idx, a.rollovers), (4, 1, 0));
    assert_eq!(a.map, [1]);
    // 8 = generation 2 (a multiple of 1 << 2), ASID 3 in its low 2 bits.
    assert_eq!(a.idx(4 | 3), 3);
    assert_eq!(a.idx(8 | 2), 2);
    let b = AsidAllocator::new(16);
    assert_eq!(b.generation, 1 << 16);
    assert_eq!(b.map.len(), (1 << 16) / 64, "one bit per ASID");
    assert_eq!(b.map[0], 1);
    assert!(b.map[1..].iter().all(|&m| m == 0));
    // The hardware ASID is the low 16 bits, whatever the generation.
    assert_eq!(b.idx((1 << 16) | 5), 5);
    assert_eq!(b.idx((3 << 16) | 0xfffe), 0xfffe);
    // Of this generation: the bits above the ASID equal the generation's.
    assert!(b.gen_match((1 << 16) | 5));
    assert!(b.gen_match((1 << 16) | 0xffff));
    assert!(!b.gen_match((2 << 16) | 5), "a later generation");
    assert!(!b.gen_match(5), "no generation (0)");
    assert!(!b.gen_match(0), "a new mm's context id");
}

/// arm64, 3-bit ASIDs (1..=7 for user mms), 3 CPUs: allocation in order,
/// the fast path, two rollovers and every way `new_context` keeps or
/// replaces an old ASID. `asid_for_switch` returns (hardware ASID, flush).
#[test]
fn allocation_rollovers_and_reservations_step_by_step() {
    let (mut w, m) = world(Arch::Arm64, 3, &["arm64.asid_bits=3"], 8);
    let mut fx = traced();
    const G1: u64 = 8; // generation 1 = 1 << 3
    const G2: u64 = 16;
    const G3: u64 = 24;

    // New mms: the map has only bit 0, cur_idx 1: ASIDs 1, 2, 3, ... in
    // turn, whichever CPU asks; no flush (nothing pending).
    assert_eq!(asid_for_switch(&mut w, 0, m[0], &mut fx), (1, false));
    assert_eq!(asid_for_switch(&mut w, 1, m[1], &mut fx), (2, false));
    assert_eq!(asid_for_switch(&mut w, 2, m[2], &mut fx), (3, false));
    for (i, &mm) in m[3..7].iter().enumerate() {
        assert_eq!(
            asid_for_switch(&mut w, 0, mm, &mut fx),
            (4 + i as u16, false)
        );
    }
    for (i, &mm) in m[..7].iter().enumerate() {
        assert_eq!(ctx(&w, mm), G1 | (i as u64 + 1), "generation 1, ASID i+1");
    }
    assert_eq!(w.asids.map, [0xff], "0 and 1..=7 taken");
    assert_eq!((w.asids.cur_idx, w.asids.generation), (7, G1));
    // The slow path records the context id as the CPU's active_asids.
    assert_eq!(active(&w), [G1 | 7, G1 | 2, G1 | 3]);
    assert_eq!(reserved(&w), [0, 0, 0]);
    assert_eq!(
        new_contexts(&mut fx),
        (0..7)
            .map(|i| (m[i], i as u16 + 1, false))
            .collect::<Vec<_>>()
    );

    // CPU0 back to m0: active_asids not 0 and m0's id of this generation:
    // the fast path's cmpxchg makes it CPU0's active ASID, no new_context.
    assert_eq!(asid_for_switch(&mut w, 0, m[0], &mut fx), (1, false));
    assert_eq!(active(&w), [G1 | 1, G1 | 2, G1 | 3]);
    assert_eq!(new_contexts(&mut fx), []);

    // Rollover 1: m7 is new and no ASID is free from cur_idx 7. The
    // generation moves on by 1 << 3; flush_context keeps the ASIDs active
    // now (1 on CPU0, 2 on CPU1, 3 on CPU2) as reserved, zeroes every
    // active_asids and marks every CPU for a flush; m7 gets the first
    // free one, 4. CPU0, the switching one, takes its own flush.
    assert_eq!(asid_for_switch(&mut w, 0, m[7], &mut fx), (4, true));
    assert_eq!((w.asids.generation, w.asids.rollovers), (G2, 1));
    assert_eq!(w.asids.map, [0b1_1111], "0, the three reserved, and 4");
    assert_eq!(w.asids.cur_idx, 4);
    assert_eq!(reserved(&w), [G1 | 1, G1 | 2, G1 | 3]);
    assert_eq!(active(&w), [G2 | 4, 0, 0]);
    assert_eq!(pending(&w), [false, true, true]);
    assert_eq!(ctx(&w, m[7]), G2 | 4);
    assert_eq!(new_contexts(&mut fx), [(m[7], 4, true)]);

    // CPU1 to m1 (ASID 2, which CPU1 itself reserved): active_asids 0, so
    // the slow path; check_update_reserved_asid finds the reservation and
    // moves it to the new generation: m1 keeps 2, the map is unchanged,
    // no new ASID is searched for (no label). CPU1's flush is taken.
    assert_eq!(asid_for_switch(&mut w, 1, m[1], &mut fx), (2, true));
    assert_eq!(ctx(&w, m[1]), G2 | 2);
    assert_eq!(reserved(&w), [G1 | 1, G2 | 2, G1 | 3]);
    assert_eq!(w.asids.map, [0b1_1111]);
    assert_eq!(new_contexts(&mut fx), []);

    // CPU1 to m0 (ASID 1, reserved by CPU0, which ran it at the rollover):
    // m0 keeps 1 on another CPU; CPU1's flush was taken already.
    assert_eq!(asid_for_switch(&mut w, 1, m[0], &mut fx), (1, false));
    assert_eq!(ctx(&w, m[0]), G2 | 1);
    assert_eq!(reserved(&w), [G2 | 1, G2 | 2, G1 | 3]);
    assert_eq!(active(&w), [G2 | 4, G2 | 1, 0]);

    // CPU0 to m5 (ASID 6, nobody reserved it, and free in this
    // generation): test_and_set finds it clear, m5 keeps 6; cur_idx stays.
    assert_eq!(asid_for_switch(&mut w, 0, m[5], &mut fx), (6, false));
    assert_eq!(w.asids.map, [0b101_1111]);
    assert_eq!(w.asids.cur_idx, 4);
    assert_eq!(new_contexts(&mut fx), []);

    // CPU0 to m3 (ASID 4, now m7's): taken, so the first free from
    // cur_idx 4: 5.
    assert_eq!(asid_for_switch(&mut w, 0, m[3], &mut fx), (5, false));
    assert_eq!((w.asids.map[0], w.asids.cur_idx), (0b111_1111, 5));
    assert_eq!(new_contexts(&mut fx), [(m[3], 5, false)]);
    // CPU0 to m4 (ASID 5, now m3's): the first free from 5 is 7 (6 is m5's).
    assert_eq!(asid_for_switch(&mut w, 0, m[4], &mut fx), (7, false));
    assert_eq!((w.asids.map[0], w.asids.cur_idx), (0xff, 7));
    assert_eq!(new_contexts(&mut fx), [(m[4], 7, false)]);

    // Rollover 2: m6's ASID 7 is m4's now, nothing is free. Active: CPU0
    // m4 (7), CPU1 m0 (1); CPU2 has not switched since rollover 1, its
    // active_asids is still 0, so its reserved ASID (m2's 3) is kept.
    // The first free one is 2.
    assert_eq!(asid_for_switch(&mut w, 0, m[6], &mut fx), (2, true));
    assert_eq!((w.asids.generation, w.asids.rollovers), (G3, 2));
    assert_eq!(w.asids.map, [0b1000_1111], "0, 7, 1, 3 reserved; 2");
    assert_eq!(w.asids.cur_idx, 2);
    assert_eq!(reserved(&w), [G2 | 7, G2 | 1, G1 | 3]);
    assert_eq!(active(&w), [G3 | 2, 0, 0]);
    assert_eq!(pending(&w), [false, true, true]);
    assert_eq!(new_contexts(&mut fx), [(m[6], 2, true)]);

    // CPU1 to m6, whose id is of this generation: active_asids is 0, so
    // the slow path, which allocates nothing (gen_match) and flushes.
    assert_eq!(asid_for_switch(&mut w, 1, m[6], &mut fx), (2, true));
    assert_eq!(ctx(&w, m[6]), G3 | 2);
    assert_eq!(w.asids.map, [0b1000_1111]);
    assert_eq!(new_contexts(&mut fx), []);

    // CPU2 to m2 (generation 1, two rollovers ago): CPU2's reservation
    // carried it through both; it keeps 3 and takes the flush pending
    // since rollover 1.
    assert_eq!(asid_for_switch(&mut w, 2, m[2], &mut fx), (3, true));
    assert_eq!(ctx(&w, m[2]), G3 | 3);
    assert_eq!(reserved(&w), [G2 | 7, G2 | 1, G3 | 3]);
    assert_eq!(pending(&w), [false, false, false]);

    // CPU1 to m7 (generation 2, ASID 4, free in generation 3): kept.
    assert_eq!(asid_for_switch(&mut w, 1, m[7], &mut fx), (4, false));
    assert_eq!(w.asids.map, [0b1001_1111]);
    assert_eq!(active(&w), [G3 | 2, G3 | 4, G3 | 3]);
    assert_eq!(new_contexts(&mut fx), []);
}

/// `flush_context` on its own: bit 0 and each CPU's active (else
/// reserved) ASID make the new map, active_asids all 0, every CPU pending.
#[test]
fn flush_context_rebuilds_the_map_from_the_active_asids() {
    let (mut w, m) = world(Arch::Arm64, 3, &["arm64.asid_bits=3"], 3);
    let mut fx = Effects::default();
    assert_eq!(asid_for_switch(&mut w, 1, m[0], &mut fx), (1, false));
    assert_eq!(asid_for_switch(&mut w, 2, m[1], &mut fx), (2, false));
    assert_eq!(asid_for_switch(&mut w, 2, m[2], &mut fx), (3, false));
    flush_context(&mut w, 0, &mut fx);
    // CPU0 never ran an mm: active and reserved 0 (bit 0, already set);
    // CPU1 runs m0 (1), CPU2 m2 (3); m1's 2 is free again.
    assert_eq!(w.asids.map, [0b1011]);
    assert_eq!(reserved(&w), [0, 8 | 1, 8 | 3]);
    assert_eq!(active(&w), [0, 0, 0]);
    assert_eq!(pending(&w), [true, true, true]);
    assert_eq!(w.asids.rollovers, 1);
    // flush_context does not move the generation (new_context's
    // atomic64_add_return does): the ids still match it.
    assert_eq!(w.asids.generation, 8);
}

/// `check_and_switch_context`'s lockless reads: the mm's context id, this
/// CPU's active_asids, and the fast-path test (active not 0, id of this
/// generation). arm64, 2-bit ASIDs (1..=3), 2 CPUs.
#[test]
fn fast_path_reads_returns_the_ids_and_the_fast_path_test() {
    let (mut w, m) = world(Arch::Arm64, 2, &["arm64.asid_bits=2"], 4);
    let mut fx = Effects::default();
    // A new mm (context id 0) on a CPU that never switched.
    assert_eq!(fast_path_reads(&mut w, 0, m[0], &mut fx), (0, 0, false));
    for (i, &mm) in m[..3].iter().enumerate() {
        assert_eq!(
            asid_for_switch(&mut w, 0, mm, &mut fx),
            (i as u16 + 1, false)
        );
    }
    // m0 (4 | 1) on CPU0 (active m2's 4 | 3): the fast path applies.
    assert_eq!(fast_path_reads(&mut w, 0, m[0], &mut fx), (5, 7, true));
    // On CPU1, whose active_asids is 0: it does not.
    assert_eq!(fast_path_reads(&mut w, 1, m[0], &mut fx), (5, 0, false));
    // m3 rolls over (generation 8): m3 gets 1 (3 reserved by CPU0).
    assert_eq!(asid_for_switch(&mut w, 0, m[3], &mut fx), (1, true));
    assert_eq!(ctx(&w, m[3]), 8 | 1);
    // m3 on CPU0 (active 9): fast. m0 (5, generation 4) on CPU0: an old
    // generation, not fast although CPU0's active is not 0.
    assert_eq!(fast_path_reads(&mut w, 0, m[3], &mut fx), (9, 9, true));
    assert_eq!(fast_path_reads(&mut w, 0, m[0], &mut fx), (5, 9, false));
    // CPU1, zeroed by the rollover: not fast even for m3.
    assert_eq!(fast_path_reads(&mut w, 1, m[3], &mut fx), (9, 0, false));
    // The reads change nothing.
    assert_eq!(active(&w), [9, 0]);
}

/// arm64's `atomic64_cmpxchg_relaxed(&active_asids, old, asid)`: stores
/// and succeeds only if active_asids still holds what the fast path read;
/// after a rollover zeroed it, fails and stores nothing.
/// `inject.asid_fastpath_blind_store` stores and succeeds regardless.
#[test]
fn arm64_fast_path_cmpxchg_fails_after_a_rollover() {
    let (mut w, m) = world(Arch::Arm64, 2, &[], 2);
    let mut fx = Effects::default();
    asid_for_switch(&mut w, 0, m[0], &mut fx);
    asid_for_switch(&mut w, 0, m[1], &mut fx);
    let (a, b) = (ctx(&w, m[0]), ctx(&w, m[1]));
    assert_eq!(active(&w)[0], b);
    assert!(fast_path_cmpxchg(&mut w, 0, b, a));
    assert_eq!(active(&w)[0], a, "the cmpxchg stored m0's id");
    // A stale read (b, no longer there): fails, stores nothing.
    assert!(!fast_path_cmpxchg(&mut w, 0, b, b));
    assert_eq!(active(&w)[0], a);
    // flush_context on CPU1 zeroes CPU0's active_asids between its read
    // (a) and its cmpxchg: the cmpxchg fails, the slow path will run.
    flush_context(&mut w, 1, &mut fx);
    assert!(!fast_path_cmpxchg(&mut w, 0, a, b));
    assert_eq!(active(&w)[0], 0);

    let (mut w, m) = world(
        Arch::Arm64,
        2,
        &["inject.asid_fastpath_blind_store=true"],
        1,
    );
    asid_for_switch(&mut w, 0, m[0], &mut fx);
    let a = ctx(&w, m[0]);
    flush_context(&mut w, 1, &mut fx);
    assert!(
        fast_path_cmpxchg(&mut w, 0, a, a),
        "the blind store succeeds"
    );
    assert_eq!(active(&w)[0], a, "over the rollover's 0");
}

/// RISC-V's `atomic_long_xchg_relaxed(&active_context, cntx)`: always
/// stores; the fast path holds if the old value was not 0.
#[test]
fn riscv_fast_path_xchg_always_stores() {
    let (mut w, m) = world(Arch::Riscv, 2, &["riscv.asid_bits=3"], 2);
    let mut fx = Effects::default();
    asid_for_switch(&mut w, 0, m[0], &mut fx);
    asid_for_switch(&mut w, 1, m[1], &mut fx);
    let (a, b) = (ctx(&w, m[0]), ctx(&w, m[1]));
    assert_eq!(active(&w), [a, b]);
    // Whatever the fast path read (here a value never stored), the xchg
    // returns the current one, b, not 0: success, a stored.
    assert!(fast_path_cmpxchg(&mut w, 1, 12345, a));
    assert_eq!(active(&w), [a, a]);
    // After a rollover zeroed it: the xchg returns 0 (slow path), but has
    // stored.
    flush_context(&mut w, 0, &mut fx);
    assert!(!fast_path_cmpxchg(&mut w, 1, a, b));
    assert_eq!(active(&w), [0, b]);
}

/// The slow path takes `cpu_asid_lock`, whose previous holder's stores it
/// then reads (the model's `catch_up`): under the weak model a CPU that
/// could still read an mm's context id as 0 (CPU0 allocated it) reads
/// only the newest value after its own slow path.
#[test]
fn slow_path_reads_the_previous_lock_holders_stores() {
    let (mut w, m) = world(Arch::Arm64, 2, &[], 2);
    w.cfg.memory_model = MemoryModel::Weak;
    let mut fx = Effects::default();
    assert_eq!(asid_for_switch(&mut w, 0, m[0], &mut fx), (1, false));
    let a = ctx(&w, m[0]);
    let vals = |w: &World| -> Vec<u64> {
        w.weak
            .choices(1, Loc::MmContextId(m[0]))
            .iter()
            .map(|c| c.1)
            .collect()
    };
    assert!(w.weak.stale_for(1));
    assert_eq!(vals(&w), [a, 0], "CPU1 may read m0's id as before");
    assert_eq!(slow_path(&mut w, 1, m[1], &mut fx), (2, false));
    assert!(!w.weak.stale_for(1));
    assert_eq!(vals(&w), [a]);
}

// ---------------------------------------------------------------------------
// kernel/locking/rwsem.c (`locking/rwsem.rs`): the rw-semaphore behind
// mmap_lock and i_mmap_rwsem, as plain data. Tasks are numbers; `wake`
// collects what each call wakes (`wake_q_add`).
// ---------------------------------------------------------------------------

/// Runs `f` with a wake callback; returns its result and the tasks woken.
fn woke<R>(f: impl FnOnce(&mut dyn FnMut(TaskId)) -> R) -> (R, Vec<TaskId>) {
    let mut v = Vec::new();
    let r = f(&mut |t| v.push(t));
    (r, v)
}

fn queue(s: &Rwsem) -> Vec<(TaskId, bool)> {
    s.waiters.iter().map(|w| (w.task, w.write)).collect()
}

/// `jiffies` at HZ=1000 is the time in ms; `RWSEM_WAIT_TIMEOUT` is
/// `DIV_ROUND_UP(HZ, 250)` = 4 jiffies.
#[test]
fn rwsem_jiffies_and_the_wait_timeout() {
    assert_eq!(jiffies(0), 0);
    assert_eq!(jiffies(999_999), 0);
    assert_eq!(jiffies(1_000_000), 1);
    assert_eq!(jiffies(5_500_000_000), 5500);
    assert_eq!(RWSEM_WAIT_TIMEOUT, 4);
    assert_eq!(MAX_READERS_WAKEUP, 256);
}

/// `count & RWSEM_LOCK_MASK`, the wait list and who sleeps on it.
#[test]
fn rwsem_locked_queued_and_sleeping() {
    let mut s = Rwsem::default();
    assert!(!s.locked());
    s.readers = 1;
    assert!(s.locked(), "one reader");
    s.readers = 0;
    s.writer = Some(7);
    assert!(s.locked(), "a writer");
    // Readers 1, 2 hold it; writer 3 queues, then writer 4.
    let mut s = Rwsem::default();
    assert!(s.down_read(1, 0, &mut |_| {}));
    assert!(s.down_read(2, 0, &mut |_| {}));
    assert_eq!(s.readers, 2);
    assert!(!s.down_write(3, false, 0, &mut |_| {}));
    assert!(!s.down_write(4, false, 0, &mut |_| {}));
    assert!(s.queued(3) && s.queued(4) && !s.queued(1) && !s.queued(5));
    assert!(s.sleeping(3) && s.sleeping(4) && !s.sleeping(1));
    // Not the last reader: no wake-up (rwsem_wake only when the count
    // has no lock bits left).
    let ((), w) = woke(|mut f| s.up_read(0, &mut f));
    assert!(w.is_empty(), "{w:?}");
    assert!(s.sleeping(3));
    // The last reader wakes the writer at the head (RWSEM_WAKE_ANY), not
    // the one behind it; a woken writer is queued but not sleeping.
    let ((), w) = woke(|mut f| s.up_read(0, &mut f));
    assert_eq!(w, [3]);
    assert!(s.queued(3) && !s.sleeping(3));
    assert!(s.sleeping(4));
}

/// A reader queues behind a waiting writer even while only readers hold
/// the lock (`rwsem_read_trylock` fails on RWSEM_FLAG_WAITERS, and the
/// slow path does not steal a lock "very likely owned by readers"), and
/// its queueing wakes nobody (`rwsem_cond_wake_waiter` with readers
/// holding: RWSEM_WAKE_READERS, the head is a writer). Each waiter's
/// timeout is `jiffies + RWSEM_WAIT_TIMEOUT` at queueing.
#[test]
fn rwsem_reader_queues_behind_a_waiting_writer() {
    let mut s = Rwsem::default();
    assert!(s.down_read(1, 10, &mut |_| {}));
    assert!(!s.down_write(2, false, 10, &mut |_| {}));
    let (got, w) = woke(|mut f| s.down_read(3, 12, &mut f));
    assert!(!got, "queued behind writer 2");
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(s.readers, 1);
    assert_eq!(queue(&s), [(2, true), (3, false)]);
    assert!(s.sleeping(2), "writer 2 not woken by reader 3's queueing");
    assert_eq!(s.waiters[0].timeout, 14);
    assert_eq!(s.waiters[1].timeout, 16);
    // A writer queueing behind them wakes nobody either.
    let (got, w) = woke(|mut f| s.down_write(4, false, 13, &mut f));
    assert!(!got);
    assert!(w.is_empty(), "{w:?}");
    assert!(s.sleeping(2));
    // The last reader leaves: writer 2 woken and takes it at its retry;
    // reader 3 and writer 4 stay queued, asleep.
    let ((), w) = woke(|mut f| s.up_read(13, &mut f));
    assert_eq!(w, [2]);
    assert!(s.write_retry(2, false, 13));
    assert_eq!(s.writer, Some(2));
    assert_eq!(queue(&s), [(3, false), (4, true)]);
    // up_write: reader 3 is granted (a reader at the head: every queued
    // reader, writers skipped), writer 4 stays.
    let ((), w) = woke(|mut f| s.up_write(14, &mut f));
    assert_eq!(w, [3]);
    assert_eq!((s.writer, s.readers), (None, 1));
    assert_eq!(queue(&s), [(4, true)]);
}

/// A writer that runs its retry and fails goes back to sleep; the woken
/// writer at the head can be robbed by another writer until it sets the
/// hand-off ("other writers are able to steal it"), and a writer that
/// queues behind it while the lock is free wakes it again
/// (`rwsem_cond_wake_waiter`, RWSEM_WAKE_ANY).
#[test]
fn rwsem_writer_steals_from_a_woken_writer_and_wakes_it() {
    let mut s = Rwsem::default();
    assert!(s.down_read(1, 0, &mut |_| {}));
    assert!(!s.down_write(2, false, 0, &mut |_| {}));
    let ((), w) = woke(|mut f| s.up_read(0, &mut f));
    assert_eq!(w, [2]);
    // Writer 3 arrives before 2 runs: it queues (the list is not empty),
    // wakes the head, then rwsem_try_write_lock takes the free lock.
    let (got, w) = woke(|mut f| s.down_write(3, false, 1, &mut f));
    assert!(got, "writer 3 steals the free lock");
    assert_eq!(w, [2], "and wakes the head again");
    assert_eq!(s.writer, Some(3));
    assert_eq!(queue(&s), [(2, true)], "3 left the list, 2 stays");
    // Writer 2 runs: the lock is held, its timeout (4) not passed: back
    // to sleep, no hand-off.
    assert!(!s.write_retry(2, false, 4));
    assert!(s.sleeping(2));
    assert!(!s.handoff, "time_after(4, 4) is false");
    // At jiffies 5 (past the timeout) it sets the hand-off.
    assert!(!s.write_retry(2, false, 5));
    assert!(s.handoff);
    // Now writer 4 may not take the lock even when it is free, a reader
    // does not steal it, and writer 2 gets it.
    let ((), w) = woke(|mut f| s.up_write(5, &mut f));
    assert_eq!(w, [2]);
    assert!(!s.down_write(4, false, 5, &mut |_| {}));
    let (got, w) = woke(|mut f| s.down_read(5, 5, &mut f));
    assert!(!got, "no reader steals under the hand-off");
    assert_eq!(w, [2], "reader 5's queueing wakes the head writer");
    assert!(!s.locked());
    assert!(s.write_retry(2, false, 6));
    assert_eq!(s.writer, Some(2));
    assert!(!s.handoff, "cleared by the writer that takes the lock");
    assert_eq!(queue(&s), [(4, true), (5, false)]);
}

/// The hand-off bit belongs to the first waiter: a later writer that is
/// woken and retries while it is set yields; the first one takes the
/// lock. An RT writer (`rt_or_dl_task`) sets it at once, timeout or not.
#[test]
fn rwsem_hand_off_only_for_the_first_waiter_and_at_once_for_rt() {
    let mut s = Rwsem::default();
    assert!(s.down_write(1, false, 0, &mut |_| {}));
    assert!(!s.down_write(2, true, 0, &mut |_| {}));
    assert!(s.handoff, "RT writer 2 sets the hand-off at its first try");
    assert!(!s.down_write(3, false, 0, &mut |_| {}));
    // up_write wakes the head, 2. Before it runs, writer 4 arrives and
    // finds the lock free: it wakes the head again and yields to it (the
    // hand-off is 2's); so does writer 3 at a (spurious) retry.
    let ((), w) = woke(|mut f| s.up_write(0, &mut f));
    assert_eq!(w, [2]);
    let (got, w) = woke(|mut f| s.down_write(4, false, 0, &mut f));
    assert!(!got);
    assert_eq!(w, [2]);
    assert!(!s.write_retry(3, false, 0));
    assert_eq!(s.writer, None);
    assert!(s.write_retry(2, true, 0));
    assert_eq!(s.writer, Some(2));
    assert!(!s.handoff);
    assert_eq!(queue(&s), [(3, true), (4, true)]);
    // Without the hand-off a non-RT writer waits RWSEM_WAIT_TIMEOUT
    // before setting it: not at its first try.
    let mut s = Rwsem::default();
    assert!(s.down_write(1, false, 0, &mut |_| {}));
    assert!(!s.down_write(2, false, 0, &mut |_| {}));
    assert!(!s.handoff);
}

/// `downgrade_write`: the writer becomes a reader and the readers queued
/// are granted with it (RWSEM_WAKE_READ_OWNED), writers skipped.
#[test]
fn rwsem_downgrade_grants_the_queued_readers() {
    let mut s = Rwsem::default();
    assert!(s.down_write(1, false, 0, &mut |_| {}));
    assert!(!s.down_read(2, 0, &mut |_| {}));
    assert!(!s.down_write(3, false, 0, &mut |_| {}));
    assert!(!s.down_read(4, 0, &mut |_| {}));
    let ((), w) = woke(|mut f| s.downgrade_write(1, &mut f));
    assert_eq!(w, [2, 4]);
    assert_eq!((s.writer, s.readers), (None, 3), "1, 2 and 4 read");
    assert_eq!(queue(&s), [(3, true)]);
    assert!(s.sleeping(3), "the writer stays asleep");
    // Downgrading with nobody queued: one reader.
    let mut s = Rwsem::default();
    assert!(s.down_write(1, false, 0, &mut |_| {}));
    let ((), w) = woke(|mut f| s.downgrade_write(0, &mut f));
    assert!(w.is_empty(), "{w:?}");
    assert_eq!((s.writer, s.readers), (None, 1));
}

/// `MAX_READERS_WAKEUP`: one `rwsem_mark_wake` grants at most 256
/// readers; the next reader stays at the head, and a reader that queues
/// behind it while readers hold the lock (RWSEM_WAKE_READERS) grants both.
#[test]
fn rwsem_mark_wake_grants_at_most_max_readers_wakeup() {
    let mut s = Rwsem::default();
    assert!(s.down_write(0, false, 0, &mut |_| {}));
    for t in 1..=257 {
        assert!(!s.down_read(t, 0, &mut |_| {}));
    }
    let ((), w) = woke(|mut f| s.up_write(0, &mut f));
    assert_eq!(w, (1..=256).collect::<Vec<_>>());
    assert_eq!(s.readers, 256);
    assert_eq!(queue(&s), [(257, false)]);
    let (got, w) = woke(|mut f| s.down_read(258, 0, &mut f));
    assert!(got, "granted with 257");
    assert_eq!(w, [257, 258]);
    assert_eq!(s.readers, 258);
    assert!(s.waiters.is_empty());
}
