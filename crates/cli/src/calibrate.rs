//! `tlblab calibrate`: fit the cost profile to this host.
//!
//! Two host runs of the seed's madvise program pin down two things the model
//! must reproduce: the local path (write fault + madvise + local INVLPG, no
//! other CPU in the mm) and the extra cost of one remote shootdown (one busy
//! thread on another CPU). The local-path prices are scaled together by the
//! ratio host/model; then `ipi_delivery`, which sits once on the critical
//! path of a remote flush, absorbs the remaining difference. Counts are not
//! fitted: they must already agree (see `tlblab bench --vs-model`).

use crate::{load_scenario, run_with_profile, RunOptions};
use machine::{Cost, CostProfile, Error};

/// One row of the calibration table: metric, host, default model, calibrated model.
pub struct Row {
    pub metric: &'static str,
    pub host: f64,
    pub before: f64,
    pub after: f64,
}

/// The fitted profile and how it compares.
pub struct Calibration {
    pub profile: CostProfile,
    pub rows: Vec<Row>,
}

fn model(
    cpus: usize,
    threads: u32,
    iterations: u64,
    p: &CostProfile,
) -> Result<(f64, f64, f64), Error> {
    let mut s = load_scenario("default")?;
    s.set(&format!("machine.cpus={cpus}"))?;
    s.set(&format!("workload.threads={threads}"))?;
    s.set(&format!("workload.iterations={iterations}"))?;
    let (r, _) = run_with_profile(&s, p.clone(), &RunOptions::default())?;
    let o = r
        .main_op()
        .ok_or_else(|| Error::Config("model run measured nothing".into()))?;
    let n = o.count.max(1) as f64;
    Ok((
        o.latency_ns.mean / 1000.0,
        r.interrupt_totals["TLB"] as f64 / n,
        r.interrupt_totals["CAL"] as f64 / n,
    ))
}

/// Measure the host and fit the profile.
pub fn calibrate(iterations: u64) -> Result<Calibration, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if ncpu < 2 {
        return Err(Error::Unsupported(
            "calibration needs 2 CPUs (one busy thread on another CPU)".into(),
        ));
    }
    let local = median_run("madvise_dontneed", 0, iterations)?;
    let remote = median_run("madvise_dontneed", 1, iterations)?;
    let (h_local, h_remote) = (local.us_per_op(), remote.us_per_op());
    let n = remote.op_count().max(1) as f64;
    let (h_tlb, h_cal) = (
        remote.interrupt_totals["TLB"] as f64 / n,
        remote.interrupt_totals["CAL"] as f64 / n,
    );
    let kernel = remote.host["kernel"].as_str().unwrap_or("?").to_string();

    let mut base = CostProfile::default_x86();
    (base.idle_polls, base.idle_source) = host_idle();
    let it = iterations.min(50_000);
    let (m_local, _, _) = model(ncpu, 0, it, &base)?;
    let (m_remote, m_tlb, m_cal) = model(ncpu, 1, it, &base)?;
    let k = h_local / m_local;
    let mut p = base.clone();
    for c in Cost::ALL
        .iter()
        .copied()
        .filter(|c| *c != Cost::IpiDelivery)
    {
        p.set(c, base.ns(c) * k);
        p.set_source(
            c,
            format!(
                "calibrated on host kernel {kernel}: x{k:.3} of x86-icelake ({})",
                base.source(c)
            ),
        );
    }
    // Fit ipi_delivery by secant steps: the model's us/op is close to, but
    // not exactly, linear in it (coalescing and the busy thread's timing move).
    let mut x0 = base.ns(Cost::IpiDelivery);
    let (mut f0, _, _) = model(ncpu, 1, it, &p)?;
    let mut x1 = (x0 + (h_remote - f0) * 1000.0).max(0.0);
    for _ in 0..6 {
        p.set(Cost::IpiDelivery, x1);
        let (f1, _, _) = model(ncpu, 1, it, &p)?;
        if (f1 / h_remote - 1.0).abs() < 0.01 || (x1 - x0).abs() < 1.0 {
            break;
        }
        let slope = ((f1 - f0) * 1000.0 / (x1 - x0)).clamp(0.2, 5.0);
        let x2 = (x1 + (h_remote - f1) * 1000.0 / slope).max(0.0);
        (x0, f0, x1) = (x1, f1, x2);
    }
    let delivery = x1;
    p.set(Cost::IpiDelivery, delivery);
    p.set_source(
        Cost::IpiDelivery,
        format!("fitted on host kernel {kernel}: madvise with one busy thread {h_remote:.3} us/op vs {h_local:.3} without"),
    );
    let fault_row = fit_file_fault(&mut p, ncpu, &kernel)?;
    let collapse_rows = fit_collapse(&mut p, ncpu, &kernel)?;
    p.name = "calibrated".into();
    p.description =
        format!("x86-icelake fitted to host kernel {kernel} with {ncpu} CPUs by tlblab calibrate");
    let (a_local, _, _) = model(ncpu, 0, it, &p)?;
    let (a_remote, a_tlb, a_cal) = model(ncpu, 1, it, &p)?;
    let mut rows = vec![
        Row {
            metric: "us/op, alone",
            host: h_local,
            before: m_local,
            after: a_local,
        },
        Row {
            metric: "us/op, 1 busy thread",
            host: h_remote,
            before: m_remote,
            after: a_remote,
        },
        Row {
            metric: "TLB per op",
            host: h_tlb,
            before: m_tlb,
            after: a_tlb,
        },
        Row {
            metric: "CAL per op",
            host: h_cal,
            before: m_cal,
            after: a_cal,
        },
    ];
    rows.push(fault_row);
    rows.extend(collapse_rows);
    Ok(Calibration { profile: p, rows })
}

