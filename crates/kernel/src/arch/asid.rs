//! The ASID allocator shared in shape by arm64 and RISC-V
//! (arch/arm64/mm/context.c, arch/riscv/mm/context.c, which was derived from it).
//!
//! `mm->context.id` holds `generation | asid`. An mm keeps its ASID for as
//! long as the generation is current; when the bitmap runs out, the
//! generation moves on (`flush_context`): the map is rebuilt from the ASIDs
//! running now (`active_asids`, else `reserved_asids`), and every CPU must
//! flush its whole TLB before it next switches (`tlb_flush_pending`), because
//! its TLB may hold entries of ASIDs that are about to be handed to other mms.

use crate::effects::{Effects, Label};
use crate::hw::memory_model::{self as mo, Loc};
use crate::world::World;
use crate::{MmId, INIT_MM};
use machine::{Cost, CpuId};

/// Global allocator state (`asid_generation`, `asid_map`, `cur_idx`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AsidAllocator {
    pub bits: u32,
    /// `asid_generation`: a multiple of `1 << bits`, starting at `1 << bits`.
    pub generation: u64,
    /// `asid_map`: one bit per ASID of this generation.
    pub map: Vec<u64>,
    pub cur_idx: u32,
    pub rollovers: u64,
}

/// Per-CPU allocator state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuAsid {
    /// `per_cpu(active_asids)`: 0 while a rollover is in progress.
    pub active: u64,
    /// `per_cpu(reserved_asids)`.
    pub reserved: u64,
    /// `tlb_flush_pending` (a cpumask upstream).
    pub flush_pending: bool,
}

impl AsidAllocator {
    pub fn new(bits: u32) -> Self {
        let n = 1usize << bits;
        let mut map = vec![0u64; n.div_ceil(64)];
        map[0] |= 1; // ASID 0 is reserved for init_mm / idle.
        AsidAllocator {
            bits,
            generation: 1 << bits,
            map,
            cur_idx: 1,
            rollovers: 0,
        }
    }
    fn num(&self) -> u32 {
        1 << self.bits
    }
    /// `asid2idx` / the hardware ASID of a context id.
    pub fn idx(&self, id: u64) -> u16 {
        (id & (self.num() as u64 - 1)) as u16
    }
    /// `asid_gen_match`.
    pub fn gen_match(&self, id: u64) -> bool {
        (id ^ self.generation) >> self.bits == 0
    }
    fn test_and_set(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, i % 64);
        let was = self.map[w] & (1 << b) != 0;
        self.map[w] |= 1 << b;
        was
    }
    fn find_next_zero(&self, from: u32) -> Option<u32> {
        (from..self.num()).find(|&i| self.map[(i / 64) as usize] & (1 << (i % 64)) == 0)
    }
}

/// `flush_context`: start a new generation. Rebuild the map from the ASIDs in
/// use on each CPU and make every CPU flush its TLB before its next switch.
/// Runs on `cpu` under `cpu_asid_lock`; each CPU's `active_asids` is taken
/// with `atomic64_xchg_relaxed` (an atomic: it reads the newest value, so a
/// concurrent fast path's `cmpxchg` either came first and is reserved here,
/// or comes after and finds 0).
pub fn flush_context(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    fx.cost(Cost::AsidRollover, 1);
    let a = &mut w.asids;
    a.map.iter_mut().for_each(|m| *m = 0);
    a.map[0] |= 1;
    a.rollovers += 1;
    for i in 0..w.cpus.len() {
        let mut asid = mo::atomic_rmw(w, cpu, Loc::ActiveAsids(i as CpuId), |_| Some(0));
        let c = &mut w.cpus[i];
        // A CPU that already rolled over once keeps its reserved ASID.
        if asid == 0 {
            asid = c.asid.reserved;
        }
        let a = &mut w.asids;
        let i = (asid & ((1u64 << a.bits) - 1)) as u32;
        let (wd, b) = ((i / 64) as usize, i % 64);
        a.map[wd] |= 1 << b;
        c.asid.reserved = asid;
        c.asid.flush_pending = true;
    }
}

/// `check_update_reserved_asid`: if some CPU reserved `asid`, move every
/// such reservation to `newasid` (the mm keeps its ASID across the rollover).
fn check_update_reserved_asid(w: &mut World, asid: u64, newasid: u64) -> bool {
    let mut hit = false;
    for c in w.cpus.iter_mut() {
        if c.asid.reserved == asid {
            hit = true;
            c.asid.reserved = newasid;
        }
    }
    hit
}

