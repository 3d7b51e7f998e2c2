//! Reclaim and page migration (issue 35): IPIs, TLBIs and time per
//! reclaimed or migrated page, each architecture's batched-unmap series on
//! (today) and off (`<arch>.batched_unmap = false`), next to the published
//! figures of Huang Ying's x86 migration batching (v6.3, 7e12beb8ca2a).

use super::{cmp_head, cmp_row, Section, Table, Unit};
use crate::{run_scenario, RunOptions};
use machine::Error;
use std::fmt::Write;

/// A run: scenario, architecture, the settings of its machine, iterations.
type Setup = (&'static str, &'static str, &'static [&'static str], u64);

/// The architectures and the machine each runs a scenario on: the bundled
/// one's, except where migration needs NUMA nodes the architecture's
/// default topology lacks at that size. Few kswapd passes: its readers
/// make most of the events (the whole section takes a few seconds).
const SETUPS: &[Setup] = &[
    ("kswapd-reclaim", "x86", &[], 8),
    ("kswapd-reclaim", "arm64", &[], 8),
    ("kswapd-reclaim", "riscv", &[], 8),
    // 2-socket Ice Lake, 128 CPUs: one node per socket.
    ("migrate-pages", "x86", &[], 40),
    // Neoverse N2 has one node: two nodes of 64 cores.
    (
        "migrate-pages",
        "arm64",
        &["machine.topology=two_nodes"],
        40,
    ),
    // SG2042: four nodes of 16 harts.
    ("migrate-pages", "riscv", &["machine.cpus=64"], 40),
];

/// One run's figures per reclaimed or migrated page.
struct PerPage {
    pages: u64,
    ipis: f64,
    flushes: f64,
    tlbi: f64,
    dsb: f64,
    us: f64,
}

/// Run `name` on `arch` with its batched-unmap switch `batched`.
fn per_page(
    w: &mut Section,
    opts: &RunOptions,
    (name, arch, sets, iterations): Setup,
    batched: bool,
) -> Result<PerPage, Error> {
    let mut s = w.scenario(name)?;
    s.set(&format!("machine.arch={arch}"))?;
    for kv in sets {
        s.set(kv)?;
    }
    s.set(&format!("{arch}.batched_unmap={batched}"))?;
    s.workload.iterations = iterations;
    let (r, _) = run_scenario(&s, opts)?;
    let a = &r.arch;
    let pages = a.get("pgmigrate_success").or(a.get("pgsteal")).copied();
    let pages = pages.unwrap_or(0).max(1);
    let o = r.main_op().expect("workload op");
    let per = |v: u64| v as f64 / pages as f64;
    Ok(PerPage {
        pages,
        ipis: per(a["ipis_sent"]),
        flushes: per(a["tlbbatch_flushes"] + a["ptep_clear_flush"]),
        tlbi: per(a["tlbi_is"]),
        dsb: per(a["dsb_ish"]),
        us: o.latency_ns.mean * o.count as f64 / pages as f64 / 1000.0,
    })
}

/// The reclaim/migration section: per-page figures, batching on and off,
/// per architecture; the x86 migration pair against Huang Ying's figures.
pub(super) fn reclaim_migration(opts: &RunOptions) -> Result<Section, Error> {
    let mut w = Section::new(
        "reclaim-migration",
        false,
        "Reclaim and page migration: batched unmap flushes per architecture",
    );
    let head = ["scenario", "arch", "batched_unmap", "pages"];
    let cols = [
        "IPIs/page",
        "flushes/page",
        "TLBI IS/page",
        "DSB ISH/page",
        "us/page",
    ];
    let mut t = Table {
        caption: "per reclaimed (kswapd) or migrated (migratepages) page; flushes = arch_tlbbatch_flush + ptep_clear_flush calls".into(),
        head: head.iter().chain(&cols).map(|c| c.to_string()).collect(),
        rows: Vec::new(),
    };
    let mut out =
        String::from("== reclaim and page migration: per page, batched unmap on/off ==\n");
    let _ = writeln!(
        out,
        "{:<15} {:<6} {:<6} {:>7} {:>10} {:>13} {:>13} {:>13} {:>9}",
        "scenario", "arch", "batch", "pages", cols[0], cols[1], cols[2], cols[3], cols[4]
    );
    let mut x86_migrate = Vec::new();
    for &setup in SETUPS {
        for batched in [true, false] {
            let p = per_page(&mut w, opts, setup, batched)?;
            let cells = [p.ipis, p.flushes, p.tlbi, p.dsb].map(|v| format!("{v:.3}"));
            let _ = writeln!(
                out,
                "{:<15} {:<6} {:<6} {:>7} {:>10} {:>13} {:>13} {:>13} {:>9.3}",
                setup.0, setup.1, batched, p.pages, cells[0], cells[1], cells[2], cells[3], p.us
            );
            let mut row = vec![setup.0.into(), setup.1.into(), batched.to_string()];
            row.push(p.pages.to_string());
            row.extend(cells);
            row.push(format!("{:.3}", p.us));
            t.rows.push(row);
            if setup.0 == "migrate-pages" && setup.1 == "x86" {
                x86_migrate.push(p);
            }
        }
    }
    w.tables.push(t);
    if let [on, off] = &x86_migrate[..] {
        w.tables.push(huang_table(on, off, &mut out));
    }
    out.push('\n');
    w.text = out;
    Ok(w)
}

/// x86 migration, batching on against off, as 7e12beb8ca2a's commit
/// message reports it (pmbench + `migratepages` back and forth on a
/// 2-socket Intel server).
fn huang_table(on: &PerPage, off: &PerPage, out: &mut String) -> Table {
    let src = "Huang Ying, 7e12beb8ca2a \"migrate_pages: batch flushing TLB\" (v6.3): 2-socket Intel server, pmbench + migratepages";
    let ipis = (on.ipis / off.ipis.max(1e-12) - 1.0) * 100.0;
    let rate = (off.us / on.us.max(1e-12) - 1.0) * 100.0;
    let rows = vec![
        cmp_row(
            "TLB flush IPIs",
            Some(-99.1),
            Some(ipis),
            Unit::Pct,
            None,
            src,
        ),
        cmp_row(
            "pages migrated per second",
            Some(291.7),
            Some(rate),
            Unit::Pct,
            None,
            src,
        ),
    ];
    let _ = writeln!(
        out,
        "x86 migration, batched vs not: IPIs {ipis:+.1}% (published -99.1%), pages/s {rate:+.1}% (published +291.7%)"
    );
    Table {
        caption: "x86 page migration: batched against before the series (7e12beb8ca2a)".into(),
        head: cmp_head(),
        rows,
    }
}
