//! kernel/sched/fair.c: where the fair class puts a task: at fork
//! (`sched_balance_fork`), at wake-up (`select_task_rq_fair`:
//! `wake_affine`, `select_idle_sibling`), when a CPU goes idle
//! (`sched_balance_newidle`) and at the tick (`sched_balance_domains`,
//! and the nohz idle balance a busy CPU's tick kicks), over the
//! scheduling domains of [`machine::Topology`].
//!
//! ```text
//!   fork:    select_task_rq_fair(WF_FORK) -> sched_balance_find_dst_cpu:
//!            highest SD_BALANCE_FORK domain -> idlest group -> idlest CPU,
//!            then again one level down from that CPU
//!   wake-up: select_task_rq_fair(WF_TTWU) -> wake_affine (prev or waker)
//!            -> select_idle_sibling: target, prev, an idle CPU of the LLC
//!   idle:    sched_balance_newidle: pull from the busiest CPU, nearest domain first
//!   tick:    sched_balance_domains (this CPU, busy intervals) and the
//!            nohz idle balance (idle CPUs pull, when this CPU has 2+ tasks)
//! ```
//!
//! Only tasks allowed on every CPU ([`crate::world::Task::cpus_allowed_all`])
//! are placed; a task a workload put on a CPU stays there, as a benchmark's
//! `sched_setaffinity` keeps it. Every decision is a function of the world:
//! no random draw. Candidates are visited in the kernel's order (groups
//! from the local one, `for_each_cpu_wrap` from the target where the kernel
//! uses it, else by CPU id) and the first of equals wins.
//!
//! Load is counted in tasks, not PELT averages: every runnable task is one
//! nice-0 task at full utilisation, so `cpu_load` = 1024 x `nr_running`
//! and a group's utilisation is its task count. Not modelled: PELT decay
//! (a CPU's load drops at once when its task leaves), `wake_wide`,
//! `recent_used_cpu`, SIS_UTIL's scan limit, `task_hot` (cache-hot tasks
//! are migrated like cold ones), active balancing (a lone running task is
//! never pushed), `SD_PREFER_SIBLING`, NUMA balancing's preferred node,
//! and the growth of `balance_interval` after balanced attempts.

use crate::effects::Effects;
use crate::world::{TaskState, World};
use crate::TaskId;
use machine::topology::{
    SD_BALANCE_FORK, SD_BALANCE_NEWIDLE, SD_NUMA, SD_SHARE_LLC, SD_WAKE_AFFINE,
};
use machine::{CpuId, Time};
use std::ops::Range;

/// Levels a topology may have (SMT, MC, NODE, NUMA).
pub const MAX_LEVELS: usize = 4;

/// `NICE_0_LOAD` scaled down (`scale_load_down(NICE_0_LOAD)`): one task's load.
const NICE_0_LOAD: u64 = 1024;
/// kernel/sched/fair.c: `NUMA_IMBALANCE_MIN`.
const NUMA_IMBALANCE_MIN: u32 = 2;
/// `sd->busy_factor`: a busy CPU balances this many times less often.
const BUSY_FACTOR: u64 = 16;

/// The fair class's per-CPU balancing state (part of `struct rq`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FairRq {
    /// `rq->idle_stamp`: when the CPU last went idle (`sched_balance_newidle`
    /// sets it, a pulled task clears it). `None`: never idle since boot.
    pub idle_stamp: Option<Time>,
    /// `sd->last_balance` of each level, ns.
    pub last_balance: [Time; MAX_LEVELS],
}

/// `enum cpu_idle_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuIdleType {
    /// `CPU_IDLE`: the nohz idle balance on behalf of an idle CPU.
    Idle,
    /// `CPU_NOT_IDLE`: a busy CPU's periodic balance.
    NotIdle,
    /// `CPU_NEWLY_IDLE`: a CPU about to go idle.
    NewlyIdle,
}

/// `enum group_type` (the ones a model without misfit or asymmetric
/// capacity can reach), least loaded first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupType {
    /// `group_has_spare`: fewer tasks than CPUs.
    HasSpare,
    /// `group_fully_busy`: as many tasks as CPUs.
    FullyBusy,
    /// `group_overloaded`: more tasks than CPUs.
    Overloaded,
}

