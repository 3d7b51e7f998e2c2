//! `tlblab run --trace-out FILE.json`: the simulated run in the Chrome
//! trace-event format (the JSON that Perfetto and chrome://tracing open).
//!
//! One track per CPU (process "CPUs", thread "CPU n"); every step a CPU runs
//! is a complete slice (`ph: "X"`) named after the kernel path it runs, with
//! its events in kernel terms as arguments; each call-function IPI is a flow
//! (`ph: "s"` in the sender's slice, `ph: "f"` in the slice where the target
//! takes the interrupt); TLB flushes and invariant violations are instant
//! events (`ph: "i"`). Timestamps are microseconds of simulated time.
//!
//! The exporter watches the engine through [`Sim::on_step`]; a run without
//! `--trace-out` never builds labels for it.

use crate::engine::{Sim, StepView};
use kernel::world::StepKind;
use kernel::Label;
use machine::{CpuId, Error, Time};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// The process id every CPU track lives in.
const PID: u32 = 0;
/// Events listed in one slice's arguments; the rest are counted.
const ARGS_PER_SLICE: usize = 16;

/// The trace being recorded.
pub struct ChromeTrace {
    /// Events as compact JSON objects (a few hundred bytes each, where a
    /// `serde_json::Value` would take kilobytes).
    events: Vec<String>,
    cap: usize,
    /// Simulated time at which the cap was reached.
    truncated_at: Option<Time>,
    /// Per CPU: end of its last slice (steps on one CPU never overlap).
    last_end: Vec<Time>,
    /// Per target CPU: flows (id, arrival time) whose interrupt is not taken yet.
    pending: Vec<Vec<(u64, Time)>>,
    /// Flow ids that got their finish event.
    finished: Vec<bool>,
    /// Index in `events` of each flow's start, by id.
    starts: Vec<usize>,
}

impl ChromeTrace {
    /// A trace of a `cpus`-CPU machine holding at most `cap` events.
    pub fn new(cpus: usize, cap: usize) -> ChromeTrace {
        let mut events = vec![
            json!({"ph": "M", "pid": PID, "name": "process_name", "args": {"name": "CPUs"}})
                .to_string(),
        ];
        for c in 0..cpus {
            let name = json!({"ph": "M", "pid": PID, "tid": c, "name": "thread_name", "args": {"name": format!("CPU {c}")}});
            let order = json!({"ph": "M", "pid": PID, "tid": c, "name": "thread_sort_index", "args": {"sort_index": c}});
            events.push(name.to_string());
            events.push(order.to_string());
        }
        ChromeTrace {
            events,
            cap,
            truncated_at: None,
            last_end: vec![0; cpus],
            pending: vec![Vec::new(); cpus],
            finished: Vec::new(),
            starts: Vec::new(),
        }
    }

    /// Record one step: its slice, the flows it starts and ends, its instants.
    pub fn step(&mut self, v: &StepView) {
        if self.events.len() >= self.cap {
            self.truncated_at.get_or_insert(v.start);
            return;
        }
        let c = v.cpu as usize;
        let start = v.start.max(self.last_end[c]);
        let end = start + v.dur;
        self.last_end[c] = end;
        let shown: Vec<&Label> = v.labels.iter().filter(|l| !is_tlb_hit(l)).collect();
        if v.dur == 0 && shown.is_empty() && v.ipis.is_empty() && v.violations.is_empty() {
            return;
        }
        let mut what: Vec<String> = shown
            .iter()
            .take(ARGS_PER_SLICE)
            .map(|l| quote(&l.to_string()))
            .collect();
        if shown.len() > ARGS_PER_SLICE {
            what.push(quote(&format!("... {} more", shown.len() - ARGS_PER_SLICE)));
        }
        self.events.push(format!(
            r#"{{"ph":"X","pid":{PID},"tid":{},"ts":{},"dur":{},"name":{},"cat":"kernel","args":{{"step":{},"events":[{}]}}}}"#,
            v.cpu,
            us(start),
            us(v.dur),
            quote(slice_name(v.kind, &shown)),
            quote(kind_name(v.kind)),
            what.join(",")
        ));
        if v.kind == StepKind::TakeIrq {
            self.finish_flows(v.cpu, v.start, start);
        }
        for &(target, sent, arrives) in &v.ipis {
            let id = self.finished.len() as u64;
            self.finished.push(false);
            self.starts.push(self.events.len());
            self.pending[target as usize].push((id, arrives));
            let ts = sent.clamp(start, end);
            self.events.push(flow("s", "", v.cpu, ts, id));
        }
        for l in shown.iter().filter(|l| is_flush(l)) {
            self.events.push(format!(
                r#"{{"ph":"i","s":"t","pid":{PID},"tid":{},"ts":{},"name":{},"cat":"tlb_flush","args":{{"what":{}}}}}"#,
                v.cpu,
                us(start),
                quote(kernel_name(l)),
                quote(&l.to_string())
            ));
        }
        for x in v.violations {
            self.events.push(format!(
                r#"{{"ph":"i","s":"t","pid":{PID},"tid":{},"ts":{},"name":"violation: invariant {}","cat":"violation","args":{{"addr":"{:#x}","what":{}}}}}"#,
                x.cpu,
                us(end),
                x.invariant,
                x.addr,
                quote(&x.what)
            ));
        }
    }

