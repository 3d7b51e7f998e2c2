//! Architecture code (`arch/`), and the hooks generic mm code calls, each
//! dispatching on `machine.arch` as the kernel does at build time.
pub mod arm64;
pub mod asid;
pub mod riscv;
pub mod x86;

use crate::effects::{Effects, Label};
use crate::world::{Flow, Frame, World};
use crate::{MmId, TaskId, TLB_FLUSH_ALL};
use machine::scenario::Arch;
use machine::{Cost, CpuId, Pfn, PAGE_SHIFT, PAGE_SIZE};

/// `tlb_flush(tlb)` (arch/*/include/asm/tlb.h): flush what the gather covered.
pub fn tlb_flush(w: &mut World, task: TaskId, fx: &mut Effects) -> Flow {
    match w.cfg.arch {
        Arch::X86 => x86::tlb::tlb_flush(w, task),
        Arch::Arm64 => arm64::tlbflush::tlb_flush(w, task, fx),
        Arch::Riscv => riscv::tlbflush::tlb_flush(w, task),
    }
}

/// RISC-V `flush_tlb_range` / `flush_tlb_mm` / `flush_tlb_page`: all are
/// `__flush_tlb_range(mm, mm_cpumask(mm), ...)`.
fn riscv_flush_tlb_range(w: &World, mm: MmId, start: u64, end: u64) -> Flow {
    Flow::Call(Frame::RiscvFlushTlbRange(
        riscv::tlbflush::FlushTlbRange::new(w, Some(mm), start, end),
    ))
}

/// `flush_tlb_kernel_range(start, end)`: kernel mappings, every CPU.
pub fn flush_tlb_kernel_range(w: &mut World, start: u64, end: u64) -> Flow {
    match w.cfg.arch {
        Arch::Riscv => Flow::Call(Frame::RiscvFlushTlbRange(
            riscv::tlbflush::FlushTlbRange::new(w, None, start, end),
        )),
        Arch::X86 => Flow::Call(Frame::FlushTlbKernelRange(
            x86::tlb_kernel::FlushTlbKernelRange::new(start, end),
        )),
        Arch::Arm64 => unreachable!("kernel-range flushes are not modelled on arm64"),
    }
}

/// `flush_tlb_mm(mm)`: every translation of `mm`, on every CPU that may hold one.
/// x86 (arch/x86/include/asm/tlbflush.h): `flush_tlb_mm_range(mm, 0UL,
/// TLB_FLUSH_ALL, 0UL, true)`: `freed_tables` is true, so lazy CPUs in the
/// mask are IPI'd too.
pub fn flush_tlb_mm(w: &mut World, mm: MmId, fx: &mut Effects) -> Flow {
    match w.cfg.arch {
        Arch::X86 => Flow::Call(Frame::FlushTlbMmRange(x86::tlb::FlushTlbMmRange::new(
            mm,
            0,
            TLB_FLUSH_ALL,
            0,
            true,
        ))),
        Arch::Arm64 => {
            arm64::tlbflush::flush_tlb_mm(w, mm, fx);
            Flow::Yield
        }
        Arch::Riscv => riscv_flush_tlb_range(w, mm, 0, TLB_FLUSH_ALL),
    }
}

/// `pmdp_collapse_flush(vma, addr, pmdp)`'s flush, after the PMD is cleared:
/// x86 and arm64 use the generic one (mm/pgtable-generic.c), a
/// `flush_tlb_range` of the 2 MiB: x86's passes `freed_tables = true` (a PMD
/// zap unhooks a PTE table, so lazy CPUs are IPI'd too: "x86/mm: Fix
/// flush_tlb_range() when used for zapping normal PMDs", 6.1 stable); arm64's
/// is `__flush_tlb_range(vma, start, end, PAGE_SIZE, false, ...)`: 512
/// strides, a `TLBI ASIDE1IS` without FEAT_TLBIRANGE, a range TLBI with it,
/// broadcast, no IPI. RISC-V overrides it (arch/riscv/mm/pgtable.c):
/// `flush_tlb_mm`, since an address-specific `sfence.vma` leaves the old
/// non-leaf entry in the walk cache.
pub fn pmdp_collapse_flush(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    addr: u64,
    fx: &mut Effects,
) -> Flow {
    let end = addr + machine::HPAGE_SIZE;
    match w.cfg.arch {
        Arch::X86 => Flow::Call(Frame::FlushTlbMmRange(x86::tlb::FlushTlbMmRange::new(
            mm, addr, end, PAGE_SHIFT, true,
        ))),
        Arch::Arm64 => {
            // 512 strides: more than the checker's TLBI buffer holds, so the
            // TLBIs complete as issued; the leading dsb(ishst) still drains
            // the cleared PMD (a full barrier on this CPU: the sync's later
            // loads cannot pass it).
            arm64::tlbflush::flush_tlb_range_weak(w, cpu, mm, addr, end, false, fx);
            Flow::Yield
        }
        Arch::Riscv => riscv_flush_tlb_range(w, mm, 0, TLB_FLUSH_ALL),
    }
}