/// `struct sg_lb_stats` of one group, in tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SgStats {
    pub span: Range<u32>,
    /// `sum_nr_running`.
    pub sum_nr_running: u32,
    /// `idle_cpus`.
    pub idle_cpus: u32,
    /// `group_weight` (allowed CPUs of the group).
    pub weight: u32,
    pub group_type: GroupType,
    /// `avg_load` = load x SCHED_CAPACITY_SCALE / capacity.
    pub avg_load: u64,
}

/// kernel/sched/core.c: `rq->nr_running` (the running task and the queued ones).
pub fn nr_running(w: &World, cpu: u32) -> u32 {
    let c = &w.cpus[cpu as usize];
    c.curr.is_some() as u32 + c.rq.len() as u32
}

/// kernel/sched/core.c: `available_idle_cpu` (`idle_cpu`: the idle task
/// runs and nothing is queued; the vCPU is not preempted).
pub fn available_idle_cpu(w: &World, cpu: u32) -> bool {
    let c = &w.cpus[cpu as usize];
    c.curr.is_none() && c.rq.is_empty() && !c.vcpu_preempted
}

/// include/linux/cpumask.h: `cpumask_test_cpu(cpu, p->cpus_ptr)`: may `p` run on `cpu`?
fn cpumask_test_cpu(w: &World, p: TaskId, cpu: u32) -> bool {
    let t = &w.tasks[p as usize];
    t.cpus_allowed_all || t.cpu as u32 == cpu
}

/// kernel/sched/fair.c: `group_classify` with `group_has_capacity` and
/// `group_is_overloaded` for tasks at full utilisation.
fn group_classify(sum_nr_running: u32, weight: u32) -> GroupType {
    if sum_nr_running < weight {
        GroupType::HasSpare
    } else if sum_nr_running == weight {
        GroupType::FullyBusy
    } else {
        GroupType::Overloaded
    }
}

/// kernel/sched/fair.c: `update_sg_lb_stats` / `update_sg_wakeup_stats`
/// over the CPUs of `span` that `p` may use (all of them when `p` is None).
fn update_sg_lb_stats(w: &World, span: Range<u32>, p: Option<TaskId>) -> SgStats {
    let (mut sum, mut idle, mut weight) = (0, 0, 0);
    for i in span.clone() {
        if p.is_some_and(|p| !cpumask_test_cpu(w, p, i)) {
            continue;
        }
        weight += 1;
        sum += nr_running(w, i);
        idle += available_idle_cpu(w, i) as u32;
    }
    let group_type = group_classify(sum, weight.max(1));
    SgStats {
        span,
        sum_nr_running: sum,
        idle_cpus: idle,
        weight,
        group_type,
        avg_load: sum as u64 * NICE_0_LOAD * 1024 / (weight.max(1) as u64 * 1024),
    }
}

/// kernel/sched/fair.c: `update_pick_idlest`: is `sgs` a better idlest
/// group than `idlest`?
fn update_pick_idlest(idlest: &SgStats, sgs: &SgStats) -> bool {
    if sgs.group_type != idlest.group_type {
        return sgs.group_type < idlest.group_type;
    }
    match sgs.group_type {
        GroupType::Overloaded | GroupType::FullyBusy => idlest.avg_load > sgs.avg_load,
        GroupType::HasSpare => {
            // Most idle CPUs; then the lowest utilisation.
            idlest.idle_cpus < sgs.idle_cpus
                || (idlest.idle_cpus == sgs.idle_cpus && idlest.sum_nr_running > sgs.sum_nr_running)
        }
    }
}

/// kernel/sched/fair.c: `adjust_numa_imbalance` (with `allow_numa_imbalance`).
fn adjust_numa_imbalance(imbalance: u32, dst_running: u32, imb_numa_nr: u32) -> u32 {
    if dst_running > imb_numa_nr {
        return imbalance;
    }
    if imbalance <= NUMA_IMBALANCE_MIN {
        0
    } else {
        imbalance
    }
}

