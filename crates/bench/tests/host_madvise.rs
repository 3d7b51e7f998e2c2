//! The real kernel: madvise(MADV_DONTNEED) with one busy thread.
//! Ignored by default (needs the host kernel); `.ci/run` runs it with
//! `--ignored` where the host has 2 CPUs and TLB/CAL rows, and it fails, not
//! passes, when run on a host without them.

#[test]
#[ignore = "needs the host kernel: 2 CPUs and TLB/CAL rows in /proc/interrupts"]
fn madvise_on_the_host_counts_shootdowns_in_tlb_and_cal() {
    if let Some(why) = bench::host_unsuitable() {
        panic!("this host cannot run the host tests: {why}");
    }
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let r = bench::run("madvise_dontneed", 1, 20_000).expect("host run");
    let (tlb, cal) = (r.interrupt_totals["TLB"], r.interrupt_totals["CAL"]);
    assert_eq!(r.op_count(), 20_000);
    // One busy thread: at most one shootdown per madvise (plus other
    // processes' shootdowns on a busy host), and on x86 each shootdown is a
    // call-function IPI, so it counts in CAL too.
    assert!(tlb > 0, "the busy thread's CPU received shootdowns");
    assert!(cal >= tlb, "TLB {tlb} CAL {cal}");
    assert!(r.us_per_op() > 0.0);
    let after = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert_eq!(
        after, ncpu,
        "the benchmark leaves the caller's CPU affinity as it found it"
    );
    assert!(bench::run("nosuch", 1, 10).is_err());
    assert!(
        bench::run("madvise_dontneed", ncpu as u32, 10).is_err(),
        "too few CPUs is an error"
    );
}
