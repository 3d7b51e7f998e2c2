//! `exit_mmap` (mm/mmap.c, 6.18-class) when the last task of an mm exits:
//! a `fullmm` gather over every VMA, `free_pgtables` at every level below
//! the PGD (each table through `tlb_remove_table`), `tlb_finish_mmu`.
//! Until issue 35 the model kept the pages and tables of every exited mm.
mod common;
use common::scenario;
use kernel::user::UserOp;
use kernel::World;
use machine::scenario::Arch;
use machine::{Cost, CostProfile, PAGE_SIZE};
use sim::{Sim, SimOptions};

const BASE: u64 = 0x7f00_0000_0000;

/// A two-thread process: thread A touches two pages on CPU1 and exits
/// first (CPU1 goes idle: lazy, the mm still loaded on x86); thread B
/// touches them on CPU0, computes a while and exits last. Returns the
/// world after the run and the frames in use before it.
fn two_threads_exit(arch: &str) -> (World, u32) {
    let s = scenario(
        "default",
        &[&format!("machine.arch={arch}"), "machine.cpus=2"],
    );
    let mut w = World::new(&s).unwrap();
    let mm = w.mm_alloc().unwrap();
    w.add_vma(mm, BASE, 2 * PAGE_SIZE);
    let touch = |addr| UserOp::Touch { addr, write: true };
    let a = vec![touch(BASE), touch(BASE + PAGE_SIZE), UserOp::Exit];
    w.spawn(mm, 1, a, true);
    let spin = UserOp::Charge {
        cost: Cost::UserLoop,
        n: 100_000,
    };
    w.spawn(mm, 0, vec![touch(BASE), spin, UserOp::Exit], true);
    let before = w.mem.in_use();
    let profile = CostProfile::default_for(s.machine.arch);
    let mut sim = Sim::new(w, profile, SimOptions::for_scenario(&s));
    sim.run(|_| {});
    (sim.world, before)
}

/// Every architecture: the last exit frees the two pages and the PTE, PMD
/// and PUD tables (the PGD stays for `__mmdrop`), so the frames in use
/// are those before the run; the PGD has no entry left.
#[test]
fn last_exit_frees_pages_and_tables() {
    for arch in ["x86", "arm64", "riscv"] {
        let (w, before) = two_threads_exit(arch);
        assert!(w.violations.is_empty(), "{arch}: {:?}", w.violations);
        assert_eq!(w.mem.in_use(), before, "{arch}: pages and tables back");
        let pgd = *w.mms[1].pgd;
        assert!((0..512).all(|i| w.mem.read(pgd, i) == Some(0)), "{arch}");
    }
}

/// x86: `tlb_flush` with `fullmm` is `flush_tlb_mm_range(mm, 0,
/// TLB_FLUSH_ALL, .., freed_tables = true)`: `native_flush_tlb_multi`
/// IPIs CPU1 although it is lazy (it still has the mm's tables loaded),
/// and `flush_tlb_func` switches it to `init_mm`: one TLB interrupt, and
/// no CPU can walk the freed tables. arm64: one `TLBI ASIDE1IS`
/// (`flush_tlb_mm`, tables were freed) and no IPI.
#[test]
fn last_exit_flushes_the_lazy_cpu_once() {
    let (w, _) = two_threads_exit("x86");
    assert_eq!(w.counters.irq_tlb, [0, 1]);
    assert_eq!(w.cpus[1].tlbstate.loaded_mm, kernel::INIT_MM);
    let (w, _) = two_threads_exit("arm64");
    assert_eq!(w.cfg.arch, Arch::Arm64);
    assert_eq!(w.counters.tlbi_is, 1);
    assert_eq!(w.counters.irq_tlb, [0, 0]);
}
