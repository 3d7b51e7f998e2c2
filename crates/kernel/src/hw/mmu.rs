//! The MMU: TLB lookup, hardware page walk, TLB and paging-structure-cache
//! fills, and the invariant monitor's checks on every completed access.

use crate::effects::{Effects, Label};
use crate::world::World;
use machine::mem::{pte, table_index, FrameUse};
use machine::tlb::TlbHit;
use machine::{Cost, CpuId, Pfn};

/// Outcome of one user access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Done,
    /// #PF: the kernel must handle it, then the access is retried.
    Fault,
}

/// A user load or store by `cpu` at `va` in its loaded address space.
///
/// Monitor: an access that completes through a cached translation whose frame
/// was freed (or freed and reused) since the translation was cached breaks
/// invariant 1; a walk that goes through a cached pointer to a freed
/// page-table page breaks invariant 3.
pub fn user_access(w: &mut World, cpu: CpuId, va: u64, write: bool, fx: &mut Effects) -> Access {
    fx.cost(Cost::UserAccess, 1);
    let c = cpu as usize;
    let asid = w.cpus[c].tlbstate.loaded_mm_asid;
    let mm = w.cpus[c].tlbstate.loaded_mm;
    if let Some(h) = w.cpus[c].tlb.lookup(asid, va) {
        if write && !h.writable {
            // x86 drops the faulting translation (SDM 4.10.4.1) and raises
            // #PF; arm64 and RISC-V may keep it cached.
            if crate::arch::fault_drops_entry(w) {
                w.cpus[c].tlb.flush_one(asid, va);
            }
            return Access::Fault;
        }
        if h.owner != mm {
            w.violation(
                5,
                cpu,
                va,
                format!(
                    "CPU{cpu} running mm{mm} hit a translation of {va:#x} cached for mm{} under the same ASID {asid}: the ASID was reused without a TLB flush",
                    h.owner
                ),
            );
        }
        if fx.tracing && w.cfg.memory_model != crate::hw::memory_model::MemoryModel::Sc {
            if let Some((owner, loc)) = crate::hw::memory_model::pending_tlbi(w, cpu, asid, va) {
                fx.label(Label::ReadPastBuffer { owner, loc });
            }
        }
        check_frame(w, cpu, va, h, "TLB hit");
        w.counters.tlb_hits += 1;
        fx.label(Label::UserAccess {
            va,
            write,
            hit: true,
        });
        return Access::Done;
    }
    w.counters.tlb_misses += 1;
    fx.cost(Cost::TlbMissWalk, 1);
    fx.label(Label::UserAccess {
        va,
        write,
        hit: false,
    });
    walk_and_fill(w, cpu, va, write, fx)
}

/// Checker (`machine.speculative_walks`): `cpu`'s hardware walker fills
/// its TLB for `va` in the loaded address space at a moment of its own
/// choosing, with no access (the Arm ARM and the RISC-V privileged spec
/// allow translations to be cached speculatively; x86 too, which is
/// why lazy CPUs get the freed-tables IPI). The same walk as an
/// access's, I3 included; what it caches is checked at the next hit.
pub fn speculative_walk(w: &mut World, cpu: CpuId, va: u64, fx: &mut Effects) {
    fx.label(Label::SpeculativeWalk { va });
    let c = &mut w.cpus[cpu as usize];
    // A miss (speculative_walk_fills): the lookup notes it for the fill.
    let missed = c.tlb.lookup(c.tlbstate.loaded_mm_asid, va);
    debug_assert!(missed.is_none());
    walk_and_fill(w, cpu, va, false, fx);
}

/// Would a speculative walk of `va` by `cpu` do something? Its TLB has
/// no entry for `va`, and either its paging-structure cache holds the
/// PTE table (the walk goes through it, I3 checked) or its loaded
/// address space maps `va` as the walkers see it.
pub fn speculative_walk_fills(w: &World, cpu: CpuId, va: u64) -> bool {
    let c = &w.cpus[cpu as usize];
    let (mm, asid) = (c.tlbstate.loaded_mm, c.tlbstate.loaded_mm_asid);
    // (Not while x86's switch_mm_irqs_off has LOADED_MM_SWITCHING.)
    if mm == crate::INIT_MM || mm as usize >= w.mms.len() || c.tlb.holds(asid, va) {
        return false;
    }
    c.tlb.psc_lookup(asid, va).is_some()
        || walk_upper(w, mm, va).is_some_and(|(walk, _)| match walk {
            Walk::Huge(_) => true,
            Walk::Table(t) => pte::present(crate::hw::memory_model::walker_pte(
                w,
                t,
                table_index(va, 1),
            )),
        })
}

