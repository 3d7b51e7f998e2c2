//! Builders the kernel crate's integration tests share (`mod common;`).
// Each test binary uses some of them.
#![allow(dead_code)]

use kernel::world::StepKind;
use kernel::{Effects, MmId, World};
use machine::scenario::Arch;
use machine::tlb::TlbHit;
use machine::{CpuId, Pfn, Scenario};

/// A validated world of `arch` with `cpus` CPUs and `sets` applied,
/// nothing running.
pub fn world(arch: Arch, cpus: u32, sets: &[&str]) -> World {
    let mut s = Scenario::default();
    s.machine.arch = arch;
    s.machine.cpus = cpus;
    for kv in sets {
        s.set(kv).unwrap();
    }
    s.validate().unwrap();
    World::new(&s).unwrap()
}

/// [`world`] with `n` new mms.
pub fn world_mms(arch: Arch, cpus: u32, sets: &[&str], n: usize) -> (World, Vec<MmId>) {
    let mut w = world(arch, cpus, sets);
    let mms = (0..n).map(|_| w.mm_alloc().unwrap()).collect();
    (w, mms)
}

/// A 4-hart RISC-V world with one mm in the mm_cpumask of harts 0..=2
/// (hart 3 never had it).
pub fn riscv_mm_on_harts_0_to_2(sets: &[&str]) -> (World, MmId) {
    let (mut w, mms) = world_mms(Arch::Riscv, 4, sets, 1);
    let mm = mms[0];
    for c in 0..3 {
        w.mms[mm as usize].cpumask.set(c);
    }
    (w, mm)
}

/// Effects that keep the steps' labels.
pub fn traced() -> Effects {
    Effects {
        tracing: true,
        ..Effects::default()
    }
}

/// A 4 KiB TLB entry of `owner` for frame `pfn` (generation 0).
pub fn tlb_hit(owner: MmId, pfn: Pfn, writable: bool) -> TlbHit {
    TlbHit {
        pfn,
        frame_gen: 0,
        writable,
        huge: false,
        owner,
    }
}

/// Step the enabled CPUs allowed by `allow` (the first enabled first)
/// until `done`; panics when nothing allowed is enabled or after 200,000
/// steps.
pub fn drive(
    w: &mut World,
    allow: impl Fn(CpuId, StepKind) -> bool,
    done: impl Fn(&World) -> bool,
) {
    let (mut en, mut fx) = (Vec::new(), Effects::default());
    for _ in 0..200_000 {
        if done(w) {
            return;
        }
        w.enabled(&mut en);
        let Some(&(c, k)) = en.iter().find(|&&(c, k)| allow(c, k)) else {
            panic!("stuck: nothing allowed among {en:?}");
        };
        fx.clear();
        w.step(c, k, &mut fx);
    }
    panic!("did not finish");
}

/// The PTE mapping `va` in `mm` (0 when no PTE table covers it).
pub fn pte_of(w: &World, mm: MmId, va: u64) -> u64 {
    let Some(t) = kernel::mm::memory::pte_table(w, mm, va) else {
        return 0;
    };
    w.mem.read(t, machine::mem::table_index(va, 1)).unwrap_or(0)
}
