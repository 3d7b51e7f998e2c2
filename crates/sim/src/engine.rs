//! The event loop.

use crate::cache::CacheModel;
use crate::queue::key;
use hdrhistogram::Histogram;
use kernel::effects::{Charge, Mark, Prices};
use kernel::world::StepKind;
use kernel::{Effects, Label, Stat, TaskId, Violation, World};
use machine::{Cost, CostProfile, CpuId, Time};
use std::collections::VecDeque;

/// The op a sleep's timer starts: none (`Effects::sleep`, or a
/// `ClockNanosleep` that only paces).
const NO_OP: u16 = kernel::user::NO_OP;

/// A map from (task, op) to when that measured op began: a short list
/// per task (a task has an op or two open), indexed by task id, so that
/// the begin and end of an op (a page fault's, in lat-pagefault) cost no
/// hashing.
#[derive(Default)]
struct OpBegins(Vec<Vec<(u16, Time)>>);

impl OpBegins {
    fn insert(&mut self, t: TaskId, op: u16, at: Time) {
        let t = t as usize;
        if self.0.len() <= t {
            self.0.resize_with(t + 1, Vec::new);
        }
        let l = &mut self.0[t];
        match l.iter_mut().find(|(o, _)| *o == op) {
            Some(e) => e.1 = at,
            None => l.push((op, at)),
        }
    }

    fn remove(&mut self, t: TaskId, op: u16) -> Option<Time> {
        let l = self.0.get_mut(t as usize)?;
        let i = l.iter().position(|(o, _)| *o == op)?;
        Some(l.swap_remove(i).1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// Run the CPU's next step (or take an arrived IRQ).
    Step,
    /// An IPI reaches the CPU's local APIC.
    Irq,
    /// Something the CPU waits for may have happened.
    Wake,
    /// An NMI: the CPU stalls for its handler, IRQs on or off.
    Nmi,
    /// An SMI: firmware stalls the CPU, IRQs on or off.
    Smi,
    /// The host deschedules this vCPU.
    Preempt,
    /// The host runs this vCPU again.
    Resume,
    /// The scheduler tick (`scheduler_tick` → `resched_curr`).
    Tick,
    /// An hrtimer armed on this CPU expires.
    Timer,
    /// The CPU enters an IRQ-off window (a stall with interrupts masked).
    IrqOff,
}

impl Kind {
    const ALL: [Kind; 10] = [
        Kind::Step,
        Kind::Irq,
        Kind::Wake,
        Kind::Nmi,
        Kind::Smi,
        Kind::Preempt,
        Kind::Resume,
        Kind::Tick,
        Kind::Timer,
        Kind::IrqOff,
    ];
}

/// An event, packed into its own queue key: time (64 bits), then the push
/// sequence number (48), the CPU (12: `machine.cpus` <= 4096) and the kind
/// (4). Events leave the queue by time, then in the order they were pushed
/// (sequence numbers are unique, so the CPU and kind bits never decide),
/// and the heap moves and compares one `u128` per entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ev(u128);

const SEQ_BITS: u32 = 48;

impl Ev {
    #[inline]
    fn new(time: Time, seq: u64, cpu: CpuId, kind: Kind) -> Ev {
        debug_assert!(seq < 1 << SEQ_BITS && cpu < 1 << 12);
        Ev(key(time, seq << 16 | (cpu as u64) << 4 | kind as u64))
    }
    #[inline]
    fn time(self) -> Time {
        (self.0 >> 64) as Time
    }
    /// The (time, sequence) key of [`key`] (what `last_key` and the lazy
    /// wake-ups compare against).
    #[inline]
    fn time_seq(self) -> u128 {
        key(self.time(), self.0 as u64 >> 16)
    }
    #[inline]
    fn cpu(self) -> CpuId {
        (self.0 as u64 >> 4) as CpuId & 0xfff
    }
    #[inline]
    fn kind(self) -> Kind {
        Kind::ALL[(self.0 & 0xf) as usize]
    }
}

impl crate::queue::Keyed for Ev {
    #[inline]
    fn key(&self) -> u128 {
        self.0
    }
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// Every measured task finished.
    Done,
    /// `machine.max_sim_time_ms` reached first.
    TimeLimit,
    /// Nothing could run any more (a model deadlock).
    Stalled,
    /// Stopped at the first violation (`stop_on_violation`).
    Violation,
    /// The measurement window (`machine.measure_us`) closed.
    Window,
}

/// Driver options.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub max_time_ns: Time,
    /// Events kept for each violation's trace; 0 = no tracing (the fast
    /// path: a run with violations is replayed with tracing on).
    pub trace_depth: usize,
    pub stop_on_violation: bool,
    /// Scale each step by a uniform factor in [1 - j%, 1 + j%].
    pub jitter_pct: u32,
    /// Seed of the jitter draws.
    pub seed: u64,
    /// NMIs per second per CPU (0 = none).
    pub nmi_hz: u32,
    /// SMIs per second per CPU (0 = none) and their length in ns.
    pub smi_hz: u32,
    pub smi_ns: u64,
    /// Mean vCPU run time between host preemptions, ns (0 = never).
    pub vcpu_run_ns: u64,
    /// Mean host preemption length, ns.
    pub vcpu_preempt_ns: u64,
    /// Scheduler tick period, ns (0 = no tick).
    pub timeslice_ns: u64,
    /// The `machine.migrate_pct` noise knob (off by default): chance (%)
    /// that a tick moves the running task to a uniformly random other CPU.
    /// Task placement itself is the kernel's (`kernel::sched::fair`, run
    /// from the tick step, `schedule` and wake-ups), deterministic.
    pub migrate_pct: u32,
    /// IRQ-off windows per second per CPU, and the share (%) from the long tail.
    pub irqoff_hz: u32,
    pub irqoff_long_pct: u32,
    /// The engine without its shortcuts (every wake-up through the heap,
    /// every charge recorded and priced after the step): the reference the
    /// shortcuts are tested against, result for result.
    pub reference: bool,
    /// The measurement window: opens at `.0` ns, the run stops at `.1`
    /// (0 = no end); `None` = no window.
    pub window_ns: Option<(Time, Time)>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            max_time_ns: 60_000_000_000,
            trace_depth: 0,
            stop_on_violation: false,
            jitter_pct: 0,
            seed: 1,
            nmi_hz: 0,
            smi_hz: 0,
            smi_ns: 0,
            vcpu_run_ns: 0,
            vcpu_preempt_ns: 0,
            timeslice_ns: 0,
            migrate_pct: 0,
            irqoff_hz: 0,
            irqoff_long_pct: 0,
            reference: false,
            window_ns: None,
        }
    }
}

