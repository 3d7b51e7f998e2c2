//! The run report: what `run --json` prints, and its text form.

use crate::engine::{End, Sim, Snapshot, ViolationRecord};
use kernel::world::FlushReason;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize, Clone, Debug)]
pub struct Latency {
    pub mean: f64,
    pub stddev: f64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct OpReport {
    pub name: String,
    pub count: u64,
    /// Completed operations per simulated second, over the span from the
    /// first start to the last end of this operation.
    pub per_sec: f64,
    pub latency_ns: Latency,
    /// The latency distribution: (quantile, ns) from the minimum to the
    /// maximum (for CDF plots).
    pub cdf: Vec<(f64, u64)>,
}

/// Quantiles kept in [`OpReport::cdf`].
pub const CDF_QUANTILES: [f64; 17] = [
    0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
];

/// `/proc/interrupts` rows: one count per CPU.
#[derive(Serialize, Clone, Debug)]
pub struct Interrupts {
    #[serde(rename = "TLB")]
    pub tlb: Vec<u64>,
    #[serde(rename = "CAL")]
    pub cal: Vec<u64>,
    #[serde(rename = "RES")]
    pub res: Vec<u64>,
}

/// One run's results. Keys are only ever added, never renamed.
#[derive(Serialize, Clone, Debug)]
pub struct Report {
    pub scenario: serde_json::Value,
    pub end: End,
    pub sim_time_ns: u64,
    /// Discrete events processed (steps, IPI arrivals, wake-ups).
    pub events: u64,
    /// Kernel/user steps run.
    pub steps: u64,
    pub interrupts: Interrupts,
    pub interrupt_totals: BTreeMap<String, u64>,
    pub tlb_flush: BTreeMap<String, u64>,
    pub ops: Vec<OpReport>,
    pub page_faults: u64,
    pub spurious_faults: u64,
    pub violations: Vec<ViolationRecord>,
    pub arch: BTreeMap<String, u64>,
    /// Where the CPUs' busy time went (what `perf` would attribute).
    pub cycles: Cycles,
    /// The same inside the measurement window (`machine.measure_from_us`,
    /// `machine.measure_us`), with the op throughput there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// `run --trace N`: the last N events of the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<String>,
}

/// Busy CPU time and the share of it spent on TLB maintenance: flush
/// instructions (INVLPG, CR3 flushes, INVLPGB/TLBSYNC, TLBI, sfence.vma, SBI
/// fences) and their completion waits (arm64 DVM queueing and DSB ISH).
/// Time blocked waiting for IPI targets is not busy time and is not in it.
#[derive(Serialize, Clone, Debug)]
pub struct Cycles {
    pub busy_ns: u64,
    pub tlb_maintenance_ns: u64,
    pub dvm_wait_ns: u64,
    /// `tlb_maintenance_ns / busy_ns`.
    pub flush_share: f64,
}

/// [`Cycles`] over the measurement window, and the ops completed in it.
#[derive(Serialize, Clone, Debug)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    pub cycles: Cycles,
    /// Measured ops (any task's) completed inside the window, and per second.
    pub ops: u64,
    pub ops_per_sec: f64,
}