/// lmbench `lat_pagefault` iterations on the host and in the model.
const LAT_PAGEFAULT_ITERS: (u64, u64) = (200, 50);

/// Fit the file-fault prices, `filemap_fault` and `fault_around_pte` scaled
/// together, from lmbench `lat_pagefault` on the host. The madvise fit
/// scales every price by one factor; on this project's VMs that leaves a
/// file fault ~30 % dearer than the host's (0.24 against 0.18 us per page),
/// because the madvise path is mostly syscall and fault entry, which a VM
/// slows more than the page-cache work. The model's `lat_pagefault` is
/// linear in the pair, so one run with them at zero gives the floor (fault
/// entry, TLB-miss walks) and the scale follows. `validate` then checks
/// `lat_mmap`, whose file faults use the pair next to unfitted mmap and
/// munmap work.
fn fit_file_fault(p: &mut CostProfile, ncpu: usize, kernel: &str) -> Result<Row, Error> {
    let (host_iters, model_iters) = LAT_PAGEFAULT_ITERS;
    let host = median_run("lat_pagefault", 1, host_iters)?.us_per_op();
    let pair = [Cost::FilemapFault, Cost::FaultAroundPte];
    let before = lmbench_model(p, ncpu, "lat-pagefault", model_iters)?;
    let mut zero = p.clone();
    for c in pair {
        zero.set(c, 0.0);
    }
    let floor = lmbench_model(&zero, ncpu, "lat-pagefault", model_iters)?;
    if host <= floor || before <= floor {
        return Err(Error::Unsupported(format!(
            "lat_pagefault fit: host {host:.4} us per page is not above the model's {floor:.4} without any page-cache work (fault entry, TLB-miss walks)"
        )));
    }
    let scale = (host - floor) / (before - floor);
    for c in pair {
        p.set(c, p.ns(c) * scale);
        p.set_source(
            c,
            format!("fitted on host kernel {kernel}: lmbench lat_pagefault {host:.4} us per page (x{scale:.3} of the madvise-scaled price)"),
        );
    }
    Ok(Row {
        metric: "lat_pagefault us/op",
        host,
        before,
        after: lmbench_model(p, ncpu, "lat-pagefault", model_iters)?,
    })
}