impl SimOptions {
    /// The options a scenario sets (time limit, seed, jitter, stalls, the
    /// scheduler tick, IRQ-off windows); no tracing.
    pub fn for_scenario(s: &machine::Scenario) -> SimOptions {
        SimOptions {
            max_time_ns: s.machine.max_sim_time_ms * 1_000_000,
            jitter_pct: s.machine.jitter_pct,
            seed: s.seed,
            nmi_hz: s.machine.nmi_hz,
            smi_hz: s.machine.smi_hz,
            smi_ns: s.machine.smi_us as u64 * 1000,
            vcpu_run_ns: s.x86.vcpu_run_us as u64 * 1000,
            vcpu_preempt_ns: s.x86.vcpu_preempt_us as u64 * 1000,
            timeslice_ns: s.machine.timeslice_us as u64 * 1000,
            migrate_pct: s.machine.migrate_pct,
            irqoff_hz: s.machine.irqoff_hz,
            irqoff_long_pct: s.machine.irqoff_long_pct,
            window_ns: (s.machine.measure_from_us > 0 || s.machine.measure_us > 0).then(|| {
                let from = s.machine.measure_from_us * 1000;
                let len = s.machine.measure_us * 1000;
                (from, if len > 0 { from + len } else { 0 })
            }),
            ..SimOptions::default()
        }
    }
}

/// Picoseconds: the driver prices in integers so that sums are exact.
const PS: u64 = kernel::effects::PS_PER_NS;

/// Latency samples of one measured operation.
pub struct OpStats {
    pub hist: Histogram<u64>,
    pub count: u64,
    pub sum: f64,
    pub sum_sq: f64,
    pub first_begin: Option<Time>,
    pub last_end: Time,
}

impl OpStats {
    fn new() -> Self {
        OpStats {
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("histogram bounds"),
            count: 0,
            sum: 0.0,
            sum_sq: 0.0,
            first_begin: None,
            last_end: 0,
        }
    }
}

/// A violation with when it happened and the events before it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ViolationRecord {
    pub time_ns: Time,
    pub invariant: u8,
    pub cpu: CpuId,
    pub addr: String,
    pub what: String,
    pub trace: Vec<String>,
}

