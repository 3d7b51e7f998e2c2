//! Benchmarks as user programs on a freshly booted [`World`].
//!
//! Each workload is one module that reads `workload.*` from the scenario,
//! creates the processes and threads the real benchmark creates, pins them,
//! and gives each a program of [`UserOp`]s that mirrors the benchmark's loop.

use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, HPAGE_SIZE, PAGE_SIZE};

pub mod defer_race;
pub mod fork_exit;
pub mod hugetlb;
pub mod khugepaged;
pub mod madvise_dontneed;
pub mod migrate;
pub mod mmapstress;
pub mod reclaim;
pub mod rt_latency;
pub mod tlb_flush;
pub mod usemem;

/// Where the benchmarks' mappings start (a typical mmap base).
pub const MAP_BASE: u64 = 0x7f00_0000_0000;

/// A workload in the catalogue.
#[derive(Clone, Copy)]
pub struct WorkloadInfo {
    pub name: &'static str,
    pub about: &'static str,
    /// What `workload.threads`, `.size` and `.iterations` mean for it.
    pub keys: &'static str,
    build: fn(&Scenario, &mut World) -> Result<(), Error>,
    /// Frames, page-table pages and tasks it needs.
    needs: fn(&Scenario) -> (u64, u64, u64),
}

/// Every workload. A static table, not a `Vec` built per call: built and
/// searched by value, its 22 entries sent LLVM's ConstraintElimination
/// pass into a 5-minute compile of `find` under fat LTO.
static CATALOGUE: &[WorkloadInfo] = &[
    madvise_dontneed::INFO,
    madvise_dontneed::RACE,
    madvise_dontneed::PAGEOUT,
    tlb_flush::THREADS,
    tlb_flush::PROCESSES,
    khugepaged::COLLAPSE,
    khugepaged::RACE,
    hugetlb::UNSHARE,
    usemem::USEMEM,
    usemem::COW_RACE,
    mmapstress::MMAPSTRESS01,
    fork_exit::FORK_EXIT,
    fork_exit::FORK_EXIT_PLACED,
    mmapstress::LAT_PAGEFAULT,
    mmapstress::LAT_MMAP,
    defer_race::DEFER_RACE,
    defer_race::VMALLOC_RACE,
    rt_latency::RT_LATENCY,
    rt_latency::RT_FLUSH_RACE,
    reclaim::KSWAPD,
    reclaim::PAGEOUT_READ,
    migrate::MIGRATE_PAGES,
];

/// Every workload.
pub fn catalogue() -> &'static [WorkloadInfo] {
    CATALOGUE
}

/// Look a workload up by name.
pub fn find(name: &str) -> Result<WorkloadInfo, Error> {
    catalogue()
        .iter()
        .find(|w| w.name == name)
        .copied()
        .ok_or_else(|| {
            let names: Vec<&str> = catalogue().iter().map(|w| w.name).collect();
            Error::Config(format!(
                "unknown workload '{name}' (known: {})",
                names.join(", ")
            ))
        })
}

/// The bundled scenario each workload starts from: `tlblab run --workload
/// NAME` begins with it, so the workload runs as its benchmark runs (the
/// machine it needs included: architecture, CPUs, memory, scheduler tick,
/// migration, preemption model, sizes, iterations). The file is the one
/// source of these values; workloads without a file of their own borrow
/// the scenario of their sibling and only change `workload.name`.
const DEFAULTS: &[(&str, &str, &str)] = &[
    (
        "madvise_dontneed",
        "flush-tlb-info-madvise",
        include_str!("../../../scenarios/flush-tlb-info-madvise.toml"),
    ),
    (
        "madvise_pageout",
        "flush-tlb-info-madvise",
        include_str!("../../../scenarios/flush-tlb-info-madvise.toml"),
    ),
    (
        "kswapd_reclaim",
        "kswapd-reclaim",
        include_str!("../../../scenarios/kswapd-reclaim.toml"),
    ),
    (
        "madvise_pageout_read",
        "madvise-pageout-read",
        include_str!("../../../scenarios/madvise-pageout-read.toml"),
    ),
    (
        "migrate_pages",
        "migrate-pages",
        include_str!("../../../scenarios/migrate-pages.toml"),
    ),
    (
        "madvise_race",
        "default",
        include_str!("../../../scenarios/default.toml"),
    ),
    (
        "tlb_flush_threads",
        "tlb-flush-threads",
        include_str!("../../../scenarios/tlb-flush-threads.toml"),
    ),
    (
        "tlb_flush_processes",
        "tlb-flush-processes",
        include_str!("../../../scenarios/tlb-flush-processes.toml"),
    ),
    (
        "khugepaged_collapse",
        "skip-sync-collapse",
        include_str!("../../../scenarios/skip-sync-collapse.toml"),
    ),
    (
        "collapse_race",
        "collapse-race",
        include_str!("../../../scenarios/collapse-race.toml"),
    ),
    (
        "hugetlb_unshare",
        "hugetlb-unshare",
        include_str!("../../../scenarios/hugetlb-unshare.toml"),
    ),
    (
        "usemem_fork_exec",
        "usemem-fork-exec",
        include_str!("../../../scenarios/usemem-fork-exec.toml"),
    ),
    (
        "cow_reuse_race",
        "cow-reuse-race",
        include_str!("../../../scenarios/cow-reuse-race.toml"),
    ),
    (
        "mmapstress01",
        "mmapstress01",
        include_str!("../../../scenarios/mmapstress01.toml"),
    ),
    // The guests' fork rows run mmapstress01's machine.
    (
        "fork_exit",
        "mmapstress01",
        include_str!("../../../scenarios/mmapstress01.toml"),
    ),
    (
        "fork_exit_placed",
        "mmapstress01",
        include_str!("../../../scenarios/mmapstress01.toml"),
    ),
    (
        "lat_pagefault",
        "lat-pagefault",
        include_str!("../../../scenarios/lat-pagefault.toml"),
    ),
    (
        "lat_mmap",
        "lat-mmap",
        include_str!("../../../scenarios/lat-mmap.toml"),
    ),
    (
        "defer_race",
        "defer-race",
        include_str!("../../../scenarios/defer-race.toml"),
    ),
    (
        "vmalloc_race",
        "vmalloc-race",
        include_str!("../../../scenarios/vmalloc-race.toml"),
    ),
    (
        "rt_latency",
        "rt-latency",
        include_str!("../../../scenarios/rt-latency.toml"),
    ),
    (
        "rt_flush_race",
        "rt-latency",
        include_str!("../../../scenarios/rt-latency.toml"),
    ),
];