/// Host runs per fitted figure; the run with the median µs/op is used.
/// Every model price but two is scaled by one host measurement, so one
/// run slowed by a neighbour (these are shared VMs) would move them all.
const HOST_ROUNDS: usize = 5;

/// madvise iterations per round where `validate` re-measures the fitted
/// madvise-alone figure next to a workload it validates.
const ALONE_ITERATIONS: u64 = 20_000;

/// `HOST_ROUNDS` rounds of `runs`, one of each per round (round r of each
/// before round r + 1), so the host's drift falls on all of them alike:
/// every run, by workload.
fn runs_in_turn<const N: usize>(
    runs: [(&str, u32, u64); N],
) -> Result<[Vec<bench::HostReport>; N], Error> {
    let mut all: [Vec<bench::HostReport>; N] = std::array::from_fn(|_| Vec::new());
    for _ in 0..HOST_ROUNDS {
        for (v, (w, t, i)) in all.iter_mut().zip(runs) {
            v.push(bench::run_with(w, t, i, false)?);
        }
    }
    Ok(all)
}

/// Each workload's run with the median µs/op.
fn medians<const N: usize>(all: [Vec<bench::HostReport>; N]) -> [bench::HostReport; N] {
    all.map(|mut v| {
        v.sort_by(|a, b| a.us_per_op().total_cmp(&b.us_per_op()));
        v.swap_remove(v.len() / 2)
    })
}

/// `bench::run_with` `HOST_ROUNDS` times; the run with the median µs/op.
fn median_run(workload: &str, threads: u32, iterations: u64) -> Result<bench::HostReport, Error> {
    let mut runs = (0..HOST_ROUNDS)
        .map(|_| bench::run_with(workload, threads, iterations, false))
        .collect::<Result<Vec<_>, _>>()?;
    runs.sort_by(|a, b| a.us_per_op().total_cmp(&b.us_per_op()));
    Ok(runs.swap_remove(HOST_ROUNDS / 2))
}

/// Collapse fits: 2 MiB extents collapsed per call, and the populations
/// (every Nth page faulted in) the two fitted prices are solved from. The
/// size is the one `validate` measures: on this project's VMs a 2 MiB
/// collapse takes ~20 % longer inside a 64 MiB call than inside a 16 MiB
/// one (580 against 490 us all present, 152 against 117 us 1/8 present,
/// medians of 5 rounds), a size effect (the copies' sources and targets
/// outgrow the last-level cache) that the model's flat per-page price
/// does not have; fitting at one size and validating at another would
/// measure that, not the fit.
const FIT_COLLAPSE_MIB: u64 = 64;
const FIT_STRIDES: [u32; 2] = [1, 8];
/// Host collapse rounds; the median round is the host's figure (one round in
/// a few takes several times longer: compaction, a busy neighbour VM).
const COLLAPSE_ROUNDS: u64 = 5;

