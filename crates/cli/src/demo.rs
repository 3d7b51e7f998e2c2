//! `tlblab demo`: every seed result built so far, in the cover letters' form.

use crate::{apply_variant, load_scenario, run_scenario, RunOptions};
use machine::Error;
use std::fmt::Write;

/// One row of a seed table: the published figure next to the model's.
pub struct Row {
    pub variant: &'static str,
    pub published: f64,
    pub model: f64,
}

/// Run the reduced seed experiments and render their tables.
pub fn demo(opts: &RunOptions, iterations: u64) -> Result<String, Error> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tlblab demo: each seed's experiment, reduced to {iterations} iterations\n"
    );

    // Seed (a): flush_tlb_info back on the stack.
    let mut base = load_scenario("flush-tlb-info-madvise")?;
    base.workload.iterations = iterations;
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
        let s = apply_variant(&base, spec)?;
        let (r, _) = run_scenario(&s, opts)?;
        let model = r.main_op().map_or(0.0, |o| o.latency_ns.mean / 1000.0);
        rows.push(Row {
            variant: name,
            published,
            model,
        });
    }
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
    for r in &rows {
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
    let aligned_ok = (rows[1].model / rows[0].model - 1.0).abs() < 0.005;
    let unaligned_ok = rows[2].model > rows[0].model && rows[2].model > rows[1].model;
    let _ = writeln!(
        out,
        "direction: aligned within 0.5% of percpu: {}; unaligned slower than both: {}\n",
        yes(aligned_ok),
        yes(unaligned_ok)
    );

    // The will-it-scale pair: shared mm IPIs, separate mms do not.
    let _ = writeln!(out, "== will-it-scale tlb_flush2: threads vs processes ==");
    let _ = writeln!(
        out,
        "{:<22} {:>10} {:>12} {:>12} {:>14}",
        "workload", "ops", "TLB IPIs", "TLB per op", "us/op"
    );
    for name in ["tlb-flush-threads", "tlb-flush-processes"] {
        let mut s = load_scenario(name)?;
        s.workload.iterations = (iterations / 100).max(20);
        let (r, _) = run_scenario(&s, opts)?;
        let o = r.main_op().expect("workload op");
        let tlb = r.interrupt_totals["TLB"];
        let _ = writeln!(
            out,
            "{:<22} {:>10} {:>12} {:>12.2} {:>14.3}",
            name,
            o.count,
            tlb,
            tlb as f64 / o.count as f64,
            o.latency_ns.mean / 1000.0
        );
    }
    // Seed (b): skip redundant tlb_remove_table_sync_one() IPIs.
    let base = load_scenario("skip-sync-collapse")?;
    let (before, _) = run_scenario(&base, opts)?;
    let (after, _) = run_scenario(
        &apply_variant(&base, "mm.skip_redundant_table_sync=true")?,
        opts,
    )?;
    let (b, a) = (
        before.interrupt_totals["CAL"],
        after.interrupt_totals["CAL"],
    );
    let _ = writeln!(
        out,
        "\n== mm: skip redundant sync IPIs (MADV_COLLAPSE {}, {} CPUs) ==",
        base.workload.size, base.machine.cpus
    );
    let _ = writeln!(
        out,
        "{:<22} {:>14} {:>14}",
        "CAL row total", "published", "model"
    );
    let _ = writeln!(out, "{:<22} {:>14} {:>14}", "before", 646_316, b);
    let _ = writeln!(out, "{:<22} {:>14} {:>14}", "after", 785, a);
    let _ = writeln!(
        out,
        "direction: more than two orders of magnitude fewer CAL interrupts: {}",
        yes(b >= 100 * a.max(1))
    );
    Ok(out)
}

/// The exhaustive checker's catalogue as a table, and whether every verdict
/// was the expected one.
pub fn checks() -> Result<(String, bool), Error> {
    let mut out = String::from("\n== tlblab check --all ==\n");
    let _ = writeln!(
        out,
        "{:<32} {:>8} {:>8} {:>8}",
        "check", "expected", "verdict", "states"
    );
    let mut ok = true;
    for c in check::configs::CATALOGUE {
        let o = check::explore(&check::configs::build(c, &[])?, check::Bounds::default());
        let want = if c.expect_safe { "safe" } else { "unsafe" };
        ok &= o.verdict == want;
        let _ = writeln!(
            out,
            "{:<32} {:>8} {:>8} {:>8}",
            c.name, want, o.verdict, o.states
        );
    }
    let _ = writeln!(out, "every verdict as expected: {}", yes(ok));
    Ok((out, ok))
}

