//! Charts as SVG text, drawn with plotters (the Rust field's plotting
//! library, here with its SVG backend only: no fonts or system libraries).
//! `report` puts them in `herd sim --report`'s page; `herd plot` draws
//! [`GroupedBars`] for the scripts (S3's Figures 3-5).

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::prelude::*;
use serde::Deserialize;

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the chart: {0}")]
pub struct ChartError(String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for ChartError {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        ChartError(e.to_string())
    }
}

/// Tableau's ten colours: distinct, and readable on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];

/// The colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Draws on a fresh SVG canvas of `size` and returns its text.
fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), ChartError>,
) -> Result<String, ChartError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
    }
    Ok(out)
}

/// A band axis's label: `name(i)` at the middle of band `i` of `n`,
/// nothing at the bands' edges.
fn band(at: &SegmentValue<i32>, n: usize, name: impl Fn(usize) -> String) -> String {
    match at {
        SegmentValue::CenterOf(i) if (0..n as i32).contains(i) => name(*i as usize),
        _ => String::new(),
    }
}

/// A chart of horizontal bands ([`rows_chart`]).
type RowsChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordi32>>>;

/// A chart of `rows` horizontal bands over 0..`x_end`, with room for
/// labels `label_px` wide on the left.
fn rows_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x_end: f64,
    rows: usize,
    label_px: u32,
) -> Result<RowsChart<'a, 'b>, ChartError> {
    Ok(ChartBuilder::on(root)
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(label_px)
        .build_cartesian_2d(0.0..x_end, (0..rows as i32).into_segmented())?)
}

/// The series' legend, boxed, at `at`.
fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    at: SeriesLabelPosition,
) -> Result<(), ChartError> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// One horizontal bar per (label, value); `x_desc` names the axis with its
/// unit.
pub fn bars(x_desc: &str, values: &[(String, f64)]) -> Result<String, ChartError> {
    let n = values.len().max(1);
    let most = values
        .iter()
        .map(|v| v.1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let most = if most > 0.0 { most * 1.1 } else { 1.0 };
    svg((760, 50 + 26 * n as u32), |root| {
        let mut chart = rows_chart(root, most, n, 260)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(x_desc)
            // Bars count top down; the axis bottom up.
            .y_labels(n)
            .y_label_formatter(&|y| band(y, n, |i| values[n - 1 - i].0.clone()))
            .draw()?;
        chart.draw_series(values.iter().enumerate().filter(|(_, v)| v.1.is_finite()).map(
            |(i, (_, v))| {
                let row = (n - 1 - i) as i32;
                let (lo, hi) = (SegmentValue::Exact(row), SegmentValue::Exact(row + 1));
                let mut bar = Rectangle::new([(0.0, lo), (*v, hi)], colour(i).filled());
                bar.set_margin(4, 4, 0, 0);
                bar
            },
        ))?;
        Ok(())
    })
}

/// A span of time on one row of a [`timeline`].
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// The row (a CPU).
    pub row: u32,
    /// Start, in seconds.
    pub start_s: f64,
    /// End, in seconds.
    pub end_s: f64,
    /// The series (a job): its colour and legend entry.
    pub series: usize,
    /// How strongly it is drawn, in (0, 1]: a CPU shared by k threads is
    /// drawn at 1/k, each thread having had 1/k of it.
    pub opacity: f64,
}