/// Fit the collapse path's own prices, `collapse_setup` (per 2 MiB
/// collapse) and `collapse_copy_page` (per present 4 KiB page), from two
/// host `MADV_COLLAPSE` runs: every page present (512 copies per extent)
/// and every 8th (64). The model prices a collapse as
/// `fixed + setup + present x copy`, linear in the two prices, so two
/// populations determine them; the kernel zero-fills the absent subpages
/// (`__collapse_huge_page_copy`), which the fit folds into the pair (copy
/// is then "copy minus zero-fill", setup "plus 512 zero-fills"). The
/// madvise path's flush and sync IPI stay priced by the madvise fit.
/// `validate` then checks a population and a size not fitted.
fn fit_collapse(p: &mut CostProfile, ncpu: usize, kernel: &str) -> Result<Vec<Row>, Error> {
    let h = host_collapse_medians(FIT_COLLAPSE_MIB, &FIT_STRIDES)?;
    let host = [h[0], h[1]];
    let model = |p: &CostProfile| -> Result<[f64; 2], Error> {
        let mut t = [0.0; 2];
        for (t, stride) in t.iter_mut().zip(FIT_STRIDES) {
            *t = model_collapse_run(p, ncpu, FIT_COLLAPSE_MIB, stride)?;
        }
        Ok(t)
    };
    let before = model(p)?;
    let present = FIT_STRIDES.map(|s| (512 / s) as f64);
    // Two secant rounds: jitter makes the model only nearly linear.
    let mut m = before;
    for _ in 0..2 {
        let d_copy = ((host[0] - host[1]) - (m[0] - m[1])) * 1000.0 / (present[0] - present[1]);
        let d_setup = (host[0] - m[0]) * 1000.0 - present[0] * d_copy;
        let copy = p.ns(Cost::CollapseCopyPage) + d_copy;
        let setup = p.ns(Cost::CollapseSetup) + d_setup;
        if copy < 0.0 || setup < 0.0 {
            return Err(Error::Unsupported(format!(
                "collapse fit: host MADV_COLLAPSE {:.1} us per 2 MiB with 512 pages present and {:.1} with 64 is not fixed + per-page (setup {setup:.0} ns, copy {copy:.0} ns)",
                host[0], host[1]
            )));
        }
        p.set(Cost::CollapseCopyPage, copy);
        p.set(Cost::CollapseSetup, setup);
        m = model(p)?;
    }
    for c in [Cost::CollapseSetup, Cost::CollapseCopyPage] {
        p.set_source(
            c,
            format!(
                "fitted on host kernel {kernel}: MADV_COLLAPSE of {FIT_COLLAPSE_MIB} MiB with every page present ({:.1} us per 2 MiB) and every 8th ({:.1} us)",
                host[0], host[1]
            ),
        );
    }
    Ok(FIT_STRIDES
        .iter()
        .enumerate()
        .map(|(i, s)| Row {
            metric: if *s == 1 {
                "collapse us/2MiB, all present"
            } else {
                "collapse us/2MiB, 1/8 present"
            },
            host: host[i],
            before: before[i],
            after: m[i],
        })
        .collect())
}

/// Host µs per 2 MiB of `MADV_COLLAPSE` over `mib` MiB at each population
/// (every `stride`-th page present), `COLLAPSE_ROUNDS` rounds each taken in
/// turn (`bench::collapse::medians_in_turn`). This host's collapse time
/// drifts by a third within minutes (THP allocation on a shared VM:
/// medians of 250 and of 330 us a quarter of an hour apart, and 340 -> 270
/// us between a calibrate and the validate after it).
fn host_collapse_medians(mib: u64, strides: &[u32]) -> Result<Vec<f64>, Error> {
    bench::collapse::medians_in_turn(mib << 20, COLLAPSE_ROUNDS, strides)
}

/// Model µs per 2 MiB extent of one `MADV_COLLAPSE` call over `mib` MiB at
/// `ncpu` CPUs with every `stride`-th page present (as the host measures:
/// the call's time over its extents).
fn model_collapse_run(p: &CostProfile, ncpu: usize, mib: u64, stride: u32) -> Result<f64, Error> {
    let mut s = load_scenario("skip-sync-collapse")?;
    s.set(&format!("machine.cpus={ncpu}"))?;
    s.set(&format!("workload.size={mib}MiB"))?;
    s.set(&format!("workload.populate_stride={stride}"))?;
    let (m, _) = run_with_profile(&s, p.clone(), &RunOptions::default())?;
    Ok(model_collapse_us(&m))
}

/// One validation row: a metric on the host and in the model.
pub struct Check {
    pub metric: String,
    pub host: f64,
    pub model: f64,
    /// Allowed |model/host − 1|.
    pub tolerance: f64,
    /// The host's own run-to-run spread of this figure, relative to its
    /// median ((max − min) / median over the rounds; 0 where one run).
    pub spread: f64,
}