/// `flush_tlb_page(vma, va)` (as `ptep_clear_flush` uses it).
pub fn flush_tlb_page(w: &mut World, mm: MmId, va: u64, fx: &mut Effects) -> Flow {
    match w.cfg.arch {
        Arch::X86 => Flow::Call(Frame::FlushTlbMmRange(x86::tlb::FlushTlbMmRange::new(
            mm,
            va,
            va + PAGE_SIZE,
            PAGE_SHIFT,
            false,
        ))),
        Arch::Arm64 => {
            arm64::tlbflush::flush_tlb_page(w, mm, va, fx);
            Flow::Yield
        }
        Arch::Riscv => riscv_flush_tlb_range(w, mm, va, va + PAGE_SIZE),
    }
}

/// `switch_mm_irqs_off` / `switch_mm` as `context_switch` calls it for a task
/// with an mm.
pub fn switch_mm(w: &mut World, cpu: CpuId, next: MmId, fx: &mut Effects) {
    match w.cfg.arch {
        Arch::X86 if w.cfg.split_steps => x86::tlb::switch_mm_irqs_off_begin(w, cpu, next, fx),
        Arch::X86 => {
            x86::tlb::switch_mm_irqs_off(w, cpu, next, fx);
        }
        Arch::Arm64 => {
            arm64::tlbflush::switch_mm(w, cpu, next, fx);
        }
        Arch::Riscv => riscv::context::switch_mm(w, cpu, next, fx),
    }
}

/// `enter_lazy_tlb`: x86 keeps the old mm loaded and marks the CPU lazy;
/// arm64 and RISC-V have no lazy-TLB filtering (arm64 only updates the
/// saved TTBR0; RISC-V keeps `satp`).
pub fn enter_lazy_tlb(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    match w.cfg.arch {
        Arch::X86 => x86::tlb::enter_lazy_tlb(w, cpu, fx),
        Arch::Arm64 => arm64::tlbflush::enter_lazy_tlb(w, cpu, fx),
        Arch::Riscv => {}
    }
}

/// `ptep_set_access_flags` as `wp_page_reuse` calls it: install the more
/// permissive `entry`. x86 writes it and flushes nothing (a stale read-only
/// entry elsewhere costs a spurious fault); arm64 invalidates per the seed's
/// switch; RISC-V's `update_mmu_cache` does a local `sfence.vma`.
#[allow(clippy::too_many_arguments)]
pub fn ptep_set_access_flags(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    table: Pfn,
    idx: usize,
    va: u64,
    entry: u64,
    fx: &mut Effects,
) {
    match w.cfg.arch {
        Arch::X86 => w.mem.write(table, idx, entry),
        Arch::Arm64 => {
            arm64::fault::__ptep_set_access_flags(w, cpu, mm, table, idx, va, entry, true, fx);
        }
        Arch::Riscv => {
            w.mem.write(table, idx, entry);
            riscv_local_flush_tlb_page(w, cpu, va, fx);
        }
    }
}

/// RISC-V `local_flush_tlb_page`: `sfence.vma va, asid` on this hart.
fn riscv_local_flush_tlb_page(w: &mut World, cpu: CpuId, va: u64, fx: &mut Effects) {
    let asid = w.cpus[cpu as usize].tlbstate.loaded_mm_asid;
    w.cpus[cpu as usize].tlb.flush_one_leaf(asid, va);
    w.counters.sfence_vma += 1;
    fx.cost(Cost::SfenceVma, 1);
    fx.label(Label::SfenceVma {
        asid,
        va,
        all: false,
    });
}

/// `flush_tlb_fix_spurious_fault(vma, va, ptep)`: a no-op on x86
/// (arch/x86/include/asm/pgtable.h: `do { } while (0)`; the #PF already
/// dropped the faulting translation, SDM 4.10.4.1, [`fault_drops_entry`]);
/// arm64 per the seed's switch; RISC-V's `update_mmu_cache` flushes the
/// page locally.
pub fn flush_tlb_fix_spurious_fault(
    w: &mut World,
    cpu: CpuId,
    mm: MmId,
    va: u64,
    _write: bool,
    fx: &mut Effects,
) {
    match w.cfg.arch {
        Arch::X86 => {}
        Arch::Arm64 => arm64::fault::flush_tlb_fix_spurious_fault(w, cpu, mm, va, fx),
        Arch::Riscv => riscv_local_flush_tlb_page(w, cpu, va, fx),
    }
}