/// The simulator: a world plus time.
pub struct Sim {
    pub world: World,
    pub profile: CostProfile,
    opts: SimOptions,
    heap: crate::queue::Queue<Ev>,
    seq: u64,
    pub now: Time,
    scheduled: Vec<bool>,
    /// Wake-ups sent to a CPU while it had a step pending, as (time, seq),
    /// kept out of the heap ([`Sim::wake`]).
    lazy_wakes: Vec<Vec<(Time, u64)>>,
    /// The key of the event popped last.
    last_key: u128,
    busy_until: Vec<Time>,
    /// An NMI handler occupies the CPU until then.
    stall_until: Vec<Time>,
    irq_arrived: Vec<bool>,
    /// A tick set `need_resched` for this task (kernel/sched/core.c:
    /// `sched_tick` -> `resched_curr`); the task is preempted at its next
    /// preemption point (the first step at which it can be preempted:
    /// `preempt_enable`, IRQs back on, the return to user), and the flag
    /// goes with it if it leaves the CPU first (`schedule` clears it).
    tick_pending: Vec<Option<TaskId>>,
    /// Each CPU's armed hrtimer: (task, op to start, expiry).
    timer: Vec<Option<(TaskId, u16, Time)>>,
    /// The hrtimer expired; its interrupt waits for IRQs to be on.
    timer_due: Vec<bool>,
    cache: CacheModel,
    /// The step's effects, reused (boxed: a step takes it out and puts it
    /// back, moving a pointer instead of the 152-byte struct).
    fx: Option<Box<Effects>>,
    offsets: Vec<u64>,
    /// Jitter factor of the step just priced, in parts per million.
    scale: u64,
    /// Price of each cost class in ps.
    /// The cost profile's prices in ps (shared with each step's `Effects`).
    prices: std::sync::Arc<Prices>,
    /// The step just priced: the DVM snoop work charged at its start, ps.
    base: u64,
    rng: machine::scenario::Rng,
    /// Heap events processed (steps, IPI arrivals, wake-ups).
    pub events: u64,
    /// World steps run.
    pub steps: u64,
    /// Of `events`, wake-ups that never entered the heap (`Sim::wake`).
    pub lazy_wakes_settled: u64,
    /// When each task's open measured ops began.
    op_begin: OpBegins,
    pub ops: Vec<OpStats>,
    trace: VecDeque<(Time, CpuId, Label)>,
    pub violations: Vec<ViolationRecord>,
    /// Time spent in user-visible ops across all ops; completed ops by any task.
    pub ops_done: u64,
    /// arm64: the mesh's DVM node (op trackers, serialised Syncs).
    dvm: crate::dvm::Dvm,
    dvm_prices: crate::dvm::DvmPrices,
    /// arm64: broadcast TLBIs issued so far, and how many of them each
    /// core has already been charged snoop work for.
    pub dvm_ops: u64,
    dvm_seen: Vec<u64>,
    /// Busy CPU time (every priced step), in ps.
    pub busy_ps: u64,
    /// Of that, TLB maintenance: flush instructions and their completion
    /// waits (`Cost::is_tlb_maintenance`, DVM queueing and sync), in ps.
    pub maint_ps: u64,
    /// Of that, waiting for the DVM path (queueing + fan-out + DSB ISH), in ps.
    pub dvm_wait_ps: u64,
    /// Time CPUs spent in IRQ-off windows (`machine.irqoff_hz`), ns.
    pub irqoff_ns: u64,
    /// The counters when the measurement window opened and closed.
    pub window: [Option<Snapshot>; 2],
    /// Called after every step with what it did (`run --trace-out`); `None`
    /// costs one branch per step and keeps labels off.
    pub on_step: Option<StepHook>,
}

/// The cumulative counters at one instant (a window's edge).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub t_ns: Time,
    pub busy_ps: u64,
    pub maint_ps: u64,
    pub dvm_wait_ps: u64,
    pub ops_done: u64,
}

/// A step observer (the Chrome trace exporter).
pub type StepHook = Box<dyn FnMut(&StepView) + Send>;

/// One step as an observer sees it.
pub struct StepView<'a> {
    pub cpu: CpuId,
    pub kind: StepKind,
    /// When the step started and how long it ran (ns).
    pub start: Time,
    pub dur: Time,
    /// What it did, in kernel terms.
    pub labels: &'a [Label],
    /// IPIs it sent: target, send time and arrival time (ns).
    pub ipis: Vec<(CpuId, Time, Time)>,
    /// Invariant violations it caused.
    pub violations: &'a [Violation],
}

impl Sim {
    pub fn new(mut world: World, profile: CostProfile, opts: SimOptions) -> Sim {
        // Whether the machine's idle task polls is the profile's fact.
        if world.cfg.idle_polls != profile.idle_polls {
            world.cfg.idle_polls = profile.idle_polls;
        }
        let n = world.cpus.len();
        let prices = std::sync::Arc::new(Prices::new(|c| profile.ns(c)));
        let profile_dvm_slots = profile.dvm_ops_in_flight;
        let dvm_prices = crate::dvm::DvmPrices {
            ncpu: n as u64,
            op_per_core: prices.ps[Cost::DvmOpPerCore as usize],
            sync: prices.ps[Cost::DsbIsh as usize],
        };
        let mut s = Sim {
            world,
            profile,
            heap: crate::queue::Queue::with_capacity(4 * n + 16),
            seq: 0,
            now: 0,
            scheduled: vec![false; n],
            lazy_wakes: vec![Vec::new(); n],
            last_key: 0,
            busy_until: vec![0; n],
            stall_until: vec![0; n],
            irq_arrived: vec![false; n],
            tick_pending: vec![None; n],
            timer: vec![None; n],
            timer_due: vec![false; n],
            cache: CacheModel::new(n),
            fx: None,
            offsets: Vec::new(),
            scale: 1_000_000,
            prices,
            base: 0,
            rng: machine::scenario::Rng::new(opts.seed ^ 0x7e57_1ab5),
            events: 0,
            steps: 0,
            lazy_wakes_settled: 0,
            op_begin: OpBegins::default(),
            ops: Vec::new(),
            trace: VecDeque::with_capacity(opts.trace_depth + 1),
            violations: Vec::new(),
            ops_done: 0,
            dvm: crate::dvm::Dvm::new(profile_dvm_slots),
            dvm_prices,
            dvm_ops: 0,
            dvm_seen: vec![0; n],
            busy_ps: 0,
            maint_ps: 0,
            dvm_wait_ps: 0,
            irqoff_ns: 0,
            window: [None, None],
            on_step: None,
            opts,
        };
        for c in 0..n as CpuId {
            if s.world.can_run(c) {
                s.push(0, c, Kind::Step);
                s.scheduled[c as usize] = true;
            }
            if s.opts.nmi_hz > 0 {
                let t = s.exp(1_000_000_000 / s.opts.nmi_hz as u64);
                s.push(t, c, Kind::Nmi);
            }
            if s.opts.smi_hz > 0 {
                let t = s.exp(1_000_000_000 / s.opts.smi_hz as u64);
                s.push(t, c, Kind::Smi);
            }
            if s.opts.vcpu_run_ns > 0 {
                let t = s.exp(s.opts.vcpu_run_ns);
                s.push(t, c, Kind::Preempt);
            }
            if s.opts.irqoff_hz > 0 {
                let t = s.exp(1_000_000_000 / s.opts.irqoff_hz as u64);
                s.push(t, c, Kind::IrqOff);
            }
            if s.opts.timeslice_ns > 0 {
                // CPUs' ticks are not in phase.
                let t = s.opts.timeslice_ns + s.rng.below(s.opts.timeslice_ns);
                s.push(t, c, Kind::Tick);
            }
        }
        s
    }