impl Check {
    /// Within the tolerance, or within the host's own spread: a difference
    /// the host cannot reproduce from run to run is not a finding.
    pub fn ok(&self) -> bool {
        (self.model / self.host.max(1e-12) - 1.0).abs() <= self.tolerance.max(self.spread)
    }
}

/// (max − min) / median of `v` (0 for fewer than two values).
pub fn spread(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[s.len() - 1] - s[0]) / s[s.len() / 2].abs().max(1e-12)
}

/// Counts must agree within 10% (the host's threads finish unevenly and other
/// processes send a few shootdowns); times within 25% (VM noise run to run).
pub const COUNT_TOLERANCE: f64 = 0.10;
pub const TIME_TOLERANCE: f64 = 0.25;
/// A row shown for information, without a verdict.
pub const INFO: f64 = f64::INFINITY;

/// Run the unfitted `tlb_flush_threads` workload on the host and in the
/// model with `profile`, at the host's CPU count.
pub fn validate(profile: &CostProfile, iterations: u64) -> Result<Vec<Check>, Error> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let threads = ncpu.min(8) as u32;
    // tlb_flush_threads in turn with what the scale was fitted on (madvise
    // alone): their ratio is free of the host's drift since calibrate.
    let rounds = runs_in_turn([
        ("tlb_flush_threads", threads, iterations),
        ("madvise_dontneed", 0, ALONE_ITERATIONS),
    ])?;
    // The host's own spread, round by round, of the two judged figures.
    let ratios: Vec<f64> = rounds[0]
        .iter()
        .zip(&rounds[1])
        .map(|(t, a)| t.us_per_op() / a.us_per_op())
        .collect();
    let tlb = |r: &bench::HostReport| r.interrupt_totals["TLB"] as f64 / r.op_count().max(1) as f64;
    let tlbs: Vec<f64> = rounds[0].iter().map(tlb).collect();
    let [host, alone] = medians(rounds);
    let (m_alone, _, _) = model(ncpu, 0, ALONE_ITERATIONS, profile)?;
    let mut s = load_scenario("tlb-flush-threads")?;
    s.set(&format!("machine.cpus={ncpu}"))?;
    s.set(&format!("workload.threads={threads}"))?;
    s.set(&format!("workload.iterations={iterations}"))?;
    s.set("workload.size=1MiB")?;
    let (m, _) = run_with_profile(&s, profile.clone(), &RunOptions::default())?;
    let mo = m
        .main_op()
        .ok_or_else(|| Error::Config("model run measured nothing".into()))?;
    let (hn, mn) = (host.op_count().max(1) as f64, mo.count.max(1) as f64);
    let mut rows = lmbench_rows(profile, ncpu)?;
    rows.extend(collapse_rows(profile, ncpu)?);
    rows.splice(
        0..0,
        vec![
            Check {
                metric: format!("tlb_flush_threads x{threads} / madvise"),
                host: host.us_per_op() / alone.us_per_op(),
                model: mo.latency_ns.mean / 1000.0 / m_alone,
                tolerance: TIME_TOLERANCE,
                spread: spread(&ratios),
            },
            Check {
                metric: format!("tlb_flush_threads x{threads} us/op"),
                host: host.us_per_op(),
                model: mo.latency_ns.mean / 1000.0,
                tolerance: INFO,
                spread: 0.0,
            },
            Check {
                metric: "TLB per op".into(),
                host: host.interrupt_totals["TLB"] as f64 / hn,
                model: m.interrupt_totals["TLB"] as f64 / mn,
                tolerance: COUNT_TOLERANCE,
                spread: spread(&tlbs),
            },
        ],
    );
    Ok(rows)
}

