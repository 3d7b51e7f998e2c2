//! arch/riscv/mm/context.c: `switch_mm`, `set_mm_asid` / `set_mm_noasid`,
//! with seed (d)'s `loaded_asid`, deferred flushes and the optional
//! `mm_cpumask` clearing.

use crate::arch::riscv::tlbflush::local_tlb_flush_queue_drain;
use crate::effects::{Effects, Label};
use crate::hw::memory_model::{self as mo, Loc, Order};
use crate::world::World;
use crate::{MmId, INIT_MM};
use machine::{Cost, CpuId};

/// arch/riscv/mm/context.c: `switch_mm`: without ASIDs a hart leaves the
/// previous mm's `mm_cpumask` (its TLB is flushed on every switch); with
/// ASIDs it never does (its TLB may still hold the old ASID's entries), so
/// the mask only grows. Then `set_mm`.
pub fn switch_mm(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) {
    let c = cpu as usize;
    let prev = w.cpus[c].tlbstate.loaded_mm;
    if prev == next || next == INIT_MM {
        return;
    }
    let use_asid = w.cfg.riscv.asid_bits > 0;
    if !use_asid && prev != INIT_MM {
        w.mms[prev as usize].cpumask.clear(cpu);
    }
    w.mms[next as usize].cpumask.set(cpu);
    fx.write(crate::world::layout::mm_cpumask(next, cpu));
    let flush = if use_asid {
        set_mm_asid(w, cpu, next, fx)
    } else {
        let ts = &mut w.cpus[c].tlbstate;
        ts.loaded_mm = next;
        ts.loaded_mm_asid = 0;
        set_mm_noasid(w, cpu, fx)
    };
    if use_asid && w.cfg.riscv.cpumask_clear_threshold > 0 {
        trim_recent(w, cpu, prev, next, fx);
    }
    fx.cost(Cost::Cr3Write, 1);
    w.counters.cr3_writes += 1;
    fx.label(Label::SwitchMm {
        from: prev,
        to: next,
        flush,
    });
}

/// `set_mm_asid`: an ASID of the current generation (`__new_context` on
/// rollover, `local_flush_tlb_all` if this hart has a rollover flush
/// pending), `satp` with it; seed (d): publish `loaded_asid`,
/// `RISCV_FENCE(w,r)`, drain the hart's deferred flushes. The checker
/// runs the three as a store, a named barrier and a load of the weak
/// model in one step: until the fence the store sits in this hart's own
/// buffer, invisible to the others, so a boundary between store and fence
/// adds no behaviour; a boundary between fence and load neither (the only
/// store the load could newly see is a drain of `need_tlb_flush`, which
/// commutes to before this step).
fn set_mm_asid(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) -> bool {
    let c = cpu as usize;
    let (asid, flush) = crate::arch::asid::asid_for_switch(w, cpu, next, fx);
    if flush {
        w.cpus[c].tlb.flush_all();
        w.counters.full_flushes += 1;
        fx.cost(Cost::FlushTlbLocal, 1);
    }
    let ts = &mut w.cpus[c].tlbstate;
    ts.loaded_mm = next;
    ts.loaded_mm_asid = asid;
    if w.cfg.riscv.defer_flush_to_context_switch {
        // Store-buffering shape with should_ipi_flush: publish loaded_asid,
        // fence w,r, then test need_tlb_flush. Either the flusher re-reads
        // the new loaded_asid (and IPIs), or this hart sees its enqueue.
        mo::store(w, cpu, Loc::LoadedAsid(cpu), asid as u64, fx);
        fx.write(crate::world::layout::cpu_tlbstate(cpu));
        fx.cost(Cost::AtomicOp, 1);
        mo::barrier(w, cpu, Some(mo::SET_MM_ASID_FENCE), Order::Full, fx);
        local_tlb_flush_queue_drain(w, cpu, asid, fx);
    }
    flush
}

/// `set_mm_noasid`: no ASIDs, so flush everything on every switch.
fn set_mm_noasid(w: &mut World, cpu: CpuId, fx: &mut Effects) -> bool {
    let c = cpu as usize;
    w.cpus[c].tlb.flush_all();
    w.counters.full_flushes += 1;
    w.counters.sfence_vma += 1;
    fx.cost(Cost::FlushTlbLocal, 1);
    true
}

/// `riscv.cpumask_clear_threshold` (the seed's announced follow-up): a hart
/// that switched that many times since it last ran an mm flushes that mm's
/// ASID locally and leaves its `mm_cpumask`, so later flushes of the mm
/// neither IPI nor queue for it.
fn trim_recent(w: &mut World, cpu: CpuId, prev: MmId, next: MmId, fx: &mut Effects) {
    let c = cpu as usize;
    let limit = w.cfg.riscv.cpumask_clear_threshold;
    let recent = &mut w.cpus[c].riscv.recent;
    recent.retain(|(m, _)| *m != next);
    for e in recent.iter_mut() {
        e.1 += 1;
    }
    if prev != INIT_MM {
        recent.push((prev, 0));
    }
    let stale: Vec<MmId> = recent
        .iter()
        .filter(|(_, n)| *n >= limit)
        .map(|(m, _)| *m)
        .collect();
    recent.retain(|(_, n)| *n < limit);
    for m in stale {
        let id = *w.mms[m as usize].context_id;
        let asid = w.asids.idx(id);
        // Drop the mm's entries (and anything queued for it), then leave the mask.
        if id != 0 {
            w.cpus[c].tlb.flush_asid(asid);
            w.cpus[c].riscv.queue.retain(|e| e.asid != u32::from(asid));
            fx.cost(Cost::SfenceVmaAsid, 1);
            w.counters.sfence_vma += 1;
        }
        w.mms[m as usize].cpumask.clear(cpu);
        fx.write(crate::world::layout::mm_cpumask(m, cpu));
        w.counters.cpumask_cleared += 1;
    }
}