/// kernel/sched/fair.c: `sched_balance_find_dst_group` (`find_idlest_group`):
/// the group of `this_cpu`'s domain at `level` to place `p` in, or `None`
/// to stay in the local group.
pub fn sched_balance_find_dst_group(
    w: &World,
    level: usize,
    p: TaskId,
    this_cpu: u32,
) -> Option<Range<u32>> {
    let topo = &w.cfg.topology;
    let sd = &topo.levels[level];
    let mut local: Option<SgStats> = None;
    let mut idlest: Option<SgStats> = None;
    for g in topo.groups(level, this_cpu) {
        if !g.clone().any(|i| cpumask_test_cpu(w, p, i)) {
            continue;
        }
        let sgs = update_sg_lb_stats(w, g.clone(), Some(p));
        if g.contains(&this_cpu) {
            local = Some(sgs);
        } else if idlest.as_ref().is_none_or(|i| update_pick_idlest(i, &sgs)) {
            idlest = Some(sgs);
        }
    }
    let idlest = idlest?;
    let Some(local) = local else {
        return Some(idlest.span);
    };
    if local.group_type != idlest.group_type {
        return (local.group_type > idlest.group_type).then_some(idlest.span);
    }
    match local.group_type {
        GroupType::Overloaded | GroupType::FullyBusy => {
            let imbalance = NICE_0_LOAD * (sd.imbalance_pct as u64 - 100) / 100;
            if sd.flags & SD_NUMA != 0 && idlest.avg_load + imbalance >= local.avg_load {
                return None;
            }
            if idlest.avg_load >= local.avg_load + imbalance {
                return None;
            }
            if 100 * local.avg_load <= sd.imbalance_pct as u64 * idlest.avg_load {
                return None;
            }
        }
        GroupType::HasSpare => {
            if sd.flags & SD_NUMA != 0 {
                // Keep the task near its parent while the local node would
                // stay below the allowed NUMA imbalance.
                let imb_numa_nr = if w.tasks[p as usize].cpus_allowed_all {
                    sd.imb_numa_nr
                } else {
                    sd.imb_numa_nr.min(local.weight)
                };
                let imbalance = local.idle_cpus.abs_diff(idlest.idle_cpus);
                if adjust_numa_imbalance(imbalance, local.sum_nr_running + 1, imb_numa_nr) == 0 {
                    return None;
                }
            }
            if local.idle_cpus >= idlest.idle_cpus {
                return None;
            }
        }
    }
    Some(idlest.span)
}

/// kernel/sched/fair.c: `sched_balance_find_dst_group_cpu`
/// (`find_idlest_group_cpu`): the idle CPU of `group` that went idle last
/// (no cpuidle driver: every idle state is the same), else the least
/// loaded CPU; the first of equals in CPU order.
pub fn sched_balance_find_dst_group_cpu(
    w: &World,
    group: Range<u32>,
    p: TaskId,
    this_cpu: u32,
) -> u32 {
    if group.len() == 1 {
        return group.start;
    }
    let mut shallowest: Option<(u32, Option<Time>)> = None;
    let mut least_loaded = this_cpu;
    let mut min_load = u32::MAX;
    for i in group.filter(|&i| cpumask_test_cpu(w, p, i)) {
        if available_idle_cpu(w, i) {
            let stamp = w.cpus[i as usize].fair.idle_stamp;
            if shallowest.is_none_or(|(_, s)| stamp > s) {
                shallowest = Some((i, stamp));
            }
        } else if shallowest.is_none() {
            let load = nr_running(w, i);
            if load < min_load {
                min_load = load;
                least_loaded = i;
            }
        }
    }
    shallowest.map_or(least_loaded, |(i, _)| i)
}

/// kernel/sched/fair.c: `sched_balance_find_dst_cpu` (`find_idlest_cpu`):
/// from the domain at `level` down, the idlest group's idlest CPU, then
/// again in that CPU's domains below the level just used.
pub fn sched_balance_find_dst_cpu(
    w: &World,
    level: usize,
    p: TaskId,
    cpu: u32,
    sd_flag: u32,
) -> u32 {
    let topo = &w.cfg.topology;
    let mut cpu = cpu;
    let mut new_cpu = cpu;
    let mut sd = Some(level);
    while let Some(l) = sd {
        let child = l.checked_sub(1);
        if topo.levels[l].flags & sd_flag == 0 {
            sd = child;
            continue;
        }
        let Some(group) = sched_balance_find_dst_group(w, l, p, cpu) else {
            sd = child;
            continue;
        };
        new_cpu = sched_balance_find_dst_group_cpu(w, group, p, cpu);
        if new_cpu == cpu {
            sd = child;
            continue;
        }
        // Now try balancing at a lower domain level of the new CPU.
        cpu = new_cpu;
        let weight = topo.levels[l].span;
        sd = (0..topo.levels.len())
            .take_while(|&k| topo.levels[k].span < weight)
            .filter(|&k| topo.levels[k].flags & sd_flag != 0)
            .last();
    }
    new_cpu
}

