//! mm/vmalloc.c: `vmalloc` / `vfree` and the lazy purge of freed vmap
//! areas, enough to exercise kernel-address-space flushes
//! (`flush_tlb_kernel_range`), which must reach every CPU at once: kernel
//! translations are global and live in every CPU's TLB whatever address
//! space it runs.
//!
//! Read in CachyOS/linux `06b47f69` (a 6.18-class tree):
//!
//! ```text
//!   vfree(addr)
//!     remove_vm_area -> free_unmap_vmap_area
//!       vunmap_range_noflush(va_start, va_end)       PTEs cleared, no flush
//!       free_vmap_area_noflush(va)                   vmap_lazy_nr += va_size >> PAGE_SHIFT
//!         nr_lazy > lazy_max_pages()? schedule_work(&drain_vmap_work)
//!     VM_FLUSH_RESET_PERMS? vm_reset_perms -> _vm_unmap_aliases
//!                                         -> __purge_vmap_area_lazy (now)
//!     __free_page(each page)                         before any flush
//!   drain_vmap_area_work -> __purge_vmap_area_lazy(ULONG_MAX, 0, false)
//!     flush_tlb_kernel_range(min va_start, max va_end)   once, merged range
//!     purge_vmap_node: the areas go back to the free space, vmap_lazy_nr -= pages
//! ```
//!
//! A lazily freed area's address is not handed out again before the purge
//! that flushed it; until then a stale global TLB entry for it is harmless
//! (nothing may touch a freed vmalloc address).

use crate::effects::{Effects, Label};
use crate::mm::memory::{pte_alloc_walk, pte_table};
use crate::world::{Flow, World};
use crate::{TaskId, INIT_MM};
use machine::mem::{pte, table_index, FrameUse};
use machine::{Cost, CpuId, Pfn, PAGE_SHIFT, PAGE_SIZE};

/// The model's `VMALLOC_START` (RISC-V Sv48's region; the model's tables
/// index 48 bits, so the sign extension is dropped; on x86 it stands for
/// an address in `VMALLOC_START..VMALLOC_END`). It lives in `init_mm`'s
/// tables, apart from every user address space.
pub const VMALLOC_START: u64 = 0x0000_c000_0000_0000;

/// One `struct vm_struct` in use: `pages` mapped pages from `va`, then the
/// guard page (`__get_vm_area_node` adds one unless `VM_NO_GUARD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VmArea {
    pub va: u64,
    pub pages: u32,
    /// `VM_FLUSH_RESET_PERMS` (module memory, BPF programs): `vfree`
    /// purges and flushes at once (`vm_reset_perms`).
    pub flush_reset_perms: bool,
}

impl VmArea {
    /// `va_size(va)`: the mapped pages and the guard page.
    pub fn va_end(&self) -> u64 {
        self.va + (self.pages as u64 + 1) * PAGE_SIZE
    }
}

/// The vmap allocator's state: the areas in use, named by the workload's
/// object numbers, the lazily freed ones and `vmap_lazy_nr`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct VmapAreas {
    /// The area behind each object number (a kernel pointer a workload keeps).
    pub objs: Vec<Option<VmArea>>,
    /// `vn->lazy`: freed, unmapped, not yet flushed; merged, by address.
    pub lazy: Vec<(u64, u64)>,
    /// `vn->purge_list`: taken by a purge whose flush has not finished
    /// (still not free).
    pub purging: Vec<(u64, u64)>,
    /// `vmap_lazy_nr`: pages in `lazy` and `purging`.
    pub lazy_nr: u64,
    /// Purges so far (`trace_purge_vmap_area_lazy`).
    pub purges: u64,
}

impl VmapAreas {
    /// mm/vmalloc.c: `__alloc_vmap_area`: the lowest free address
    /// (first fit from `VMALLOC_START`) for `size` bytes; busy and lazily
    /// freed areas are not free.
    pub fn alloc_vmap_area(&self, size: u64) -> u64 {
        let used = self.objs.iter().flatten().map(|a| (a.va, a.va_end()));
        let freed = self.lazy.iter().chain(&self.purging).copied();
        let mut ranges: Vec<(u64, u64)> = used.chain(freed).collect();
        ranges.sort_unstable();
        let mut addr = VMALLOC_START;
        for (s, e) in ranges {
            if s < addr + size && e > addr {
                addr = e;
            }
        }
        addr
    }

