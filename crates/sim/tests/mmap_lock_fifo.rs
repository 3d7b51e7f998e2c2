//! `mmap_lock`'s FIFO queue in time (kernel/locking/rwsem.c): a steady
//! stream of readers no longer starves a writer.
//!
//! Three threads call `madvise(MADV_DONTNEED)` in a loop over a range that
//! spans two VMAs (`madvise_lock` → `try_vma_read_lock` fails: the range
//! is not in one VMA, so each call holds `mmap_read_lock`), staggered so
//! that the lock is read-held almost always; a fourth thread calls
//! `mmap(MAP_FIXED)` (`mmap_write_lock`). The old model let a reader in
//! whenever no writer held the lock, so the writer waited for an instant
//! with no reader at all, which the stream need never leave it.

use kernel::user::UserOp;
use kernel::world::StepKind;
use kernel::{Label, World};
use machine::{CostProfile, Scenario, HPAGE_SIZE, PAGE_SIZE};
use sim::{Sim, SimOptions};
use std::sync::{Arc, Mutex};

const P: u64 = 0x7f00_0000_0000;
/// The `madvise` range: 16 pages across the boundary of the two VMAs.
const M: u64 = P + HPAGE_SIZE - 8 * PAGE_SIZE;
const M_LEN: u64 = 16 * PAGE_SIZE;
/// The writer's `mmap(MAP_FIXED)`, away from both VMAs.
const W: u64 = P + 4 * HPAGE_SIZE;
const READERS: u32 = 3;

/// Runs `readers` threads of the stream (each one's loop starts `stagger`
/// ns after the previous one's) and, if `writer_at`, the writer entering
/// `mmap` then. Returns the simulation and, per CPU, the times of its
/// `madvise` entries.
fn run(readers: u32, writer_at: Option<u32>, stagger: u32) -> (Sim, Vec<Vec<u64>>) {
    let mut s = Scenario::default();
    s.machine.cpus = READERS + 1;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, P, HPAGE_SIZE);
    w.add_vma(mm, P + HPAGE_SIZE, HPAGE_SIZE);
    let (madv, map) = (w.op_id("madvise"), w.op_id("mmap"));
    for c in 1..=readers {
        let prog = vec![
            UserOp::Compute {
                ns: stagger * (c - 1) + 1,
            },
            UserOp::OpBegin(madv),
            UserOp::MadviseDontneed {
                start: M,
                len: M_LEN,
            },
            UserOp::OpEnd(madv),
            UserOp::Loop {
                to: 1,
                times: if writer_at.is_some() { u64::MAX } else { 400 },
            },
            UserOp::Exit,
        ];
        w.spawn(mm, c as u16, prog, writer_at.is_none());
    }
    if let Some(at) = writer_at {
        let prog = vec![
            UserOp::Compute { ns: at },
            UserOp::OpBegin(map),
            UserOp::Mmap {
                start: W,
                len: PAGE_SIZE,
            },
            UserOp::OpEnd(map),
            UserOp::Exit,
        ];
        w.spawn(mm, 0, prog, true);
    }
    let opts = SimOptions {
        max_time_ns: 20_000_000,
        ..SimOptions::default()
    };
    let mut sim = Sim::new(w, CostProfile::default_x86(), opts);
    let entries = Arc::new(Mutex::new(vec![Vec::new(); READERS as usize + 1]));
    let e = entries.clone();
    sim.on_step = Some(Box::new(move |v| {
        if v.kind == StepKind::Run
            && v.labels
                .iter()
                .any(|l| matches!(l, Label::Syscall { nr } if nr.starts_with("madvise")))
        {
            e.lock().unwrap()[v.cpu as usize].push(v.start);
        }
    }));
    sim.run(|_| {});
    let entries = entries.lock().unwrap().clone();
    (sim, entries)
}

/// Latency of op `name` in `sim`: (samples, max ns).
fn op(sim: &Sim, name: &str) -> (u64, u64) {
    let id = sim.world.op_names.iter().position(|n| n == name).unwrap();
    let s = &sim.ops[id];
    (s.count, s.hist.max())
}

/// The writer is not starved, and waits as the rwsem says it must. Once
/// it is queued, a reader arriving while another reader holds the lock
/// queues behind it (`RWSEM_FLAG_WAITERS` fails `rwsem_read_trylock`; the
/// lock is "very likely owned by readers", so no stealing): each of those
/// threads enters at most one `madvise` while the writer waits. But the
/// last reader out wakes the writer and, looping, finds the lock free
/// again before the writer runs (here in the same step: its `up_read`,
/// syscall exit and next `down_read`): it steals it (reader optimistic
/// lock stealing: no writer, no hand-off), and the writer's
/// `rwsem_try_write_lock` fails, every time, until the writer has waited
/// past `RWSEM_WAIT_TIMEOUT` (4 jiffies at HZ=1000: past jiffy q + 4, q
/// the jiffy it queued in). Its next failing try sets the hand-off bit;
/// the stealer's next `down_read` queues, and the writer gets the lock at
/// that reader's `up_read`: at most one `madvise` (the longest of the
/// stream without the writer) and the wake-up later. The old model let
/// a reader in whenever no writer held the lock; the three overlapping
/// readers never all left it, and the writer never got it.
#[test]
fn a_stream_of_readers_does_not_starve_a_writer() {
    use kernel::locking::rwsem::RWSEM_WAIT_TIMEOUT;
    let stagger = 600;
    let (alone, _) = run(READERS, None, stagger);
    let (n, madvise_max) = op(&alone, "madvise");
    assert_eq!(n, READERS as u64 * 400);
    let (uncontended, _) = run(0, Some(1), stagger);
    let (_, mmap_alone) = op(&uncontended, "mmap");
    let (sim, entries) = run(READERS, Some(200_000), stagger);
    assert!(sim.violations.is_empty());
    let (done, _) = op(&sim, "mmap");
    assert_eq!(done, 1, "the writer got the lock");
    let id = sim.world.op_names.iter().position(|n| n == "mmap").unwrap();
    let (begin, end) = (sim.ops[id].first_begin.unwrap(), sim.ops[id].last_end);
    let ms = 1_000_000;
    let handoff_at = (begin / ms + RWSEM_WAIT_TIMEOUT + 1) * ms;
    let wake = 2_000;
    assert!(
        end >= handoff_at && end <= handoff_at + madvise_max + mmap_alone + wake,
        "mmap from {begin} to {end} ns: hand-off from {handoff_at} ns, a madvise at most {madvise_max} ns, an mmap alone {mmap_alone} ns"
    );
    let c = &sim.world.counters;
    assert_eq!((c.rwsem_sleep_writer, c.rwsem_wlock_handoff), (1, 1));
    // One thread steals, the others queue behind the writer; each thread
    // sleeps once in down_read (the stealer after the hand-off).
    let during: Vec<usize> = entries[1..]
        .iter()
        .map(|e| e.iter().filter(|&&t| t > begin && t < end).count())
        .collect();
    assert_eq!(during.iter().filter(|&&n| n > 1).count(), 1, "{during:?}");
    assert_eq!(c.rwsem_sleep_reader, READERS as u64, "{during:?}");
    assert!(entries[1..].iter().all(|e| e.iter().any(|&t| t < begin)));
}