/// kernel/sched/fair.c: `select_task_rq_fair` for `WF_FORK` (reached from
/// `wake_up_new_task`; `sched_balance_fork` in the domain flags' terms):
/// the CPU a new task `p`, forked on `cpu`, starts on.
pub fn select_task_rq_fair_fork(w: &World, p: TaskId, cpu: u32) -> u32 {
    let topo = &w.cfg.topology;
    // for_each_domain with want_affine = 0: the highest level of an
    // unbroken run of SD_BALANCE_FORK from the bottom.
    let sd = (0..topo.levels.len())
        .take_while(|&k| topo.levels[k].flags & SD_BALANCE_FORK != 0)
        .last();
    match sd {
        Some(l) => sched_balance_find_dst_cpu(w, l, p, cpu, SD_BALANCE_FORK),
        None => cpu,
    }
}

/// kernel/sched/fair.c: `wake_affine_idle`.
fn wake_affine_idle(w: &World, this_cpu: u32, prev_cpu: u32, sync: bool) -> Option<u32> {
    let topo = &w.cfg.topology;
    if available_idle_cpu(w, this_cpu) && topo.cpus_share_cache(this_cpu, prev_cpu) {
        return Some(if available_idle_cpu(w, prev_cpu) {
            prev_cpu
        } else {
            this_cpu
        });
    }
    if sync && nr_running(w, this_cpu) == 1 {
        return Some(this_cpu);
    }
    if available_idle_cpu(w, prev_cpu) {
        return Some(prev_cpu);
    }
    None
}

/// kernel/sched/fair.c: `wake_affine_weight`, with each task's load 1024
/// (the waker's load counted on `this_cpu`, the wakee's blocked load on
/// `prev_cpu`).
fn wake_affine_weight(w: &World, level: usize, this_cpu: u32, prev_cpu: u32, sync: bool) -> bool {
    let pct = w.cfg.topology.levels[level].imbalance_pct as u64;
    let mut this_eff = nr_running(w, this_cpu) as u64 * NICE_0_LOAD;
    if sync {
        // The waker is about to sleep: its load leaves this CPU.
        this_eff = this_eff.saturating_sub(NICE_0_LOAD);
    }
    // WA_BIAS.
    this_eff = (this_eff + NICE_0_LOAD) * 100;
    let mut prev_eff = nr_running(w, prev_cpu) as u64 * NICE_0_LOAD * (100 + (pct - 100) / 2);
    if sync {
        prev_eff += 1;
    }
    this_eff < prev_eff
}

/// kernel/sched/fair.c: `wake_affine`: the waker's CPU if the wakee should
/// move next to it, else its previous CPU.
pub fn wake_affine(w: &World, level: usize, this_cpu: u32, prev_cpu: u32, sync: bool) -> u32 {
    let target = match wake_affine_idle(w, this_cpu, prev_cpu, sync) {
        Some(t) => Some(t),
        None => wake_affine_weight(w, level, this_cpu, prev_cpu, sync).then_some(this_cpu),
    };
    if target == Some(this_cpu) {
        this_cpu
    } else {
        prev_cpu
    }
}

/// kernel/sched/fair.c: `is_core_idle`: is every SMT sibling of
/// `core`'s core idle?
fn is_core_idle(w: &World, core: u32) -> bool {
    let topo = &w.cfg.topology;
    match topo.levels.first() {
        Some(l) if l.flags & machine::topology::SD_SHARE_CPUCAPACITY != 0 => {
            topo.span(0, core).all(|i| available_idle_cpu(w, i))
        }
        _ => available_idle_cpu(w, core),
    }
}

