//! Calibration against the host kernel. Ignored by default; `.ci/run` runs it
//! with `--ignored` where the host has 2 CPUs and TLB/CAL rows.

#[test]
#[ignore = "needs the host kernel: 2 CPUs and TLB/CAL rows in /proc/interrupts"]
fn calibrated_profile_reproduces_the_host_and_reads_back() {
    if let Some(why) = bench::host_unsuitable() {
        panic!("this host cannot run the host tests: {why}");
    }
    let c = tlblab::calibrate::calibrate(20_000).expect("calibration");
    // The fitted rows: the madvise path (two), lat_pagefault (the file-fault
    // pair, one scale) and the collapse path (two populations, two prices:
    // solved exactly up to the model's jitter).
    let fitted = c.rows[..2].iter().chain(
        c.rows
            .iter()
            .filter(|r| r.metric.starts_with("collapse") || r.metric.starts_with("lat_pagefault")),
    );
    assert_eq!(fitted.clone().count(), 5);
    for r in fitted {
        assert!(
            (r.after / r.host - 1.0).abs() < 0.05,
            "{}: host {} model {}",
            r.metric,
            r.host,
            r.after
        );
    }
    let text = c.profile.to_toml();
    let back = machine::CostProfile::from_toml(&text, "calibrated").unwrap();
    assert_eq!(back.name, "calibrated");
    assert!(back
        .source(machine::Cost::IpiDelivery)
        .contains("fitted on host"));
    for cost in [
        machine::Cost::CollapseSetup,
        machine::Cost::CollapseCopyPage,
    ] {
        assert!(back.source(cost).contains("MADV_COLLAPSE"));
        assert!(back.ns(cost) >= 0.0);
    }
    for cost in [machine::Cost::FilemapFault, machine::Cost::FaultAroundPte] {
        assert!(back.source(cost).contains("lat_pagefault"));
        assert!(back.ns(cost) > 0.0);
    }
}