    /// The reused step effects, with the prices unless this is the
    /// reference engine (which records every charge and prices them after).
    fn take_fx(&mut self) -> Box<Effects> {
        self.fx.take().unwrap_or_else(|| {
            Box::new(Effects {
                prices: (!self.opts.reference).then(|| self.prices.clone()),
                ..Effects::default()
            })
        })
    }

    /// An exponentially distributed delay with the given mean (ns).
    fn exp(&mut self, mean: u64) -> Time {
        let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (-(1.0 - u).ln() * mean as f64) as Time + 1
    }

    #[inline]
    fn push(&mut self, time: Time, cpu: CpuId, kind: Kind) {
        self.seq += 1;
        self.heap.push(Ev::new(time, self.seq, cpu, kind));
    }

    /// Something `cpu` may wait for happens at `at`: at that time, if the
    /// CPU has no step pending, it gets one (`Kind::Wake`).
    ///
    /// A wake-up sent while the CPU has a step pending does nothing if it
    /// still has one when the wake-up is due, which is the common case (an
    /// unlock wakes every CPU of the mm, most of them running). Such a
    /// wake-up is kept in `lazy_wakes` instead of the heap and settled when
    /// the pending step runs ([`Sim::settle_wakes`]): the ones due before
    /// it were no-ops and are only counted; if the CPU is left without a
    /// step, the rest go into the heap with their sequence numbers. Events
    /// leave in the same order and are counted the same as if every
    /// wake-up went through the heap.
    ///
    /// `settles_now`: `cpu` is the one whose step sent the wake-up. It has
    /// no step pending yet, but `exec` decides that in this same event and
    /// `handle` settles its list right after, so the wake-up is kept
    /// lazily too (and goes into the heap then if no step became pending).
    fn wake(&mut self, cpu: CpuId, at: Time, settles_now: bool) {
        let c = cpu as usize;
        if (self.scheduled[c] || settles_now) && !self.opts.reference {
            self.seq += 1;
            self.lazy_wakes[c].push((at, self.seq));
        } else {
            self.push(at, cpu, Kind::Wake);
        }
    }

    /// The step of `c` with key `k` just ran: count the lazy wake-ups due
    /// before it (no-ops: a step was pending); if none is pending now, the
    /// later ones become heap events.
    fn settle_wakes(&mut self, c: usize, k: u128) {
        let mut list = std::mem::take(&mut self.lazy_wakes[c]);
        let pending = self.scheduled[c];
        list.retain(|&(time, seq)| {
            if key(time, seq) < k {
                self.events += 1;
                self.lazy_wakes_settled += 1;
                false
            } else if !pending {
                self.heap.push(Ev::new(time, seq, c as CpuId, Kind::Wake));
                false
            } else {
                true
            }
        });
        self.lazy_wakes[c] = list;
    }

    /// Lazy wake-ups the heap would have delivered before the run ended:
    /// those due before the last event (`limit`: none after this time).
    fn count_passed_wakes(&mut self, limit: Option<Time>) {
        let k = self.last_key;
        let n: usize = self
            .lazy_wakes
            .iter()
            .map(|l| {
                l.iter()
                    .filter(|&&(t, s)| match limit {
                        Some(max) => t <= max,
                        None => key(t, s) < k,
                    })
                    .count()
            })
            .sum();
        self.events += n as u64;
        self.lazy_wakes_settled += n as u64;
        for l in &mut self.lazy_wakes {
            l.clear();
        }
    }

