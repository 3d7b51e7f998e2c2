//! Seed (c): arm64 local TLBI when `wp_page_reuse` upgrades a PTE: usemem
//! with fork/exec against cores, the fitted profile's prediction, and the
//! reuse race without the spurious-fault flush. usemem is measured as
//! `perf record -a` would: over a steady-state window of whole fork periods
//! after a warm-up ([`steady_state`]).

use super::{cmp_head, cmp_row, curve, figure, published, series, yes};
use super::{Figure, Section, Table, Unit};
use crate::plot::line_chart_published;
use crate::sweep::{sweep, Axis, Row as SweepRow};
use crate::{apply_variant, load_scenario, run_scenario, RunOptions};
use machine::Error;
use std::fmt::Write;

/// The source of the published figures.
const SRC_C: &str = "Huang Ying, arm64, mm: avoid TLBI broadcast in wp_page_reuse (cover letter): usemem score, perf cycles% of TLB-flush functions, 128-core arm64 server";

/// The seed's switches: local reuse flush, local spurious-fault flush.
const SEED: &str = "arm64.wp_reuse_flush=local,arm64.spurious_fault_flush=local";

/// Warm-up before the measurement window, and the window, in fork periods.
const WARMUP_PERIODS: u64 = 2;
const WINDOW_PERIODS: u64 = 10;

/// Seed (c): arm64 local TLBI in the write-protect fault reuse path. The
/// run length is the window's (10 fork periods), not `_iterations`.
pub(super) fn arm64_seed(opts: &RunOptions, _iterations: u64) -> Result<Section, Error> {
    let mut sec = Section::new(
        "seed-arm64-local-tlbi-wp-fault",
        true,
        "arm64: local TLBI when wp_page_reuse upgrades a PTE (seed c)",
    );
    sec.scenario("usemem-fork-exec")?;
    let mut out = String::new();
    let out = &mut out;
    let base = steady_state(&reduced_usemem()?, WINDOW_PERIODS)?;
    let (gains, at128) = usemem_scaling(out, &base, opts)?;
    let g = gains.last().copied().unwrap_or(0.0) * 100.0;
    sec.tables.push(usemem_table(&base, at128, g));
    // The magnitude: the DVM Sync price fitted to the published baseline
    // share alone; the patched figures are the fitted profile's prediction.
    let fitted = arm64_baseline_fit(out, &base, opts)?;
    sec.tables.push(baseline_fit_table(fitted));
    cow_reuse_race(&mut sec, opts, out)?;
    sec.text = std::mem::take(out);
    Ok(sec)
}

/// `s` measured over `periods` fork periods after the warm-up, the writers
/// running until the window closes.
fn steady_state(s: &machine::Scenario, periods: u64) -> Result<machine::Scenario, Error> {
    let mut s = s.clone();
    let p = s.workload.period_us;
    s.workload.iterations = 1_000_000_000; // never reached: the window ends the run
    s.machine.measure_from_us = WARMUP_PERIODS * p;
    s.machine.measure_us = periods * p;
    s.machine.max_sim_time_ms = s
        .machine
        .max_sim_time_ms
        .max((WARMUP_PERIODS + periods) * p / 1000 + 1);
    s.validate()?;
    Ok(s)
}

/// The window's flush share (percent) and op throughput of a steady-state run.
fn window_figures(r: &sim::Report) -> (f64, f64) {
    r.window.as_ref().map_or((0.0, 0.0), |w| {
        (w.cycles.flush_share * 100.0, w.ops_per_sec)
    })
}