/// MADV_COLLAPSE of 64 MiB (32 collapses) on the host and in the model
/// (`skip-sync-collapse` at the host's CPU count): CAL interrupts per
/// collapse (upstream: one `tlb_remove_table_sync_one` IPI to each other
/// CPU), with the host's background CAL traffic over the same time removed.
fn collapse_rows(profile: &CostProfile, ncpu: usize) -> Result<Vec<Check>, Error> {
    let host = bench::run_with("khugepaged_collapse", 1, COLLAPSE_ROUNDS, false)?;
    let mut s = load_scenario("skip-sync-collapse")?;
    s.set(&format!("machine.cpus={ncpu}"))?;
    s.set("workload.size=64MiB")?;
    let (m, _) = run_with_profile(&s, profile.clone(), &RunOptions::default())?;
    let collapses = m.arch["collapses"].max(1) as f64;
    // A population `calibrate` did not fit (it fits 1/1 and 1/8 at 64 MiB),
    // measured in turn with the fitted all-present one.
    let t = host_collapse_medians(64, &[1, 2])?;
    let (all, half) = (
        model_collapse_us(&m),
        model_collapse_run(profile, ncpu, 64, 2)?,
    );
    Ok(vec![
        Check {
            metric: "MADV_COLLAPSE CAL per collapse".into(),
            host: host_row_per_op(&host, "CAL"),
            model: m.interrupt_totals["CAL"] as f64 / collapses,
            tolerance: COUNT_TOLERANCE,
            spread: 0.0,
        },
        // The validation proper: how time falls with the pages present,
        // free of the host's drift (both host figures from one window).
        Check {
            metric: "MADV_COLLAPSE 1/2 present / all".into(),
            host: t[1] / t[0],
            model: half / all,
            tolerance: TIME_TOLERANCE,
            spread: 0.0,
        },
        // Absolute times: the all-present population is the fitted one, so
        // these show the drift since calibrate rather than the model.
        Check {
            metric: "MADV_COLLAPSE us per 2 MiB".into(),
            host: t[0],
            model: all,
            tolerance: INFO,
            spread: 0.0,
        },
        Check {
            metric: "MADV_COLLAPSE us/2MiB, 1/2 present".into(),
            host: t[1],
            model: half,
            tolerance: INFO,
            spread: 0.0,
        },
    ])
}

/// A `/proc/interrupts` row of a host run per op, less the host's own
/// background traffic over the same time (`background_<row>`, if measured).
fn host_row_per_op(h: &bench::HostReport, row: &str) -> f64 {
    let bg = h
        .arch
        .get(&format!("background_{row}"))
        .copied()
        .unwrap_or(0);
    h.interrupt_totals[row].saturating_sub(bg) as f64 / h.op_count().max(1) as f64
}

/// µs per 2 MiB extent of the `MADV_COLLAPSE` call in a model run, as the
/// host measures it (the whole call, `lru_add_drain_all` included, over
/// its extents).
fn model_collapse_us(m: &sim::Report) -> f64 {
    let extents = m.arch["collapses"].max(1) as f64;
    m.ops
        .iter()
        .find(|o| o.name == "madvise_collapse")
        .map_or(0.0, |o| {
            o.latency_ns.mean * o.count as f64 / 1000.0 / extents
        })
}

/// lmbench `lat_mmap` (map a file, touch a quarter, unmap) on the host and
/// in the model. (`lat_pagefault`, one read per page of a 1 MiB cached
/// file with 16-page fault-around, is fitted by `calibrate`.)
fn lmbench_rows(profile: &CostProfile, ncpu: usize) -> Result<Vec<Check>, Error> {
    let host = median_run("lat_mmap", 1, 2000)?;
    Ok(vec![Check {
        metric: "lat_mmap us/op".into(),
        host: host.us_per_op(),
        model: lmbench_model(profile, ncpu, "lat-mmap", 2000)?,
        tolerance: TIME_TOLERANCE,
        spread: 0.0,
    }])
}

