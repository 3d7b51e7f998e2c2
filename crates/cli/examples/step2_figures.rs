//! Seed (b) step 2, evaluated: sync IPIs and collapse time, upstream vs
//! step 1 vs step 2 (`mm.targeted_table_sync`), on the setups step 1 cannot
//! help, with 0, 1, 4 and 16 GUP-fast threads; the break-even; and the
//! figure of sync IPIs saved against walkers.
//!
//! `cargo run --release -p tlblab --example step2_figures [OUT.svg]`
use machine::{Cost, CostProfile};
use tlblab::plot::{line_chart, Series};
use tlblab::{load_scenario, run_scenario, RunOptions};

use tlblab::demo::{STEP2, STEP2_SETUPS as SETUPS};

const VARIANTS: [(&str, &[&str]); 3] = [
    ("upstream", &[]),
    ("step 1", &["mm.skip_redundant_table_sync=true"]),
    ("step 2", &STEP2),
];
const WALKERS: [u32; 4] = [0, 1, 4, 16];
const SIZE: &str = "workload.size=256MiB";

struct Row {
    cal: u64,
    tlb: u64,
    collapses: u64,
    collapse_us: f64,
    walks: u64,
    sim_ms: f64,
}

fn run(setup: &[&str], variant: &[&str], k: u32) -> Row {
    let mut s = load_scenario("skip-sync-collapse").unwrap();
    let threads = format!("workload.threads={k}");
    for kv in setup.iter().chain(variant).chain(&[SIZE, threads.as_str()]) {
        s.set(kv).unwrap();
    }
    let r = run_scenario(&s, &RunOptions::default()).unwrap().0;
    assert!(r.violations.is_empty(), "{setup:?} {variant:?} {k}");
    let op = r
        .ops
        .iter()
        .find(|o| o.name == "collapse_huge_page")
        .unwrap();
    Row {
        cal: r.interrupt_totals["CAL"],
        tlb: r.interrupt_totals["TLB"],
        collapses: r.arch["collapses"],
        collapse_us: op.latency_ns.mean / 1e3,
        walks: r.arch["gup_fast"],
        sim_ms: r.sim_time_ns as f64 / 1e6,
    }
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or("step2-ipis-saved.svg".into());
    let mut series = Vec::new();
    println!("| setup | GUP-fast threads | variant | CAL (sync IPIs) | TLB IPIs | collapse_huge_page mean (us) | GUP-fast walks per ms |");
    println!("|---|---|---|---|---|---|---|");
    for (name, setup) in SETUPS {
        let arch = if name.starts_with("arm64") {
            machine::scenario::Arch::Arm64
        } else {
            machine::scenario::Arch::X86
        };
        let p = CostProfile::default_for(arch);
        let mut saved = Vec::new();
        for k in WALKERS {
            let rows: Vec<Row> = VARIANTS.iter().map(|(_, v)| run(setup, v, k)).collect();
            for ((vname, _), r) in VARIANTS.iter().zip(&rows) {
                println!(
                    "| {name} | {k} | {vname} | {} | {} | {:.2} | {:.0} |",
                    r.cal,
                    r.tlb,
                    r.collapse_us,
                    r.walks as f64 / r.sim_ms
                );
            }
            let (up, s2) = (&rows[0], &rows[2]);
            let per_collapse = (up.cal as f64 - s2.cal as f64) / up.collapses as f64;
            saved.push((k as f64, per_collapse));
            // What one avoided collapse-time sync costs: the collapser's
            // wait, and each avoided IPI's handler on its target.
            let handler = p.ns(Cost::IrqEntry) + p.ns(Cost::CsdRun) + p.ns(Cost::IrqExit);
            let s_ns = (up.collapse_us - s2.collapse_us) * 1e3 + per_collapse * handler;
            let o_ns = 2.0 * p.ns(Cost::LocklessWalkStore) + p.ns(Cost::LocklessWalkMb);
            println!(
                "|   | {k} | break-even | saves {s_ns:.0} ns per collapse, costs {o_ns:.0} ns per walk: pays above 1 collapse per {:.0} walks (here 1 per {:.0}) | | | |",
                s_ns / o_ns,
                s2.walks as f64 / s2.collapses as f64
            );
        }
        series.push(Series {
            name: name.to_string(),
            points: saved,
        });
    }
    let svg = line_chart(
        "Seed (b) step 2: sync IPIs saved per 2 MiB collapse vs upstream",
        "GUP-fast threads of the collapsing mm",
        "sync IPIs saved per collapse",
        &series,
    )
    .unwrap();
    std::fs::write(&out, svg).unwrap();
    println!("figure: {out}");
}