    /// The target takes its call-function interrupt at `at` (slice start
    /// `ts`): every IPI that had arrived by then is handled in this slice.
    fn finish_flows(&mut self, cpu: CpuId, at: Time, ts: Time) {
        let mut pending = std::mem::take(&mut self.pending[cpu as usize]);
        pending.retain(|&(id, arrives)| {
            if arrives > at {
                return true;
            }
            self.finished[id as usize] = true;
            self.events.push(flow("f", r#""bp":"e","#, cpu, ts, id));
            false
        });
        self.pending[cpu as usize] = pending;
    }

    /// The JSON document, and a note when the cap cut the run short. Flows
    /// whose interrupt was still pending at the end are left out (a start
    /// without a finish would dangle).
    pub fn finish(mut self, sim_end: Time) -> (String, Option<String>) {
        for (id, &i) in self.starts.iter().enumerate() {
            if !self.finished[id] {
                self.events[i].clear();
            }
        }
        let note = self.truncated_at.map(|t| {
            format!(
                "trace capped at {} events: it covers {:.3} of {:.3} ms simulated (raise --trace-max-events or shorten the run with --set machine.max_sim_time_ms=...)",
                self.cap,
                t as f64 / 1e6,
                sim_end as f64 / 1e6
            )
        });
        if let (Some(t), Some(n)) = (self.truncated_at, &note) {
            self.events.push(format!(
                r#"{{"ph":"i","s":"g","pid":{PID},"tid":0,"ts":{},"name":"trace truncated","args":{{"note":{}}}}}"#,
                us(t),
                quote(n)
            ));
        }
        let events: Vec<&str> = self
            .events
            .iter()
            .filter(|e| !e.is_empty())
            .map(String::as_str)
            .collect();
        let doc = format!(
            "{{\"traceEvents\":[\n{}\n],\"displayTimeUnit\":\"ns\",\"otherData\":{}}}\n",
            events.join(",\n"),
            json!({"generator": "tlblab run --trace-out", "truncated": note.is_some()})
        );
        (doc, note)
    }
}

/// A flow event (`ph` s or f) of IPI `id`.
fn flow(ph: &str, extra: &str, cpu: CpuId, ts: Time, id: u64) -> String {
    format!(
        r#"{{"ph":"{ph}",{extra}"pid":{PID},"tid":{cpu},"ts":{},"id":{id},"name":"IPI","cat":"ipi"}}"#,
        us(ts)
    )
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    Value::from(s).to_string()
}

/// Record `sim`'s steps from now on into a trace of at most `cap` events.
pub fn attach(sim: &mut Sim, cap: usize) -> Arc<Mutex<ChromeTrace>> {
    let trace = Arc::new(Mutex::new(ChromeTrace::new(sim.world.cpus.len(), cap)));
    let t = Arc::clone(&trace);
    sim.on_step = Some(Box::new(move |v| t.lock().expect("trace lock").step(v)));
    trace
}

/// Detach the recorder from `sim` and write its trace to `path`; returns
/// the note to print when the trace was capped.
pub fn write(
    sim: &mut Sim,
    trace: Arc<Mutex<ChromeTrace>>,
    path: &str,
) -> Result<Option<String>, Error> {
    sim.on_step = None;
    let trace = Arc::try_unwrap(trace)
        .map_err(|_| Error::Config("trace recorder still attached".into()))?
        .into_inner()
        .expect("trace lock");
    let (doc, note) = trace.finish(sim.now);
    std::fs::write(path, doc).map_err(|e| Error::Write(format!("{path}: {e}")))?;
    Ok(note)
}

fn us(ns: Time) -> f64 {
    ns as f64 / 1000.0
}

fn is_tlb_hit(l: &Label) -> bool {
    matches!(l, Label::UserAccess { hit: true, .. })
}

/// Labels that invalidate TLB entries (instant events of category tlb_flush).
fn is_flush(l: &Label) -> bool {
    matches!(
        l,
        Label::FlushTlbFunc { .. }
            | Label::Invlpgb { .. }
            | Label::TlbiIs { .. }
            | Label::TlbiLocal { .. }
            | Label::SfenceVma { .. }
            | Label::KernelRangeFlush { .. }
            | Label::ApplyDeferred { .. }
            | Label::SwitchMm { flush: true, .. }
            | Label::VcpuResume { flushed: true }
    )
}

/// A step's slice is named after the kernel path it runs: its first event
/// that is more than an access or the interrupt entry.
fn slice_name(kind: StepKind, shown: &[&Label]) -> &'static str {
    let marker = |l: &Label| {
        matches!(
            l,
            Label::UserAccess { .. } | Label::KernelAccess { .. } | Label::IrqEntry
        )
    };
    shown
        .iter()
        .find(|l| !marker(l))
        .or_else(|| shown.first())
        .map_or_else(|| kind_name(kind), |l| kernel_name(l))
}

fn kind_name(kind: StepKind) -> &'static str {
    match kind {
        StepKind::Run => "run",
        StepKind::TakeIrq => "irq",
        StepKind::VcpuPreempt => "vCPU preempted by the host",
        StepKind::VcpuResume => "vCPU resumed by the host",
        StepKind::Tick { migrate_to: None } => "scheduler_tick",
        StepKind::Tick {
            migrate_to: Some(_),
        } => "scheduler_tick (migrate)",
        StepKind::TimerIrq => "hrtimer_interrupt",
        StepKind::Drain { .. } => "store buffer drain",
        StepKind::SpecWalk { .. } => "speculative page walk",
        StepKind::Picked { .. } => "run (loads of older messages)",
    }
}