    #[inline(always)]
    fn schedule(&mut self, cpu: CpuId, time: Time) {
        if !self.scheduled[cpu as usize] {
            self.scheduled[cpu as usize] = true;
            self.push(time, cpu, Kind::Step);
        }
    }

    /// Run until the workload is done, the time limit, or a stall.
    /// `progress` is called about every million events with the current time.
    pub fn run(&mut self, mut progress: impl FnMut(&Sim)) -> End {
        let mut tick = 0u32;
        loop {
            if *self.world.measuring == 0 {
                self.count_passed_wakes(None);
                return End::Done;
            }
            if self.opts.stop_on_violation && !self.world.violations.is_empty() {
                self.count_passed_wakes(None);
                return End::Violation;
            }
            let Some(ev) = self.heap.pop() else {
                self.count_passed_wakes(None);
                return End::Stalled;
            };
            if self.window_edge(ev.time()) {
                self.count_passed_wakes(Some(self.now));
                return End::Window;
            }
            if ev.time() > self.opts.max_time_ns {
                self.now = self.opts.max_time_ns;
                self.count_passed_wakes(Some(self.opts.max_time_ns));
                return End::TimeLimit;
            }
            self.now = ev.time();
            self.last_key = ev.time_seq();
            self.events += 1;
            self.handle(ev.cpu(), ev.kind());
            tick += 1;
            if tick == 1 << 20 {
                tick = 0;
                progress(self);
            }
        }
    }

    /// Open or close the measurement window before an event at `t`, as
    /// `perf record -a` sees the counters; true when it closed (stop).
    fn window_edge(&mut self, t: Time) -> bool {
        let Some((from, to)) = self.opts.window_ns else {
            return false;
        };
        if self.window[0].is_none() && t >= from {
            self.window[0] = Some(self.snapshot(from));
        }
        if to > 0 && to <= self.opts.max_time_ns && t >= to && self.window[1].is_none() {
            self.now = to;
            self.window[1] = Some(self.snapshot(to));
            return true;
        }
        false
    }

    /// The cumulative counters a window is measured from, at `t` ns.
    pub fn snapshot(&self, t: Time) -> Snapshot {
        Snapshot {
            t_ns: t,
            busy_ps: self.busy_ps,
            maint_ps: self.maint_ps,
            dvm_wait_ps: self.dvm_wait_ps,
            ops_done: self.ops_done,
        }
    }

    /// Handle an event of `kind` for `cpu` at `now`.
    fn handle(&mut self, cpu: CpuId, kind: Kind) {
        let c = cpu as usize;
        match kind {
            Kind::Step => {
                self.scheduled[c] = false;
                self.exec(cpu);
                if !self.lazy_wakes[c].is_empty() {
                    self.settle_wakes(c, self.last_key);
                }
            }
            Kind::Irq => {
                self.irq_arrived[c] = true;
                let t = self.now.max(self.busy_until[c]);
                self.schedule(cpu, t);
            }
            Kind::Wake => {
                let t = self.now.max(self.busy_until[c]);
                self.schedule(cpu, t);
            }
            Kind::Timer => {
                if let Some((t, op, due)) = self.timer[c] {
                    if due == self.now {
                        self.timer[c] = None;
                        // The latency clock starts at expiry, not delivery.
                        if op != NO_OP {
                            self.op_begin.insert(t, op, due);
                        }
                        self.timer_due[c] = true;
                        let at = self.now.max(self.busy_until[c]);
                        self.schedule(cpu, at);
                    }
                }
            }
            Kind::Tick => {
                let t = self.now + self.opts.timeslice_ns;
                self.push(t, cpu, Kind::Tick);
                if let Some(t) = self.world.cpus[c].curr {
                    self.tick_pending[c] = Some(t);
                    let at = self.now.max(self.busy_until[c]);
                    self.schedule(cpu, at);
                }
            }
            Kind::Nmi | Kind::Smi | Kind::IrqOff | Kind::Preempt | Kind::Resume => {
                self.background(cpu, kind)
            }
        }
    }