/// Which series ran where over time: one row per CPU, one colour per job.
pub fn timeline(spans: &[Span], series: &[String]) -> Result<String, ChartError> {
    let mut rows: Vec<u32> = spans.iter().map(|s| s.row).collect();
    rows.sort_unstable();
    rows.dedup();
    let end_s = spans.iter().map(|s| s.end_s).fold(0.0, f64::max).max(1e-9);
    let n = rows.len().max(1);
    svg((960, 80 + 16 * n as u32 + 18 * series.len() as u32), |root| {
        let mut chart = rows_chart(root, end_s, n, 60)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("time (s)")
            .y_labels(n.min(64))
            .y_label_formatter(&|y| band(y, n, |i| format!("CPU {}", rows[i])))
            .draw()?;
        for (k, name) in series.iter().enumerate() {
            let mine = spans.iter().filter(|s| s.series == k);
            chart
                .draw_series(mine.map(|s| {
                    let r = rows.binary_search(&s.row).unwrap_or(0) as i32;
                    let fill = colour(k).mix(s.opacity.clamp(0.05, 1.0)).filled();
                    let (lo, hi) = (SegmentValue::Exact(r), SegmentValue::Exact(r + 1));
                    let mut span = Rectangle::new([(s.start_s, lo), (s.end_s, hi)], fill);
                    span.set_margin(1, 1, 0, 0);
                    span
                }))?
                .label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour(k).filled()));
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}

/// A line over time: (time in seconds, value) points.
pub type Line = (String, Vec<(f64, f64)>);

/// Lines over time on one value axis (`y_desc`), over grey steps on a
/// second axis (`steps_desc`, from 0 to its most), with spans of time shaded
/// where something went wrong (`shade`: start and end in seconds).
pub fn lines_over_steps(
    y_desc: &str,
    lines: &[Line],
    steps_desc: &str,
    steps: &[(f64, f64, f64)],
    shade: &[(f64, f64)],
) -> Result<String, ChartError> {
    let end_s = steps
        .iter()
        .map(|s| s.1)
        .chain(lines.iter().flat_map(|l| l.1.iter().map(|p| p.0)))
        .fold(0.0, f64::max)
        .max(1e-9);
    let top = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.1;
    let most_steps = steps.iter().map(|s| s.2).fold(0.0, f64::max).max(1.0);
    svg((960, 340), |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(60)
            .right_y_label_area_size(60)
            .build_cartesian_2d(0.0..end_s, 0.0..top)?
            .set_secondary_coord(0.0..end_s, 0.0..most_steps);
        chart.configure_mesh().x_desc("time (s)").y_desc(y_desc).draw()?;
        chart.configure_secondary_axes().y_desc(steps_desc).draw()?;
        let red = RGBColor(0xe1, 0x57, 0x59).mix(0.15).filled();
        chart.draw_series(
            shade
                .iter()
                .map(|&(a, b)| Rectangle::new([(a, 0.0), (b, top)], red)),
        )?;
        let grey = RGBColor(0xbb, 0xbb, 0xbb).stroke_width(6);
        let stairs = steps.iter().flat_map(|&(a, b, v)| [(a, v), (b, v)]);
        chart
            .draw_secondary_series(LineSeries::new(stairs, grey))?
            .label(steps_desc)
            .legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 14, y)], RGBColor(0xbb, 0xbb, 0xbb).stroke_width(6))
            });
        for (k, (name, points)) in lines.iter().enumerate() {
            chart
                .draw_series(LineSeries::new(points.iter().copied(), colour(k).stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], colour(k).stroke_width(2)));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

/// Bars in groups in panels (S3's Figures 3-5: a panel per platform, a
/// group per task set, a bar per policy), each bar drawn from `reference`
/// (1: as fast as linux) to its value. `herd plot` reads it as JSON.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupedBars {
    /// The figure's title.
    pub title: String,
    /// The value axis, with its unit.
    pub y_desc: String,
    /// Where bars start from (drawn as a black line).
    #[serde(default)]
    pub reference: f64,
    /// The series, in legend order.
    pub series: Vec<String>,
    /// The panels, top to bottom.
    pub panels: Vec<Panel>,
}

/// One panel of [`GroupedBars`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Panel {
    /// Its title.
    pub name: String,
    /// Its groups, left to right: a name and one value per series (`null`:
    /// no bar).
    pub groups: Vec<(String, Vec<Option<f64>>)>,
}