/// The kernel function (or instruction) an event belongs to.
fn kernel_name(l: &Label) -> &'static str {
    match l {
        Label::UserAccess { .. } => "user",
        Label::PageFault { .. } => "handle_mm_fault",
        Label::DoAnonymousPage { .. } => "do_anonymous_page",
        Label::SpuriousFault { .. } => "flush_tlb_fix_spurious_fault",
        Label::ZapPtes { .. } => "zap_pte_range",
        Label::FreePages { .. } => "tlb_flush_mmu_free",
        Label::MigrateFolioMove { .. } => "migrate_folio_move",
        Label::FreeTable { .. } => "tlb_remove_table",
        Label::IncMmTlbGen { .. } => "flush_tlb_mm_range",
        Label::SendIpis { .. } => "smp_call_function_many_cond",
        Label::FlushTlbFunc { .. } | Label::FlushTlbFuncSkip { .. } => "flush_tlb_func",
        Label::IrqEntry => "sysvec_call_function",
        Label::CsdUnlock { .. } => "csd_unlock",
        Label::WaitDone => "csd_lock_wait",
        Label::SwitchMm { .. } => "switch_mm_irqs_off",
        Label::EnterLazy { .. } => "enter_lazy_tlb",
        Label::Syscall { nr } => nr,
        Label::Vunmap { .. } => "vunmap_range_noflush",
        Label::VmapPurge { .. } => "__purge_vmap_area_lazy",
        Label::VmapPurged { .. } => "purge_vmap_node",
        Label::Exit => "do_exit",
        Label::VcpuPreempt => "vCPU preempted by the host",
        Label::VcpuResume { .. } => "vCPU resumed by the host",
        Label::GupFastPmd { .. } | Label::GupFastPte { .. } => "gup_fast",
        Label::PmdpCollapseFlush { .. } => "pmdp_collapse_flush",
        Label::TableSync { .. } => "tlb_remove_table_sync_one",
        Label::TableSyncMm { .. } => "tlb_remove_table_sync_mm",
        Label::CollapseInstall { .. } => "collapse_huge_page",
        Label::CollapseFailed { .. } => "collapse_huge_page (failed)",
        Label::Invlpgb { .. } => "INVLPGB+TLBSYNC",
        Label::UseGlobalAsid { .. } => "use_global_asid",
        Label::CsdLockWait { .. } => "csd_lock",
        Label::KvmDeferFlush { .. } => "kvm_flush_tlb_multi",
        Label::PmdUnshare { .. } => "huge_pmd_unshare",
        Label::PmdShare { .. } => "huge_pmd_share",
        Label::TlbiIs { .. } => "TLBI IS",
        Label::TlbiLocal { .. } => "TLBI (local)",
        Label::NewContext { .. } => "new_context",
        Label::WpPageReuse { .. } => "wp_page_reuse",
        Label::WpPageCopy { .. } => "wp_page_copy",
        Label::Fork { .. } => "dup_mmap",
        Label::DeferFlush { .. } | Label::ReadLoadedAsid { .. } => "__flush_tlb_range",
        Label::ApplyDeferred { .. } => "switch_mm",
        Label::SfenceVma { .. } => "sfence.vma",
        Label::KernelRangeFlush { pages } if *pages == kernel::TLB_FLUSH_ALL => "do_flush_tlb_all",
        Label::KernelRangeFlush { .. } => "do_kernel_range_flush",
        Label::PtReclaim { .. } => "zap_pte_range (PT_RECLAIM)",
        Label::TableSyncRcu { .. } => "tlb_remove_table_sync_rcu",
        Label::TlbBatch { flush: false, .. } => "try_to_unmap_one",
        Label::TlbBatch { flush: true, .. } => "arch_tlbbatch_flush",
        Label::SbiRfence { .. } => "sbi_remote_sfence_vma_asid",
        Label::Wakeup { .. } => "hrtimer_wakeup",
        Label::KernelAccess { .. } => "kernel access",
        Label::SpeculativeWalk { .. } => "speculative walk",
        Label::StoreBuffered { .. }
        | Label::Drained { .. }
        | Label::ReadPastBuffer { .. }
        | Label::ReadStale { .. } => "store buffer",
        Label::Barrier { name, .. } | Label::BarrierDropped { name } => name,
        Label::SwitchMmBegin { .. } | Label::SwitchMmReadTlbGen { .. } => "switch_mm_irqs_off",
        Label::TlbFlushNested { .. } => "tlb_finish_mmu",
    }
}