    /// The machine's own events: NMIs, SMIs, IRQ-off windows, and the
    /// host descheduling and resuming a vCPU. Each draws its next one.
    fn background(&mut self, cpu: CpuId, kind: Kind) {
        let c = cpu as usize;
        let per_s = |hz: u32| 1_000_000_000 / hz as u64;
        match kind {
            Kind::Nmi => {
                self.stall(c, self.p(Cost::Nmi) / PS);
                let t = self.now + self.exp(per_s(self.opts.nmi_hz));
                self.push(t, cpu, Kind::Nmi);
            }
            Kind::Smi => {
                self.stall(c, self.opts.smi_ns);
                let t = self.now + self.exp(per_s(self.opts.smi_hz));
                self.push(t, cpu, Kind::Smi);
            }
            Kind::IrqOff => {
                // A spin_lock_irqsave section: the CPU is busy and takes
                // no interrupt until it ends (priced like a stall).
                let long = self.rng.below(100) < self.opts.irqoff_long_pct as u64;
                let mean = if long {
                    self.p(Cost::IrqOffLong)
                } else {
                    self.p(Cost::IrqOffShort)
                } / PS;
                let len = self.exp(mean.max(1));
                self.stall(c, len);
                self.irqoff_ns += len;
                let t = self.now + self.exp(per_s(self.opts.irqoff_hz));
                self.push(t, cpu, Kind::IrqOff);
            }
            Kind::Preempt => {
                self.host_step(cpu, StepKind::VcpuPreempt);
                let t = self.now + self.exp(self.opts.vcpu_preempt_ns.max(1));
                self.push(t, cpu, Kind::Resume);
            }
            Kind::Resume => {
                self.host_step(cpu, StepKind::VcpuResume);
                let t = self.now + self.exp(self.opts.vcpu_run_ns);
                self.push(t, cpu, Kind::Preempt);
                let at = self.busy_until[c].max(self.now);
                if self.world.can_run(cpu) || (self.irq_arrived[c] && self.world.can_take_irq(cpu))
                {
                    self.schedule(cpu, at);
                }
            }
            _ => unreachable!("{kind:?} is not a background event"),
        }
    }

    /// The CPU executes something outside the OS's control for `ns`.
    fn stall(&mut self, c: usize, ns: Time) {
        if !self.world.cpus[c].vcpu_preempted {
            let from = self.now.max(self.busy_until[c]).max(self.stall_until[c]);
            self.stall_until[c] = from + ns;
        }
    }

    /// A host action on a vCPU (preempt/resume), priced like a step.
    fn host_step(&mut self, cpu: CpuId, kind: StepKind) {
        let mut fx = self.take_fx();
        fx.clear();
        fx.tracing = self.opts.trace_depth > 0 || self.on_step.is_some();
        self.world.now = self.now;
        let nviol = self.world.violations.len();
        self.world.step(cpu, kind, &mut fx);
        let dur = self.price(cpu, &fx);
        let c = cpu as usize;
        self.busy_until[c] = self.busy_until[c].max(self.now) + dur;
        self.trace_labels(cpu, &fx);
        if self.on_step.is_some() {
            self.notify(cpu, kind, dur, &fx, nviol);
        }
        self.fx = Some(fx);
    }

    /// Show the step just run to `on_step`.
    fn notify(&mut self, cpu: CpuId, kind: StepKind, dur: Time, fx: &Effects, nviol: usize) {
        let delivery = self.p(Cost::IpiDelivery) / PS;
        let ipis = fx
            .ipis
            .iter()
            .map(|&(t, m)| {
                let sent = self.now + self.at(m);
                (t, sent, sent + delivery)
            })
            .collect();
        let mut hook = self.on_step.take().expect("called with a hook");
        hook(&StepView {
            cpu,
            kind,
            start: self.now,
            dur,
            labels: &fx.labels,
            ipis,
            violations: &self.world.violations[nviol..],
        });
        self.on_step = Some(hook);
    }

    fn trace_labels(&mut self, cpu: CpuId, fx: &Effects) {
        if self.opts.trace_depth == 0 {
            return;
        }
        // TLB-hit accesses are the bulk of events and never the cause.
        for &l in fx
            .labels
            .iter()
            .filter(|l| !matches!(l, Label::UserAccess { hit: true, .. }))
        {
            if self.trace.len() == self.opts.trace_depth {
                self.trace.pop_front();
            }
            self.trace.push_back((self.now, cpu, l));
        }
    }

    fn exec(&mut self, cpu: CpuId) {
        let c = cpu as usize;
        if self.now < self.stall_until[c] {
            // Inside an NMI handler: the step runs when it returns.
            let t = self.stall_until[c];
            self.schedule(cpu, t);
            return;
        }
        let Some(kind) = self.next_step(cpu) else {
            return;
        };
        self.world.now = self.now;
        let nviol = self.world.violations.len();
        let mut fx = self.take_fx();
        fx.clear();
        fx.tracing = self.opts.trace_depth > 0 || self.on_step.is_some();
        self.world.step(cpu, kind, &mut fx);
        self.steps += 1;
        let dur = self.price(cpu, &fx);
        let now = self.now;
        self.busy_until[c] = now + dur;
        self.deliver(cpu, &fx, now);
        self.trace_labels(cpu, &fx);
        if self.on_step.is_some() {
            self.notify(cpu, kind, dur, &fx, nviol);
        }
        self.fx = Some(fx);
        if self.world.violations.len() > nviol {
            let new: Vec<Violation> = self.world.violations[nviol..].to_vec();
            for v in new {
                self.record_violation(v);
            }
        }
        if (self.irq_arrived[c] && self.world.can_take_irq(cpu))
            || (self.timer_due[c] && self.world.can_take_timer(cpu))
            || self.world.can_run(cpu)
        {
            self.schedule(cpu, now + dur);
        }
    }

