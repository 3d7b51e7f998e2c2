//! Page migration between NUMA nodes against a running process, as
//! `migratepages PID 0 1` (numactl) run back and forth against a
//! memory benchmark: the test Huang Ying's v6.3 series (7e12beb8ca2a
//! "migrate_pages: batch flushing TLB") measured with pmbench on a
//! 2-socket Intel server (TLB flush IPIs -99.1%, pages migrated per
//! second +291.7%).
//!
//! ```text
//!   CPU0:                 migratepages (another process) loops { migrate_pages(2):
//!                         every folio of the region on node 0 to node 1, then
//!                         back on the next call }                     <- measured, per call
//!   CPU1..=threads:       threads of the process, each writing its slice of the
//!                         region in a loop (memset of each 4 KiB page); a write to a
//!                         folio under migration sleeps in migration_entry_wait
//! ```
//! The region is populated on node 0 before the run (the benchmark's
//! initialisation). Every migrated folio owes a flush on every CPU running
//! the process: with `<arch>.batched_unmap` one per `migrate_pages_batch`
//! (512 folios), without it one per folio (`ptep_clear_flush`).

use crate::{measured_loop, size_pages, tables_for, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Error, Scenario, PAGE_SIZE};

pub const MIGRATE_PAGES: WorkloadInfo = WorkloadInfo {
    name: "migrate_pages",
    about: "migratepages on CPU 0 moves a process's pages between NUMA nodes 0 and 1 while its threads keep writing them on the other CPUs (batched unmap flushes: <arch>.batched_unmap)",
    keys: "threads = writer threads (CPUs 1..=threads); size = the region, split among them; iterations = migrate_pages calls (alternately 0 -> 1 and 1 -> 0)",
    build,
    needs,
};

fn needs(s: &Scenario) -> (u64, u64, u64) {
    (
        2 * (s.workload.size.0 / PAGE_SIZE) + 8,
        tables_for(s.workload.size.0) + 4,
        s.workload.threads as u64 + 1,
    )
}

/// Two NUMA nodes at least, and the threads plus `migratepages` fit.
fn check_machine(s: &Scenario, w: &World) -> Result<(), Error> {
    let nodes = w.cfg.topology.nr_nodes();
    if nodes < 2 {
        return Err(Error::Range(format!(
            "workload migrate_pages needs 2 NUMA nodes; machine.topology with machine.cpus = {} has {nodes} (icelake_2s needs more than 64 CPUs, sg2042 more than 16; or machine.topology = \"two_nodes\")",
            s.machine.cpus
        )));
    }
    let threads = s.workload.threads;
    if threads == 0 || threads + 1 > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {threads}: migrate_pages needs 1 to machine.cpus - 1 = {} threads (CPU 0 runs migratepages)",
            s.machine.cpus - 1
        )));
    }
    Ok(())
}

fn build(s: &Scenario, w: &mut World) -> Result<(), Error> {
    check_machine(s, w)?;
    let threads = s.workload.threads as u64;
    let pages = size_pages(s)?;
    if pages < threads {
        return Err(Error::Range(format!(
            "workload.size = {} gives fewer pages than workload.threads = {threads}",
            s.workload.size
        )));
    }
    let len = s.workload.size.0;
    let mm = w.mm_alloc()?;
    w.add_vma(mm, MAP_BASE, len);
    kernel::mm::memory::populate_range(w, mm, MAP_BASE, MAP_BASE + len)?;
    let tool = w.mm_alloc()?;
    let op = w.op_id("migrate_pages");
    let call = vec![UserOp::MigratePages {
        mm,
        start: MAP_BASE,
        len,
        from: 0,
        to: 1,
    }];
    let prog = measured_loop(0, op, call, s.workload.iterations, UserOp::Exit);
    w.spawn(tool, 0, prog, true);
    let slice = pages / threads;
    for i in 0..threads {
        let start = MAP_BASE + i * slice * PAGE_SIZE;
        let prog = vec![
            UserOp::Memset {
                start,
                pages: slice as u32,
            },
            UserOp::Loop {
                to: 0,
                times: u64::MAX,
            },
        ];
        w.spawn(mm, (i + 1) as u16, prog, false);
    }
    Ok(())
}