/// Mean µs per op of an lmbench scenario in the model on x86 at `ncpu`
/// CPUs with nothing else running.
fn lmbench_model(p: &CostProfile, ncpu: usize, scenario: &str, iters: u64) -> Result<f64, Error> {
    let mut s = load_scenario(scenario)?;
    for kv in [
        "machine.arch=x86".to_string(),
        format!("machine.cpus={ncpu}"),
        "machine.timeslice_us=0".into(),
        "machine.migrate_pct=0".into(),
        format!("workload.iterations={iters}"),
    ] {
        s.set(&kv)?;
    }
    let (m, _) = run_with_profile(&s, p.clone(), &RunOptions::default())?;
    let mo = m
        .main_op()
        .ok_or_else(|| Error::Config("model run measured nothing".into()))?;
    Ok(mo.latency_ns.mean / 1000.0)
}

/// One guest boot compared with the model at the guest's vCPU count.
pub struct GuestValidation {
    pub run: bench::guest::GuestRun,
    pub rows: Vec<Check>,
    /// Times in a vCPU-oversubscribed guest, shown without a verdict.
    pub info: Vec<(String, f64, f64)>,
}

/// Host scheduler slice a preempted vCPU waits on this 2-core host (EEVDF
/// `base_slice_ns` = 0.75 ms × (1 + ilog2(CPUs)) = 1.5 ms): the mean
/// preemption length given to the model.
pub const GUEST_PREEMPT_US: u32 = 1500;

/// `tlblab validate --guest`: boot the guest kernel with `cpus` vCPUs, run
/// madvise (one madvising thread, `cpus − 1` busy threads) and MADV_COLLAPSE
/// there, and run the same workloads in the model at `cpus`, with
/// `x86.paravirt = kvm` when the guest kernel chose the paravirtual flush and
/// the guest's measured steal time as the vCPU preemption rate.
/// A QEMU guest's idle loop, whatever the profile's machine does: the
/// guests `validate --guest` boots (x86 TCG `-cpu max`, arm64 and RISC-V
/// `virt` under TCG) have no polling idle state (no `intel_idle`, no
/// `cpuidle-haltpoll` without KVM): the idle task halts (`HLT`/`WFI`) with
/// `TIF_POLLING_NRFLAG` cleared, so a wake-up of an idle vCPU through its
/// wake list is a call-function IPI.
pub fn qemu_guest_idle(mut p: CostProfile) -> CostProfile {
    p.idle_polls = false;
    p.idle_source = "QEMU TCG guest: no polling idle state (no intel_idle, no cpuidle-haltpoll without KVM); the idle task halts with TIF_POLLING_NRFLAG cleared (kernel/sched/idle.c default_idle_call)".into();
    p
}

/// This host's idle loop, from its cpuidle driver: `intel_idle` enters
/// every state with MWAIT, polling (`mwait_idle_with_hints`); any other
/// driver (`acpi_idle`'s HLT, `haltpoll`, none) is taken as not polling.
fn host_idle() -> (bool, String) {
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "none".into());
    let polls = driver == "intel_idle";
    (
        polls,
        format!(
            "this host's cpuidle driver: {driver} ({})",
            if polls {
                "MWAIT idle polls: mwait_idle_with_hints sets TIF_POLLING_NRFLAG"
            } else {
                "taken as not polling: HLT/WFI with TIF_POLLING_NRFLAG cleared"
            }
        ),
    )
}