    /// What `cpu` does next, if anything: the expired hrtimer's interrupt,
    /// an arrived IPI, a preemption the tick asked for, or its task.
    fn next_step(&mut self, cpu: CpuId) -> Option<StepKind> {
        let c = cpu as usize;
        Some(if self.timer_due[c] && self.world.can_take_timer(cpu) {
            self.timer_due[c] = false;
            StepKind::TimerIrq
        } else if self.irq_arrived[c] && self.world.can_take_irq(cpu) {
            self.irq_arrived[c] = false;
            StepKind::TakeIrq
        } else if self.need_resched(cpu) {
            self.tick_pending[c] = None;
            let n = self.world.cpus.len() as u64;
            // The fair class's balancing runs inside the tick step
            // (scheduler_tick -> sched_balance_trigger); `to` is only the
            // noise knob's random move. (The draw is made at 0 % too, so
            // the jitter sequence of a run does not depend on the knob.)
            let to = if n > 1 && self.rng.below(100) < self.opts.migrate_pct as u64 {
                // Another CPU, uniformly.
                let o = 1 + self.rng.below(n - 1);
                Some(((cpu as u64 + o) % n) as CpuId)
            } else {
                None
            };
            StepKind::Tick { migrate_to: to }
        } else if self.world.can_run(cpu) {
            StepKind::Run
        } else {
            return None;
        })
    }

    /// Send what the step of `cpu` just priced did, each at its mark: IPIs
    /// (arriving after `ipi_delivery`), wake-ups, statistics, timers.
    ///
    /// A wake-up of `cpu` itself (an unlock waking the mm's CPUs, its own
    /// among them) is kept lazily at once ([`Sim::wake`]'s `settles_now`).
    fn deliver(&mut self, cpu: CpuId, fx: &Effects, now: Time) {
        let delivery = self.p(Cost::IpiDelivery) / PS;
        for &(t, m) in &fx.ipis {
            let at = now + self.at(m) + delivery;
            self.push(at, t, Kind::Irq);
        }
        for &(t, m) in &fx.wakes {
            let at = now + self.at(m);
            self.wake(t, at, t == cpu);
        }
        for &(s, m) in &fx.stats {
            let at = now + self.at(m);
            self.stat(s, at);
        }
        for &(tc, task, op, due) in &fx.timers {
            self.timer[tc as usize] = Some((task, op, due));
            self.push(due.max(now), tc, Kind::Timer);
        }
        for &(tc, task, cost, n) in &fx.sleeps {
            // An I/O wait: the wake-up starts no measured op.
            let due = now + self.p(cost) * n as u64 / PS;
            self.timer[tc as usize] = Some((task, NO_OP, due));
            self.push(due, tc, Kind::Timer);
        }
    }

    /// Price a step's charges; fills `offsets` (ps before each charge,
    /// jitter applied) and returns the step's duration in ns.
    /// The tick's `need_resched` for the task running on `cpu`, taken at a
    /// preemption point; dropped if that task no longer runs here.
    fn need_resched(&mut self, cpu: CpuId) -> bool {
        let c = cpu as usize;
        match self.tick_pending[c] {
            Some(t) if self.world.cpus[c].curr == Some(t) => self.world.can_preempt(cpu),
            Some(_) => {
                self.tick_pending[c] = None;
                false
            }
            None => false,
        }
    }

    /// Price a step: the plain charges `fx` summed as they came (or, in
    /// the reference engine, recorded), then its cache lines and DVM
    /// broadcasts in order. Fills `offsets` (the state-priced charges'
    /// sum before each) for [`Sim::at`] and returns the step's duration in
    /// ns, jitter applied.
    #[inline(always)]
    fn price(&mut self, cpu: CpuId, fx: &Effects) -> Time {
        self.offsets.clear();
        // Offsets are read only at marks (IPIs, wake-ups, statistics) and
        // by a step observer; most steps have none.
        let record = !(fx.ipis.is_empty() && fx.wakes.is_empty() && fx.stats.is_empty())
            || self.on_step.is_some();
        let c = cpu as usize;
        // Every broadcast TLBI since this core last ran was looked up in its
        // TLB too: that work is stolen from whatever it runs now.
        let snooped = self.dvm_ops - self.dvm_seen[c];
        self.dvm_seen[c] = self.dvm_ops;
        self.base = snooped * self.p(Cost::DvmSnoop);
        let mut maint = self.base + fx.plain_maint;
        let mut extra = 0;
        let mut batch_missed = false;
        for (i, ch) in fx.charges.iter().enumerate() {
            if record {
                self.offsets.push(extra);
            }
            let plain = fx.charge_plain.get(i).copied().unwrap_or(0);
            let p = match *ch {
                Charge::Cost(c, n) => {
                    let p = self.prices.ps[c as usize] * n as u64;
                    maint += p & self.prices.maint[c as usize];
                    p
                }
                Charge::Dvm(ops) => {
                    let wait = self.dvm_broadcast(c, ops, self.base + plain + extra);
                    maint += wait;
                    wait
                }
                Charge::Ns(ns) => ns as u64 * PS,
                Charge::Line { addr, write, batch } => {
                    if !batch {
                        batch_missed = false;
                    }
                    if self.cache.access(cpu, addr, write) {
                        let p = if batch_missed {
                            self.p(Cost::CacheLineConcurrent)
                        } else {
                            self.p(Cost::CacheLineTransfer)
                        };
                        batch_missed = true;
                        p
                    } else {
                        0
                    }
                }
            };
            extra += p;
        }
        if record {
            self.offsets.push(extra);
        }
        let acc = self.base + fx.plain + extra;
        self.busy_ps += acc;
        self.maint_ps += maint;
        let j = self.opts.jitter_pct as u64 * 10_000; // parts per million
        self.scale = if j > 0 && acc > 0 {
            1_000_000 - j + self.rng.below(2 * j + 1)
        } else {
            1_000_000
        };
        (acc * self.scale / 1_000_000 + PS / 2) / PS
    }

