//! The SVG plots of `clasp run --out DIR` (plotters' SVG backend, as the simulator's plots):
//! input rate, throughput and workers over time; latency per interval; and the estimates α, β,
//! γ, W̄, each with the migrations marked.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde_json::Value;

use super::{IntervalRow, MigrationRow, RunRecord};

/// Renders rate.svg, latency.svg and estimates.svg; returns (file name, SVG text) in that
/// order, for the caller to write.
pub(super) fn render_plots(rec: &RunRecord) -> Result<Vec<(&'static str, String)>, String> {
    let title = run_title(&rec.summary);
    let plots: [(&str, PlotFn); 3] = [
        ("rate.svg", plot_rate),
        ("latency.svg", plot_latency),
        ("estimates.svg", plot_estimates),
    ];
    let mut rendered = Vec::new();
    for (name, plot) in plots {
        let mut svg = String::new();
        plot(&mut svg, rec, &title).map_err(|e| format!("plotting {name}: {e}"))?;
        rendered.push((name, svg));
    }
    Ok(rendered)
}

fn run_title(summary: &Value) -> String {
    match (summary["app"].as_str(), summary["policy"].as_str()) {
        (Some(a), Some(p)) => format!("{a} / {p}"),
        (Some(a), None) => a.to_string(),
        (None, Some(p)) => p.to_string(),
        (None, None) => "clasp run".to_string(),
    }
}

