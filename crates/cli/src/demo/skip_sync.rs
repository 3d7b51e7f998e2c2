//! Seed (b): skip redundant `tlb_remove_table_sync_one()` IPIs: the CAL
//! row before and after, hugetlb unshare with lazy CPUs, and step 2
//! (targeted sync IPIs, not posted).

use super::{cmp_head, cmp_row, curve, figure, published, series, yes};
use super::{Figure, Section, Table, Unit};
use crate::plot::{line_chart, line_chart_published};
use crate::sweep::{sweep, Axis, Row as SweepRow};
use crate::{apply_variant, load_scenario, run_scenario, RunOptions};
use machine::Error;
use std::fmt::Write;

/// The source of the published figures.
const SRC_B: &str = "[PATCH v8 0/2] skip redundant sync IPIs when TLB flush sent them (Lance Yang, 2026-03-24): CAL row of /proc/interrupts, MADV_COLLAPSE of 20 GiB, 64 cores";

/// Seed (b): skip redundant `tlb_remove_table_sync_one()` IPIs: the CAL
/// row before and after, hugetlb unshare with lazy CPUs (the violations
/// the invariant monitor reports per variant), and step 2's table.
pub(super) fn skip_sync_seed(opts: &RunOptions) -> Result<Section, Error> {
    let mut out = String::new();
    let mut b_sec = Section::new(
        "seed-skip-redundant-sync-ipis",
        true,
        "mm: skip redundant tlb_remove_table_sync_one() IPIs (seed b)",
    );
    let base = b_sec.scenario("skip-sync-collapse")?;
    let cal = collapse_cal_rows(&base, opts, &mut out)?;
    b_sec.tables.push(cal);
    hugetlb_unshare_lazy(&mut b_sec, opts, &mut out)?;
    let step2 = step2_table(&mut b_sec, opts, &mut out)?;
    b_sec.tables.push(step2);
    b_sec.text = out;
    Ok(b_sec)
}

