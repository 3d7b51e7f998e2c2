//! Lazy TLB and freed page tables (arch/x86/mm/tlb.c `should_flush_tlb`,
//! `native_flush_tlb_multi`, `flush_tlb_func`).
//!
//! CPU1 runs a thread of the mm that touches a page and exits: CPU1 goes
//! idle in lazy mode with the mm still loaded and its paging-structure cache
//! still pointing at the PTE table. CPU0 then madvises (no IPI to the lazy
//! CPU) and munmaps three times (page tables freed: every CPU in the mask is
//! IPI'd, lazy ones included).

use kernel::user::UserOp;
use kernel::World;
use machine::{Cost, CostProfile, Scenario, HPAGE_SIZE, PAGE_SIZE};
use sim::{Sim, SimOptions};

const R: u64 = 0x7f00_0000_0000;

fn run(inject_lazy_skip: bool) -> Sim {
    let mut s = Scenario::default();
    s.machine.cpus = 3;
    s.inject.lazy_skip_on_freed_tables = inject_lazy_skip;
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, R, HPAGE_SIZE);
    w.spawn(
        mm,
        1,
        vec![
            UserOp::Touch {
                addr: R + PAGE_SIZE,
                write: true,
            },
            UserOp::Exit,
        ],
        false,
    );
    let mut a = vec![
        UserOp::Charge {
            cost: Cost::TaskCreate,
            n: 1,
        },
        UserOp::Touch {
            addr: R,
            write: true,
        },
        UserOp::MadviseDontneed {
            start: R,
            len: PAGE_SIZE,
        },
    ];
    for _ in 0..3 {
        a.extend([
            UserOp::Munmap {
                start: R,
                len: HPAGE_SIZE,
            },
            UserOp::Mmap {
                start: R,
                len: HPAGE_SIZE,
            },
            UserOp::Touch {
                addr: R,
                write: true,
            },
        ]);
    }
    a.push(UserOp::Exit);
    w.spawn(mm, 0, a, true);
    let mut sim = Sim::new(w, CostProfile::default_x86(), SimOptions::default());
    sim.run(|_| {});
    sim
}

#[test]
fn lazy_cpu_skipped_for_pages_but_ipid_for_freed_tables() {
    let sim = run(false);
    let c = &sim.world.counters;
    assert!(sim.violations.is_empty(), "{:?}", sim.violations.first());
    // madvise: CPU1 is lazy, no IPI. munmap 1: IPI'd, switches to init_mm.
    // munmap 2: still in mm_cpumask, IPI'd, finds the mm not loaded and
    // clears itself (remote_wrong_cpu). munmap 3: not in the mask any more.
    assert_eq!(c.irq_tlb[1], 2, "TLB row of the lazy CPU");
    assert_eq!(c.irq_tlb[2], 0, "a CPU that never ran the mm");
    assert_eq!(c.tlb_flush[kernel::FlushReason::RemoteWrongCpu as usize], 1);
    assert_eq!(sim.world.cpus[1].tlbstate.loaded_mm, kernel::INIT_MM);
    assert!(!sim.world.mms[1].cpumask.test(1));
}

/// Skipping lazy CPUs when tables are freed leaves CPU1's paging-structure
/// cache pointing at the freed PTE table: invariant 3.
#[test]
fn skipping_lazy_cpus_on_freed_tables_is_caught() {
    let sim = run(true);
    let v = sim.violations.first().expect("caught");
    assert_eq!(v.invariant, 3, "{}", v.what);
    assert!(v.what.contains("CPU1 (lazy in mm1)"), "{}", v.what);
}