/// A TLB miss's walk: through the paging-structure cache or from the PGD,
/// then the TLB fill. `Fault` when nothing (or nothing writable, for a
/// write) is mapped.
fn walk_and_fill(w: &mut World, cpu: CpuId, va: u64, write: bool, fx: &mut Effects) -> Access {
    let c = cpu as usize;
    let asid = w.cpus[c].tlbstate.loaded_mm_asid;
    let mm = w.cpus[c].tlbstate.loaded_mm;
    // The paging-structure cache may hold the PTE table for this 2 MiB
    // region. If the walk goes through it, the walk's fill would store the
    // entry it found again: skipped.
    let mut psc_used = false;
    let pte_table = match w.cpus[c].tlb.psc_lookup(asid, va) {
        Some(p) => {
            if w.mem.gen(p.table) != p.table_gen || w.mem.usage(p.table) != FrameUse::Table(1) {
                w.violation(
                    3,
                    cpu,
                    va,
                    format!(
                        "CPU{cpu} walked {va:#x} through a cached pointer to page-table frame {} freed since it was cached",
                        p.table
                    ),
                );
                walk_and_cache_pud(w, c, asid, mm, va, fx)
            } else {
                psc_used = true;
                Some(Walk::Table(p.table))
            }
        }
        None => walk_and_cache_pud(w, c, asid, mm, va, fx),
    };
    let (hit, table) = match pte_table {
        None => return Access::Fault,
        Some(Walk::Huge(e)) => (
            TlbHit {
                owner: mm,
                pfn: pte::pfn(e),
                frame_gen: w.mem.gen(pte::pfn(e)),
                writable: pte::writable(e),
                huge: true,
            },
            None,
        ),
        Some(Walk::Table(t)) => {
            let idx = table_index(va, 1);
            let e = crate::hw::memory_model::walker_pte(w, t, idx);
            let loc = crate::hw::memory_model::Loc::Pte {
                table: t,
                idx: idx as u16,
            };
            crate::hw::memory_model::walker_read(w, cpu, loc, fx);
            if !pte::present(e) {
                return Access::Fault;
            }
            let pfn = pte::pfn(e);
            w.mem.prefetch_after(t, idx);
            (
                TlbHit {
                    owner: mm,
                    pfn,
                    frame_gen: w.mem.gen(pfn),
                    writable: pte::writable(e),
                    huge: false,
                },
                Some(t),
            )
        }
    };
    if write && !hit.writable {
        return Access::Fault;
    }
    tlb_fill(w, c, asid, va, hit);
    if let (Some(t), false) = (table, psc_used) {
        let g = w.mem.gen(t);
        let swap = w.cpus[c].tlb.psc_fill(asid, va, t, g);
        if let (Some(swap), true) = (swap, w.psc_index.0.enabled()) {
            w.psc_index.0.note(c, swap, w.cpus[c].tlb.psc_pfns());
        }
    }
    Access::Done
}

/// The TLB tag of global (kernel) translations: they match under any ASID.
pub const KERNEL_TLB_TAG: u16 = u16::MAX;

/// A kernel load or store at `va` (a vmalloc address, mapped in `init_mm`'s
/// tables with the global bit). Returns whether a translation existed.
///
/// Monitor: a hit through a cached translation whose frame was freed since
/// breaks invariant 7 when the kernel's flush of that address was skipped
/// or deferred, which is the only way such an entry survives.
pub fn kernel_access(w: &mut World, cpu: CpuId, va: u64, fx: &mut Effects) -> bool {
    fx.cost(Cost::UserAccess, 1);
    let c = cpu as usize;
    if let Some(h) = w.cpus[c].tlb.lookup(KERNEL_TLB_TAG, va) {
        let now = w.mem.gen(h.pfn);
        if now != h.frame_gen {
            w.violation(
                7,
                cpu,
                va,
                format!(
                    "CPU{cpu} accessed kernel address {va:#x} through a stale global TLB entry to frame {} freed since it was cached: the kernel-range flush never reached this CPU",
                    h.pfn
                ),
            );
        }
        w.counters.tlb_hits += 1;
        fx.label(Label::KernelAccess { va, hit: true });
        return true;
    }
    w.counters.tlb_misses += 1;
    fx.cost(Cost::TlbMissWalk, 1);
    let Some((Walk::Table(t), _)) = walk_upper(w, crate::INIT_MM, va) else {
        return false;
    };
    let e = w.mem.read(t, table_index(va, 1)).unwrap_or(0);
    if !pte::present(e) {
        return false;
    }
    let pfn = pte::pfn(e);
    let hit = TlbHit {
        owner: crate::INIT_MM,
        pfn,
        frame_gen: w.mem.gen(pfn),
        writable: true,
        huge: false,
    };
    tlb_fill(w, c, KERNEL_TLB_TAG, va, hit);
    fx.label(Label::KernelAccess { va, hit: false });
    true
}

