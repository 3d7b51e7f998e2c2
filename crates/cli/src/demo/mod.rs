//! `tlblab demo`: every seed result built so far, in the cover letters' form.
//!
//! The driver and the helpers every section shares (tables, published
//! against model rows, figures) are here; each seed's experiment and
//! figures are in its own module (`flush_tlb_info`, `skip_sync`,
//! `arm64_wp_reuse`, `riscv_defer`), next to `will_it_scale`, `reclaim`
//! (reclaim and page migration per architecture), `checks` (the
//! checker's catalogue) and `report` (the HTML report).

use machine::Error;

mod arm64_wp_reuse;
mod checks;
mod flush_tlb_info;
mod reclaim;
mod report;
mod riscv_defer;
mod skip_sync;
mod will_it_scale;

pub use checks::checks;
pub use report::{write_report, Meta};
pub use skip_sync::{STEP2, STEP2_SETUPS};

use arm64_wp_reuse::{arm64_seed, arm64_share_figure};
use flush_tlb_info::{flush_tlb_info_seed, rt_latency_figure};
use reclaim::reclaim_migration;
use riscv_defer::{riscv_ipi_figure, riscv_seed};
use skip_sync::{collapse_figures, skip_sync_seed};
use will_it_scale::{will_it_scale, will_it_scale_figure};

use crate::plot::Series;
use crate::sweep::Row as SweepRow;
use crate::{load_scenario, RunOptions};

/// One row of a seed table: the published figure next to the model's.
pub struct Row {
    pub variant: &'static str,
    pub published: f64,
    pub model: f64,
}

/// A table of the report: caption, header cells, rows of cells.
pub struct Table {
    pub caption: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// An unsafe variant and how it goes wrong, in kernel terms.
pub struct Unsafe {
    pub variant: String,
    pub verdict: String,
    /// The events that lead to the violation, the violation last.
    pub steps: Vec<String>,
}

/// One part of the report: a seed's experiment (or the checker's catalogue).
pub struct Section {
    /// Anchor; for a seed also its docs page, `docs/{id}.md`.
    pub id: &'static str,
    pub title: String,
    pub doc: Option<&'static str>,
    /// What `tlblab demo` prints for it.
    pub text: String,
    pub tables: Vec<Table>,
    pub unsafe_variants: Vec<Unsafe>,
    /// Bundled scenarios it ran, with their seeds.
    pub scenarios: Vec<(String, u64)>,
}

impl Section {
    fn new(id: &'static str, doc: bool, title: &str) -> Section {
        Section {
            id,
            title: title.to_string(),
            doc: doc.then_some(id),
            text: String::new(),
            tables: Vec::new(),
            unsafe_variants: Vec::new(),
            scenarios: Vec::new(),
        }
    }

    /// Load a bundled scenario and note it (and its seed) as used here.
    fn scenario(&mut self, name: &str) -> Result<machine::Scenario, Error> {
        let s = load_scenario(name)?;
        if !self.scenarios.iter().any(|(n, _)| n == name) {
            self.scenarios.push((name.to_string(), s.seed));
        }
        Ok(s)
    }

