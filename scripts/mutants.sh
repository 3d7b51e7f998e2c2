#!/bin/sh
# Mutation testing of the modelled flush paths (docs/mutants.md).
# Usage: scripts/mutants.sh [extra cargo-mutants args, e.g. --shard 1/4 | --list]
# Run it in a checkout of its own (it mutates the tree in place):
#   git worktree add /tmp/mutants-run HEAD && cp -a target /tmp/mutants-run/
#   cd /tmp/mutants-run && scripts/mutants.sh --shard 1/4
# Needs cargo-mutants (scripts/install-mutants.sh). nice: other builds first.
set -eu
RE='FlushTlbMmRange::step|flush_tlb_func|native_flush_tlb_multi|switch_mm_irqs_off'
RE="$RE|tlb_finish_mmu|tlb_remove_table_sync_one"
RE="$RE|FlushTlbRange::|may_defer|enqueue|local_tlb_flush_queue_drain"
RE="$RE|__ptep_set_access_flags|flush_tlb_fix_spurious_fault|local_flush_tlb_page"
exec nice -n 15 cargo mutants --in-place --baseline=skip \
    -f crates/kernel/src/arch/x86/tlb.rs \
    -f crates/kernel/src/mm/mmu_gather.rs \
    -f crates/kernel/src/arch/riscv/tlbflush.rs \
    -f crates/kernel/src/arch/arm64/fault.rs \
    -f crates/kernel/src/arch/arm64/tlbflush.rs \
    -f crates/kernel/src/arch/mod.rs \
    --re "$RE" \
    --test-package kernel --test-package sim \
    --timeout 120 --build-timeout 900 "$@"