/// Does a permission fault drop the TLB entry that caused it? x86 does
/// (SDM 4.10.4.1); arm64 and RISC-V may keep it, so only the kernel's
/// spurious-fault flush gets rid of a stale read-only entry.
pub fn fault_drops_entry(w: &World) -> bool {
    w.cfg.arch == Arch::X86
}

/// `struct arch_tlbflush_unmap_batch` of the running architecture
/// (`current->tlb_ubc.arch`): what reclaim's deferred unmaps still owe.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArchTlbflushUnmapBatch {
    /// The CPUs to flush (and INVLPGB's `unmapped_pages`).
    X86(x86::tlb_kernel::ArchTlbflushUnmapBatch),
    /// The TLBIs already issued, waiting for their `DSB ISH`.
    Arm64(arm64::tlbflush::ArchTlbflushUnmapBatch),
    /// The harts to flush.
    Riscv(riscv::tlbflush::ArchTlbflushUnmapBatch),
}

impl ArchTlbflushUnmapBatch {
    /// An empty batch (`arch_tlbbatch_clear`).
    pub fn new(w: &World) -> Self {
        let mask = machine::CpuMask::new(w.cpus.len());
        match w.cfg.arch {
            Arch::X86 => Self::X86(x86::tlb_kernel::ArchTlbflushUnmapBatch {
                cpumask: mask,
                unmapped_pages: false,
            }),
            Arch::Arm64 => Self::Arm64(Default::default()),
            Arch::Riscv => Self::Riscv(riscv::tlbflush::ArchTlbflushUnmapBatch { cpumask: mask }),
        }
    }

    /// The same batch with CPU ids renamed (the checker's symmetry).
    pub fn permuted(&self, map: &[CpuId]) -> Self {
        let mut b = self.clone();
        match &mut b {
            Self::X86(x) => x.cpumask = x.cpumask.permuted(map),
            Self::Riscv(r) => r.cpumask = r.cpumask.permuted(map),
            Self::Arm64(_) => {}
        }
        b
    }
}

/// `arch_tlbbatch_should_defer(mm)` (`cpu` is `get_cpu()`'s).
pub fn arch_tlbbatch_should_defer(w: &World, cpu: CpuId, mm: MmId) -> bool {
    match w.cfg.arch {
        Arch::X86 => x86::tlb_kernel::arch_tlbbatch_should_defer(w, cpu, mm),
        Arch::Arm64 => arm64::tlbflush::arch_tlbbatch_should_defer(),
        // arch/riscv/mm/tlbflush.c: `arch_tlbbatch_should_defer`: true.
        Arch::Riscv => true,
    }
}

/// `arch_tlbbatch_add_pending(batch, mm, va)`.
pub fn arch_tlbbatch_add_pending(
    w: &mut World,
    cpu: CpuId,
    batch: &mut ArchTlbflushUnmapBatch,
    mm: MmId,
    va: u64,
    fx: &mut Effects,
) {
    match batch {
        ArchTlbflushUnmapBatch::X86(b) => x86::tlb_kernel::arch_tlbbatch_add_pending(w, b, mm, fx),
        ArchTlbflushUnmapBatch::Arm64(b) => {
            arm64::tlbflush::arch_tlbbatch_add_pending(w, cpu, b, mm, va, fx)
        }
        ArchTlbflushUnmapBatch::Riscv(b) => riscv::tlbflush::arch_tlbbatch_add_pending(w, b, mm),
    }
}

/// `arch_tlbbatch_flush(batch)`: x86's and RISC-V's IPI (a nested path),
/// arm64's is one `DSB ISH` done here.
pub fn arch_tlbbatch_flush(
    w: &mut World,
    cpu: CpuId,
    batch: ArchTlbflushUnmapBatch,
    fx: &mut Effects,
) -> Flow {
    match batch {
        ArchTlbflushUnmapBatch::X86(b) => Flow::Call(Frame::ArchTlbbatchFlush(
            x86::tlb_kernel::ArchTlbbatchFlush::new(b),
        )),
        ArchTlbflushUnmapBatch::Arm64(b) => {
            arm64::tlbflush::arch_tlbbatch_flush(w, cpu, b, fx);
            Flow::Yield
        }
        ArchTlbflushUnmapBatch::Riscv(b) => Flow::Call(Frame::RiscvFlushTlbRange(
            riscv::tlbflush::FlushTlbRange::tlbbatch(w, b),
        )),
    }
}