    /// mm/vmalloc.c: `free_vmap_area_noflush`: the area joins the lazy
    /// tree (`merge_or_add_vmap_area` merges neighbours); returns the new
    /// `vmap_lazy_nr`.
    pub fn free_vmap_area_noflush(&mut self, a: VmArea) -> u64 {
        self.lazy_nr += (a.va_end() - a.va) >> PAGE_SHIFT;
        self.lazy.push((a.va, a.va_end()));
        self.lazy.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.lazy.len());
        for &(s, e) in &self.lazy {
            match merged.last_mut() {
                Some(last) if last.1 >= s => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.lazy = merged;
        self.lazy_nr
    }
}

/// mm/vmalloc.c: `lazy_max_pages`: 32 MiB of pages times
/// `fls(num_online_cpus())`.
pub fn lazy_max_pages(online_cpus: u32) -> u64 {
    let fls = (u32::BITS - online_cpus.leading_zeros()) as u64;
    fls * (32 << 20) / PAGE_SIZE
}

/// mm/vmalloc.c: `vmalloc` (`__vmalloc_node_range`) of `pages` pages as
/// object `obj`: a vmap area (`alloc_vmap_area`), a page per PTE
/// (`vmap_pages_range`), and a write of its first page.
pub fn vmalloc(
    w: &mut World,
    cpu: CpuId,
    obj: u8,
    pages: u32,
    reset_perms: bool,
    fx: &mut Effects,
) {
    let o = obj as usize;
    if w.vmap.objs.get(o).is_some_and(|a| a.is_some()) || pages == 0 {
        return;
    }
    let va = w.vmap.alloc_vmap_area((pages as u64 + 1) * PAGE_SIZE);
    for i in 0..pages as u64 {
        fx.cost(Cost::DoAnonymousPage, 1);
        if let Err(e) = map_one(w, cpu, va + i * PAGE_SIZE, fx) {
            w.violation(0, cpu, va, format!("vmalloc: {e}"));
            return;
        }
    }
    let v = &mut w.vmap;
    if v.objs.len() <= o {
        v.objs.resize(o + 1, None);
    }
    v.objs[o] = Some(VmArea {
        va,
        pages,
        flush_reset_perms: reset_perms,
    });
    crate::hw::mmu::kernel_access(w, cpu, va, fx);
}

/// mm/vmalloc.c: `vmap_pages_range` for one page: allocate it and set
/// its PTE in `init_mm`.
fn map_one(w: &mut World, cpu: CpuId, va: u64, fx: &mut Effects) -> Result<(), machine::Error> {
    let table = pte_alloc_walk(w, cpu, INIT_MM, va)?;
    let page = w.mem.alloc(FrameUse::Anon)?;
    let e = pte::make(page, pte::WRITE | pte::ACCESSED | pte::DIRTY);
    w.mem.write(table, table_index(va, 1), e);
    fx.label(Label::DoAnonymousPage { va, pfn: page });
    Ok(())
}

/// The address of object `obj` if it is allocated (a workload's pointer).
pub fn obj_va(w: &World, obj: u8) -> Option<u64> {
    w.vmap
        .objs
        .get(obj as usize)
        .copied()
        .flatten()
        .map(|a| a.va)
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `remove_vm_area`: unmap without a flush, free the area lazily.
    Unmap,
    /// `__purge_vmap_area_lazy`: take the lazy areas, one flush of their
    /// merged range; with `vm_reset_perms` (true) the range also spans the
    /// pages' direct-map addresses (`flush_dmap`): a full flush.
    Purge(Vec<Pfn>, bool),
    /// `purge_vmap_node`: the flushed areas (second) are free again.
    PurgeDone(Vec<Pfn>, Vec<(u64, u64)>),
    /// `__free_page` of each page.
    Free(Vec<Pfn>),
}

/// `vfree(obj)` in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Vfree {
    pub obj: u8,
    pub pc: Pc,
}

impl Vfree {
    pub fn new(obj: u8) -> Self {
        Vfree { obj, pc: Pc::Unmap }
    }