    /// The price of one unit of `c`, ps.
    #[inline]
    fn p(&self, c: Cost) -> u64 {
        self.prices.ps[c as usize]
    }

    /// arm64: `ops` broadcast TLBIs of CPU `c` and the `DSB ISH` after
    /// them, issued `at` ps into its step ([`crate::dvm`]: parallel op
    /// fan-outs, serialised Syncs). Returns the CPU's wait, ps.
    fn dvm_broadcast(&mut self, c: usize, ops: u32, at: u64) -> u64 {
        let start = self.now * PS + at;
        let done = self.dvm.tlbi_is_dsb_ish(start, ops, &self.dvm_prices);
        self.dvm_ops += ops as u64;
        self.dvm_seen[c] += ops as u64;
        let wait = done - start;
        self.dvm_wait_ps += wait;
        wait
    }

    /// Offset in ns of mark `m` within the step just priced (jitter applied).
    #[inline]
    fn at(&self, m: Mark) -> Time {
        (self.base + m.plain + self.offsets[m.idx as usize]) * self.scale / 1_000_000 / PS
    }

    fn stat(&mut self, s: Stat, at: Time) {
        match s {
            Stat::OpBegin(t, op) => {
                self.op_begin.insert(t, op, at);
            }
            Stat::OpEnd(t, op) => {
                let Some(b) = self.op_begin.remove(t, op) else {
                    return;
                };
                while self.ops.len() <= op as usize {
                    self.ops.push(OpStats::new());
                }
                let lat = at - b;
                let o = &mut self.ops[op as usize];
                o.hist.saturating_record(lat.max(1));
                o.count += 1;
                o.sum += lat as f64;
                o.sum_sq += (lat as f64) * (lat as f64);
                o.first_begin = Some(o.first_begin.map_or(b, |f| f.min(b)));
                o.last_end = o.last_end.max(at);
                if op != kernel::arch::x86::tlb::OP_FLUSH_TLB_MM_RANGE {
                    self.ops_done += 1;
                }
            }
            Stat::Done(_) => {}
        }
    }

    /// The last `trace_depth` events (labels), oldest first.
    pub fn trace_tail(&self) -> Vec<String> {
        self.trace
            .iter()
            .map(|(t, c, l)| format!("t={t}ns CPU{c}: {l}"))
            .collect()
    }

    fn record_violation(&mut self, v: Violation) {
        let trace = self
            .trace
            .iter()
            .map(|(t, c, l)| format!("t={t}ns CPU{c}: {l}"))
            .collect();
        self.violations.push(ViolationRecord {
            time_ns: self.now,
            invariant: v.invariant,
            cpu: v.cpu,
            addr: format!("{:#x}", v.addr),
            what: v.what,
            trace,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's fields come back out of its key, and keys order by time,
    /// then sequence, whatever the CPU and kind.
    #[test]
    fn event_packing() {
        let e = Ev::new(7, (1 << SEQ_BITS) - 1, 4095, Kind::IrqOff);
        assert_eq!((e.time(), e.cpu(), e.kind()), (7, 4095, Kind::IrqOff));
        assert_eq!(e.time_seq(), key(7, (1 << SEQ_BITS) - 1));
        for k in Kind::ALL {
            assert_eq!(Ev::new(1, 2, 3, k).kind(), k);
        }
        let a = Ev::new(5, 10, 4095, Kind::IrqOff);
        let b = Ev::new(5, 11, 0, Kind::Step);
        let c = Ev::new(6, 1, 0, Kind::Step);
        assert!(a.0 < b.0 && b.0 < c.0);
    }

    /// `OpBegins` answers as a map of (task, op): a begin again overwrites,
    /// an end takes the begin once.
    #[test]
    fn op_begins_is_a_map() {
        let mut m = OpBegins::default();
        let mut h = std::collections::HashMap::new();
        let mut x = 5u64;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let (t, op) = ((x >> 33) as TaskId % 9, (x >> 50) as u16 % 3);
            if x >> 63 == 0 {
                m.insert(t, op, i);
                h.insert((t, op), i);
            } else {
                assert_eq!(m.remove(t, op), h.remove(&(t, op)));
            }
        }
        assert!(!h.is_empty());
    }
}