/// kernel/sched/fair.c: `select_idle_cpu`: the first idle CPU of the LLC
/// domain `llc` in `for_each_cpu_wrap` order from `target + 1`; with SMT,
/// a CPU of a wholly idle core first (`select_idle_core`), else the first
/// idle CPU seen.
pub fn select_idle_cpu(w: &World, p: TaskId, llc: usize, target: u32) -> Option<u32> {
    let topo = &w.cfg.topology;
    let span = topo.span(llc, target);
    let n = span.len() as u32;
    let smt = topo
        .levels
        .first()
        .is_some_and(|l| l.flags & machine::topology::SD_SHARE_CPUCAPACITY != 0);
    let mut idle_cpu = None;
    for k in 0..n {
        let cpu = span.start + (target + 1 - span.start + k) % n;
        if !cpumask_test_cpu(w, p, cpu) || !available_idle_cpu(w, cpu) {
            continue;
        }
        if !smt || is_core_idle(w, cpu) {
            return Some(cpu);
        }
        idle_cpu.get_or_insert(cpu);
    }
    idle_cpu
}

/// kernel/sched/fair.c: `select_idle_sibling`: `target` if idle, else
/// `prev` if idle and sharing its cache, else an idle CPU of target's LLC,
/// else `target`.
pub fn select_idle_sibling(w: &World, p: TaskId, prev: u32, target: u32) -> u32 {
    let topo = &w.cfg.topology;
    if available_idle_cpu(w, target) && cpumask_test_cpu(w, p, target) {
        return target;
    }
    if prev != target
        && topo.cpus_share_cache(prev, target)
        && available_idle_cpu(w, prev)
        && cpumask_test_cpu(w, p, prev)
    {
        return prev;
    }
    let Some(llc) = topo.llc_level() else {
        return target;
    };
    select_idle_cpu(w, p, llc, target).unwrap_or(target)
}

/// kernel/sched/fair.c: `select_task_rq_fair` for `WF_TTWU`: the CPU task
/// `p` (last on `prev_cpu`) wakes on when `this_cpu` wakes it. No level
/// has `SD_BALANCE_WAKE`, so this is the fast path: `wake_affine` in the
/// lowest domain holding both CPUs, then `select_idle_sibling`.
pub fn select_task_rq_fair_wake(
    w: &World,
    p: TaskId,
    prev_cpu: u32,
    this_cpu: u32,
    sync: bool,
) -> u32 {
    let topo = &w.cfg.topology;
    // want_affine: wake_wide() is taken as false (not modelled).
    let want_affine = cpumask_test_cpu(w, p, this_cpu);
    let mut new_cpu = prev_cpu;
    if want_affine {
        for (l, sd) in topo.levels.iter().enumerate() {
            if sd.flags & SD_WAKE_AFFINE == 0 {
                break;
            }
            if topo.span(l, this_cpu).contains(&prev_cpu) {
                if this_cpu != prev_cpu {
                    new_cpu = wake_affine(w, l, this_cpu, prev_cpu, sync);
                }
                break;
            }
        }
    }
    select_idle_sibling(w, p, prev_cpu, new_cpu)
}

/// kernel/sched/core.c: `move_queued_task` (fair.c's `detach_task` +
/// `attach_task`): move queued task `t` from `src`'s runqueue to `dst`'s.
fn move_queued_task(w: &mut World, t: TaskId, src: u32, dst: u32, fx: &mut Effects) {
    let rq = &mut w.cpus[src as usize].rq;
    if let Some(i) = rq.iter().position(|&x| x == t) {
        rq.remove(i);
    }
    w.tasks[t as usize].cpu = dst as CpuId;
    w.cpus[dst as usize].rq.push_back(t);
    w.cpus[dst as usize].fair.idle_stamp = None;
    w.counters.sched_migrations += 1;
    fx.wake(dst as CpuId);
}

