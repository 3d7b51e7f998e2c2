//! Page-table pages freed under lockless walkers: khugepaged's collapse
//! against GUP-fast (and against a pin held for an I/O), PT_RECLAIM,
//! munmap's `free_pgtables`, and MADV_PAGEOUT's batched unmap flush.

use super::x86_flush::madvise_race;
use super::P;
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

/// A world with one mm over a populated 2 MiB at P: the world, the mm,
/// the length.
fn populated_hpage(s: &Scenario) -> Result<(World, kernel::MmId, u64), Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    let len = machine::HPAGE_SIZE;
    w.add_vma(mm, P, len);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + len)?;
    Ok((w, mm, len))
}

/// Threads of one mm over a populated 2 MiB: CPU0 MADV_COLLAPSEs it and
/// then zaps it (freeing the deposited table, which a later fault may reuse);
/// every other CPU GUP-fasts two of its pages.
pub(super) fn collapse_vs_gup(s: &Scenario) -> Result<World, Error> {
    let (mut w, mm, len) = populated_hpage(s)?;
    w.spawn(
        mm,
        0,
        vec![
            UserOp::MadviseCollapse { start: P, len },
            UserOp::MadviseDontneed { start: P, len },
            UserOp::Touch {
                addr: P,
                write: true,
            },
            UserOp::Exit,
        ],
        true,
    );
    for cpu in 1..s.machine.cpus as u16 {
        w.spawn(
            mm,
            cpu,
            vec![
                UserOp::GupFast {
                    base: P,
                    span: 512,
                    pages: 2,
                    stride: 1,
                },
                UserOp::UnpinUserPages,
                UserOp::Exit,
            ],
            true,
        );
    }
    Ok(w)
}

/// One mm over a populated 2 MiB: CPU0 MADV_COLLAPSEs it; CPU1, another
/// thread, reads one of its pages three times through the MMU (hardware
/// walks through the PMD, not GUP-fast).
pub(super) fn collapse_vs_reader(s: &Scenario) -> Result<World, Error> {
    let (mut w, mm, len) = populated_hpage(s)?;
    w.spawn(
        mm,
        0,
        vec![UserOp::MadviseCollapse { start: P, len }, UserOp::Exit],
        true,
    );
    let read = UserOp::Touch {
        addr: P + PAGE_SIZE,
        write: false,
    };
    let reads = vec![read.clone(), read.clone(), read, UserOp::Exit];
    w.spawn(mm, 1, reads, true);
    Ok(w)
}

/// One mm over a populated 2 MiB: CPU0 MADV_COLLAPSEs it; CPU1 pins two
/// of its pages with GUP-fast (an `O_DIRECT` buffer), holds them for the
/// I/O, then unpins. Whether the pin is there when the collapse scans or
/// isolates decides the outcome: collapsed, or `SCAN_PAGE_COUNT` (at the
/// scan, or after the flush with the PMD restored).
pub(super) fn collapse_vs_pin(s: &Scenario) -> Result<World, Error> {
    let (mut w, mm, len) = populated_hpage(s)?;
    let collapse = vec![
        UserOp::MadviseCollapse { start: P, len },
        UserOp::Touch {
            addr: P,
            write: true,
        },
        UserOp::Exit,
    ];
    w.spawn(mm, 0, collapse, true);
    let pin = vec![
        UserOp::GupFast {
            base: P,
            span: 512,
            pages: 2,
            stride: 1,
        },
        UserOp::IoWait {
            cost: machine::Cost::DirectIo,
            n: 1,
        },
        UserOp::UnpinUserPages,
        UserOp::Exit,
    ];
    w.spawn(mm, 1, pin, true);
    Ok(w)
}

