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
    /// Architecture of the guest (with --guest): x86_64 (this host's kernel,
    /// KVM when usable), riscv64 or arm64 (Debian's 6.12 kernels under QEMU
    /// TCG with the cross-built agent: scripts/install-guest-cross.sh, then
    /// scripts/build-guest-agent.sh).
    #[arg(long, default_value = "x86_64")]
    arch: String,
    /// Children forked per fork row (riscv64 and arm64 guests; 0: no fork rows).
    #[arg(long, default_value_t = 100)]
    forks: u64,
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
        arch,
        forks,
        paravirt,
        timeout,
    } = args;
    let arch = bench_arch(&arch)?;
    if guest && arch != GuestArchName::X86_64 {
        return validate_guest_cross(profile, &arch, iterations, cpus, forks, timeout);
    }
    if guest {
        return validate_guest(profile, iterations, cpus, &paravirt, timeout);
    }
    if arch != GuestArchName::X86_64 {
        return Err(Error::Config(
            "--arch riscv64 or arm64 validates against a guest: add --guest".into(),
        ));
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

/// The traced collapse round's events (the recorded round of `mib` MiB
/// after an untraced one), per 2 MiB collapse; information.
#[cfg(target_os = "linux")]
fn print_collapse_trace(by: &[(String, u64)], mib: u64) {
    if by.is_empty() {
        return;
    }
    let collapses = (mib / 2).max(1) as f64;
    println!(
        "traced collapse round ({} collapses): events per collapse",
        collapses
    );
    for (k, n) in by {
        println!("  {:<72} {:>8.3}", k, *n as f64 / collapses);
    }
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
            arch: bench::guest::GuestArch::X86_64,
            cpus,
            paravirt: pv,
            madvise_iterations: iterations,
            collapse_mib: 64,
            collapse_rounds: 2,
            forks: 0,
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
        print_collapse_trace(&g.collapse_trace, plan.collapse_mib);
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

/// The guest architecture named by `--arch`.
#[cfg(target_os = "linux")]
type GuestArchName = bench::guest::GuestArch;

#[cfg(target_os = "linux")]
fn bench_arch(s: &str) -> Result<GuestArchName, Error> {
    bench::guest::GuestArch::parse(s)
}

#[cfg(not(target_os = "linux"))]
#[derive(PartialEq)]
enum GuestArchName {
    X86_64,
    Other,
}

#[cfg(not(target_os = "linux"))]
fn bench_arch(s: &str) -> Result<GuestArchName, Error> {
    Ok(if s.starts_with("x86") {
        GuestArchName::X86_64
    } else {
        GuestArchName::Other
    })
}

#[cfg(not(target_os = "linux"))]
fn validate_guest_cross(
    _: Option<String>,
    _: &GuestArchName,
    _: u64,
    _: u32,
    _: u64,
    _: u64,
) -> Result<u8, Error> {
    Err(Error::Unsupported(
        "validate --guest needs a Linux host".into(),
    ))
}

/// A guest row of a riscv64 or arm64 guest: IPIs per operation, judged
/// within validate's count tolerance (10%) or [`CROSS_ABS_SLACK`] IPIs per
/// op, whichever is larger (a model count of 0 against a guest's stray IPI
/// every few hundred ops is a match, not an infinite ratio).
pub struct CrossRow {
    pub metric: String,
    pub guest: f64,
    pub model: f64,
    /// Judged (false: shown for information).
    pub judged: bool,
}

/// Absolute slack of a cross guest's per-op IPI rows.
pub const CROSS_ABS_SLACK: f64 = 0.05;

impl CrossRow {
    pub fn ok(&self) -> bool {
        !self.judged
            || (self.model - self.guest).abs()
                <= (tlblab::calibrate::COUNT_TOLERANCE * self.guest.abs()).max(CROSS_ABS_SLACK)
    }
}

/// Prints the rows as `validate` does; returns whether all judged rows are ok.
fn print_cross(rows: &[CrossRow]) -> bool {
    println!(
        "{:<48} {:>10} {:>10} {:>8} {:>10}",
        "metric", "guest", "model", "diff", "within"
    );
    for r in rows {
        let verdict = match (r.judged, r.ok()) {
            (false, _) => "(info)",
            (true, true) => "ok",
            (true, false) => "OUT",
        };
        println!(
            "{:<48} {:>10.3} {:>10.3} {:>+8.3} {:>10}",
            r.metric,
            r.guest,
            r.model,
            r.model - r.guest,
            verdict
        );
    }
    rows.iter().all(CrossRow::ok)
}

/// A row of a guest run per op, less the guest's own background traffic
/// over the same time where the benchmark measured it (`background_<row>`).
#[cfg(target_os = "linux")]
fn per_op(h: &bench::HostReport, row: &str) -> f64 {
    let bg = h
        .arch
        .get(&format!("background_{row}"))
        .copied()
        .unwrap_or(0);
    h.interrupt_totals
        .get(row)
        .copied()
        .unwrap_or(0)
        .saturating_sub(bg) as f64
        / h.op_count().max(1) as f64
}

/// `tlblab validate --guest --arch riscv64|arm64`: one guest boot (Debian's
/// 6.12 kernel under QEMU TCG, the cross-built agent as PID 1) and the same
/// workloads in the model at `machine.arch` of the guest and its vCPU count.
#[cfg(target_os = "linux")]
fn validate_guest_cross(
    profile: Option<String>,
    arch: &GuestArchName,
    iterations: u64,
    cpus: u32,
    forks: u64,
    timeout: u64,
) -> Result<u8, Error> {
    let plan = bench::guest::GuestPlan {
        arch: *arch,
        cpus,
        paravirt: false,
        madvise_iterations: iterations,
        collapse_mib: 64,
        collapse_rounds: 2,
        forks,
        timeout: std::time::Duration::from_secs(timeout),
    };
    let t0 = std::time::Instant::now();
    let g = bench::guest::run(&plan)?;
    let boot_s = t0.elapsed().as_secs_f64();
    let rows = cross_rows(profile.as_deref(), &plan, &g)?;
    println!(
        "guest {} {} (QEMU TCG, {cpus} vCPUs on {} host CPUs, {boot_s:.0} s wall)",
        arch.name(),
        g.kernel,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let ok = print_cross(&rows);
    print_collapse_trace(&g.collapse_trace, plan.collapse_mib);
    for (label, h) in [
        ("fork+exit (1 child)", &g.fork_one),
        ("fork+exit, born on its CPU", &g.fork_placed),
        ("mmapstress01", &g.fork_ltp),
    ] {
        let Some(h) = h else { continue };
        let n = h.op_count().max(1) as f64;
        let per: Vec<String> = h
            .interrupts
            .get("CAL")
            .into_iter()
            .flatten()
            .map(|c| format!("{:.2}", *c as f64 / n))
            .collect();
        println!("{label}: CAL per fork by CPU: {}", per.join(" "));
    }
    if let Some(h) = g
        .fork_ltp
        .as_ref()
        .filter(|h| h.arch.contains_key("traced"))
    {
        let n = h.op_count().max(1) as f64;
        println!(
            "mmapstress01 (LTP's shape), traced: {:.0} us of guest time per fork; per fork:",
            h.sim_time_ns as f64 / n / 1000.0
        );
        for (k, v) in h
            .arch
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "traced" | "parent_pid"))
        {
            println!("  {k:<46} {:>10.3}", *v as f64 / n);
        }
        for l in h.host["sched_domains"].as_array().into_iter().flatten() {
            println!("  sched domain of CPU0: {}", l.as_str().unwrap_or(""));
        }
        for l in h.host["parent_migrations"].as_array().into_iter().flatten() {
            println!("  {}", l.as_str().unwrap_or(""));
        }
    }
    if !g.fork_placed_ipis.is_empty() {
        println!(
            "fork+exit, born on its CPU, traced (csd:csd_queue_cpu, ipi:ipi_send_cpu): per fork, by function"
        );
        let mut by = g.fork_placed_ipis.clone();
        by.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (cb, n) in by {
            println!("  {cb:<46} {n:>10.3}");
        }
    }
    Ok(u8::from(!ok))
}

/// The model's side of a cross guest's rows: the x86 guest's scenarios
/// (default madvise with `cpus − 1` busy threads, skip-sync-collapse) and
/// mmapstress01 with the guest's children (LTP's shape on the guest's
/// `flat` topology), at `machine.arch` of the guest and its vCPU count.
#[cfg(target_os = "linux")]
pub fn cross_rows(
    profile: Option<&str>,
    plan: &bench::guest::GuestPlan,
    g: &bench::guest::GuestRun,
) -> Result<Vec<CrossRow>, Error> {
    use machine::scenario::Arch;
    let arch = plan.arch.model_arch();
    let model_arch = match plan.arch {
        bench::guest::GuestArch::Riscv64 => Arch::Riscv,
        bench::guest::GuestArch::Arm64 => Arch::Arm64,
        bench::guest::GuestArch::X86_64 => Arch::X86,
    };
    let p = tlblab::calibrate::qemu_guest_idle(tlblab::load_profile(profile, model_arch)?);
    let cpus = plan.cpus;
    let run = |name: &str, knobs: &[String]| -> Result<sim::Report, Error> {
        let mut s = tlblab::load_scenario(name)?;
        s.set(&format!("machine.arch={arch}"))?;
        s.set(&format!("machine.cpus={cpus}"))?;
        for kv in knobs {
            s.set(kv)?;
        }
        let (m, _) = tlblab::run_with_profile(&s, p.clone(), &tlblab::RunOptions::default())?;
        Ok(m)
    };
    let total =
        |m: &sim::Report, row: &str| m.interrupt_totals.get(row).copied().unwrap_or(0) as f64;
    let m = run(
        "default",
        &[
            format!("workload.threads={}", cpus - 1),
            format!(
                "workload.iterations={}",
                plan.madvise_iterations.min(20_000)
            ),
        ],
    )?;
    let mn = m.main_op().map_or(1, |o| o.count.max(1)) as f64;
    let mc = run(
        "skip-sync-collapse",
        &[format!("workload.size={}MiB", plan.collapse_mib)],
    )?;
    let collapses = mc.arch["collapses"].max(1) as f64;
    let row = |metric: &str, guest: f64, model: f64, judged: bool| CrossRow {
        metric: metric.to_string(),
        guest,
        model,
        judged,
    };
    let mut rows = vec![
        row(
            &format!("madvise x{} busy: CAL per op", cpus - 1),
            per_op(&g.madvise, "CAL"),
            total(&m, "CAL") / mn,
            true,
        ),
        row(
            "madvise: RES per op",
            per_op(&g.madvise, "RES"),
            total(&m, "RES") / mn,
            false,
        ),
        row(
            "MADV_COLLAPSE: CAL per collapse",
            per_op(&g.collapse, "CAL"),
            total(&mc, "CAL") / collapses,
            true,
        ),
    ];
    // The traced collapse round (6.4+ kernels: `csd:csd_queue_cpu` names
    // the function of each request): the collapse's own requests, the
    // sync's, without the tick's work that lands in the same CAL row
    // (`nohz_csd_func`, RCU's wake-ups: docs/guests.md). The model's: every
    // request its collapses queued (`csd_queued`: one to each other CPU
    // per `tlb_remove_table_sync_one`; the collapsing task's mm is loaded
    // nowhere else, so its flushes queue none).
    let sync: u64 = g
        .collapse_trace
        .iter()
        .filter(|(k, _)| k.starts_with("csd_queue_cpu func=tlb_remove_table_smp_sync "))
        .map(|(_, n)| n)
        .sum();
    if sync > 0 {
        rows.push(row(
            "MADV_COLLAPSE: sync requests per collapse (traced)",
            sync as f64 / (plan.collapse_mib / 2).max(1) as f64,
            mc.arch["csd_queued"] as f64 / collapses,
            true,
        ));
    }
    rows.extend([row(
        "collapses (thp_collapse_alloc)",
        g.collapse
            .arch
            .get("thp_collapse_alloc")
            .copied()
            .unwrap_or(0) as f64,
        mc.arch["collapses"] as f64 * plan.collapse_rounds as f64,
        true,
    )]);
    for (report, label) in [
        (&g.fork_one, "one"),
        (&g.fork_placed, "placed"),
        (&g.fork_ltp, "ltp"),
    ] {
        let Some(h) = report else { continue };
        let children = h.scenario["workload"]["threads"].as_u64().unwrap_or(1);
        // QEMU's virt machine: one cluster, no cache nodes, so the MC
        // domain spans every vCPU and is the LLC (arch_topology.c:
        // cpu_coregroup_mask); the model's `flat` topology.
        // Each row's own shape: the benchmark's placement (a child born on
        // CPU0 that pins itself, or born on its own CPU) or LTP's (the
        // fair class places every task).
        let workload = match label {
            "one" => "workload.name=fork_exit",
            "placed" => "workload.name=fork_exit_placed",
            _ => "workload.name=mmapstress01",
        };
        let mf = run(
            "mmapstress01",
            &[
                workload.into(),
                "machine.migrate_pct=0".into(),
                "machine.topology=flat".into(),
                format!("workload.threads={children}"),
                format!("workload.iterations={}", h.op_count()),
            ],
        )?;
        let forks = mf.arch["forks"].max(1) as f64;
        let name = match label {
            "one" => "fork+exit (1 child)".to_string(),
            "placed" => "fork+exit, born on its CPU".to_string(),
            _ => format!("mmapstress01 (LTP) x{children}"),
        };
        // LTP's shape is traced: its flush IPIs are judged (the model's: its
        // CAL less the IPIs of its wake-list wake-ups); the rest of the
        // guest's CAL (other wake-ups, idle-balance kicks) is not judged.
        let traced = h.arch.contains_key("traced");
        rows.push(row(
            &format!("{name}: CAL per fork"),
            per_op(h, "CAL"),
            total(&mf, "CAL") / forks,
            !traced,
        ));
        if traced {
            let n = h.op_count().max(1) as f64;
            let get = |k: &str| h.arch.get(k).copied().unwrap_or(0) as f64;
            rows.push(row(
                &format!("{name}: flush IPIs per fork (traced)"),
                get("flush_ipis") / n,
                (total(&mf, "CAL") - mf.arch.get("ttwu_ipis").copied().unwrap_or(0) as f64) / forks,
                true,
            ));
            rows.push(row(
                &format!("{name}: moves (guest: the parent's; model: any task's)"),
                get("parent_migrations"),
                mf.arch["sched_migrations"] as f64,
                false,
            ));
        }
        // Where they land: CPU0 runs the forking parent; a child is born
        // there (it inherits the parent's affinity) before it pins itself.
        let cpu0 = h.interrupts.get("CAL").and_then(|v| v.first()).copied();
        rows.push(row(
            &format!("{name}: CAL to CPU0 per fork"),
            cpu0.unwrap_or(0) as f64 / h.op_count().max(1) as f64,
            mf.interrupts.cal.first().copied().unwrap_or(0) as f64 / forks,
            false,
        ));
        rows.push(row(
            &format!("{name}: RES per fork"),
            per_op(h, "RES"),
            total(&mf, "RES") / forks,
            false,
        ));
    }
    Ok(rows)
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
