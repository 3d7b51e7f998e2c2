//! Seed x86-flush-tlb-info-on-stack: the madvise benchmark's us/op for the
//! three placements of `struct flush_tlb_info`.
mod common;
use common::*;

fn us_per_op(placement: &str) -> f64 {
    let s = scenario(
        "flush-tlb-info-madvise",
        &[
            "workload.iterations=20000",
            "machine.jitter_pct=0",
            &format!("x86.flush_tlb_info={placement}"),
        ],
    );
    run(&s).main_op().unwrap().latency_ns.mean / 1000.0
}

/// The per-CPU slot and an aligned stack slot are each one cache line that
/// the initiator writes and the three targets read: the same work, so the
/// same time. An unaligned 40-byte struct at offset 32 spans two lines: one
/// more ownership request by the initiator and one more read per target.
#[test]
fn aligned_matches_percpu_and_unaligned_is_slower() {
    let percpu = us_per_op("percpu");
    let aligned = us_per_op("stack_aligned");
    let unaligned = us_per_op("stack_unaligned");
    assert_eq!(aligned, percpu);
    // The second line is missed together with the first (the misses
    // overlap): one `cache_line_concurrent` for the initiator's ownership
    // request, and one for the target that acks last, on the critical
    // path of every madvise (one flush per op): 28 ns of ~2.97 us, +0.94%.
    // Derived from the prices; the seed's published +0.9% is not used.
    let line = machine::CostProfile::default_x86().ns(machine::Cost::CacheLineConcurrent);
    let extra_ns = (unaligned - percpu) * 1000.0;
    assert!(
        (extra_ns - 2.0 * line).abs() < 0.01,
        "unaligned costs {extra_ns} ns more per op, expected 2 x {line}"
    );
}

/// With the line offset moved so the 40-byte struct fits one line, the
/// unaligned variant costs exactly what the aligned one does: the cost comes
/// from straddling, not from the variant's name.
#[test]
fn unaligned_that_fits_one_line_costs_nothing() {
    let s = |p: &str, off: u32| {
        scenario(
            "flush-tlb-info-madvise",
            &[
                "workload.iterations=5000",
                &format!("x86.flush_tlb_info={p}"),
                &format!("x86.flush_tlb_info_stack_offset={off}"),
            ],
        )
    };
    let aligned = run(&s("stack_aligned", 0))
        .main_op()
        .unwrap()
        .latency_ns
        .mean;
    let fits = run(&s("stack_unaligned", 24))
        .main_op()
        .unwrap()
        .latency_ns
        .mean;
    let straddles = run(&s("stack_unaligned", 32))
        .main_op()
        .unwrap()
        .latency_ns
        .mean;
    assert_eq!(aligned, fits);
    assert!(straddles > fits);
}