/// kernel/sched/fair.c: `sched_balance_rq` (`load_balance`) of `this_cpu`'s
/// domain at `level`: find the busiest group and its busiest CPU, and pull
/// queued tasks from it if the imbalance calls for it. Returns the tasks
/// moved.
pub fn sched_balance_rq(
    w: &mut World,
    this_cpu: u32,
    level: usize,
    idle: CpuIdleType,
    fx: &mut Effects,
) -> u32 {
    let sd = w.cfg.topology.levels[level].clone();
    // sched_balance_find_src_group (update_sd_lb_stats, update_sd_pick_busiest).
    let mut local: Option<SgStats> = None;
    let mut busiest: Option<SgStats> = None;
    for g in w.cfg.topology.groups(level, this_cpu) {
        let sgs = update_sg_lb_stats(w, g.clone(), None);
        if g.contains(&this_cpu) {
            local = Some(sgs);
            continue;
        }
        if sgs.sum_nr_running == 0 {
            continue;
        }
        let better = match &busiest {
            None => true,
            Some(b) if sgs.group_type != b.group_type => sgs.group_type > b.group_type,
            Some(b) => match sgs.group_type {
                GroupType::Overloaded | GroupType::FullyBusy => sgs.avg_load > b.avg_load,
                GroupType::HasSpare => {
                    sgs.idle_cpus < b.idle_cpus
                        || (sgs.idle_cpus == b.idle_cpus && sgs.sum_nr_running > b.sum_nr_running)
                }
            },
        };
        if better {
            busiest = Some(sgs);
        }
    }
    let (Some(local), Some(busiest)) = (local, busiest) else {
        return 0;
    };
    if local.group_type > busiest.group_type {
        return 0;
    }
    // calculate_imbalance, in tasks to move.
    let imbalance =
        if busiest.group_type == GroupType::Overloaded {
            if local.group_type != GroupType::HasSpare {
                // migrate_load: even the average loads. A task moves only if
                // its load fits in the imbalance (detach_tasks), so three
                // tasks on two CPUs stay where they are.
                let (load, cap) = w.cfg.topology.groups(level, this_cpu).iter().fold(
                    (0u64, 0u64),
                    |(l, c), g| {
                        let sgs = update_sg_lb_stats(w, g.clone(), None);
                        (l + sgs.sum_nr_running as u64, c + sgs.weight as u64)
                    },
                );
                let sds_avg = load * NICE_0_LOAD / cap.max(1);
                if local.avg_load >= busiest.avg_load
                    || local.avg_load >= sds_avg
                    || 100 * busiest.avg_load <= sd.imbalance_pct as u64 * local.avg_load
                {
                    return 0;
                }
                let imb_load = ((busiest.avg_load - sds_avg) * busiest.weight as u64)
                    .min((sds_avg - local.avg_load) * local.weight as u64);
                (imb_load / NICE_0_LOAD) as u32
            } else if sd.flags & SD_SHARE_LLC == 0 {
                // migrate_util: fill the local group's spare capacity, at
                // most the busiest group's excess.
                local
                    .idle_cpus
                    .min(busiest.sum_nr_running - busiest.weight)
                    .max(1)
            } else {
                calculate_imbalance_has_spare(&w.cfg.topology, level, &sd, idle, &local, &busiest)
            }
        } else {
            // Busiest has spare or is fully busy: an idle CPU pulls only when
            // the groups' tasks per core differ by more than one
            // (SD_PREFER_SIBLING) or their idle CPUs by more than one.
            let prefer = prefer_sibling(&w.cfg.topology, level)
                && local.group_type == GroupType::HasSpare
                && sibling_imbalance(&w.cfg.topology, idle, &local, &busiest) > 1;
            if !prefer
                && (idle == CpuIdleType::NotIdle
                    || local.group_type != GroupType::HasSpare
                    || (busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1)
                    || busiest.sum_nr_running <= 1)
            {
                return 0;
            }
            if local.group_type != GroupType::HasSpare {
                return 0;
            }
            calculate_imbalance_has_spare(&w.cfg.topology, level, &sd, idle, &local, &busiest)
        };
    if imbalance == 0 {
        return 0;
    }
    // sched_balance_find_src_rq: the CPU of the busiest group with the most
    // tasks that has a queued task allowed here; the first of equals.
    let mut src: Option<(u32, u32)> = None;
    for i in busiest.span.clone() {
        let nr = nr_running(w, i);
        let movable = w.cpus[i as usize]
            .rq
            .iter()
            .any(|&t| cpumask_test_cpu(w, t, this_cpu));
        if movable && src.is_none_or(|(_, n)| nr > n) {
            src = Some((i, nr));
        }
    }
    let Some((src, _)) = src else {
        return 0;
    };
    // detach_tasks: from the task that waited longest; a running task is
    // never moved (can_migrate_task: task_on_cpu).
    let mut moved = 0;
    while moved < imbalance {
        if idle != CpuIdleType::NotIdle && nr_running(w, src) <= 1 {
            break;
        }
        let Some(t) = w.cpus[src as usize]
            .rq
            .iter()
            .copied()
            .find(|&t| cpumask_test_cpu(w, t, this_cpu))
        else {
            break;
        };
        move_queued_task(w, t, src, this_cpu, fx);
        moved += 1;
    }
    moved
}