type PlotFn = fn(&mut String, &RunRecord, &str) -> Result<(), String>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A legend label, a colour and the points of one line.
type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);
/// A panel's name and how to read its value from an interval.
type Panel = (&'static str, fn(&IntervalRow) -> f64);

const INPUT: RGBColor = BLACK;
const THROUGHPUT: RGBColor = RGBColor(31, 119, 180);
const WORKERS: RGBColor = RGBColor(214, 39, 40);
const POLICY_MIGRATION: RGBColor = RGBColor(148, 103, 189);
const CHAOS_MIGRATION: RGBColor = RGBColor(255, 127, 14);
const COLORS: [RGBColor; 4] = [
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
];

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// An axis label: short, without a trailing `.0` on large values (W̄ is ~10⁶ µs).
fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Points with both coordinates finite (plotters and the range computation need that).
fn finite(pts: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    pts.filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

/// The upper end of an axis from 0: the largest finite value with 5 % headroom, 1 if none.
fn upper(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.filter(|v| v.is_finite()).fold(0.0f64, f64::max);
    if m > 0.0 { m * 1.05 } else { 1.0 }
}

/// The time axis: up to the last interval or migration.
fn t_end(rec: &RunRecord) -> f64 {
    upper(
        rec.intervals
            .iter()
            .map(|r| r.t_s)
            .chain(rec.migrations.iter().map(|m| m.t_s)),
    )
}

fn is_chaos(m: &MigrationRow) -> bool {
    m.reason.starts_with("chaos")
}

fn migration_color(m: &MigrationRow) -> RGBColor {
    if is_chaos(m) {
        CHAOS_MIGRATION
    } else {
        POLICY_MIGRATION
    }
}

/// A time-series chart on `area`: one line per series, migrations as vertical lines, a legend.
fn lines_chart(
    area: &Area<'_>,
    rec: &RunRecord,
    caption: &str,
    y_desc: &str,
    series: &[Series<'_>],
) -> Result<(), String> {
    let t_max = t_end(rec);
    let y_max = upper(series.iter().flat_map(|s| s.2.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(err)?;
    for (label, color, pts) in series {
        let color = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
    }
    chart
        .draw_series(
            rec.migrations
                .iter()
                .filter(|m| m.t_s.is_finite())
                .map(|m| PathElement::new(vec![(m.t_s, 0.0), (m.t_s, y_max)], migration_color(m))),
        )
        .map_err(err)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(err)?;
    Ok(())
}

fn plot_rate(svg: &mut String, rec: &RunRecord, title: &str) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, (1000, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let rows = &rec.intervals;
    let t_max = t_end(rec);
    let input = finite(rows.iter().map(|r| (r.t_s, r.input_per_s)));
    let output = finite(rows.iter().map(|r| (r.t_s, r.throughput_per_s)));
    let y_max = upper(input.iter().chain(&output).map(|p| p.1));
    let steps = worker_steps(rows);
    let w_max = rows.iter().map(|r| r.workers).max().unwrap_or(0) as f64 + 1.0;

    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title}: input rate, throughput and workers"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .right_y_label_area_size(50)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(err)?
        .set_secondary_coord(0.0..t_max, 0.0..w_max);
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("per s")
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("workers")
        .y_labels(w_max as usize + 1)
        // Only whole workers get a label.
        .y_label_formatter(&|v| {
            if (v - v.round()).abs() < 1e-6 {
                format!("{v:.0}")
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(err)?;
    // Intervals with a migration in progress, shaded.
    chart
        .draw_series(
            rows.iter()
                .enumerate()
                .filter(|(_, r)| r.migrating)
                .map(|(i, r)| {
                    let t0 = if i > 0 { rows[i - 1].t_s } else { 0.0 };
                    Rectangle::new(
                        [(t0, 0.0), (r.t_s, y_max)],
                        POLICY_MIGRATION.mix(0.12).filled(),
                    )
                }),
        )
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(input, INPUT.stroke_width(2)))
        .map_err(err)?
        .label("input /s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], INPUT));
    chart
        .draw_series(LineSeries::new(output, THROUGHPUT.stroke_width(2)))
        .map_err(err)?
        .label("throughput /s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], THROUGHPUT));
    chart
        .draw_secondary_series(LineSeries::new(steps, WORKERS.stroke_width(2)))
        .map_err(err)?
        .label("workers (right axis)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], WORKERS));
    mark_migrations(&mut chart, rec, y_max)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Workers as a step line: the count changes at the interval where it was first seen.
fn worker_steps(rows: &[IntervalRow]) -> Vec<(f64, f64)> {
    let mut steps = Vec::with_capacity(rows.len() * 2);
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            steps.push((r.t_s, rows[i - 1].workers as f64));
        }
        steps.push((r.t_s, r.workers as f64));
    }
    finite(steps.into_iter())
}

/// The rate plot's primary axes: time (s) × per second.
type RateChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Every migration as a vertical line labelled `before→after`, policy and chaos moves in their
/// own colours and legend entries.
fn mark_migrations(
    chart: &mut RateChart<'_, '_>,
    rec: &RunRecord,
    y_max: f64,
) -> Result<(), String> {
    for (chaos, reason, color) in [
        (false, "policy", POLICY_MIGRATION),
        (true, "chaos", CHAOS_MIGRATION),
    ] {
        let marks: Vec<&MigrationRow> = rec
            .migrations
            .iter()
            .filter(|m| m.t_s.is_finite() && is_chaos(m) == chaos)
            .collect();
        if marks.is_empty() {
            continue;
        }
        chart
            .draw_series(
                marks
                    .iter()
                    .map(|m| PathElement::new(vec![(m.t_s, 0.0), (m.t_s, y_max)], color)),
            )
            .map_err(err)?
            .label(format!("migration ({reason})"))
            .legend(move |(x, y)| PathElement::new(vec![(x + 7, y - 6), (x + 7, y + 6)], color));
        chart
            .draw_series(marks.iter().map(|m| {
                Text::new(
                    format!("{}→{}", m.workers_before, m.workers_after),
                    (m.t_s, y_max * 0.97),
                    ("sans-serif", 11).into_font().color(&color),
                )
            }))
            .map_err(err)?;
    }
    Ok(())
}

fn plot_latency(svg: &mut String, rec: &RunRecord, title: &str) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, (1000, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let rows = &rec.intervals;
    let series = [
        (
            "p50",
            COLORS[0],
            finite(rows.iter().map(|r| (r.t_s, r.latency_p50_ms))),
        ),
        (
            "p95",
            COLORS[1],
            finite(rows.iter().map(|r| (r.t_s, r.latency_p95_ms))),
        ),
        (
            "p99",
            COLORS[2],
            finite(rows.iter().map(|r| (r.t_s, r.latency_p99_ms))),
        ),
    ];
    lines_chart(
        &root,
        rec,
        &format!("{title}: latency per interval (migrations marked)"),
        "latency (ms)",
        &series,
    )?;
    root.present().map_err(err)
}

/// One panel per estimate: they differ by orders of magnitude (α tens of µs, W̄ ~10⁶).
fn plot_estimates(svg: &mut String, rec: &RunRecord, title: &str) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, (1000, 4 * 200)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let rows = &rec.intervals;
    let panels: [Panel; 4] = [
        ("α (local hand-off)", |r| r.alpha_us),
        ("β (remote hand-off)", |r| r.beta_us),
        ("γ (per destination)", |r| r.gamma_us),
        ("W̄ (worker capacity)", |r| r.w_bar_us),
    ];
    for (i, (area, (name, get))) in root.split_evenly((4, 1)).iter().zip(panels).enumerate() {
        let pts = finite(rows.iter().map(|r| (r.t_s, get(r))));
        lines_chart(
            area,
            rec,
            &format!("{title}: estimated {name}"),
            "µs",
            &[(name, COLORS[i], pts)],
        )?;
    }
    root.present().map_err(err)
}
