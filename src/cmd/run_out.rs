//! The output side of `clasp run` (issue 7, item 3): plain data in, files and text out.
//!
//! The run loop fills a [`RunRecord`] (one [`IntervalRow`] per metrics interval, one
//! [`MigrationRow`] per migration, one [`DecisionRow`] per scaling decision, and the JSON summary
//! it prints with `--json`); this module turns it into `--out DIR` ([`write_out`]), the text
//! summary at the end of a run ([`render_summary`]) and the progress line ([`progress_line`]).
//! Nothing here touches the cluster.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;

/// One metrics interval of the run, as the planner saw it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IntervalRow {
    /// Seconds since the run started, at the end of the interval.
    pub t_s: f64,
    /// Inputs admitted per second.
    pub input_per_s: f64,
    /// Request trees completed per second.
    pub throughput_per_s: f64,
    /// Active workers.
    pub workers: usize,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_p99_ms: f64,
    /// The estimator's α (local hand-off cost), µs.
    pub alpha_us: f64,
    /// The estimator's β (remote hand-off cost), µs.
    pub beta_us: f64,
    /// The estimator's γ (per-destination cost), µs.
    pub gamma_us: f64,
    /// The estimator's worker capacity W̄, µs.
    pub w_bar_us: f64,
    /// A migration was in progress during the interval.
    pub migrating: bool,
}

/// One migration: the plan, its two durations (the paper's §5.2) and its request counts.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MigrationRow {
    pub epoch: u64,
    /// Seconds since the run started, when the plan was sent.
    pub t_s: f64,
    pub workers_before: usize,
    pub workers_after: usize,
    pub key_groups_moved: usize,
    /// Plan sent → all completions in.
    pub planner_ms: f64,
    /// The longest worker pause.
    pub worker_pause_ms: f64,
    pub exported: u64,
    pub forwarded: u64,
    pub held: u64,
    /// Inputs admitted while the migration was in progress.
    pub admitted_during: u64,
    /// `"policy"` or `"chaos"`.
    pub reason: String,
}

/// One scaling decision with its one-line explanation (`key=value` pairs).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DecisionRow {
    pub t_s: f64,
    pub line: String,
}

/// Everything a finished (or interrupted) run reports.
pub struct RunRecord {
    /// The full JSON summary (what `--json` prints), built by the caller.
    pub summary: Value,
    pub intervals: Vec<IntervalRow>,
    pub migrations: Vec<MigrationRow>,
    pub decisions: Vec<DecisionRow>,
}

/// The columns of `intervals.csv`, in [`IntervalRow`]'s field order.
const INTERVAL_HEADER: [&str; 12] = [
    "t_s",
    "input_per_s",
    "throughput_per_s",
    "workers",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "alpha_us",
    "beta_us",
    "gamma_us",
    "w_bar_us",
    "migrating",
];

/// The columns of `migrations.csv`, in [`MigrationRow`]'s field order.
const MIGRATION_HEADER: [&str; 12] = [
    "epoch",
    "t_s",
    "workers_before",
    "workers_after",
    "key_groups_moved",
    "planner_ms",
    "worker_pause_ms",
    "exported",
    "forwarded",
    "held",
    "admitted_during",
    "reason",
];

fn interval_fields(r: &IntervalRow) -> [String; 12] {
    [
        r.t_s.to_string(),
        r.input_per_s.to_string(),
        r.throughput_per_s.to_string(),
        r.workers.to_string(),
        r.latency_p50_ms.to_string(),
        r.latency_p95_ms.to_string(),
        r.latency_p99_ms.to_string(),
        r.alpha_us.to_string(),
        r.beta_us.to_string(),
        r.gamma_us.to_string(),
        r.w_bar_us.to_string(),
        r.migrating.to_string(),
    ]
}

fn migration_fields(m: &MigrationRow) -> [String; 12] {
    [
        m.epoch.to_string(),
        m.t_s.to_string(),
        m.workers_before.to_string(),
        m.workers_after.to_string(),
        m.key_groups_moved.to_string(),
        m.planner_ms.to_string(),
        m.worker_pause_ms.to_string(),
        m.exported.to_string(),
        m.forwarded.to_string(),
        m.held.to_string(),
        m.admitted_during.to_string(),
        m.reason.clone(),
    ]
}

