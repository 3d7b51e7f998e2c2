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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
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
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}