/// `collapse_vs_gup` on 4 CPUs where the mm first earns a global ASID
/// (arch/x86/mm/tlb.c: `consider_global_asid`): CPU0 (pid 0, sampled at
/// jiffies 0) flushes a 4 KiB page twice while CPUs 1-3 run the mm (one
/// GUP-fast walker that computes first, two spinners): the first flush IPIs and assigns the
/// ASID, the second is broadcast and its transition IPIs move the others
/// over; then the collapse.
pub(super) fn collapse_vs_gup_global_asid(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    let len = machine::HPAGE_SIZE;
    let q = P + len;
    w.add_vma(mm, P, len + PAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + len)?;
    let touch = UserOp::Touch {
        addr: q,
        write: true,
    };
    let zap = UserOp::MadviseDontneed {
        start: q,
        len: PAGE_SIZE,
    };
    let prog = vec![
        touch.clone(),
        zap.clone(),
        touch,
        zap,
        UserOp::MadviseCollapse { start: P, len },
        UserOp::MadviseDontneed { start: P, len },
        UserOp::Touch {
            addr: P,
            write: true,
        },
        UserOp::Exit,
    ];
    w.spawn(mm, 0, prog, true);
    let walk = UserOp::GupFast {
        base: P,
        span: 512,
        pages: 2,
        stride: 1,
    };
    // A step in user mode first: the walker runs the mm (and takes the
    // flush IPIs) before its IRQ-off walk begins.
    let think = UserOp::Compute { ns: 100 };
    w.spawn(
        mm,
        1,
        vec![think, walk, UserOp::UnpinUserPages, UserOp::Exit],
        true,
    );
    for cpu in 2..s.machine.cpus as u16 {
        w.spawn(mm, cpu, vec![UserOp::Spin], false);
    }
    Ok(w)
}

/// PT_RECLAIM (x86, the default): a thread on CPU1 reads P (its walker
/// caches the PMD entry's pointer to P's PTE table) and exits, leaving CPU1
/// lazy in the mm. CPU0 writes P and `MADV_DONTNEED`s the whole 2 MiB:
/// `zap_pte_range` empties the table, clears the PMD and frees the table
/// after the flush; then CPU0 faults P back (a new table, possibly the
/// same frame).
pub(super) fn pt_reclaim_lazy(s: &Scenario) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    let len = machine::HPAGE_SIZE;
    w.add_vma(mm, P, len);
    let read = UserOp::Touch {
        addr: P,
        write: false,
    };
    let write = UserOp::Touch {
        addr: P,
        write: true,
    };
    w.spawn(mm, 1, vec![read, UserOp::Exit], true);
    w.spawn(
        mm,
        0,
        vec![
            write.clone(),
            UserOp::MadviseDontneed { start: P, len },
            write,
            UserOp::Exit,
        ],
        true,
    );
    Ok(w)
}

/// PT_RECLAIM against GUP-fast: CPU0 `MADV_DONTNEED`s a populated 2 MiB
/// (its PTE table freed through `tlb_remove_table`'s RCU path) and faults
/// a page back; CPU1 GUP-fasts two pages of the range with IRQs off.
pub(super) fn pt_reclaim_vs_gup(s: &Scenario) -> Result<World, Error> {
    let len = machine::HPAGE_SIZE;
    range_vs_gup(
        s,
        vec![
            UserOp::MadviseDontneed { start: P, len },
            UserOp::Touch {
                addr: P,
                write: true,
            },
            UserOp::Exit,
        ],
    )
}

/// `madvise_race` with `MADV_PAGEOUT`: CPU0 writes P and pages it out
/// (reclaim's batched unmap flush), twice; CPU1, a thread of the same mm,
/// reads P three times.
pub(super) fn pageout_race(s: &Scenario) -> Result<World, Error> {
    let mut w = madvise_race(s)?;
    let t = &mut w.tasks[0];
    t.prog = kernel::user::pageout_instead_of_dontneed(&t.prog);
    Ok(w)
}

/// munmap against GUP-fast: CPU0 unmaps a populated 2 MiB (`free_pgtables`
/// frees its PTE table); CPU1, a thread of the same mm, GUP-fasts two of
/// its pages with IRQs off.
pub(super) fn munmap_vs_gup(s: &Scenario) -> Result<World, Error> {
    let len = machine::HPAGE_SIZE;
    range_vs_gup(s, vec![UserOp::Munmap { start: P, len }, UserOp::Exit])
}

/// A 2 MiB VMA at P with its first two pages populated; CPU0 runs `prog`,
/// CPU1 (a thread of the same mm) GUP-fasts those two pages with IRQs off.
pub(super) fn range_vs_gup(s: &Scenario, prog: Vec<UserOp>) -> Result<World, Error> {
    let mut w = World::new(s)?;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, P, machine::HPAGE_SIZE);
    kernel::mm::memory::populate_range(&mut w, mm, P, P + 2 * PAGE_SIZE)?;
    w.spawn(mm, 0, prog, true);
    w.spawn(
        mm,
        1,
        vec![
            UserOp::GupFast {
                base: P,
                span: 2,
                pages: 2,
                stride: 1,
            },
            UserOp::Exit,
        ],
        true,
    );
    Ok(w)
}
