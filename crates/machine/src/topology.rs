//! The scheduling-domain topology of a machine: what
//! `kernel/sched/topology.c: build_sched_domains` builds from the
//! architecture's `sched_domain_topology` (SMT, CLS, MC, PKG) and
//! `sched_init_numa` (the NUMA levels), for the fair class's task placement
//! (`kernel/sched/fair.c`; the model is `kernel::sched::fair`).
//!
//! ```text
//!   SG2042 (64 harts)      NUMA  [0 ........................... 63]   imbalance_pct 117
//!                          NODE  [0 .. 15][16 .. 31][32 .. 47][48 .. 63]
//!                          MC    [0-3][4-7] ...  (L2 cluster = the LLC the kernel sees)
//! ```
//!
//! A level is a span size: every domain of the level is a contiguous block
//! of that many CPUs (the last one may be short), and its groups are the
//! blocks of the level below (single CPUs at the bottom). Spans larger than
//! the machine are cut to it, and a level whose span equals the one below
//! is dropped as `sd_parent_degenerate` drops it (its flags go to the level
//! kept). The model numbers CPUs so that each block is contiguous; where a
//! real machine enumerates them otherwise (x86 SMT siblings are CPU n and
//! n + cores), only the tie-breaking order of equal candidates differs.

use serde::{Deserialize, Serialize};

/// include/linux/sched/sd_flags.h: `SD_BALANCE_NEWIDLE`.
pub const SD_BALANCE_NEWIDLE: u32 = 1 << 0;
/// `SD_BALANCE_EXEC` (= `WF_EXEC`).
pub const SD_BALANCE_EXEC: u32 = 1 << 1;
/// `SD_BALANCE_FORK` (= `WF_FORK`).
pub const SD_BALANCE_FORK: u32 = 1 << 2;
/// `SD_BALANCE_WAKE` (= `WF_TTWU`; set on no level by default, so a
/// wake-up takes the fast path).
pub const SD_BALANCE_WAKE: u32 = 1 << 3;
/// `SD_WAKE_AFFINE`: a wake-up may move the task next to its waker.
pub const SD_WAKE_AFFINE: u32 = 1 << 4;
/// `SD_SHARE_CPUCAPACITY`: SMT siblings.
pub const SD_SHARE_CPUCAPACITY: u32 = 1 << 7;
/// `SD_SHARE_LLC`: the domain's CPUs share the last-level cache
/// (`sd_llc` is the highest such domain).
pub const SD_SHARE_LLC: u32 = 1 << 9;
/// `SD_NUMA`: a level built by `sched_init_numa`.
pub const SD_NUMA: u32 = 1 << 13;

/// The flags `sd_init` gives every level (kernel/sched/topology.c).
const SD_DEFAULT: u32 = SD_BALANCE_NEWIDLE | SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE;

/// Which machine's topology a scenario runs on (`machine.topology`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TopologyKind {
    /// The topology of the architecture's bundled cost profile:
    /// x86 → `icelake_2s`, arm64 → `neoverse_n2`, riscv → `sg2042`.
    #[default]
    Auto,
    /// One domain over every CPU, sharing one LLC (no NUMA).
    Flat,
    /// Sophgo SG2042: 64 T-Head C920 harts, clusters of 4 sharing an L2, 4 NUMA nodes of 16.
    Sg2042,
    /// Arm Neoverse N2 on a CMN-700 mesh: 128 cores, one system-level cache, one node.
    NeoverseN2,
    /// Two-socket Ice Lake-SP: 2 × 32 cores × 2 SMT threads, one LLC and one node per socket.
    Icelake2s,
    /// Two NUMA nodes of half the CPUs each (the first one the larger),
    /// each one LLC: a generic two-socket machine at any size, for small
    /// runs and checks of NUMA paths (page migration).
    TwoNodes,
}

/// One level of the hierarchy (one `struct sched_domain` per CPU).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SdLevel {
    /// The kernel's name for the level (`SMT`, `MC`, `NODE`, `NUMA`).
    pub name: &'static str,
    /// CPUs in each domain of the level (`sd->span_weight`).
    pub span: u32,
    /// `sd->flags`.
    pub flags: u32,
    /// `sd->imbalance_pct`: `sched_balance_rq` and `find_idlest_group`
    /// treat loads within this percentage as balanced.
    pub imbalance_pct: u32,
    /// `sd->imb_numa_nr`: tasks a NUMA level lets one side hold beyond
    /// balance (`build_sched_domains`); 0 below the first non-LLC level.
    pub imb_numa_nr: u32,
}

