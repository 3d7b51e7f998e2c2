//! SVG figures for reports (plotters, SVG backend: no fonts needed).

use plotters::prelude::*;

/// One named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart (linear axes from zero) as an SVG string.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<String, String> {
    line_chart_published(title, x_label, y_label, series, &[])
}

/// [`line_chart`] with published figures drawn as large hollow diamonds
/// (one legend entry per published series), next to the model's lines.
pub fn line_chart_published(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    published: &[Series],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let all = || series.iter().chain(published);
        let xs = all().flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = all().flat_map(|s| s.points.iter().map(|p| p.1));
        let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
        let y1 = ys.fold(0.0f64, f64::max).max(1.0) * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x1.max(x0 + 1.0) * 1.05, 0.0..y1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .x_labels(8)
            .y_labels(8)
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(|e| e.to_string())?;
        let palette = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
        for (i, s) in series.iter().enumerate() {
            let c = palette[i % palette.len()];
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(|e| e.to_string())?;
        }
        for (i, s) in published.iter().enumerate() {
            let c = palette[i % palette.len()];
            chart
                .draw_series(s.points.iter().map(|p| {
                    EmptyElement::at(*p)
                        + PathElement::new(
                            vec![(0, -7), (7, 0), (0, 7), (-7, 0), (0, -7)],
                            c.stroke_width(2),
                        )
                }))
                .map_err(|e| e.to_string())?
                .label(format!("published: {}", s.name))
                .legend(move |(x, y)| {
                    PathElement::new(
                        vec![
                            (x + 10, y - 6),
                            (x + 16, y),
                            (x + 10, y + 6),
                            (x + 4, y),
                            (x + 10, y - 6),
                        ],
                        c.stroke_width(2),
                    )
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The main op's latency CDF of each run: x = log10 of the latency in ns
/// (tails span orders of magnitude), y = the quantile in nines
/// (1 = p90, 2 = p99, 3 = p99.9, 4 = p99.99; the maximum is drawn at 5).
pub fn latency_cdf(
    title: &str,
    labels: &[String],
    reports: &[sim::Report],
) -> Result<String, String> {
    let series: Vec<Series> = labels
        .iter()
        .zip(reports)
        .map(|(l, r)| Series {
            name: l.clone(),
            points: r
                .main_op()
                .map(|o| {
                    o.cdf
                        .iter()
                        .map(|&(q, ns)| {
                            // "Nines": 0.9 -> 1, 0.99 -> 2, ...; the maximum at 5.
                            let nines = if q >= 1.0 { 5.0 } else { -(1.0 - q).log10() };
                            ((ns.max(1) as f64).log10(), nines)
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    let op = reports
        .first()
        .and_then(|r| r.main_op())
        .map_or("op".to_string(), |o| o.name.clone());
    line_chart(
        &format!("{title}: {op} latency CDF"),
        "latency, log10 ns",
        "quantile, nines (3 = p99.9; max at 5)",
        &series,
    )
}

/// A sweep metric against the last axis, one series per combination of
/// the other axes' values. `metric` is a `sweep.csv` column.
pub fn sweep_chart(
    title: &str,
    axes: &[crate::sweep::Axis],
    rows: &[crate::sweep::Row],
    metric: &str,
) -> Result<String, String> {
    let Some(last) = axes.last() else {
        return Err("sweep --plot needs at least one --over axis".into());
    };
    if rows.first().is_some_and(|r| r.metric(metric).is_none()) {
        return Err(format!(
            "--y {metric}: not a sweep metric ({})",
            crate::sweep::metric_names()
        ));
    }
    let mut series: Vec<Series> = Vec::new();
    for r in rows {
        let (others, x) = r.values.split_at(r.values.len() - 1);
        let name = if others.is_empty() {
            metric.to_string()
        } else {
            others
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let xv = x[0]
            .1
            .parse::<f64>()
            .unwrap_or_else(|_| last.values.iter().position(|v| *v == x[0].1).unwrap_or(0) as f64);
        let y = r.metric(metric).unwrap_or(0.0);
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((xv, y)),
            None => series.push(Series {
                name,
                points: vec![(xv, y)],
            }),
        }
    }
    line_chart(
        &format!("{title}: {metric} vs {}", last.key),
        &last.key,
        metric,
        &series,
    )
}
