//! hugetlb PMD sharing and `huge_pmd_unshare` (seed skip-redundant-sync-ipis).
//!
//! ```text
//!   process A: CPU0 loops { touch each 2 MiB page; munmap; mmap again }   <- measured
//!              CPU1..=threads: GUP-fast of 16-page buffers over the range
//!   process B: CPU threads+1 loops { touch; munmap; mmap } on the same file
//! ```
//! With `workload.lazy_threads = n`, n more threads (of B, A, B, ...) run on
//! the next CPUs: each reads the first huge page, then sleeps
//! `workload.period_us` (default 50 µs) and again, so while it sleeps its CPU
//! is lazy in that mm with the mm's PUD entry -> the shared PMD table in its
//! PUD-entry cache. (A read while its process has the range unmapped is a
//! SIGSEGV that ends the thread; its CPU stays lazy.)
//!
//! Both map one hugetlbfs file at the same 1 GiB-aligned address, so their
//! PUDs point at one shared PMD table. Whoever unmaps while the other still
//! shares only unshares (`huge_pmd_unshare`, then `tlb_remove_table_sync_one`);
//! the last user clears the huge PMDs and frees the table.

use crate::{measured_loop, WorkloadInfo, MAP_BASE};
use kernel::user::UserOp;
use kernel::World;
use machine::{Cost, Error, Scenario, HPAGE_SIZE};

pub const UNSHARE: WorkloadInfo = WorkloadInfo {
    name: "hugetlb_unshare",
    about: "two processes share hugetlb PMD tables and keep unmapping (unsharing) and remapping them, while GUP-fast threads of one walk the range",
    keys: "threads = GUP-fast threads of process A; size = hugetlb mapping (multiple of 2MiB, at most 1GiB); iterations = A's cycles; lazy_threads = threads of B, A, ... that read and sleep period_us (default 50), leaving their CPUs lazy",
    build,
    needs,
};

fn needs(s: &Scenario) -> (u64, u64, u64) {
    (
        2 * s.workload.size.0 / HPAGE_SIZE + 8,
        12,
        (s.workload.threads + s.workload.lazy_threads) as u64 + 2,
    )
}

fn build(s: &Scenario, w: &mut World) -> Result<(), Error> {
    let size = s.workload.size.0;
    if !size.is_multiple_of(HPAGE_SIZE) || size > 1 << 30 {
        return Err(Error::Range(format!(
            "workload.size = {} must be a multiple of 2MiB and at most 1GiB (one shared PMD table)",
            s.workload.size
        )));
    }
    let k = s.workload.threads;
    let lazy = s.workload.lazy_threads;
    if k + lazy + 2 > s.machine.cpus {
        return Err(Error::Range(format!(
            "workload.threads = {k} GUP threads, {lazy} lazy threads and two processes need {} CPUs, machine.cpus = {}",
            k + lazy + 2,
            s.machine.cpus
        )));
    }
    let touch: Vec<UserOp> = (0..size / HPAGE_SIZE)
        .map(|i| UserOp::Touch {
            addr: MAP_BASE + i * HPAGE_SIZE,
            write: true,
        })
        .collect();
    let cycle = |touch: &[UserOp]| {
        let mut v = touch.to_vec();
        v.push(UserOp::Munmap {
            start: MAP_BASE,
            len: size,
        });
        v.push(UserOp::MmapHugetlb {
            start: MAP_BASE,
            len: size,
        });
        v
    };
    let a = w.mm_alloc()?;
    let b = w.mm_alloc()?;
    w.add_vma_hugetlb(a, MAP_BASE, size);
    w.add_vma_hugetlb(b, MAP_BASE, size);
    let op = w.op_id("hugetlb_cycle");
    w.spawn(
        a,
        0,
        measured_loop(0, op, cycle(&touch), s.workload.iterations, UserOp::Exit),
        true,
    );
    crate::khugepaged::gup_threads(s, w, a);
    let mut pb = vec![UserOp::Charge {
        cost: Cost::TaskCreate,
        n: k + 1,
    }];
    pb.extend(cycle(&touch));
    pb.push(UserOp::Loop {
        to: 1,
        times: u64::MAX,
    });
    w.spawn(b, (k + 1) as u16, pb, false);
    let wake = w.op_id("lazy_thread_wakeup");
    let period_ns = 1000
        * if s.workload.period_us == 0 {
            50
        } else {
            s.workload.period_us.min(1_000_000) as u32
        };
    for i in 0..lazy {
        let mm = if i % 2 == 0 { b } else { a };
        let prog = vec![
            UserOp::Touch {
                addr: MAP_BASE,
                write: false,
            },
            UserOp::ClockNanosleep {
                period_ns,
                op: wake,
            },
            UserOp::OpEnd(wake),
            UserOp::Loop {
                to: 0,
                times: u64::MAX,
            },
        ];
        w.spawn(mm, (k + 2 + i) as u16, prog, false);
    }
    Ok(())
}