/// The CAL row of a `MADV_COLLAPSE` run upstream and with the skip, next
/// to the cover letter's: printed to `out`, and as the report's table.
fn collapse_cal_rows(
    base: &machine::Scenario,
    opts: &RunOptions,
    out: &mut String,
) -> Result<Table, Error> {
    let (before, _) = run_scenario(base, opts)?;
    let (after, _) = run_scenario(
        &apply_variant(base, "mm.skip_redundant_table_sync=true")?,
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
    let bb = Some((646_316.0, b as f64));
    let table = Table {
        caption: format!(
            "CAL row total, MADV_COLLAPSE of {} on {} CPUs",
            base.workload.size, base.machine.cpus
        ),
        head: cmp_head(),
        rows: vec![
            cmp_row(
                "before (upstream)",
                Some(646_316.0),
                Some(b as f64),
                Unit::Count,
                None,
                SRC_B,
            ),
            cmp_row(
                "after (skip redundant sync)",
                Some(785.0),
                Some(a as f64),
                Unit::Count,
                bb,
                SRC_B,
            ),
        ],
    };
    let _ = writeln!(
        out,
        "direction: more than two orders of magnitude fewer CAL interrupts: {}",
        yes(b >= 100 * a.max(1))
    );
    Ok(table)
}

/// hugetlb PMD unshare with two lazy CPUs, upstream, with the seed, and
/// with the seed leaving lazy CPUs out of the unshare flush: the
/// violations the invariant monitor reports for each.
fn hugetlb_unshare_lazy(
    sec: &mut Section,
    opts: &RunOptions,
    out: &mut String,
) -> Result<(), Error> {
    let h = apply_variant(&sec.scenario("hugetlb-unshare")?, "workload.lazy_threads=2")?;
    let mut found = Vec::new();
    for v in [
        "",
        "mm.skip_redundant_table_sync=true",
        "mm.skip_redundant_table_sync=true,mm.unshare_without_lazy_ipi=true",
    ] {
        let r = run_scenario(&apply_variant(&h, v)?, opts)?.0;
        let name = if v.is_empty() { "upstream" } else { v };
        sec.caught(&format!("hugetlb-unshare, 2 lazy CPUs: {name}"), &r);
        found.push(r.violations.len());
    }
    let _ = writeln!(
        out,
        "hugetlb-unshare with lazy CPUs: upstream -> {} violation(s) (a lazy CPU's PUD-entry cache outlives the unshare); seed -> {}; seed + unshare_without_lazy_ipi -> {}",
        found[0], found[1], found[2]
    );
    Ok(())
}

/// Seed (b) step 2's setups: where step 1 cannot help (its key is off with
/// INVLPGB and with a PV flush; arm64 has none).
pub const STEP2_SETUPS: [(&str, &[&str]); 3] = [
    (
        "x86 64 CPUs, INVLPGB",
        &["machine.cpus=64", "x86.invlpgb=true"],
    ),
    (
        "x86 KVM guest, 64 vCPUs",
        &[
            "machine.cpus=64",
            "x86.paravirt=kvm",
            "x86.vcpu_run_us=1000",
        ],
    ),
    (
        "arm64 128 cores",
        &["machine.arch=arm64", "machine.cpus=128"],
    ),
];

/// Step 2 as the switches set it: step 1's key and the targeted sync.
pub const STEP2: [&str; 2] = [
    "mm.skip_redundant_table_sync=true",
    "mm.targeted_table_sync=true",
];

/// Seed (b) step 2 (targeted sync IPIs; not posted): sync IPIs per
/// collapse and collapse time, upstream vs step 2, 64 MiB with 4 GUP-fast
/// threads on each setup (docs/seed-skip-redundant-sync-ipis.md, "Step 2,
/// evaluated", has 0-16 threads at 256 MiB).
fn step2_table(sec: &mut Section, opts: &RunOptions, out: &mut String) -> Result<Table, Error> {
    let _ = writeln!(
        out,
        "step 2 (targeted sync IPIs, not posted), 64 MiB, 4 GUP-fast threads:"
    );
    let mut rows = Vec::new();
    for (name, setup) in STEP2_SETUPS {
        let mut s = sec.scenario("skip-sync-collapse")?;
        for kv in setup
            .iter()
            .chain(&["workload.size=64MiB", "workload.threads=4"])
        {
            s.set(kv)?;
        }
        let mut per = Vec::new();
        for variant in [&[][..], &STEP2[..]] {
            let mut v = s.clone();
            for kv in variant {
                v.set(kv)?;
            }
            let (r, _) = run_scenario(&v, opts)?;
            sec.caught(&format!("step 2, {name}"), &r);
            let n = r.arch["collapses"].max(1) as f64;
            // A remote flush_tlb_func counts in both rows: the sync IPIs
            // are the CAL row less the TLB row.
            let sync = (r.interrupt_totals["CAL"] - r.interrupt_totals["TLB"]) as f64 / n;
            let us = r
                .ops
                .iter()
                .find(|o| o.name == "collapse_huge_page")
                .map_or(0.0, |o| o.latency_ns.mean / 1000.0);
            per.push((sync, us));
        }
        let [(up_ipi, up_us), (s2_ipi, s2_us)] = [per[0], per[1]];
        let _ = writeln!(
            out,
            "  {name}: sync IPIs per collapse {up_ipi:.2} -> {s2_ipi:.2}; collapse_huge_page {up_us:.1} -> {s2_us:.1} us ({:+.1}%)",
            (s2_us / up_us.max(1e-12) - 1.0) * 100.0
        );
        rows.push(vec![
            format!("step 2, {name}: sync IPIs per collapse"),
            "not posted (the cover letter's step 2)".into(),
            format!("{up_ipi:.2} -> {s2_ipi:.2}"),
            format!(
                "collapse_huge_page {up_us:.1} -> {s2_us:.1} us ({:+.1}%)",
                (s2_us / up_us.max(1e-12) - 1.0) * 100.0
            ),
            "docs/seed-skip-redundant-sync-ipis.md, Step 2, evaluated".into(),
        ]);
    }
    Ok(Table {
        caption: "seed (b) step 2: mm.targeted_table_sync, upstream -> step 2 (64 MiB, 4 GUP-fast threads)".into(),
        head: cmp_head(),
        rows,
    })
}

/// Seed (b): CAL interrupts per collapse and the collapse's time, against
/// CPUs, upstream and with the series.
pub(super) fn collapse_figures(opts: &RunOptions) -> Result<Vec<Figure>, Error> {
    let mut collapse = load_scenario("skip-sync-collapse")?;
    collapse.set("workload.size=2GiB")?;
    let axes = [
        Axis::parse("mm.skip_redundant_table_sync=false,true")?,
        Axis::parse("machine.cpus=8,16,32,64,128,256")?,
    ];
    let rows = sweep(&collapse, &axes, opts, false)?;
    let cal = |r: &SweepRow| r.cal_total as f64 / 1024.0;
    let ms = |r: &SweepRow| r.us_per_op / 1000.0;
    // The v8 cover letter: 20 GiB = 10240 collapses on 64 cores.
    let per_collapse = |cal: f64| cal / 10240.0;
    Ok(vec![
        figure(
            "seed-skip-redundant-sync-ipis",
            "CAL interrupts per 2 MiB collapse (MADV_COLLAPSE of 2 GiB); diamonds: the v8 cover letter's 20 GiB run on 64 cores, per collapse",
            line_chart_published(
                "CAL per collapse vs CPUs",
                "CPUs",
                "CAL interrupts per collapse",
                &[
                    series("upstream", curve(&rows, "false", cal)),
                    series("skip redundant sync", curve(&rows, "true", cal)),
                ],
                &[
                    published("upstream (v8)", 64.0, per_collapse(646_316.0)),
                    published("with the series (v8)", 64.0, per_collapse(785.0)),
                ],
            ),
        )?,
        figure(
            "seed-skip-redundant-sync-ipis",
            "Time to collapse 2 GiB",
            line_chart(
                "MADV_COLLAPSE of 2 GiB vs CPUs",
                "CPUs",
                "ms",
                &[
                    series("upstream", curve(&rows, "false", ms)),
                    series("skip redundant sync", curve(&rows, "true", ms)),
                ],
            ),
        )?,
    ])
}
