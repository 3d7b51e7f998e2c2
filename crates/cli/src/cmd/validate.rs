//! `tlblab validate`: host (or a QEMU guest) against the model on what the calibration did not fit.

use machine::Error;

#[derive(clap::Args)]
pub struct Args {
    /// Profile to validate (default: calibrate now).
    #[arg(long)]
    profile: Option<String>,
    #[arg(long, default_value_t = 1000)]
    iterations: u64,
    /// Validate against a Linux guest booted under QEMU instead of this host
    /// (needs scripts/install-guest.sh; KVM when /dev/kvm opens, else TCG).
    #[arg(long)]
    guest: bool,
    /// vCPUs of the guest (with --guest).
    #[arg(long, default_value_t = 8)]
    cpus: u32,
    /// Paravirtual TLB flush in the guest: on, off or both (with --guest; on needs KVM).
    #[arg(long, default_value = "both")]
    paravirt: String,
    /// Seconds to wait for each guest boot.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args {
        profile,
        iterations,
        guest,
        cpus,
        paravirt,
        timeout,
    } = args;
    if guest {
        return validate_guest(profile, iterations, cpus, &paravirt, timeout);
    }
    let p = match profile {
        Some(path) => tlblab::load_profile(Some(&path), machine::scenario::Arch::X86)?,
        None => tlblab::calibrate::calibrate(50_000)?.profile,
    };
    let before = std::fs::read_to_string("/proc/stat").ok();
    let rows = tlblab::calibrate::validate(&p, iterations)?;
    let after = std::fs::read_to_string("/proc/stat").ok();
    let ok = print_checks("host", &rows);
    if let (Some(b), Some(a)) = (before, after) {
        if let Some(why) = host_noise(&b, &a) {
            println!("note: this host cannot give a clean measurement: {why}");
        }
    }
    Ok(u8::from(!ok))
}

/// What kept the host from a clean measurement between two `/proc/stat`
/// snapshots: CPU time stolen by the hypervisor (a VM whose vCPUs wait for
/// the host), or other tasks runnable at the end. `None`: neither.
pub fn host_noise(before: &str, after: &str) -> Option<String> {
    let cpu = |t: &str| -> Option<Vec<u64>> {
        let line = t.lines().find(|l| l.starts_with("cpu "))?;
        line.split_whitespace()
            .skip(1)
            .map(|v| v.parse().ok())
            .collect()
    };
    let (b, a) = (cpu(before)?, cpu(after)?);
    let delta: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| x.saturating_sub(*y))
        .collect();
    let total: u64 = delta.iter().take(8).sum();
    let steal = delta.get(7).copied().unwrap_or(0) as f64 / total.max(1) as f64;
    let running: u64 = after
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    let mut why = Vec::new();
    if steal > 0.01 {
        why.push(format!(
            "{:.1}% of CPU time stolen by the hypervisor",
            steal * 100.0
        ));
    }
    if running > 1 {
        why.push(format!("{} other runnable task(s) at the end", running - 1));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// A validation table: metric, `source` (host or guest), model, ratio,
/// tolerance and the host's spread, with the verdict. Returns whether
/// every row is within.
fn print_checks(source: &str, rows: &[tlblab::calibrate::Check]) -> bool {
    println!(
        "{:<32} {:>12} {:>12} {:>8} {:>10} {:>8}",
        "metric", source, "model", "ratio", "within", "spread"
    );
    for r in rows {
        let ratio = r.model / r.host.max(1e-12);
        let (h, m) = (r.host, r.model);
        if r.tolerance.is_infinite() {
            println!(
                "{:<32} {h:>12.4} {m:>12.4} {ratio:>8.3}     (info)",
                r.metric
            );
            continue;
        }
        // A row is OUT only beyond both the tolerance and the host's own
        // run-to-run spread.
        println!(
            "{:<32} {h:>12.4} {m:>12.4} {ratio:>8.3} {:>9.0}% {:>7.0}% {}",
            r.metric,
            r.tolerance * 100.0,
            r.spread * 100.0,
            if r.ok() { "ok" } else { "OUT" }
        );
    }
    rows.iter().all(|r| r.ok())
}

/// `tlblab validate --guest`: one table per guest boot (paravirt off / on).
#[cfg(target_os = "linux")]
fn validate_guest(
    profile: Option<String>,
    iterations: u64,
    cpus: u32,
    paravirt: &str,
    timeout: u64,
) -> Result<u8, Error> {
    let modes: &[bool] = match paravirt {
        "off" => &[false],
        "on" => &[true],
        "both" if bench::guest::kvm_usable() => &[false, true],
        "both" => {
            eprintln!(
                "note: KVM unusable ({}): TCG guest, paravirt flush off only",
                bench::guest::kvm_unusable_reason().unwrap_or("?")
            );
            &[false]
        }
        other => {
            return Err(Error::Config(format!(
                "--paravirt {other} (expected on, off or both)"
            )))
        }
    };
    let p = tlblab::load_profile(profile.as_deref(), machine::scenario::Arch::X86)?;
    let mut all = true;
    for &pv in modes {
        let plan = bench::guest::GuestPlan {
            cpus,
            paravirt: pv,
            madvise_iterations: iterations,
            collapse_mib: 64,
            collapse_rounds: 2,
            timeout: std::time::Duration::from_secs(timeout),
        };
        let v = tlblab::calibrate::validate_guest(&p, &plan)?;
        let g = &v.run;
        println!(
            "guest {} ({}, {cpus} vCPUs on {} host CPUs), paravirt flush {} (guest kernel chose {}), busy vCPUs preempted {:.1}% of the time",
            g.kernel,
            g.accel,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            if pv { "offered" } else { "hidden" },
            if g.pv_tlb_flush { "kvm_flush_tlb_multi" } else { "native_flush_tlb_multi" },
            g.steal_fraction * 100.0
        );
        all &= print_checks("guest", &v.rows);
        for (metric, h, m) in &v.info {
            println!(
                "{metric:<32} {h:>12.2} {m:>12.2} {:>8.3} {:>10}",
                m / h.max(1e-12),
                "(info)"
            );
        }
        println!();
    }
    Ok(u8::from(!all))
}

#[cfg(not(target_os = "linux"))]
fn validate_guest(_: Option<String>, _: u64, _: u32, _: &str, _: u64) -> Result<u8, Error> {
    Err(Error::Unsupported(
        "validate --guest needs a Linux host".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::host_noise;

    const QUIET: &str = "cpu  100 0 50 800 0 0 0 0 0 0\nprocs_running 1\n";

    #[test]
    fn steal_and_runnable_tasks_make_a_noisy_host() {
        let stolen = "cpu  200 0 100 1550 0 0 0 100 0 0\nprocs_running 1\n";
        let busy = "cpu  200 0 100 1700 0 0 0 0 0 0\nprocs_running 3\n";
        let quiet = "cpu  200 0 100 1700 0 0 0 1 0 0\nprocs_running 1\n";
        let m = host_noise(QUIET, stolen).expect("steal");
        assert!(m.starts_with("10.0% of CPU time stolen"), "{m}");
        assert_eq!(
            host_noise(QUIET, busy).unwrap(),
            "2 other runnable task(s) at the end"
        );
        assert_eq!(
            host_noise(QUIET, quiet),
            None,
            "0.1% steal is noise-free enough"
        );
        assert_eq!(host_noise("garbage", QUIET), None);
    }
}