enum Walk {
    Table(Pfn),
    Huge(u64),
}

/// The walker caches a translation in CPU `c`'s TLB; a first one of the
/// ASID's bucket goes in the world's index of the CPUs that may hold it
/// ([`crate::hw::filled_index`]).
#[inline(always)]
pub(crate) fn tlb_fill(w: &mut World, c: usize, asid: u16, va: u64, hit: TlbHit) {
    if !w.cpus[c].tlb.may_hold(asid) {
        w.tlb_filled.0.note(c as CpuId, asid);
    }
    w.cpus[c].tlb.fill(asid, va, hit);
}

/// Walk PGD → PUD → PMD of `mm`: the PTE table or a huge leaf, and the PMD
/// table the PUD entry led to; None if not present.
fn walk_upper(w: &World, mm: crate::MmId, va: u64) -> Option<(Walk, Pfn)> {
    let mut table = *w.mms[mm as usize].pgd;
    let mut pmd_table = table;
    for level in [4u8, 3, 2] {
        let idx = table_index(va, level);
        let mut e = w.mem.read(table, idx)?;
        if w.cfg.memory_model != crate::hw::memory_model::MemoryModel::Sc {
            // arm64: a cleared PMD the writer's DSB has not yet made
            // visible to the walkers still leads to the old PTE table.
            e = crate::hw::memory_model::walker_pte(w, table, idx);
        }
        if !pte::present(e) {
            return None;
        }
        if level == 2 && pte::huge(e) {
            return Some((Walk::Huge(e), pmd_table));
        }
        table = pte::pfn(e);
        if level == 3 {
            pmd_table = table;
        }
    }
    Some((Walk::Table(table), pmd_table))
}

/// A full walk by CPU `c`'s hardware walker: the PUD entry it read goes into
/// the PUD-entry cache (how a hugetlb PMD table stays reachable after unshare).
fn walk_and_cache_pud(
    w: &mut World,
    c: usize,
    asid: u16,
    mm: crate::MmId,
    va: u64,
    fx: &mut Effects,
) -> Option<Walk> {
    let (walk, pmd_table) = walk_upper(w, mm, va)?;
    if fx.tracing {
        let loc = crate::hw::memory_model::Loc::PageTable {
            table: pmd_table,
            index: table_index(va, 2),
        };
        crate::hw::memory_model::walker_read(w, c as CpuId, loc, fx);
    }
    let g = w.mem.gen(pmd_table);
    let swap = w.cpus[c].tlb.pud_psc_fill(asid, va, pmd_table, g);
    if w.psc_index.0.enabled() {
        w.psc_index.0.note(c, swap, w.cpus[c].tlb.psc_pfns());
    }
    Some(walk)
}

/// Invariant 1: the frame behind a cached translation is still the one cached.
fn check_frame(w: &mut World, cpu: CpuId, va: u64, h: TlbHit, via: &str) {
    let now = w.mem.gen(h.pfn);
    if now != h.frame_gen {
        let state = match w.mem.usage(h.pfn) {
            FrameUse::Free => "is free",
            FrameUse::Anon => "was reused as a user page",
            FrameUse::Table(_) => "was reused as a page table",
            FrameUse::Deposited => "was reused as a deposited page table",
        };
        w.violation(
            1,
            cpu,
            va,
            format!(
                "CPU{cpu} accessed {va:#x} via {via} to frame {} which {state} (generation {} -> {})",
                h.pfn, h.frame_gen, now
            ),
        );
    }
}