/// RFC 4180 quoting: only fields with a comma, quote or line break are quoted.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv<const N: usize>(header: &[&str; N], rows: impl Iterator<Item = [String; N]>) -> String {
    let mut out = header.join(",");
    out.push('\n');
    for row in rows {
        let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

fn write_file(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Writes DIR/summary.json (pretty), DIR/intervals.csv (header + one row per interval, all
/// [`IntervalRow`] fields), DIR/migrations.csv, DIR/decisions.txt, and three SVG plots:
/// DIR/rate.svg (input rate and throughput per s on the left axis, active workers as a step line
/// on a secondary axis, migrations marked), DIR/latency.svg (p50/p95/p99 ms over time),
/// DIR/estimates.svg (α, β, γ, W̄ µs over time). Creates DIR (and parents). Returns the files
/// written, in that order; an error names the path that failed.
pub fn write_out(dir: &Path, rec: &RunRecord) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("creating output directory {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let mut text = |name: &str, contents: String| -> Result<(), String> {
        let path = dir.join(name);
        write_file(&path, &contents)?;
        written.push(path);
        Ok(())
    };
    let mut summary = serde_json::to_string_pretty(&rec.summary)
        .map_err(|e| format!("serialising {}: {e}", dir.join("summary.json").display()))?;
    summary.push('\n');
    text("summary.json", summary)?;
    text(
        "intervals.csv",
        csv(&INTERVAL_HEADER, rec.intervals.iter().map(interval_fields)),
    )?;
    text(
        "migrations.csv",
        csv(
            &MIGRATION_HEADER,
            rec.migrations.iter().map(migration_fields),
        ),
    )?;
    let mut decisions = String::new();
    for d in &rec.decisions {
        let _ = writeln!(decisions, "t={:.3}s {}", d.t_s, d.line);
    }
    text("decisions.txt", decisions)?;

    let title = run_title(&rec.summary);
    let plots: [(&str, PlotFn); 3] = [
        ("rate.svg", plot_rate),
        ("latency.svg", plot_latency),
        ("estimates.svg", plot_estimates),
    ];
    for (name, plot) in plots {
        let path = dir.join(name);
        plot(&path, rec, &title).map_err(|e| format!("plotting {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The human summary printed at the end of a run: throughput, latency p50/p95/p99,
/// worker-seconds, every decision line, every migration with its durations and counts, and the
/// final α/β/γ/W̄ estimates. Missing summary keys print as `n/a`.
pub fn render_summary(rec: &RunRecord) -> String {
    let s = &rec.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "clasp run: app {}, policy {}, {} s",
        text_or_na(&s["app"]),
        text_or_na(&s["policy"]),
        num_or_na(&s["elapsed_s"], 1, 1.0),
    );
    let l = &s["latency_us"];
    let _ = writeln!(
        out,
        "throughput {} /s; latency ms p50 {} p95 {} p99 {} max {}; worker-seconds {}",
        num_or_na(&s["throughput_per_s"], 0, 1.0),
        num_or_na(&l["p50"], 3, 1e-3),
        num_or_na(&l["p95"], 3, 1e-3),
        num_or_na(&l["p99"], 3, 1e-3),
        num_or_na(&l["max"], 3, 1e-3),
        num_or_na(&s["worker_seconds"], 1, 1.0),
    );
    let _ = writeln!(out, "decisions: {}", rec.decisions.len());
    for d in &rec.decisions {
        let _ = writeln!(out, "  t={:>8.3}s  {}", d.t_s, d.line);
    }
    let _ = writeln!(out, "migrations: {}", rec.migrations.len());
    for m in &rec.migrations {
        let _ = writeln!(
            out,
            "  epoch {} t={:.3}s [{}] workers {} -> {}, {} key groups moved; planner {:.3} ms, \
             longest pause {:.3} ms; exported {}, forwarded {}, held {}, admitted during {}",
            m.epoch,
            m.t_s,
            m.reason,
            m.workers_before,
            m.workers_after,
            m.key_groups_moved,
            m.planner_ms,
            m.worker_pause_ms,
            m.exported,
            m.forwarded,
            m.held,
            m.admitted_during,
        );
    }
    match rec.intervals.last() {
        Some(r) => {
            let _ = writeln!(
                out,
                "estimates at t={:.1}s: α {:.1} µs, β {:.1} µs, γ {:.1} µs, W̄ {:.0} µs",
                r.t_s, r.alpha_us, r.beta_us, r.gamma_us, r.w_bar_us
            );
        }
        None => {
            let _ = writeln!(out, "estimates: n/a (no intervals)");
        }
    }
    out
}

/// One progress line for a terminal: elapsed, input rate, throughput, workers, p99 and
/// migrations so far. Fixed-width fields, no line break (the caller rewrites it with `\r`).
pub fn progress_line(row: &IntervalRow, migrations: usize) -> String {
    format!(
        "t {:>7.1} s  in {:>9.0}/s  out {:>9.0}/s  workers {:>3}  p99 {:>8.2} ms  \
         migrations {:>3}{}",
        row.t_s,
        row.input_per_s,
        row.throughput_per_s,
        row.workers,
        row.latency_p99_ms,
        migrations,
        if row.migrating {
            "  migrating"
        } else {
            "           "
        },
    )
}

/// A JSON string as is, any other non-null value as JSON, missing or null as `n/a`.
fn text_or_na(v: &Value) -> String {
    match v {
        Value::Null => "n/a".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A JSON number times `scale` with `prec` decimals; anything else as `n/a`.
fn num_or_na(v: &Value, prec: usize, scale: f64) -> String {
    v.as_f64()
        .map(|x| format!("{:.prec$}", x * scale))
        .unwrap_or_else(|| "n/a".into())
}

fn run_title(summary: &Value) -> String {
    match (summary["app"].as_str(), summary["policy"].as_str()) {
        (Some(a), Some(p)) => format!("{a} / {p}"),
        (Some(a), None) => a.to_string(),
        (None, Some(p)) => p.to_string(),
        (None, None) => "clasp run".to_string(),
    }
}

// ---- plots (plotters' SVG backend, as controlplane/src/sim/plot.rs) ----

type PlotFn = fn(&Path, &RunRecord, &str) -> Result<(), String>;
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

fn plot_rate(path: &Path, rec: &RunRecord, title: &str) -> Result<(), String> {
    let root = SVGBackend::new(path, (1000, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let rows = &rec.intervals;
    let t_max = t_end(rec);
    let input = finite(rows.iter().map(|r| (r.t_s, r.input_per_s)));
    let output = finite(rows.iter().map(|r| (r.t_s, r.throughput_per_s)));
    let y_max = upper(input.iter().chain(&output).map(|p| p.1));
    // Workers as a step line: the count changes at the interval where it was first seen.
    let mut steps = Vec::with_capacity(rows.len() * 2);
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            steps.push((r.t_s, rows[i - 1].workers as f64));
        }
        steps.push((r.t_s, r.workers as f64));
    }
    let steps = finite(steps.into_iter());
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn plot_latency(path: &Path, rec: &RunRecord, title: &str) -> Result<(), String> {
    let root = SVGBackend::new(path, (1000, 400)).into_drawing_area();
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
fn plot_estimates(path: &Path, rec: &RunRecord, title: &str) -> Result<(), String> {
    let root = SVGBackend::new(path, (1000, 4 * 200)).into_drawing_area();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory under the system temp dir, removed when dropped (also on a failed assert).
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            TempDir(std::env::temp_dir().join(format!(
                "clasp-run-out-{name}-{}-{nanos}",
                std::process::id()
            )))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// RFC 4180 lines (no embedded line breaks in these tests) back into fields.
    fn parse_csv_line(line: &str) -> Vec<String> {
        let mut fields = vec![String::new()];
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    chars.next();
                    fields.last_mut().unwrap().push('"');
                }
                ('"', _) => quoted = !quoted,
                (',', false) => fields.push(String::new()),
                (c, _) => fields.last_mut().unwrap().push(c),
            }
        }
        fields
    }

    fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
        let mut lines = text.lines();
        let header = parse_csv_line(lines.next().expect("a header line"));
        (header, lines.map(parse_csv_line).collect())
    }

    fn sample() -> RunRecord {
        let intervals = (0..20)
            .map(|i| {
                let t = (i + 1) as f64 * 0.5;
                IntervalRow {
                    t_s: t,
                    input_per_s: 1000.0 * t,
                    throughput_per_s: 950.0 * t,
                    workers: 1 + i / 7,
                    latency_p50_ms: 0.2,
                    latency_p95_ms: 0.9,
                    latency_p99_ms: if i == 3 { f64::NAN } else { 2.0 + t },
                    alpha_us: 38.5,
                    beta_us: 275.0,
                    gamma_us: 51_500.0,
                    w_bar_us: 1e6,
                    migrating: i == 7 || i == 14,
                }
            })
            .collect();
        let migrations = vec![
            MigrationRow {
                epoch: 1,
                t_s: 3.5,
                workers_before: 1,
                workers_after: 2,
                key_groups_moved: 64,
                planner_ms: 4.25,
                worker_pause_ms: 0.75,
                exported: 10,
                forwarded: 3,
                held: 7,
                admitted_during: 120,
                reason: "policy".into(),
            },
            MigrationRow {
                epoch: 2,
                t_s: 7.0,
                workers_before: 2,
                workers_after: 3,
                key_groups_moved: 40,
                planner_ms: 2.5,
                worker_pause_ms: 0.5,
                exported: 11,
                forwarded: 0,
                held: 1,
                admitted_during: 99,
                reason: "chaos, \"forced\"".into(),
            },
        ];
        let decisions = vec![
            DecisionRow {
                t_s: 3.4,
                line: "scale_out from=1 to=2 reason=saturated util=0.97".into(),
            },
            DecisionRow {
                t_s: 6.9,
                line: "chaos to=3 moved=40".into(),
            },
        ];
        RunRecord {
            summary: serde_json::json!({
                "app": "wc",
                "policy": "clasp",
                "throughput_per_s": 9500.0,
                "latency_us": {"p50": 200.0, "p95": 900.0, "p99": 2500.0, "max": 9000.0},
                "worker_seconds": 21.5,
                "elapsed_s": 10.0,
                "migrations": [{"epoch": 1}, {"epoch": 2}],
            }),
            intervals,
            migrations,
            decisions,
        }
    }

    const FILES: [&str; 7] = [
        "summary.json",
        "intervals.csv",
        "migrations.csv",
        "decisions.txt",
        "rate.svg",
        "latency.svg",
        "estimates.svg",
    ];

    fn check_files(dir: &Path, written: &[PathBuf]) {
        let expected: Vec<PathBuf> = FILES.iter().map(|f| dir.join(f)).collect();
        assert_eq!(written, expected.as_slice());
        for p in &expected {
            assert!(p.is_file(), "{} missing", p.display());
        }
        for svg in &expected[4..] {
            let text = std::fs::read_to_string(svg).unwrap();
            assert!(text.starts_with("<svg"), "{}", svg.display());
            assert!(text.trim_end().ends_with("</svg>"), "{}", svg.display());
        }
    }

    #[test]
    fn run_out_writes_every_file_and_they_read_back() {
        let tmp = TempDir::new("full");
        let dir = tmp.0.join("nested").join("out");
        let rec = sample();
        let written = write_out(&dir, &rec).unwrap();
        check_files(&dir, &written);

        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary, rec.summary);

        let (header, rows) =
            parse_csv(&std::fs::read_to_string(dir.join("intervals.csv")).unwrap());
        assert_eq!(header, INTERVAL_HEADER);
        assert_eq!(rows.len(), rec.intervals.len());
        for (row, r) in rows.iter().zip(&rec.intervals) {
            assert_eq!(row.len(), INTERVAL_HEADER.len());
            assert_eq!(row[0].parse::<f64>().unwrap(), r.t_s);
            assert_eq!(row[3].parse::<usize>().unwrap(), r.workers);
            let p99 = row[6].parse::<f64>().unwrap();
            assert!(p99 == r.latency_p99_ms || (p99.is_nan() && r.latency_p99_ms.is_nan()));
            assert_eq!(row[11].parse::<bool>().unwrap(), r.migrating);
        }

        let (header, rows) =
            parse_csv(&std::fs::read_to_string(dir.join("migrations.csv")).unwrap());
        assert_eq!(header, MIGRATION_HEADER);
        assert_eq!(rows.len(), rec.migrations.len());
        for (row, m) in rows.iter().zip(&rec.migrations) {
            assert_eq!(row.len(), MIGRATION_HEADER.len());
            assert_eq!(row[0].parse::<u64>().unwrap(), m.epoch);
            assert_eq!(row[5].parse::<f64>().unwrap(), m.planner_ms);
            assert_eq!(row[10].parse::<u64>().unwrap(), m.admitted_during);
            assert_eq!(row[11], m.reason);
        }

        let decisions = std::fs::read_to_string(dir.join("decisions.txt")).unwrap();
        assert_eq!(decisions.lines().count(), rec.decisions.len());
        for d in &rec.decisions {
            assert!(decisions.contains(&d.line));
        }
        let rate = std::fs::read_to_string(dir.join("rate.svg")).unwrap();
        assert!(rate.contains("migration (policy)"));
        assert!(rate.contains("migration (chaos)"));
        assert!(rate.contains("workers (right axis)"));
    }

    #[test]
    fn run_out_empty_record_still_writes_valid_files() {
        let tmp = TempDir::new("empty");
        let rec = RunRecord {
            summary: serde_json::json!({}),
            intervals: vec![],
            migrations: vec![],
            decisions: vec![],
        };
        let written = write_out(&tmp.0, &rec).unwrap();
        check_files(&tmp.0, &written);
        for (file, header) in [
            ("intervals.csv", INTERVAL_HEADER),
            ("migrations.csv", MIGRATION_HEADER),
        ] {
            let (h, rows) = parse_csv(&std::fs::read_to_string(tmp.0.join(file)).unwrap());
            assert_eq!(h, header);
            assert!(rows.is_empty());
        }
        assert_eq!(
            std::fs::read_to_string(tmp.0.join("decisions.txt")).unwrap(),
            ""
        );
        let text = render_summary(&rec);
        assert!(text.contains("policy n/a"), "{text}");
        assert!(text.contains("throughput n/a"), "{text}");
        assert!(text.contains("p99 n/a"), "{text}");
        assert!(text.contains("worker-seconds n/a"), "{text}");
        assert!(text.contains("estimates: n/a"), "{text}");
    }

    #[test]
    fn run_out_error_names_the_path() {
        let tmp = TempDir::new("err");
        std::fs::create_dir_all(&tmp.0).unwrap();
        let file = tmp.0.join("a-file");
        std::fs::write(&file, "x").unwrap();
        let dir = file.join("out");
        let rec = sample();
        let e = write_out(&dir, &rec).unwrap_err();
        assert!(e.contains(&dir.display().to_string()), "{e}");
    }

    #[test]
    fn run_out_headers_name_every_field() {
        let keys = |v: Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let sorted = |h: &[&str]| -> Vec<String> {
            let mut k: Vec<String> = h.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(serde_json::to_value(IntervalRow::default()).unwrap()),
            sorted(&INTERVAL_HEADER)
        );
        assert_eq!(
            keys(serde_json::to_value(MigrationRow::default()).unwrap()),
            sorted(&MIGRATION_HEADER)
        );
    }

    #[test]
    fn run_out_summary_mentions_every_migration_and_decision() {
        let rec = sample();
        let text = render_summary(&rec);
        assert!(text.contains("app wc, policy clasp, 10.0 s"), "{text}");
        assert!(text.contains("throughput 9500 /s"), "{text}");
        assert!(
            text.contains("p50 0.200 p95 0.900 p99 2.500 max 9.000"),
            "{text}"
        );
        assert!(text.contains("worker-seconds 21.5"), "{text}");
        for d in &rec.decisions {
            assert!(text.contains(&d.line), "{text}");
        }
        for m in &rec.migrations {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("epoch {} ", m.epoch)))
                .unwrap_or_else(|| panic!("epoch {} missing:\n{text}", m.epoch));
            for part in [
                format!("workers {} -> {}", m.workers_before, m.workers_after),
                format!("planner {:.3} ms", m.planner_ms),
                format!("longest pause {:.3} ms", m.worker_pause_ms),
                format!("exported {}", m.exported),
                format!("forwarded {}", m.forwarded),
                format!("held {}", m.held),
                format!("admitted during {}", m.admitted_during),
            ] {
                assert!(line.contains(&part), "{part} not in {line}");
            }
        }
        assert!(text.contains("α 38.5 µs"), "{text}");
        assert!(text.contains("W̄ 1000000 µs"), "{text}");
    }

    #[test]
    fn run_out_progress_line_is_one_fixed_width_line() {
        let mut row = IntervalRow {
            t_s: 12.0,
            input_per_s: 1234.0,
            throughput_per_s: 1200.0,
            workers: 3,
            latency_p99_ms: 1.25,
            ..Default::default()
        };
        let a = progress_line(&row, 2);
        assert!(!a.contains('\n'));
        for part in [
            "12.0 s",
            "1234/s",
            "1200/s",
            "workers   3",
            "1.25 ms",
            "migrations   2",
        ] {
            assert!(a.contains(part), "{part} not in {a}");
        }
        row.migrating = true;
        let b = progress_line(&row, 2);
        assert!(b.contains("migrating"));
        assert_eq!(a.chars().count(), b.chars().count());
    }
}