/// usemem with fork/exec on 8, 64 and 128 cores, upstream and with the
/// seed, over the steady-state window. Returns the throughput gain per core
/// count and the flush shares (upstream, seed) at 128 cores, in percent.
fn usemem_scaling(
    out: &mut String,
    base: &machine::Scenario,
    opts: &RunOptions,
) -> Result<(Vec<f64>, (f64, f64)), Error> {
    let _ = writeln!(
        out,
        "\n== arm64: local TLBI when wp_page_reuse upgrades a PTE (usemem {} threads, {}, fork+exec every {} ms; perf window: {} periods after {}) ==",
        base.workload.threads,
        base.workload.size,
        base.workload.period_us / 1000,
        WINDOW_PERIODS,
        WARMUP_PERIODS
    );
    let _ = writeln!(
        out,
        "{:<8} {:>16} {:>16} {:>16} {:>16} {:>12}",
        "CPUs",
        "flush share base",
        "flush share seed",
        "TLBI IS base",
        "TLBI IS seed",
        "throughput"
    );
    let mut gains = Vec::new();
    let mut at128 = (0.0, 0.0);
    for cpus in [8u32, 64, 128] {
        let mut s = base.clone();
        s.machine.cpus = cpus;
        let (b, _) = run_scenario(&s, opts)?;
        let (p, _) = run_scenario(&apply_variant(&s, SEED)?, opts)?;
        let ((sb, tb), (sp, tp)) = (window_figures(&b), window_figures(&p));
        let gain = tp / tb.max(1e-9) - 1.0;
        gains.push(gain);
        at128 = (sb, sp);
        let _ = writeln!(
            out,
            "{:<8} {:>15.2}% {:>15.2}% {:>16} {:>16} {:>+11.1}%",
            cpus,
            sb,
            sp,
            b.arch["tlbi_is"],
            p.arch["tlbi_is"],
            gain * 100.0
        );
    }
    let _ = writeln!(
        out,
        "published (128-core server, 100 GB, fork/exec every 40 s): +40.6%, flush cycles 50.5% -> 0.3%"
    );
    let _ = writeln!(
        out,
        "direction: gain positive and growing with cores: {}",
        yes(gains.windows(2).all(|w| w[1] > w[0]) && gains[0] > 0.0)
    );
    Ok((gains, at128))
}

/// usemem at 128 cores against the cover letter: the flush shares
/// `at128` (upstream, seed) and the throughput gain `g`, in percent.
fn usemem_table(base: &machine::Scenario, at128: (f64, f64), g: f64) -> Table {
    Table {
        caption: format!(
            "usemem {} threads, {}, fork+exec every {} ms, 128 cores (the seed: 100 GB, every 40 s)",
            base.workload.threads,
            base.workload.size,
            base.workload.period_us / 1000
        ),
        head: cmp_head(),
        rows: vec![
            cmp_row("upstream: TLB-flush share of cycles", Some(50.5), Some(at128.0), Unit::Pct, None, SRC_C),
            cmp_row("seed: TLB-flush share of cycles", Some(0.3), Some(at128.1), Unit::Pct, None, SRC_C),
            cmp_row("seed: throughput gain", Some(40.6), Some(g), Unit::Pct, None, SRC_C),
        ],
    }
}

/// `arm64_baseline_fit`'s figures against the cover letter.
fn baseline_fit_table((fit_before, fit_after, fit_gain): (f64, f64, f64)) -> Table {
    Table {
        caption: "profile arm64-n2-seed-baseline-fit (DVM Sync price fitted to the unpatched share only, steady-state window), usemem at 128 cores: the seed's figures are predictions".into(),
        head: cmp_head(),
        rows: vec![
            cmp_row("upstream: TLB-flush share of cycles (fitted)", Some(50.5), Some(fit_before), Unit::Pct, None, SRC_C),
            cmp_row("seed: TLB-flush share of cycles (predicted)", Some(0.3), Some(fit_after), Unit::Pct, None, SRC_C),
            cmp_row("seed: throughput gain (predicted)", Some(40.6), Some(fit_gain), Unit::Pct, None, SRC_C),
        ],
    }
}

