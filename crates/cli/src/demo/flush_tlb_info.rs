//! Seed (a), x86: `flush_tlb_info` back on the stack: the madvise loop
//! per variant against the published figures, and v7's preemptible flush
//! seen from cyclictest.

use super::{cmp_head, cmp_row, figure, yes, Figure, Row, Section, Table, Unit};
use crate::{apply_variant, load_scenario, run_scenario, RunOptions};
use machine::Error;
use std::fmt::Write;

/// The source of the published figures.
const SRC_A: &str = "[PATCH v7 12/14] x86/mm: Move flush_tlb_info back to the stack (Chuyi Zhou), madvise benchmark: avg usec/op, 128-CPU Ice Lake";

/// Seed (a), x86: `flush_tlb_info` back on the stack: the madvise loop's
/// latency per variant against the published figures, then the
/// preemptible flush's RT wake-up latency.
pub(super) fn flush_tlb_info_seed(opts: &RunOptions, iterations: u64) -> Result<Section, Error> {
    let mut sa = Section::new(
        "seed-flush-tlb-info-on-stack",
        true,
        "x86: flush_tlb_info back on the stack (seed a)",
    );
    let mut out = String::new();
    let mut base = sa.scenario("flush-tlb-info-madvise")?;
    base.workload.iterations = iterations;
    let rows = madvise_rows(&base, opts)?;
    print_madvise_rows(&mut out, &base, &rows);
    sa.tables.push(madvise_table(&base, iterations, &rows));
    let aligned_ok = (rows[1].model / rows[0].model - 1.0).abs() < 0.005;
    let unaligned_ok = rows[2].model > rows[0].model && rows[2].model > rows[1].model;
    let _ = writeln!(
        out,
        "direction: aligned within 0.5% of percpu: {}; unaligned slower than both: {}\n",
        yes(aligned_ok),
        yes(unaligned_ok)
    );

    sa.text = out;
    preemptible_flush(&mut sa, opts)?;
    Ok(sa)
}

/// The madvise loop under each placement of `flush_tlb_info`: the model's
/// us/op next to the published one, the per-CPU baseline first.
fn madvise_rows(base: &machine::Scenario, opts: &RunOptions) -> Result<Vec<Row>, Error> {
    let variants = [
        ("base (percpu)", "x86.flush_tlb_info=percpu", 2.5278),
        (
            "on-stack-aligned",
            "x86.flush_tlb_info=stack_aligned",
            2.5261,
        ),
        (
            "on-stack-not-aligned",
            "x86.flush_tlb_info=stack_unaligned",
            2.5508,
        ),
    ];
    let mut rows = Vec::new();
    for (name, spec, published) in variants {
        let s = apply_variant(base, spec)?;
        let (r, _) = run_scenario(&s, opts)?;
        let model = r.main_op().map_or(0.0, |o| o.latency_ns.mean / 1000.0);
        rows.push(Row {
            variant: name,
            published,
            model,
        });
    }
    Ok(rows)
}

/// The madvise loop's rows as `tlblab demo` prints them.
fn print_madvise_rows(out: &mut String, base: &machine::Scenario, rows: &[Row]) {
    let _ = writeln!(
        out,
        "== x86: move flush_tlb_info back to the stack (madvise loop, {} CPUs, {} busy threads) ==",
        base.machine.cpus, base.workload.threads
    );
    let _ = writeln!(
        out,
        "{:<22} {:>14} {:>14} {:>12} {:>12}",
        "variant", "published us/op", "model us/op", "pub vs base", "model vs base"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<22} {:>14.4} {:>14.4} {:>+11.2}% {:>+11.2}%",
            r.variant,
            r.published,
            r.model,
            (r.published / rows[0].published - 1.0) * 100.0,
            (r.model / rows[0].model - 1.0) * 100.0
        );
    }
}

/// The madvise loop's rows as the report's table, each against its baseline.
fn madvise_table(base: &machine::Scenario, iterations: u64, rows: &[Row]) -> Table {
    let b0 = (rows[0].published, rows[0].model);
    Table {
        caption: format!(
            "madvise(MADV_DONTNEED) loop, {} CPUs, {} busy threads, {} iterations",
            base.machine.cpus, base.workload.threads, iterations
        ),
        head: cmp_head(),
        rows: rows
            .iter()
            .map(|r| {
                cmp_row(
                    r.variant,
                    Some(r.published),
                    Some(r.model),
                    Unit::Us,
                    Some(b0),
                    SRC_A,
                )
            })
            .collect(),
    }
}