    /// The first violation of `r` as an unsafe variant, if it has one.
    fn caught(&mut self, variant: &str, r: &sim::Report) {
        if let Some(v) = r.violations.first() {
            let mut steps = v.trace.clone();
            steps.push(format!(
                "VIOLATION I{} on CPU{} at {} ({} ns): {}",
                v.invariant, v.cpu, v.addr, v.time_ns, v.what
            ));
            self.unsafe_variants.push(Unsafe {
                variant: variant.to_string(),
                verdict: format!(
                    "{} violation(s), the first of invariant {}",
                    r.violations.len(),
                    v.invariant
                ),
                steps,
            });
        }
    }
}

/// How a published figure and the model's compare.
#[derive(Clone, Copy)]
enum Unit {
    /// Microseconds per op: relative difference.
    Us,
    /// Event counts: relative difference.
    Count,
    /// A percentage: difference in percentage points.
    Pct,
}

fn fmt_val(v: f64, u: Unit) -> String {
    match u {
        Unit::Us => format!("{v:.4} us/op"),
        Unit::Count => format!("{v:.0}"),
        Unit::Pct => format!("{v:+.1}%").replace('+', ""),
    }
}

/// The header of every published-vs-model table.
fn cmp_head() -> Vec<String> {
    [
        "variant",
        "published",
        "model",
        "difference",
        "source of the published figure",
    ]
    .map(String::from)
    .to_vec()
}

/// A published-vs-model row. With `base` (the published and model values
/// of the baseline), each side also shows its change against its own
/// baseline and the difference compares those changes (machines differ,
/// so the direction and size of the change is what carries over).
fn cmp_row(
    variant: &str,
    published: Option<f64>,
    model: Option<f64>,
    unit: Unit,
    base: Option<(f64, f64)>,
    source: &str,
) -> Vec<String> {
    let rel = |v: f64, b: f64| (v / b.max(1e-12) - 1.0) * 100.0;
    let cell = |v: Option<f64>, b: Option<f64>| match (v, b) {
        (None, _) => "—".to_string(),
        (Some(v), Some(b)) => format!("{} ({:+.2}% vs base)", fmt_val(v, unit), rel(v, b)),
        (Some(v), None) => fmt_val(v, unit),
    };
    let diff = match (published, model, base, unit) {
        (Some(p), Some(m), Some((pb, mb)), _) => {
            format!("{:+.2} pp (change vs base)", rel(m, mb) - rel(p, pb))
        }
        (Some(p), Some(m), None, Unit::Pct) => format!("{:+.1} pp", m - p),
        (Some(p), Some(m), None, _) => format!("{:+.1}%", rel(m, p)),
        _ => "—".to_string(),
    };
    vec![
        variant.to_string(),
        cell(published, base.map(|b| b.0)),
        cell(model, base.map(|b| b.1)),
        diff,
        source.to_string(),
    ]
}

/// Run the reduced seed experiments: one section per seed, with its tables.
pub fn demo(opts: &RunOptions, iterations: u64) -> Result<Vec<Section>, Error> {
    Ok(vec![
        flush_tlb_info_seed(opts, iterations)?,
        will_it_scale(opts, iterations)?,
        skip_sync_seed(opts)?,
        arm64_seed(opts, iterations)?,
        riscv_seed(opts)?,
        reclaim_migration(opts)?,
    ])
}

/// What `tlblab demo` prints: the header and every section's text.
pub fn text(sections: &[Section], iterations: u64) -> String {
    let mut out =
        format!("tlblab demo: each seed's experiment, reduced to {iterations} iterations\n\n");
    for s in sections {
        out.push_str(&s.text);
    }
    out
}

/// A figure of the report, in the section `section`.
pub struct Figure {
    pub section: &'static str,
    pub caption: String,
    pub svg: String,
}

/// A published point as a one-point series.
fn published(name: &str, x: f64, y: f64) -> crate::plot::Series {
    crate::plot::Series {
        name: name.to_string(),
        points: vec![(x, y)],
    }
}

/// The demo's figures from sweeps (reduced sizes), as inline SVGs, with the
/// published points drawn where a seed published a comparable figure.
pub fn figures(opts: &RunOptions) -> Result<Vec<Figure>, Error> {
    let mut figs = collapse_figures(opts)?;
    figs.push(will_it_scale_figure(opts)?);
    figs.push(rt_latency_figure(opts)?);
    figs.push(arm64_share_figure(opts)?);
    figs.push(riscv_ipi_figure(opts)?);
    Ok(figs)
}

fn figure(
    section: &'static str,
    caption: &str,
    svg: Result<String, String>,
) -> Result<Figure, Error> {
    Ok(Figure {
        section,
        caption: caption.to_string(),
        svg: svg.map_err(Error::Config)?,
    })
}

/// A two-axis sweep's curve: the rows whose first axis is `first`, as
/// (second axis, `y` of the row) points.
fn curve(rows: &[SweepRow], first: &str, y: impl Fn(&SweepRow) -> f64) -> Vec<(f64, f64)> {
    rows.iter()
        .filter(|r| r.values[0].1 == first)
        .map(|r| (r.values[1].1.parse().unwrap_or(0.0), y(r)))
        .collect()
}

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.into(),
        points,
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "reproduced"
    } else {
        "NOT reproduced"
    }
}
