//! Calibration against the host kernel (skipped where the host cannot run it).

#[test]
fn calibrated_profile_reproduces_the_host_and_reads_back() {
    if let Some(why) = bench::host_unsuitable() {
        eprintln!("skipped: {why}");
        return;
    }
    let c = tlblab::calibrate::calibrate(20_000).expect("calibration");
    for r in &c.rows[..2] {
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
}