/// The scheduling domains of every CPU (all CPUs see the same levels).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Topology {
    pub nr_cpus: u32,
    /// Levels, lowest (smallest span) first.
    pub levels: Vec<SdLevel>,
}

impl Topology {
    /// The topology of `kind` cut to `nr_cpus` CPUs.
    pub fn build(kind: TopologyKind, arch: crate::scenario::Arch, nr_cpus: u32) -> Topology {
        use crate::scenario::Arch;
        let kind = match (kind, arch) {
            (TopologyKind::Auto, Arch::X86) => TopologyKind::Icelake2s,
            (TopologyKind::Auto, Arch::Arm64) => TopologyKind::NeoverseN2,
            (TopologyKind::Auto, Arch::Riscv) => TopologyKind::Sg2042,
            (k, _) => k,
        };
        let template: &[(&'static str, u32, u32)] = match kind {
            TopologyKind::Auto => unreachable!("resolved above"),
            TopologyKind::Flat => &[("MC", u32::MAX, SD_SHARE_LLC)],
            TopologyKind::Sg2042 => SG2042,
            TopologyKind::NeoverseN2 => NEOVERSE_N2,
            TopologyKind::Icelake2s => ICELAKE_2S,
            TopologyKind::TwoNodes => {
                let half = nr_cpus.div_ceil(2);
                return Topology::from_levels(
                    nr_cpus,
                    &[("MC", half, SD_SHARE_LLC), ("NUMA", nr_cpus, SD_NUMA)],
                );
            }
        };
        Topology::from_levels(nr_cpus, template)
    }

    /// A topology from `(name, span, extra flags)` levels, lowest first,
    /// cut to `nr_cpus` (tests build small machines this way).
    pub fn from_levels(nr_cpus: u32, template: &[(&'static str, u32, u32)]) -> Topology {
        let mut levels: Vec<SdLevel> = Vec::new();
        for &(name, span, extra) in template {
            let span = span.min(nr_cpus);
            let below = levels.last().map_or(1, |l| l.span);
            if span <= below {
                // sd_parent_degenerate: same span as the child; the child
                // keeps its own flags plus the sharing ones of the parent.
                if let Some(l) = levels.last_mut() {
                    l.flags |= extra & SD_SHARE_LLC;
                }
                continue;
            }
            let flags = SD_DEFAULT | extra;
            // sd_init: SMT siblings balance at 110, every other level at 117.
            let imbalance_pct = if flags & SD_SHARE_CPUCAPACITY != 0 {
                110
            } else {
                117
            };
            levels.push(SdLevel {
                name,
                span,
                flags,
                imbalance_pct,
                imb_numa_nr: 0,
            });
        }
        if levels.is_empty() {
            // One CPU: a single trivial domain keeps the code uniform.
            levels.push(SdLevel {
                name: "MC",
                span: nr_cpus.max(1),
                flags: SD_DEFAULT | SD_SHARE_LLC,
                imbalance_pct: 117,
                imb_numa_nr: 0,
            });
        }
        // build_sched_domains: the allowed NUMA imbalance. At the first
        // level above the LLC: the number of LLCs in it (a single LLC:
        // 12.5% of the span), at least 1; above it, that times the number
        // of first-NUMA-level spans in the level.
        let mut imb = 0;
        let mut imb_span = 1;
        for i in 0..levels.len() {
            let child_llc = i > 0 && levels[i - 1].flags & SD_SHARE_LLC != 0;
            if levels[i].flags & SD_SHARE_LLC == 0 && child_llc {
                let nr_llcs = levels[i].span / levels[i - 1].span;
                imb = if nr_llcs == 1 {
                    levels[i].span >> 3
                } else {
                    nr_llcs
                }
                .max(1);
                levels[i].imb_numa_nr = imb;
                imb_span = levels[i + 1..]
                    .iter()
                    .find(|l| l.flags & SD_NUMA != 0)
                    .map_or(levels[i].span, |l| l.span);
            } else {
                levels[i].imb_numa_nr = imb * (levels[i].span / imb_span).max(1);
            }
        }
        Topology { nr_cpus, levels }
    }

    /// The CPUs of `cpu`'s domain at `level` (`sched_domain_span`).
    pub fn span(&self, level: usize, cpu: u32) -> std::ops::Range<u32> {
        let s = self.levels[level].span;
        let lo = cpu / s * s;
        lo..(lo + s).min(self.nr_cpus)
    }

    /// The groups of `cpu`'s domain at `level`, in the kernel's order: the
    /// group holding `cpu` first, then the others wrapping around the span
    /// (`build_sched_groups` walks the span with `for_each_cpu_wrap` from
    /// `cpu`). Each group is the span of the level below (a single CPU at
    /// the bottom).
    pub fn groups(&self, level: usize, cpu: u32) -> Vec<std::ops::Range<u32>> {
        let span = self.span(level, cpu);
        let g = if level == 0 {
            1
        } else {
            self.levels[level - 1].span
        };
        let n = span.end - span.start;
        let count = n.div_ceil(g);
        let first = (cpu - span.start) / g;
        (0..count)
            .map(|k| {
                let lo = span.start + (first + k) % count * g;
                lo..(lo + g).min(span.end)
            })
            .collect()
    }

    /// CPUs per NUMA node: the span of the level below the first `SD_NUMA`
    /// level (`sched_init_numa` builds the NUMA levels over the nodes), or
    /// every CPU when no NUMA level is left (one node). Nodes are
    /// contiguous blocks of CPUs, as every level's domains are here.
    pub fn node_span(&self) -> u32 {
        match self.levels.iter().position(|l| l.flags & SD_NUMA != 0) {
            Some(0) => 1,
            Some(i) => self.levels[i - 1].span,
            None => self.nr_cpus.max(1),
        }
    }

    /// `nr_node_ids` (every node has CPUs in the model).
    pub fn nr_nodes(&self) -> u32 {
        self.nr_cpus.max(1).div_ceil(self.node_span())
    }

    /// include/linux/topology.h: `cpu_to_node`.
    pub fn cpu_to_node(&self, cpu: u32) -> u32 {
        cpu / self.node_span()
    }

    /// `per_cpu(sd_llc)`: the highest level sharing the last-level cache.
    pub fn llc_level(&self) -> Option<usize> {
        self.levels
            .iter()
            .rposition(|l| l.flags & SD_SHARE_LLC != 0)
    }

    /// kernel/sched/core.c: `cpus_share_cache`.
    pub fn cpus_share_cache(&self, a: u32, b: u32) -> bool {
        a == b
            || self
                .llc_level()
                .is_some_and(|l| self.span(l, a).contains(&b))
    }
}

/// Sophgo SG2042 as Linux builds its domains.
/// Source: arch/riscv/boot/dts/sophgo/sg2042-cpus.dtsi (`cpu-map`: one
/// socket of 16 clusters of 4 C920 cores, each cluster's cores pointing to
/// one `l2-cache` node; no L3 node, so `cacheinfo`'s LLC is the cluster L2
/// and `cpu_coregroup_mask`, hence MC, is the cluster), and the SG2042
/// TRM / Milk-V Pioneer documentation (4 DDR controllers, one NUMA node per
/// 16 cores; the device tree's `numa-node-id`). The NUMA distances are at
/// most `RECLAIM_DISTANCE` (30), so the NUMA level keeps
/// `SD_BALANCE_FORK` and `SD_WAKE_AFFINE`. The model gives the cross-node
/// distances one NUMA level; the DT's distance map (not re-checked here)
/// may split it into more.
const SG2042: &[(&str, u32, u32)] = &[
    ("MC", 4, SD_SHARE_LLC),
    ("NODE", 16, 0),
    ("NUMA", 64, SD_NUMA),
];

/// Arm Neoverse N2 in a 128-core CMN-700 mesh (the class of the arm64
/// seed's machine). Source: Arm Neoverse N2 TRM (private 512 KiB-1 MiB L2
/// per core, no cluster-level shared cache) and the CMN-700 TRM (the mesh's
/// system-level cache is shared by every core): with ACPI PPTT describing
/// the SLC as the shared level, MC spans all 128 cores and is the LLC; one
/// NUMA node.
const NEOVERSE_N2: &[(&str, u32, u32)] = &[("MC", 128, SD_SHARE_LLC)];

/// Two-socket Ice Lake-SP (Xeon Platinum 8358 class: 32 cores per socket, 2
/// threads per core, 128 CPUs; the 128-CPU Ice Lake of seed
/// x86-flush-tlb-info-on-stack v2). Source: Intel Xeon Scalable 3rd gen
/// datasheet (one L3 per socket, one memory domain per socket with SNC
/// off), and arch/x86/kernel/smpboot.c `x86_topology` (SMT, MC = the LLC,
/// PKG) with `sched_init_numa` adding the two-node level.
const ICELAKE_2S: &[(&str, u32, u32)] = &[
    ("SMT", 2, SD_SHARE_CPUCAPACITY | SD_SHARE_LLC),
    ("MC", 64, SD_SHARE_LLC),
    ("NUMA", 128, SD_NUMA),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Arch;

    /// SG2042 at 64 harts: clusters of 4 are the LLC, nodes of 16, one NUMA
    /// level; imb_numa_nr = 4 LLCs per node at NODE, x4 nodes at NUMA.
    #[test]
    fn sg2042_levels() {
        let t = Topology::build(TopologyKind::Auto, Arch::Riscv, 64);
        let spans: Vec<u32> = t.levels.iter().map(|l| l.span).collect();
        assert_eq!(spans, [4, 16, 64]);
        assert_eq!(t.llc_level(), Some(0));
        assert!(t.cpus_share_cache(4, 7) && !t.cpus_share_cache(3, 4));
        assert_eq!(t.levels[1].imb_numa_nr, 4);
        // One first-NUMA-level span (64) in the NUMA level: factor 1.
        assert_eq!(t.levels[2].imb_numa_nr, 4);
        assert_eq!(t.groups(1, 9), [8..12, 12..16, 0..4, 4..8]);
        assert_eq!(t.groups(0, 6), [6..7, 7..8, 4..5, 5..6]);
    }

    /// Cut to 8 harts: two clusters of 4 under one domain of 8.
    #[test]
    fn small_machines_drop_degenerate_levels() {
        let t = Topology::build(TopologyKind::Sg2042, Arch::Riscv, 8);
        let spans: Vec<u32> = t.levels.iter().map(|l| l.span).collect();
        assert_eq!(spans, [4, 8]);
        let t = Topology::build(TopologyKind::Auto, Arch::X86, 8);
        let spans: Vec<u32> = t.levels.iter().map(|l| l.span).collect();
        assert_eq!(spans, [2, 8]);
        assert_eq!(t.llc_level(), Some(1));
        let t = Topology::build(TopologyKind::Auto, Arch::Arm64, 128);
        assert_eq!(t.levels.len(), 1);
        assert_eq!(t.llc_level(), Some(0));
    }

    /// NUMA nodes: the span below the first NUMA level; none left, one node.
    #[test]
    fn numa_nodes_per_topology() {
        let nodes = |k, arch, n| {
            let t = Topology::build(k, arch, n);
            (t.nr_nodes(), t.node_span(), t.cpu_to_node(n - 1))
        };
        assert_eq!(nodes(TopologyKind::Auto, Arch::X86, 128), (2, 64, 1));
        assert_eq!(nodes(TopologyKind::Auto, Arch::X86, 72), (2, 64, 1));
        assert_eq!(nodes(TopologyKind::Auto, Arch::X86, 64), (1, 64, 0));
        assert_eq!(nodes(TopologyKind::Auto, Arch::Riscv, 64), (4, 16, 3));
        assert_eq!(nodes(TopologyKind::Auto, Arch::Riscv, 8), (1, 8, 0));
        assert_eq!(nodes(TopologyKind::Auto, Arch::Arm64, 128), (1, 128, 0));
        assert_eq!(nodes(TopologyKind::TwoNodes, Arch::Arm64, 8), (2, 4, 1));
        assert_eq!(nodes(TopologyKind::TwoNodes, Arch::X86, 2), (2, 1, 1));
        assert_eq!(nodes(TopologyKind::TwoNodes, Arch::X86, 1), (1, 1, 0));
    }
}