    /// mm/vmalloc.c: `vfree` → `remove_vm_area`, the purge when it is due
    /// (`drain_vmap_area_work`) or asked for (`vm_reset_perms`), then
    /// `__free_page` of each page.
    pub fn step(&mut self, w: &mut World, _cpu: CpuId, _task: TaskId, fx: &mut Effects) -> Flow {
        match std::mem::replace(&mut self.pc, Pc::Free(Vec::new())) {
            Pc::Unmap => self.remove_vm_area(w, fx),
            Pc::Purge(pages, dmap) => {
                let taken = std::mem::take(&mut w.vmap.lazy);
                let (Some(&(start, _)), Some(&(_, end))) = (taken.first(), taken.last()) else {
                    // Another purge took them (`nr_purge_nodes == 0`).
                    self.pc = Pc::Free(pages);
                    return Flow::Yield;
                };
                fx.label(Label::VmapPurge { start, end });
                w.vmap.purging.extend_from_slice(&taken);
                w.vmap.purges += 1;
                self.pc = Pc::PurgeDone(pages, taken);
                let end = if dmap { crate::TLB_FLUSH_ALL } else { end };
                crate::arch::flush_tlb_kernel_range(w, start, end)
            }
            Pc::PurgeDone(pages, taken) => {
                let freed = purge_vmap_node(w, &taken);
                fx.label(Label::VmapPurged { pages: freed });
                self.pc = Pc::Free(pages);
                Flow::Yield
            }
            Pc::Free(pages) => {
                fx.cost(Cost::FreePage, pages.len() as u32);
                if let Some(&first) = pages.first() {
                    fx.label(Label::FreePages {
                        n: pages.len() as u32,
                        first,
                    });
                }
                pages.into_iter().for_each(|p| w.mem.free(p));
                Flow::Return
            }
        }
    }

    /// mm/vmalloc.c: `remove_vm_area` → `free_unmap_vmap_area`:
    /// `vunmap_range_noflush` and `free_vmap_area_noflush`; a purge when
    /// `vmap_lazy_nr` passes `lazy_max_pages()` or the area has
    /// `VM_FLUSH_RESET_PERMS`.
    fn remove_vm_area(&mut self, w: &mut World, fx: &mut Effects) -> Flow {
        let Some(area) = w
            .vmap
            .objs
            .get_mut(self.obj as usize)
            .and_then(Option::take)
        else {
            return Flow::Return;
        };
        fx.cost(Cost::ZapFixed, 1);
        fx.cost(Cost::ZapPte, area.pages);
        let pages = vunmap_range_noflush(w, area);
        let nr_lazy = w.vmap.free_vmap_area_noflush(area);
        fx.label(Label::Vunmap {
            va: area.va,
            pages: area.pages,
            nr_lazy,
        });
        let due = nr_lazy > lazy_max_pages(w.cpus.len() as u32);
        self.pc = if due || area.flush_reset_perms {
            Pc::Purge(pages, area.flush_reset_perms)
        } else {
            Pc::Free(pages)
        };
        Flow::Yield
    }
}

/// mm/vmalloc.c: `vunmap_range_noflush`: clear the area's PTEs in
/// `init_mm`; returns the pages they mapped.
fn vunmap_range_noflush(w: &mut World, a: VmArea) -> Vec<Pfn> {
    let mut pages = Vec::with_capacity(a.pages as usize);
    for i in 0..a.pages as u64 {
        let va = a.va + i * PAGE_SIZE;
        let Some(table) = pte_table(w, INIT_MM, va) else {
            continue;
        };
        let e = w.mem.read(table, table_index(va, 1)).unwrap_or(0);
        if pte::present(e) {
            w.mem.write(table, table_index(va, 1), 0);
            pages.push(pte::pfn(e));
        }
    }
    pages
}

/// mm/vmalloc.c: `purge_vmap_node`: the flushed areas `taken` go back to
/// the free space (`reclaim_list_global`), `vmap_lazy_nr` drops by their
/// pages (returned).
fn purge_vmap_node(w: &mut World, taken: &[(u64, u64)]) -> u64 {
    let v = &mut w.vmap;
    v.purging.retain(|r| !taken.contains(r));
    let pages: u64 = taken.iter().map(|(s, e)| (e - s) >> PAGE_SHIFT).sum();
    v.lazy_nr -= pages;
    pages
}