/// Draws [`GroupedBars`].
pub fn grouped_bars(fig: &GroupedBars) -> Result<String, ChartError> {
    let values = fig
        .panels
        .iter()
        .flat_map(|p| p.groups.iter().flat_map(|g| g.1.iter().flatten()));
    let (lo, hi) = values.fold((fig.reference, fig.reference), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    let pad = ((hi - lo) * 0.08).max(0.01);
    let (lo, hi) = (lo - pad, hi + pad);
    let per_panel = 240;
    let legend = 18 * fig.series.len() as u32 + 20;
    let height = 40 + per_panel * fig.panels.len().max(1) as u32 + legend;
    // Each group as wide as its bars, and as its name needs (about 7 px a
    // character at the axis's font size), so names do not run together.
    let longest = fig
        .panels
        .iter()
        .flat_map(|p| p.groups.iter().map(|g| g.0.len()))
        .max()
        .unwrap_or(1) as u32;
    let group_px = (14 * (fig.series.len() as u32 + 1)).max(7 * longest + 12);
    let groups = fig.panels.iter().map(|p| p.groups.len()).max().unwrap_or(1) as u32;
    let width = 120 + group_px * groups;
    svg((width.max(560), height), |root| {
        let root = root.titled(&fig.title, ("sans-serif", 16))?;
        let (plots, key) = root.split_vertically(root.dim_in_pixel().1 - legend);
        let areas = plots.split_evenly((fig.panels.len().max(1), 1));
        let k = fig.series.len().max(1);
        for (panel, area) in fig.panels.iter().zip(&areas) {
            // One band per bar and one empty band between groups; a
            // group's name stands under its middle bar.
            let per_group = k + 1;
            let slots = panel.groups.len().max(1) * per_group;
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.name, ("sans-serif", 13))
                .margin(6)
                .x_label_area_size(24)
                .y_label_area_size(56)
                .build_cartesian_2d((0..slots as i32).into_segmented(), lo..hi)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc(fig.y_desc.as_str())
                .x_labels(slots)
                .x_label_formatter(&|x| {
                    band(x, slots, |j| {
                        let g = &panel.groups[j / per_group];
                        if j % per_group == (k - 1) / 2 {
                            g.0.clone()
                        } else {
                            String::new()
                        }
                    })
                })
                .draw()?;
            for (g, (_, vals)) in panel.groups.iter().enumerate() {
                let bars = vals.iter().enumerate().filter_map(|(s, v)| v.map(|v| (s, v)));
                chart.draw_series(bars.map(|(s, v)| {
                    let j = (g * per_group + s) as i32;
                    let (a, b) = (SegmentValue::Exact(j), SegmentValue::Exact(j + 1));
                    let mut bar = Rectangle::new([(a, fig.reference), (b, v)], colour(s).filled());
                    bar.set_margin(0, 0, 1, 1);
                    bar
                }))?;
            }
            let ends = [SegmentValue::Exact(0), SegmentValue::Exact(slots as i32)];
            chart.draw_series(LineSeries::new(ends.map(|x| (x, fig.reference)), BLACK))?;
        }
        for (s, name) in fig.series.iter().enumerate() {
            let y = 6 + 18 * s as i32;
            key.draw(&Rectangle::new([(60, y), (72, y + 12)], colour(s).filled()))?;
            key.draw(&Text::new(name.as_str(), (80, y), ("sans-serif", 12)))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_their_labels() {
        let b = bars("makespan (s)", &[("linux".into(), 2.0), ("smt:spn".into(), 1.5)]).unwrap();
        assert!(
            b.starts_with("<svg") && b.contains("makespan (s)") && b.contains("smt:spn"),
            "{b}"
        );
        let fig = GroupedBars {
            title: "completion".into(),
            y_desc: "completion vs linux".into(),
            reference: 1.0,
            series: vec!["a".into(), "b".into()],
            panels: vec![Panel {
                name: "UMA".into(),
                groups: vec![("HD1".into(), vec![Some(0.9), None])],
            }],
        };
        let g = grouped_bars(&fig).unwrap();
        assert!(
            g.contains("UMA") && g.contains("HD1") && g.contains("completion vs linux"),
            "{g}"
        );
        let spans = [Span {
            row: 0,
            start_s: 0.0,
            end_s: 1.0,
            series: 0,
            opacity: 1.0,
        }];
        let t = timeline(&spans, &["job".into()]).unwrap();
        assert!(t.contains("CPU 0") && t.contains("time (s)"), "{t}");
    }
}