/// The demo's figures from sweeps (reduced sizes), as inline SVGs.
pub fn figures(opts: &RunOptions) -> Result<Vec<(String, String)>, Error> {
    use crate::plot::{line_chart, Series};
    use crate::sweep::{sweep, Axis};
    let mut figs = Vec::new();
    let mut collapse = load_scenario("skip-sync-collapse")?;
    collapse.set("workload.size=2GiB")?;
    let axes = [
        Axis::parse("mm.skip_redundant_table_sync=false,true")?,
        Axis::parse("machine.cpus=8,16,32,64,128,256")?,
    ];
    let rows = sweep(&collapse, &axes, opts, false)?;
    let by = |skip: &str, f: fn(&crate::sweep::Row) -> f64| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r.values[0].1 == skip)
            .map(|r| (r.values[1].1.parse().unwrap_or(0.0), f(r)))
            .collect()
    };
    let cal = |r: &crate::sweep::Row| r.cal_total as f64 / 1024.0;
    let ms = |r: &crate::sweep::Row| r.us_per_op / 1000.0;
    figs.push((
        "CAL interrupts per 2 MiB collapse (MADV_COLLAPSE of 2 GiB)".to_string(),
        line_chart(
            "CAL per collapse vs CPUs",
            "CPUs",
            "CAL interrupts per collapse",
            &[
                Series {
                    name: "upstream".into(),
                    points: by("false", cal),
                },
                Series {
                    name: "skip redundant sync".into(),
                    points: by("true", cal),
                },
            ],
        )
        .map_err(Error::Config)?,
    ));
    figs.push((
        "Time to collapse 2 GiB".to_string(),
        line_chart(
            "MADV_COLLAPSE of 2 GiB vs CPUs",
            "CPUs",
            "ms",
            &[
                Series {
                    name: "upstream".into(),
                    points: by("false", ms),
                },
                Series {
                    name: "skip redundant sync".into(),
                    points: by("true", ms),
                },
            ],
        )
        .map_err(Error::Config)?,
    ));
    let mut wis = load_scenario("tlb-flush-threads")?;
    wis.set("workload.iterations=30")?;
    let axes = [
        Axis::parse("workload.name=tlb_flush_threads,tlb_flush_processes")?,
        Axis::parse("workload.threads=2,4,8,16,32")?,
    ];
    let rows = sweep(&wis, &axes, opts, false)?;
    let series = |name: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r.values[0].1 == name)
            .map(|r| (r.values[1].1.parse().unwrap_or(0.0), r.tlb_per_op))
            .collect()
    };
    figs.push((
        "will-it-scale tlb_flush2: TLB shootdown IPIs per madvise".to_string(),
        line_chart(
            "TLB IPIs per op vs tasks (64 CPUs)",
            "tasks",
            "TLB IPIs per op",
            &[
                Series {
                    name: "threads (one mm)".into(),
                    points: series("tlb_flush_threads"),
                },
                Series {
                    name: "processes".into(),
                    points: series("tlb_flush_processes"),
                },
            ],
        )
        .map_err(Error::Config)?,
    ));
    Ok(figs)
}

/// Write a self-contained HTML report; returns its path.
pub fn write_report(dir: &str, tables: &str, figs: &[(String, String)]) -> Result<String, Error> {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>tlblab report</title>\
         <style>body{font-family:sans-serif;max-width:980px;margin:2em auto}pre{background:#f6f6f6;padding:1em}\
         figure{margin:1.5em 0}</style></head><body><h1>tlblab report</h1>",
    );
    html.push_str("<h2>Seed results</h2><pre>");
    html.push_str(&esc(tables));
    html.push_str("</pre><h2>Figures</h2>");
    for (caption, svg) in figs {
        html.push_str("<figure>");
        html.push_str(svg);
        html.push_str(&format!(
            "<figcaption>{}</figcaption></figure>",
            esc(caption)
        ));
    }
    html.push_str("</body></html>\n");
    std::fs::create_dir_all(dir).map_err(|e| Error::Io(format!("{dir}: {e}")))?;
    let path = format!("{dir}/index.html");
    std::fs::write(&path, html).map_err(|e| Error::Io(format!("{path}: {e}")))?;
    Ok(path)
}

fn yes(b: bool) -> &'static str {
    if b {
        "reproduced"
    } else {
        "NOT reproduced"
    }
}
