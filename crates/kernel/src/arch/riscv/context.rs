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
///
/// `cpumask_set_cpu` / `cpumask_clear_cpu` are `set_bit` / `clear_bit`, a
/// relaxed `amoor.w` / `amoand.w` (no `.aq`/`.rl`): under RVWMO the bit
/// may become visible to other harts after this hart's later loads and
/// page walks, so the checker buffers it ([`mm_cpumask_store`]) until a
/// fence (`switch_mm_cid`'s, or seed (d)'s in `set_mm_asid`) or a drain.
pub fn switch_mm(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) {
    let c = cpu as usize;
    let prev = w.cpus[c].tlbstate.loaded_mm;
    if prev == next || next == INIT_MM {
        return;
    }
    let use_asid = w.cfg.riscv.asid_bits > 0;
    if !use_asid && prev != INIT_MM {
        mm_cpumask_store(w, cpu, prev, false, fx);
    }
    mm_cpumask_store(w, cpu, next, true, fx);
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
        mm_cpumask_store(w, cpu, m, false, fx);
        w.counters.cpumask_cleared += 1;
    }
}

/// `cpumask_set_cpu(cpu, mm_cpumask(mm))` / `cpumask_clear_cpu` by `cpu`
/// itself: a relaxed AMO on the bit, through the checker's memory model
/// (buffered under RVWMO; memory at once under SC and in the simulator).
pub fn mm_cpumask_store(w: &mut World, cpu: CpuId, mm: MmId, set: bool, fx: &mut Effects) {
    mo::store(w, cpu, Loc::MmCpumask { mm, cpu }, set as u64, fx);
    fx.write(crate::world::layout::mm_cpumask(mm, cpu));
}

/// `cpumask_test_cpu(cpu, mm_cpumask(mm))` by `cpu` itself: its own newest
/// store to the bit (store-to-load forwarding), else memory.
pub fn mm_cpumask_test_own(w: &World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> bool {
    fx.read(crate::world::layout::mm_cpumask(mm, cpu));
    mo::load(w, cpu, Loc::MmCpumask { mm, cpu }, fx) != 0
}

/// `__flush_tlb_range(mm, mm_cpumask(mm), ...)`'s read of the mask by
/// `cpu`: memory, with `cpu`'s own bit through its store buffer. A bit
/// another hart set but still buffers is not seen (labelled when tracing:
/// the read past that buffer).
pub fn read_mm_cpumask(w: &World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> machine::CpuMask {
    let mut mask = w.mms[mm as usize].cpumask.clone();
    if w.cfg.memory_model == mo::MemoryModel::Sc {
        return mask;
    }
    if mm_cpumask_test_own(w, cpu, mm, fx) {
        mask.set(cpu);
    } else {
        mask.clear(cpu);
    }
    if fx.tracing {
        for c in (0..w.cpus.len() as CpuId).filter(|&c| c != cpu) {
            mo::load(w, cpu, Loc::MmCpumask { mm, cpu: c }, fx);
        }
    }
    mask
}