/// `new_context`: an ASID of the current generation for `mm`, keeping its
/// old number if nobody took it, rolling the generation over if none is free.
/// Runs on `cpu` under `cpu_asid_lock`.
pub fn new_context(w: &mut World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> u64 {
    let asid = *w.mms[mm as usize].context_id;
    let generation = w.asids.generation;
    if asid != 0 {
        let newasid = generation | w.asids.idx(asid) as u64;
        // If our current ASID was active during a rollover, we can continue
        // to use it and this was just a false alarm.
        if check_update_reserved_asid(w, asid, newasid) {
            return newasid;
        }
        // We had a valid ASID in a previous life: try to keep it.
        let bit = w.asids.idx(asid) as u32;
        if !w.asids.test_and_set(bit) {
            return newasid;
        }
    }
    let mut rollover = false;
    let i = match w.asids.find_next_zero(w.asids.cur_idx) {
        Some(i) => i,
        None => {
            // We're out of ASIDs: move to the next generation
            // (atomic64_add_return_relaxed(ASID_FIRST_VERSION, &asid_generation)).
            rollover = true;
            let step = 1 << w.asids.bits;
            mo::atomic_rmw(w, cpu, Loc::AsidGeneration, |g| Some(g + step));
            flush_context(w, cpu, fx);
            w.asids
                .find_next_zero(1)
                .expect("flush_context leaves at least one ASID free")
        }
    };
    w.asids.test_and_set(i);
    w.asids.cur_idx = i;
    fx.label(Label::NewContext {
        mm,
        asid: i as u16,
        rollover,
    });
    i as u64 | w.asids.generation
}

/// The fast and slow paths of `check_and_switch_context` (arm64) /
/// `set_mm_asid` (RISC-V), in one step: make sure `mm` has an ASID of the
/// current generation and record it as this CPU's active ASID; returns the
/// hardware ASID and whether this CPU must flush its whole TLB first (a
/// rollover happened since it last switched). The checker runs arm64's
/// fast path in steps of its own ([`fast_path_reads`], [`fast_path_cmpxchg`]).
pub fn asid_for_switch(w: &mut World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> (u16, bool) {
    debug_assert_ne!(mm, INIT_MM);
    let (asid, old_active, fast) = fast_path_reads(w, cpu, mm, fx);
    if fast && fast_path_cmpxchg(w, cpu, old_active, asid) {
        return (w.asids.idx(asid), false);
    }
    slow_path(w, cpu, mm, fx)
}

/// arch/arm64/mm/context.c: `check_and_switch_context`'s lockless reads:
/// `atomic64_read(&mm->context.id)`, this CPU's `active_asids` and
/// `asid_gen_match` (`asid_generation`), all relaxed. Returns the mm's
/// context id, the active ASID read, and whether the fast path applies.
pub fn fast_path_reads(w: &mut World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> (u64, u64, bool) {
    let asid = mo::read_once(w, cpu, Loc::MmContextId(mm), fx);
    let old_active = mo::read_once(w, cpu, Loc::ActiveAsids(cpu), fx);
    let generation = mo::read_once(w, cpu, Loc::AsidGeneration, fx);
    let gen_match = (asid ^ generation) >> w.asids.bits == 0;
    (asid, old_active, old_active != 0 && asid != 0 && gen_match)
}

/// arch/arm64/mm/context.c: the fast path's
/// `atomic64_cmpxchg_relaxed(this_cpu_ptr(&active_asids), old_active_asid, asid)`:
/// false when a rollover zeroed `active_asids` since the read (then the
/// slow path runs). `inject.asid_fastpath_blind_store` stores blindly.
/// RISC-V's `set_mm_asid` uses `atomic_long_xchg_relaxed(&active_context,
/// cntx)` instead: it always stores, and takes the fast path when the old
/// value was not 0.
pub fn fast_path_cmpxchg(w: &mut World, cpu: CpuId, old_active: u64, asid: u64) -> bool {
    if w.cfg.arch == machine::scenario::Arch::Riscv {
        return mo::atomic_rmw(w, cpu, Loc::ActiveAsids(cpu), |_| Some(asid)) != 0;
    }
    let blind = w.cfg.inject.asid_fastpath_blind_store;
    let cur = mo::atomic_rmw(w, cpu, Loc::ActiveAsids(cpu), |cur| {
        (blind || cur == old_active).then_some(asid)
    });
    blind || cur == old_active
}

/// arch/arm64/mm/context.c: `check_and_switch_context`'s slow path under
/// `cpu_asid_lock`: a new context if the generation moved on, the rollover
/// flush if pending, then `atomic64_set(this_cpu_ptr(&active_asids), asid)`.
pub fn slow_path(w: &mut World, cpu: CpuId, mm: MmId, fx: &mut Effects) -> (u16, bool) {
    let c = cpu as usize;
    // raw_spin_lock_irqsave: the previous holder's stores (released by its
    // unlock) are what this CPU reads from here on.
    if !w.weak.is_empty() {
        w.weak.catch_up(cpu);
    }
    let mut asid = *w.mms[mm as usize].context_id;
    if asid == 0 || !w.asids.gen_match(asid) {
        asid = new_context(w, cpu, mm, fx);
        mo::store_now(w, cpu, Loc::MmContextId(mm), asid);
    }
    let flush =
        std::mem::take(&mut w.cpus[c].asid.flush_pending) && !w.cfg.inject.skip_rollover_flush;
    mo::store_now(w, cpu, Loc::ActiveAsids(cpu), asid);
    (w.asids.idx(asid), flush)
}