impl Window {
    /// The window between snapshots `a` and `b`.
    pub fn between(a: &Snapshot, b: &Snapshot) -> Window {
        let busy = b.busy_ps - a.busy_ps;
        let maint = b.maint_ps - a.maint_ps;
        let ops = b.ops_done - a.ops_done;
        let len = b.t_ns.saturating_sub(a.t_ns);
        Window {
            start_ns: a.t_ns,
            end_ns: b.t_ns,
            cycles: Cycles {
                busy_ns: busy / 1000,
                tlb_maintenance_ns: maint / 1000,
                dvm_wait_ns: (b.dvm_wait_ps - a.dvm_wait_ps) / 1000,
                flush_share: r3(maint as f64 / busy.max(1) as f64 * 100.0) / 100.0,
            },
            ops,
            ops_per_sec: if len > 0 {
                ops as f64 * 1e9 / len as f64
            } else {
                0.0
            },
        }
    }
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl Report {
    pub fn build(sim: &Sim, scenario: serde_json::Value, end: End) -> Report {
        let c = &sim.world.counters;
        let ops = op_reports(sim);
        let tlb_flush = FlushReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), c.tlb_flush[*r as usize]))
            .collect();
        let mut totals = BTreeMap::new();
        totals.insert("TLB".to_string(), c.irq_tlb.iter().sum());
        totals.insert("CAL".to_string(), c.irq_cal.iter().sum());
        totals.insert("RES".to_string(), c.irq_res.iter().sum());
        let arch = arch_counters(sim);
        Report {
            scenario,
            end,
            sim_time_ns: sim.now,
            events: sim.events,
            steps: sim.steps,
            interrupts: Interrupts {
                tlb: c.irq_tlb.clone(),
                cal: c.irq_cal.clone(),
                res: c.irq_res.clone(),
            },
            interrupt_totals: totals,
            tlb_flush,
            ops,
            page_faults: c.page_faults,
            spurious_faults: c.spurious_faults,
            violations: sim.violations.clone(),
            arch,
            cycles: Cycles {
                busy_ns: sim.busy_ps / 1000,
                tlb_maintenance_ns: sim.maint_ps / 1000,
                dvm_wait_ns: sim.dvm_wait_ps / 1000,
                flush_share: r3(sim.maint_ps as f64 / sim.busy_ps.max(1) as f64 * 100.0) / 100.0,
            },
            window: sim.window[0].map(|a| {
                let b = sim.window[1].unwrap_or_else(|| sim.snapshot(sim.now));
                Window::between(&a, &b)
            }),
            trace: sim.trace_tail(),
        }
    }

    /// The first workload op (what the benchmark prints).
    pub fn main_op(&self) -> Option<&OpReport> {
        self.ops.first()
    }

    /// A human summary.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let name = self
            .scenario
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or("?");
        let _ = writeln!(
            s,
            "scenario {name}: {:?} after {:.3} ms simulated, {} events",
            self.end,
            self.sim_time_ns as f64 / 1e6,
            self.events
        );
        for o in &self.ops {
            let l = &o.latency_ns;
            let _ = writeln!(
                s,
                "  {:<22} {:>9} ops  {:>10.4} us/op  p50 {:>8} p99 {:>8} p99.9 {:>8} max {:>9} ns  {:>12.0} ops/s",
                o.name,
                o.count,
                l.mean / 1000.0,
                l.p50,
                l.p99,
                l.p999,
                l.max,
                o.per_sec
            );
        }
        let t = &self.interrupt_totals;
        let _ = writeln!(
            s,
            "  interrupts: TLB {}  CAL {}  RES {}",
            t["TLB"], t["CAL"], t["RES"]
        );
        let flushes: Vec<String> = self
            .tlb_flush
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(s, "  tlb:tlb_flush: {}", flushes.join(", "));
        let _ = writeln!(
            s,
            "  page faults {} (spurious {})",
            self.page_faults, self.spurious_faults
        );
        let _ = writeln!(
            s,
            "  TLB maintenance: {:.2}% of {:.3} ms busy CPU time",
            self.cycles.flush_share * 100.0,
            self.cycles.busy_ns as f64 / 1e6
        );
        if let Some(w) = &self.window {
            let _ = writeln!(
                s,
                "  window {:.3}-{:.3} ms: TLB maintenance {:.2}% of {:.3} ms busy CPU time, {} ops ({:.0} ops/s)",
                w.start_ns as f64 / 1e6,
                w.end_ns as f64 / 1e6,
                w.cycles.flush_share * 100.0,
                w.cycles.busy_ns as f64 / 1e6,
                w.ops,
                w.ops_per_sec
            );
        }
        let a = &self.arch;
        if a["tlbi_is"] + a["tlbi_local"] > 0 {
            let _ = writeln!(
                s,
                "  arm64: TLBI IS ops {}  DSB ISH {}  local TLBI {}  DVM wait {:.3} ms  ASID rollovers {}",
                a["tlbi_is"],
                a["dsb_ish"],
                a["tlbi_local"],
                self.cycles.dvm_wait_ns as f64 / 1e6,
                a["asid_rollovers"]
            );
        }
        if a["forks"] > 0 {
            let _ = writeln!(
                s,
                "  fork {}  wp_page_reuse {}  wp_page_copy {}",
                a["forks"], a["wp_reuse"], a["wp_copy"]
            );
        }
        if let Some(&moved) = a.get("pgmigrate_success") {
            let per = |v: u64| v as f64 / moved.max(1) as f64;
            let busy = self
                .main_op()
                .map_or(0.0, |o| o.latency_ns.mean * o.count as f64);
            let _ = writeln!(
                s,
                "  migration: {moved} pages migrated ({} failed, {} faults waited on migration entries); per page {:.3} IPIs, {:.3} flushes, {:.3} TLBI IS, {:.3} us",
                a["pgmigrate_fail"],
                a["migration_entry_wait"],
                per(a["ipis_sent"]),
                per(a["tlbbatch_flushes"] + a["ptep_clear_flush"]),
                per(a["tlbi_is"]),
                busy / 1000.0 / moved.max(1) as f64
            );
        }
        if !self.trace.is_empty() {
            let _ = writeln!(s, "  last {} events:", self.trace.len());
            for l in &self.trace {
                let _ = writeln!(s, "    {l}");
            }
        }
        if self.violations.is_empty() {
            let _ = writeln!(s, "  invariants: no violations");
        } else {
            let _ = writeln!(s, "  VIOLATIONS: {}", self.violations.len());
            for v in self.violations.iter().take(3) {
                let _ = writeln!(s, "    [I{}] t={}ns {}", v.invariant, v.time_ns, v.what);
                for l in &v.trace {
                    let _ = writeln!(s, "        {l}");
                }
            }
        }
        s
    }
}