/// kernel/sched/fair.c (no function: the model's gate) Does any live task
/// let the fair class place it? (Worlds whose tasks
/// are all pinned, the checker's among them, never touch the balancing
/// state.)
///
/// For a footprint it reads the number of tasks and the tasks allowed on
/// every CPU only: `cpus_allowed_all` is set by the step that creates the
/// task (which writes that number) and never changed after, so a step of
/// another CPU can change the answer only by creating a task or by
/// writing one of those.
/// Is some task, live or not, allowed on every CPU? Reads the number of
/// tasks only (`cpus_allowed_all` is fixed when the task is created).
fn any_placeable(w: &World) -> bool {
    let n = w.tasks.len();
    machine::footprint::paused(|| (0..n).any(|i| w.tasks[i].cpus_allowed_all))
}

pub fn placement_active(w: &World) -> bool {
    if !machine::footprint::recording() {
        return w
            .tasks
            .iter()
            .any(|t| t.cpus_allowed_all && t.state != TaskState::Exited);
    }
    let n = w.tasks.len();
    let placeable = |i: usize| machine::footprint::paused(|| w.tasks[i].cpus_allowed_all);
    (0..n).any(|i| placeable(i) && w.tasks[i].state != TaskState::Exited)
}

/// kernel/sched/fair.c: `update_sd_lb_stats`'s `sds->prefer_sibling`: the
/// child domain has `SD_PREFER_SIBLING`
/// (`sd_init` sets it on every level but the NUMA ones).
fn prefer_sibling(topo: &machine::Topology, level: usize) -> bool {
    level > 0 && topo.levels[level - 1].flags & SD_NUMA == 0
}

/// kernel/sched/fair.c: `update_sg_lb_stats`'s `sgs->cores`: cores in a
/// group of `weight` CPUs (SMT siblings count once).
fn cores(topo: &machine::Topology, weight: u32) -> u32 {
    match topo.levels.first() {
        Some(l) if l.flags & machine::topology::SD_SHARE_CPUCAPACITY != 0 => {
            weight.div_ceil(l.span).max(1)
        }
        _ => weight.max(1),
    }
}

/// kernel/sched/fair.c: `sibling_imbalance`: tasks to move so that both
/// groups run as many tasks per core.
fn sibling_imbalance(
    topo: &machine::Topology,
    idle: CpuIdleType,
    local: &SgStats,
    busiest: &SgStats,
) -> u32 {
    if idle == CpuIdleType::NotIdle || busiest.sum_nr_running == 0 {
        return 0;
    }
    let (nb, nl) = (cores(topo, busiest.weight), cores(topo, local.weight));
    if nb == nl {
        return busiest.sum_nr_running.saturating_sub(local.sum_nr_running);
    }
    let imb = (nl * busiest.sum_nr_running).saturating_sub(nb * local.sum_nr_running);
    let imb = (2 * imb + nl + nb) / (nl + nb);
    if imb <= 1 && local.sum_nr_running == 0 && busiest.sum_nr_running > 1 {
        2
    } else {
        imb
    }
}

/// kernel/sched/fair.c: `calculate_imbalance`, the branch for a local group with
/// spare capacity (`migrate_task`): the tasks-per-core difference with
/// `SD_PREFER_SIBLING` or single-CPU groups, else the idle-CPU difference;
/// NUMA allows its small imbalance; half of it moves.
fn calculate_imbalance_has_spare(
    topo: &machine::Topology,
    level: usize,
    sd: &machine::topology::SdLevel,
    idle: CpuIdleType,
    local: &SgStats,
    busiest: &SgStats,
) -> u32 {
    let mut imb = if busiest.weight == 1 || prefer_sibling(topo, level) {
        sibling_imbalance(topo, idle, local, busiest)
    } else {
        local.idle_cpus.saturating_sub(busiest.idle_cpus)
    };
    if sd.flags & SD_NUMA != 0 {
        imb = adjust_numa_imbalance(imb, local.sum_nr_running + 1, sd.imb_numa_nr);
    }
    imb >> 1
}

