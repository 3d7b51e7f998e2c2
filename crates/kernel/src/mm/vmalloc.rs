//! mm/vmalloc.c: `vmalloc` / `vfree` of one page, enough to exercise
//! kernel-address-space flushes (`flush_tlb_kernel_range`), which must
//! reach every CPU at once: kernel translations are global and live in
//! every CPU's TLB whatever address space it runs.

use crate::effects::{Effects, Label};
use crate::mm::memory::{pte_alloc_walk, pte_table};
use crate::world::{Flow, World};
use crate::{TaskId, INIT_MM};
use machine::mem::{pte, table_index, FrameUse};
use machine::{Cost, CpuId, Pfn, PAGE_SIZE};

/// `vmalloc(PAGE_SIZE)` at the fixed address `va` (the model's vmap area
/// hands the same address out again, as the real allocator does once the
/// lazy purge has flushed it): allocate a page, map it in `init_mm`, write it.
pub fn vmalloc(w: &mut World, cpu: CpuId, va: u64, fx: &mut Effects) {
    fx.cost(Cost::DoAnonymousPage, 1);
    let Ok(table) = pte_alloc_walk(w, INIT_MM, va) else {
        w.violation(0, cpu, va, "vmalloc: out of simulated memory".into());
        return;
    };
    let idx = table_index(va, 1);
    if pte::present(w.mem.read(table, idx).unwrap_or(0)) {
        return;
    }
    let Ok(page) = w.mem.alloc(FrameUse::Anon) else {
        w.violation(0, cpu, va, "vmalloc: out of simulated memory".into());
        return;
    };
    w.mem.write(
        table,
        idx,
        pte::make(page, pte::WRITE | pte::ACCESSED | pte::DIRTY),
    );
    fx.label(Label::DoAnonymousPage { va, pfn: page });
    crate::hw::mmu::kernel_access(w, cpu, va, fx);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `vunmap_range`: clear the PTE, then `flush_tlb_kernel_range`.
    Unmap,
    /// After the flush: give the page back.
    Free(Pfn),
}

/// `vfree(va)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Vfree {
    pub va: u64,
    pub pc: Pc,
}

impl Vfree {
    pub fn new(va: u64) -> Self {
        Vfree { va, pc: Pc::Unmap }
    }

    /// mm/vmalloc.c: `vfree` → `remove_vm_area` → `vunmap_range` +
    /// `flush_tlb_kernel_range` (as `vm_unmap_aliases` / a lazy purge would
    /// before the address is handed out again), then `__free_pages`.
    pub fn step(&mut self, w: &mut World, _cpu: CpuId, _task: TaskId, fx: &mut Effects) -> Flow {
        match self.pc {
            Pc::Unmap => {
                fx.cost(Cost::ZapFixed, 1);
                let Some(table) = pte_table(w, INIT_MM, self.va) else {
                    return Flow::Return;
                };
                let idx = table_index(self.va, 1);
                let e = w.mem.read(table, idx).unwrap_or(0);
                if !pte::present(e) {
                    return Flow::Return;
                }
                w.mem.write(table, idx, 0);
                self.pc = Pc::Free(pte::pfn(e));
                crate::arch::flush_tlb_kernel_range(w, self.va, self.va + PAGE_SIZE)
            }
            Pc::Free(page) => {
                fx.cost(Cost::FreePage, 1);
                fx.label(Label::FreePages { n: 1, first: page });
                w.mem.free(page);
                Flow::Return
            }
        }
    }
}