/// Each measured op that ran: workload ops first (in registration order),
/// the kernel span last.
fn op_reports(sim: &Sim) -> Vec<OpReport> {
    let w = &sim.world;
    let mut ops = Vec::new();
    let order = (1..sim.ops.len()).chain(std::iter::once(0));
    for i in order {
        let Some(o) = sim.ops.get(i) else { continue };
        if o.count == 0 {
            continue;
        }
        let mean = o.sum / o.count as f64;
        let var = (o.sum_sq / o.count as f64 - mean * mean).max(0.0);
        let span = o.last_end.saturating_sub(o.first_begin.unwrap_or(0)).max(1);
        ops.push(OpReport {
            name: w.op_names[i].clone(),
            count: o.count,
            per_sec: r3(o.count as f64 * 1e9 / span as f64),
            latency_ns: Latency {
                mean: r3(mean),
                stddev: r3(var.sqrt()),
                p50: o.hist.value_at_quantile(0.5),
                p99: o.hist.value_at_quantile(0.99),
                p999: o.hist.value_at_quantile(0.999),
                max: o.hist.max(),
            },
            cdf: CDF_QUANTILES
                .iter()
                .map(|&q| (q, o.hist.value_at_quantile(q)))
                .collect(),
        });
    }
    ops
}

/// The architecture's and the mm's counters, by name (`/proc/vmstat`-like).
fn arch_counters(sim: &Sim) -> BTreeMap<String, u64> {
    let w = &sim.world;
    let c = &w.counters;
    let mut arch: BTreeMap<String, u64> = [
        ("invlpg", c.invlpg),
        ("full_flushes", c.full_flushes),
        ("cr3_writes", c.cr3_writes),
        ("tlb_hits", c.tlb_hits),
        ("tlb_misses", c.tlb_misses),
        ("ipis_sent", c.ipis_sent),
        ("csd_queued", c.csd_queued),
        ("ttwu_wakelist", c.ttwu_wakelist),
        ("wake_idle_without_ipi", c.wake_idle_without_ipi),
        ("ttwu_ipis", c.ttwu_ipis),
        ("lru_add_drain_all", c.lru_add_drain_all),
        ("lru_drain_works", c.lru_drain_works),
        ("sched_migrations", c.sched_migrations),
        ("sched_newidle_pulls", c.sched_newidle_pulls),
        ("sched_balance_pulls", c.sched_balance_pulls),
        ("sched_fork_remote", c.sched_fork_remote),
        ("sched_wake_migrations", c.sched_wake_migrations),
        ("segv", c.segv),
        ("violations_dropped", c.violations_dropped),
        ("frames_in_use", w.mem.in_use() as u64),
        ("table_sync_ipi", c.table_sync_ipi),
        ("table_sync_skipped", c.table_sync_skipped),
        ("invlpgb", c.invlpgb),
        ("tlbsync", c.tlbsync),
        ("kvm_deferred_flushes", c.kvm_deferred_flushes),
        ("vcpu_preemptions", c.vcpu_preemptions),
        ("gup_fast", c.gup_fast),
        ("gup_fast_backoff", c.gup_fast_backoff),
        ("collapses", c.collapses),
        ("pmd_shares", c.pmd_shares),
        ("pmd_unshares", c.pmd_unshares),
        ("pmd_fully_unshared", c.pmd_fully_unshared),
        ("rcu_table_batches", c.rcu_table_batches),
        ("tlbi_is", c.tlbi_is),
        ("dsb_ish", c.dsb_ish),
        ("tlbi_local", c.tlbi_local),
        ("dvm_ops", sim.dvm_ops),
        ("asid_rollovers", w.asids.rollovers),
        ("wp_reuse", c.wp_reuse),
        ("wp_copy", c.wp_copy),
        ("forks", c.forks),
        ("spurious_livelocks", c.spurious_livelocks),
        ("sfence_vma", c.sfence_vma),
        ("sbi_rfence", c.sbi_rfence),
        ("deferred_flushes", c.deferred_flushes),
        ("deferred_applied", c.deferred_applied),
        ("deferred_overflows", c.deferred_overflows),
        ("cpumask_cleared", c.cpumask_cleared),
        ("defer_ipi_running", c.defer_ipi_running),
        ("defer_ipi_loaded", c.defer_ipi_loaded),
        ("defer_enqueues", c.defer_enqueues),
        ("defer_drains", c.defer_drains),
        ("kernel_range_flushes", c.kernel_range_flushes),
        ("tlbbatch_flushes", c.tlbbatch_flushes),
        ("pt_reclaimed", c.pt_reclaimed),
        ("table_sync_rcu", c.table_sync_rcu),
        ("table_sync_rcu_skipped", c.table_sync_rcu_skipped),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    arch.insert("gup_pins".into(), c.gup_pins);
    arch.insert("madv_collapse_eagain".into(), c.madv_collapse_eagain);
    arch.insert("collapse_pmd_restored".into(), c.collapse_pmd_restored);
    arch.insert("vma_lock_success".into(), c.vma_lock_success);
    arch.insert("vma_lock_fallback".into(), c.vma_lock_fallback);
    // /sys/kernel/mm/transparent_hugepage/khugepaged-like: collapse
    // failures by the mm_collapse_huge_page tracepoint's status.
    for (i, r) in kernel::mm::khugepaged::ScanResult::ALL.iter().enumerate() {
        arch.insert(format!("collapse_fail_{}", r.name()), c.collapse_fail[i]);
    }
    if c.pgsteal + c.reclaim_kept > 0 {
        // Reclaim ran (MADV_PAGEOUT, kswapd): reports without it stay as they were.
        for (k, v) in [
            ("pgsteal", c.pgsteal),
            ("reclaim_kept", c.reclaim_kept),
            ("pswpout", c.pswpout),
            ("pswpin", c.pswpin),
            ("tlb_ubc_pending", c.tlb_ubc_pending),
            ("ptep_clear_flush", c.ptep_clear_flush),
        ] {
            arch.insert(k.into(), v);
        }
    }
    if c.pgmigrate_success + c.pgmigrate_fail > 0 {
        // Page migration ran: reports without it stay as they were.
        for (k, v) in [
            ("pgmigrate_success", c.pgmigrate_success),
            ("pgmigrate_fail", c.pgmigrate_fail),
            ("migration_entry_wait", c.migration_entry_wait),
            ("tlb_ubc_pending", c.tlb_ubc_pending),
            ("ptep_clear_flush", c.ptep_clear_flush),
        ] {
            arch.insert(k.into(), v);
        }
    }
    if c.rwsem_sleep_reader + c.rwsem_sleep_writer > 0 {
        // A down_read / down_write queued (mmap_lock, i_mmap_rwsem):
        // reports without a lock sleep stay as they were.
        for (k, v) in [
            ("rwsem_sleep_reader", c.rwsem_sleep_reader),
            ("rwsem_sleep_writer", c.rwsem_sleep_writer),
            ("rwsem_wlock_handoff", c.rwsem_wlock_handoff),
        ] {
            arch.insert(k.into(), v);
        }
    }
    if c.table_sync_targeted > 0 {
        // Seed (b) step 2 only: reports without it stay as they were.
        arch.insert("table_sync_targeted".into(), c.table_sync_targeted);
    }
    arch
}