/// kernel/sched/sched.h: `get_rd_overloaded`: some CPU's runqueue holds a queued task that may move to another CPU
/// (the root domain's `overloaded`, restricted to what can be pulled).
///
/// For a footprint, a world with no task allowed on every CPU answers no
/// from the number of tasks alone (as [`placement_active`] reads it), not
/// from every runqueue.
fn get_rd_overloaded(w: &World) -> bool {
    if machine::footprint::recording() && !any_placeable(w) {
        return false;
    }
    w.cpus
        .iter()
        .any(|c| c.rq.iter().any(|&t| w.tasks[t as usize].cpus_allowed_all))
}

/// kernel/sched/fair.c: `sched_balance_newidle`: `this_cpu` found nothing
/// to run; before it idles, pull from the busiest CPU, nearest domain
/// first. Returns the tasks pulled (now on this CPU's runqueue).
pub fn sched_balance_newidle(w: &mut World, this_cpu: CpuId, fx: &mut Effects) -> u32 {
    let now = w.now;
    w.cpus[this_cpu as usize].fair.idle_stamp = Some(now);
    if !get_rd_overloaded(w) {
        return 0;
    }
    let mut pulled = 0;
    for l in 0..w.cfg.topology.levels.len() {
        if w.cfg.topology.levels[l].flags & SD_BALANCE_NEWIDLE != 0 {
            // (New-idle balancing leaves sd->last_balance alone.)
            pulled = sched_balance_rq(w, this_cpu as u32, l, CpuIdleType::NewlyIdle, fx);
        }
        if pulled > 0 {
            break;
        }
    }
    if pulled > 0 {
        w.counters.sched_newidle_pulls += pulled as u64;
    }
    pulled
}

/// kernel/sched/fair.c: `get_sd_balance_interval`, ns: the span in ms
/// (`sd->min_interval`), times `busy_factor` on a busy CPU.
fn get_sd_balance_interval(w: &World, level: usize, busy: bool) -> Time {
    let ms = w.cfg.topology.levels[level].span as Time * if busy { BUSY_FACTOR } else { 1 };
    ms * 1_000_000
}

/// kernel/sched/fair.c: `sched_balance_domains` of `cpu`: each domain
/// whose interval has passed balances once.
pub fn sched_balance_domains(
    w: &mut World,
    cpu: CpuId,
    idle: CpuIdleType,
    fx: &mut Effects,
) -> u32 {
    let now = w.now;
    let busy = idle == CpuIdleType::NotIdle;
    let mut pulled = 0;
    for l in 0..w.cfg.topology.levels.len() {
        let last = w.cpus[cpu as usize].fair.last_balance[l];
        if now < last + get_sd_balance_interval(w, l, busy) {
            continue;
        }
        w.cpus[cpu as usize].fair.last_balance[l] = now;
        let idle = if pulled > 0 {
            CpuIdleType::NotIdle
        } else {
            idle
        };
        pulled += sched_balance_rq(w, cpu as u32, l, idle, fx);
    }
    pulled
}

/// kernel/sched/fair.c: `sched_balance_trigger` at the tick of `cpu`
/// (`SCHED_SOFTIRQ`): its own periodic balance, and, when it has two or
/// more tasks and some CPU is idle (`nohz_balancer_kick`), the nohz idle
/// balance: every idle CPU, in `for_each_cpu_wrap` order from `cpu + 1`,
/// balances its domains as `CPU_IDLE`.
pub fn sched_balance_trigger(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    if !get_rd_overloaded(w) {
        return;
    }
    let mut pulled = sched_balance_domains(w, cpu, CpuIdleType::NotIdle, fx);
    if nr_running(w, cpu as u32) >= 2 {
        let n = w.cpus.len() as u32;
        for k in 1..n {
            let i = (cpu as u32 + k) % n;
            if available_idle_cpu(w, i) {
                pulled += sched_balance_domains(w, i as CpuId, CpuIdleType::Idle, fx);
            }
        }
    }
    w.counters.sched_balance_pulls += pulled as u64;
}

/// kernel/sched/core.c: `select_task_rq` (from `try_to_wake_up`) for a task of
/// the fair class woken on `this_cpu` (an hrtimer or I/O completion there):
/// the CPU it runs on next. A task pinned to its CPU stays.
pub fn select_task_rq(w: &World, p: TaskId, this_cpu: CpuId) -> CpuId {
    let t = &w.tasks[p as usize];
    if !t.cpus_allowed_all || t.rt || t.state == TaskState::Exited {
        return t.cpu;
    }
    select_task_rq_fair_wake(w, p, t.cpu as u32, this_cpu as u32, false) as CpuId
}