pub fn validate_guest(
    profile: &CostProfile,
    plan: &bench::guest::GuestPlan,
) -> Result<GuestValidation, Error> {
    let g = bench::guest::run(plan)?;
    let profile = &qemu_guest_idle(profile.clone());
    let cpus = plan.cpus;
    let pv = if g.pv_tlb_flush { "kvm" } else { "none" };
    // Preempted a fraction f of the time: run f⁻¹−1 preemption lengths.
    let f = g.steal_fraction.clamp(0.0, 0.95);
    let run_us = if f < 0.005 {
        0
    } else {
        (GUEST_PREEMPT_US as f64 * (1.0 - f) / f).round().max(1.0) as u32
    };
    let guest_knobs = [
        "machine.arch=x86".to_string(),
        format!("machine.cpus={cpus}"),
        format!("x86.paravirt={pv}"),
        format!("x86.vcpu_run_us={run_us}"),
        format!("x86.vcpu_preempt_us={GUEST_PREEMPT_US}"),
    ];
    let mut s = load_scenario("default")?;
    for kv in guest_knobs.iter().cloned().chain([
        format!("workload.threads={}", cpus - 1),
        format!(
            "workload.iterations={}",
            plan.madvise_iterations.min(20_000)
        ),
    ]) {
        s.set(&kv)?;
    }
    let (m, _) = run_with_profile(&s, profile.clone(), &RunOptions::default())?;
    let mo = m
        .main_op()
        .ok_or_else(|| Error::Config("model run measured nothing".into()))?;
    let (hn, mn) = (g.madvise.op_count().max(1) as f64, mo.count.max(1) as f64);
    let mut c = load_scenario("skip-sync-collapse")?;
    for kv in guest_knobs
        .iter()
        .cloned()
        .chain([format!("workload.size={}MiB", plan.collapse_mib)])
    {
        c.set(&kv)?;
    }
    let (mc, _) = run_with_profile(&c, profile.clone(), &RunOptions::default())?;
    let collapses = mc.arch["collapses"].max(1) as f64;
    let gc = &g.collapse;
    let rows = vec![
        Check {
            metric: "madvise TLB per op".into(),
            host: g.madvise.interrupt_totals["TLB"] as f64 / hn,
            model: m.interrupt_totals["TLB"] as f64 / mn,
            tolerance: COUNT_TOLERANCE,
            spread: 0.0,
        },
        Check {
            metric: "madvise CAL per op".into(),
            host: g.madvise.interrupt_totals["CAL"] as f64 / hn,
            model: m.interrupt_totals["CAL"] as f64 / mn,
            tolerance: COUNT_TOLERANCE,
            spread: 0.0,
        },
        Check {
            metric: "MADV_COLLAPSE CAL per collapse".into(),
            host: host_row_per_op(gc, "CAL"),
            model: mc.interrupt_totals["CAL"] as f64 / collapses,
            tolerance: COUNT_TOLERANCE,
            spread: 0.0,
        },
        Check {
            metric: "collapses (thp_collapse_alloc)".into(),
            host: gc.arch.get("thp_collapse_alloc").copied().unwrap_or(0) as f64,
            model: mc.arch["collapses"] as f64 * plan.collapse_rounds as f64,
            tolerance: 0.0,
            spread: 0.0,
        },
    ];
    let info = vec![
        (
            "MADV_COLLAPSE TLB per collapse".to_string(),
            host_row_per_op(gc, "TLB"),
            mc.interrupt_totals["TLB"] as f64 / collapses,
        ),
        (
            "madvise us/op".to_string(),
            g.madvise.us_per_op(),
            mo.latency_ns.mean / 1000.0,
        ),
        (
            "MADV_COLLAPSE us per 2 MiB".to_string(),
            gc.us_per_op(),
            model_collapse_us(&mc),
        ),
    ];
    Ok(GuestValidation { run: g, rows, info })
}

#[cfg(test)]
mod tests {
    use super::{spread, Check};

    /// A row is OUT only beyond both its tolerance and the host's own
    /// run-to-run spread (issue 32: tlb_flush_threads / madvise gave 0.75,
    /// 0.88 and then 1.43 on one quiet 2-vCPU VM).
    #[test]
    fn a_row_is_out_only_beyond_the_hosts_own_spread() {
        let rounds = [0.75, 0.88, 1.43, 0.80, 0.85];
        let s = spread(&rounds);
        assert!((s - (1.43 - 0.75) / 0.85).abs() < 1e-12, "{s}");
        let row = |spread| Check {
            metric: "ratio".into(),
            host: 0.85,
            model: 1.30,
            tolerance: 0.25,
            spread,
        };
        assert!(!row(0.0).ok(), "53% off, 25% allowed");
        assert!(row(s).ok(), "within the host's 80% spread");
        assert_eq!(spread(&[1.0]), 0.0);
    }
}