/// Seed (a) v7: the preemptible flush, seen from cyclictest.
fn preemptible_flush(sec: &mut Section, opts: &RunOptions) -> Result<(), Error> {
    let base = sec.scenario("rt-latency")?;
    let out = &mut sec.text;
    let mut t = rt_latency_table(&base);
    let _ = writeln!(
        out,
        "\n== x86: preemptible flush (cyclictest next to a madvise storm, {} CPUs, PREEMPT, IRQ-off windows {}/s with a {}% long tail) ==",
        base.machine.cpus, base.machine.irqoff_hz, base.machine.irqoff_long_pct
    );
    let _ = writeln!(
        out,
        "{:<34} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "variant", "p50 us", "p99 us", "p99.9 us", "max us", "madvise/s"
    );
    let p999 = rt_latency_rows(&base, opts, out, &mut t)?;
    sec.tables.push(t);
    let out = &mut sec.text;
    let _ = writeln!(
        out,
        "direction: the latency tail falls with the preemptible flush: {}",
        yes(p999[1] < p999[0])
    );
    Ok(())
}

/// The empty table of cyclictest's wake-up latency per variant.
fn rt_latency_table(base: &machine::Scenario) -> Table {
    Table {
        caption: format!(
            "model only: cyclictest wake-up latency next to a madvise storm, {} CPUs, PREEMPT",
            base.machine.cpus
        ),
        head: [
            "variant",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "madvise/s",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    }
}

/// cyclictest upstream and with the preemptible flush: one printed line
/// and one row of `t` each. Returns each variant's p99.9 latency.
fn rt_latency_rows(
    base: &machine::Scenario,
    opts: &RunOptions,
    out: &mut String,
    t: &mut Table,
) -> Result<Vec<u64>, Error> {
    let mut p999 = Vec::new();
    for (name, spec) in [
        ("upstream (percpu, get_cpu)", ""),
        (
            "stack_aligned + preemptible_flush",
            "x86.flush_tlb_info=stack_aligned,x86.preemptible_flush=true",
        ),
    ] {
        let s = if spec.is_empty() {
            base.clone()
        } else {
            apply_variant(base, spec)?
        };
        let (r, _) = run_scenario(&s, opts)?;
        let find = |n: &str| r.ops.iter().find(|o| o.name == n);
        let l = &find("rt_wakeup_latency").expect("latency op").latency_ns;
        p999.push(l.p999);
        let _ = writeln!(
            out,
            "{:<34} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>12.0}",
            name,
            l.p50 as f64 / 1e3,
            l.p99 as f64 / 1e3,
            l.p999 as f64 / 1e3,
            l.max as f64 / 1e3,
            find("madvise").map_or(0.0, |o| o.per_sec)
        );
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
        t.rows.push(vec![
            name.to_string(),
            us(l.p50),
            us(l.p99),
            us(l.p999),
            us(l.max),
            format!("{:.0}", find("madvise").map_or(0.0, |o| o.per_sec)),
        ]);
    }
    Ok(p999)
}

/// Seed (a) v7: cyclictest's wake-up latency CDF, upstream against the
/// preemptible flush.
pub(super) fn rt_latency_figure(opts: &RunOptions) -> Result<Figure, Error> {
    let rt = load_scenario("rt-latency")?;
    let variants = [
        "as given".to_string(),
        "x86.flush_tlb_info=stack_aligned,x86.preemptible_flush=true".to_string(),
    ];
    let reports = vec![
        run_scenario(&rt, opts)?.0,
        run_scenario(&apply_variant(&rt, &variants[1])?, opts)?.0,
    ];
    figure(
        "seed-flush-tlb-info-on-stack",
        "x86 cyclictest wake-up latency next to a madvise storm: upstream vs the preemptible flush",
        crate::plot::latency_cdf("rt-latency", &variants, &reports),
    )
}