/// The reuse race: the local reuse flush without the spurious-fault flush
/// livelocks (an unsafe variant of the section); with it, spurious faults.
fn cow_reuse_race(sec: &mut Section, opts: &RunOptions, out: &mut String) -> Result<(), Error> {
    let race = sec.scenario("cow-reuse-race")?;
    let (unsafe_r, _) = run_scenario(&apply_variant(&race, "arm64.wp_reuse_flush=local")?, opts)?;
    sec.caught(
        "cow-reuse-race: arm64.wp_reuse_flush=local without the spurious-fault flush",
        &unsafe_r,
    );
    let (safe_r, _) = run_scenario(&apply_variant(&race, SEED)?, opts)?;
    let livelocks = unsafe_r
        .violations
        .iter()
        .filter(|v| v.invariant == 6)
        .count();
    let _ = writeln!(
        out,
        "cow-reuse-race: local reuse without the spurious-fault flush -> {} livelock violation(s); with it -> {} violations, {} spurious faults",
        livelocks,
        safe_r.violations.len(),
        safe_r.spurious_faults
    );
    Ok(())
}

/// The arm64 magnitude: the same usemem at 128 cores under the profile
/// whose DVM Sync price is fitted to the seed's baseline share alone; the
/// patched figures are its prediction. The baseline share is also measured
/// over a window twice as long: a steady-state fit does not drift with the
/// run length. Returns the flush shares before and after and the gain, in
/// percent.
fn arm64_baseline_fit(
    out: &mut String,
    base: &machine::Scenario,
    opts: &RunOptions,
) -> Result<(f64, f64, f64), Error> {
    let mut s = base.clone();
    s.machine.cpus = 128;
    let fit = RunOptions {
        profile: Some("arm64-n2-seed-baseline-fit".into()),
        ..opts.clone()
    };
    let (b, _) = run_scenario(&s, &fit)?;
    let (p, _) = run_scenario(&apply_variant(&s, SEED)?, &fit)?;
    let (long, _) = run_scenario(&steady_state(&s, 2 * WINDOW_PERIODS)?, &fit)?;
    let ((sb, tb), (sp, tp)) = (window_figures(&b), window_figures(&p));
    let figures = (sb, sp, (tp / tb.max(1e-9) - 1.0) * 100.0);
    let bound = (sb - sp) / (100.0 - sb) * 100.0;
    let _ = writeln!(
        out,
        "profile arm64-n2-seed-baseline-fit (DVM Sync fitted to the baseline share), 128 CPUs: flush share {:.2}% ({:.2}% over {} periods) -> {:.2}% (predicted), throughput {:+.1}% (predicted; at least {:+.1}% when the flush waits are the writers' own); published 50.5% -> 0.3%, +40.6%",
        figures.0,
        window_figures(&long).0,
        2 * WINDOW_PERIODS,
        figures.1,
        figures.2,
        bound
    );
    Ok(figures)
}

/// The usemem scenario at a quarter of its size, with the fork period
/// scaled with it (the seed's 40 s per 100 GB).
fn reduced_usemem() -> Result<machine::Scenario, Error> {
    let mut s = load_scenario("usemem-fork-exec")?;
    s.set("workload.size=256MiB")?;
    s.set("workload.period_us=100000")?;
    Ok(s)
}

/// Seed (c): the share of busy time in TLB maintenance against cores.
pub(super) fn arm64_share_figure(opts: &RunOptions) -> Result<Figure, Error> {
    let mut usemem = steady_state(&reduced_usemem()?, WINDOW_PERIODS)?;
    let axes = [
        Axis::parse("arm64.wp_reuse_flush=broadcast,local")?,
        Axis::parse("machine.cpus=8,16,32,64,100,128")?,
    ];
    usemem.set("arm64.spurious_fault_flush=local")?;
    let rows = sweep(&usemem, &axes, opts, false)?;
    let share = |r: &SweepRow| r.flush_share * 100.0;
    figure(
        "seed-arm64-local-tlbi-wp-fault",
        "arm64 usemem with fork/exec: busy time in TLB maintenance (broadcast TLBI + DSB ISH waits) over a steady-state window of 10 fork periods; diamonds: the cover letter's perf cycles% on its 128-core server",
        line_chart_published(
            "TLB maintenance share vs cores (arm64)",
            "cores",
            "% of busy CPU time",
            &[
                series("upstream: broadcast reuse flush", curve(&rows, "broadcast", share)),
                series("seed: local reuse flush", curve(&rows, "local", share)),
            ],
            &[
                published("upstream", 128.0, 50.5),
                published("with the patch", 128.0, 0.3),
            ],
        ),
    )
}