/// The name of the bundled scenario that holds `workload`'s defaults.
pub fn defaults_source(workload: &str) -> Result<&'static str, Error> {
    find(workload)?;
    DEFAULTS
        .iter()
        .find(|(w, _, _)| *w == workload)
        .map(|(_, file, _)| *file)
        .ok_or_else(|| Error::Config(format!("workload '{workload}' has no bundled scenario")))
}

/// `workload`'s defaults: its bundled scenario, named after the workload.
pub fn defaults(workload: &str) -> Result<Scenario, Error> {
    let file = defaults_source(workload)?;
    let (_, _, text) = DEFAULTS
        .iter()
        .find(|(_, f, _)| *f == file)
        .expect("listed");
    let mut s = Scenario::from_toml(text, file)?;
    s.name = workload.to_string();
    s.workload.name = workload.to_string();
    Ok(s)
}

/// Host bytes the scenario needs, from the workload's own estimate.
pub fn estimate_bytes(s: &Scenario) -> Result<u64, Error> {
    let w = find(&s.workload.name)?;
    let (frames, tables, tasks) = (w.needs)(s);
    Ok(World::estimate_bytes(s, frames, tables, tasks))
}

/// Validate the scenario and build its world, ready to run.
pub fn build(s: &Scenario) -> Result<World, Error> {
    s.validate()?;
    let w = find(&s.workload.name)?;
    let (frames, tables, _) = (w.needs)(s);
    let avail = s.machine.memory.0 / PAGE_SIZE;
    if frames + tables > avail {
        return Err(Error::TooBig(format!(
            "workload needs {} frames but machine.memory = {} has {avail}",
            frames + tables,
            s.machine.memory
        )));
    }
    let mut world = World::new(s)?;
    // For the simulator, which never hashes its world (and may populate
    // millions of entries before it starts).
    world.mem.defer_digests();
    if !s.inject.drop_barrier.is_empty() {
        return Err(Error::Config(format!(
            "inject.drop_barrier={}: only `tlblab check` sees barriers (the simulator is sequentially consistent)",
            s.inject.drop_barrier
        )));
    }
    if s.inject.asid_fastpath_blind_store {
        return Err(Error::Config(
            "inject.asid_fastpath_blind_store: only `tlblab check` splits check_and_switch_context into its fast-path steps (the simulator switches in one step)".into(),
        ));
    }
    if s.machine.speculative_walks {
        return Err(Error::Config(
            "machine.speculative_walks: only `tlblab check` explores speculative walks (the simulator walks at accesses only)".into(),
        ));
    }
    if s.inject.arm64_broadcast_dsb_nsh {
        return Err(Error::Config(
            "inject.arm64_broadcast_dsb_nsh: only `tlblab check` sees TLBIs in flight (the simulator completes each as it issues it)".into(),
        ));
    }
    (w.build)(s, &mut world)?;
    Ok(world)
}

/// Pages in `workload.size`, which must be a whole number of pages.
pub fn size_pages(s: &Scenario) -> Result<u64, Error> {
    let sz = s.workload.size.0;
    if !sz.is_multiple_of(PAGE_SIZE) {
        return Err(Error::Range(format!(
            "workload.size = {} is not a multiple of 4KiB",
            s.workload.size
        )));
    }
    Ok(sz / PAGE_SIZE)
}

/// Page-table pages needed to map `bytes` (PTE tables plus upper levels).
pub fn tables_for(bytes: u64) -> u64 {
    bytes.div_ceil(HPAGE_SIZE) + 4
}

/// The classic measured loop: the task's start-up (the `index`-th task
/// created waits for the creation of those before it), then begin, `body`,
/// end, repeat `iterations` times, then `tail`.
pub fn measured_loop(
    index: u32,
    op: u16,
    body: Vec<UserOp>,
    iterations: u64,
    tail: UserOp,
) -> Vec<UserOp> {
    let mut p = vec![UserOp::Charge {
        cost: machine::Cost::TaskCreate,
        n: index,
    }];
    let top = p.len() as u16;
    p.push(UserOp::OpBegin(op));
    p.extend(body);
    p.push(UserOp::OpEnd(op));
    p.push(UserOp::Loop {
        to: top,
        times: iterations,
    });
    p.push(tail);
    p
}
