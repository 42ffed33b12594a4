//! SVG plots of the experiments (plotters, SVG backend: no font or image libraries needed).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use super::e2e::E2eResult;
use crate::app::AppModel;

const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Fig. 10: throughput per policy per app, normalised to CLASP. Every app's name is drawn under
/// its group of bars (a numeric axis would label only the "round" positions: 4 of 7 apps).
pub fn placement_bars(path: &Path, v: &Value, apps: &[AppModel]) -> std::io::Result<()> {
    let policies = ["clasp", "faasflow", "zhang24"];
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(io_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Throughput on N workers, relative to CLASP (Fig. 10)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..apps.len() as f64, LABEL_Y..1.3f64)
        .map_err(io_err)?;
    chart
        .configure_mesh()
        .x_labels(0)
        .y_desc("throughput / CLASP")
        .draw()
        .map_err(io_err)?;
    let centred = TextStyle::from(("sans-serif", 14)).pos(Pos::new(HPos::Center, VPos::Center));
    chart
        .draw_series(apps.iter().enumerate().map(|(i, a)| {
            Text::new(
                a.name.clone(),
                (i as f64 + 0.5, LABEL_Y / 2.0),
                centred.clone(),
            )
        }))
        .map_err(io_err)?;
    for (pi, p) in policies.iter().enumerate() {
        let bars: Vec<Rectangle<(f64, f64)>> = apps
            .iter()
            .enumerate()
            .map(|(ai, a)| {
                let base = v["results"]["clasp"][&a.name]["throughput_per_s"]
                    .as_f64()
                    .unwrap_or(1.0)
                    .max(1e-9);
                let y = v["results"][p][&a.name]["throughput_per_s"]
                    .as_f64()
                    .unwrap_or(0.0)
                    / base;
                let x0 = ai as f64 + 0.1 + pi as f64 * 0.27;
                Rectangle::new([(x0, 0.0), (x0 + 0.25, y)], COLORS[pi].filled())
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(io_err)?
            .label(*p)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 10, y + 5)], COLORS[pi].filled())
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(io_err)?;
    root.present().map_err(io_err)
}

/// The bottom of the placement chart: the band below 0 holds the apps' names.
const LABEL_Y: f64 = -0.1;

/// Fig. 11–13: mean predicted workers and MAE per target rate, per policy.
pub fn worker_count(path: &Path, v: &Value) -> std::io::Result<()> {
    let root = SVGBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(io_err)?;
    let (left, right) = root.split_horizontally(500);
    let workers = v["workers"].as_f64().unwrap_or(10.0);
    let policies = ["clasp", "faasflow", "zhang24"];
    let mut chart = ChartBuilder::on(&left)
        .caption("Workers vs target rate (Fig. 12/13)", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(10.0..100.0f64, 0.0..workers * 1.1)
        .map_err(io_err)?;
    chart
        .configure_mesh()
        .x_desc("target rate (% of max)")
        .y_desc("workers")
        .draw()
        .map_err(io_err)?;
    let series = |arr: &Value| -> Vec<(f64, f64)> {
        arr.as_array()
            .map(|a| {
                a.iter()
                    .enumerate()
                    .map(|(i, y)| ((i + 1) as f64 * 10.0, y.as_f64().unwrap_or(0.0)))
                    .collect()
            })
            .unwrap_or_default()
    };
    chart
        .draw_series(LineSeries::new(
            series(&v["mean_observed_optimal_by_target"]),
            BLACK.stroke_width(2),
        ))
        .map_err(io_err)?
        .label("observed optimal")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLACK));
    for (i, p) in policies.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                series(&v["mean_predicted_by_target"][p]),
                COLORS[i],
            ))
            .map_err(io_err)?
            .label(*p)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], COLORS[i]));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(io_err)?;
    let mut chart = ChartBuilder::on(&right)
        .caption(
            "Mean absolute worker-count error (Fig. 11a)",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(10.0..100.0f64, 0.0..(workers / 2.0).max(1.0))
        .map_err(io_err)?;
    chart
        .configure_mesh()
        .x_desc("target rate (% of max)")
        .y_desc("MAE (workers)")
        .draw()
        .map_err(io_err)?;
    for (i, p) in policies.iter().enumerate() {
        let pts: Vec<(f64, f64)> = v["mae_by_target"][p]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["target_pct"].as_f64().unwrap_or(0.0),
                            e["mae"].as_f64().unwrap_or(0.0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        chart
            .draw_series(LineSeries::new(pts, COLORS[i]))
            .map_err(io_err)?
            .label(*p)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], COLORS[i]));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(io_err)?;
    root.present().map_err(io_err)
}

/// Fig. 14's pictures: input rate, throughput and workers over time, one row per app and one
/// column per policy (each row on its app's own scales).
pub fn e2e_timelines(path: &Path, runs: &[(String, Vec<E2eResult>)]) -> std::io::Result<()> {
    let cols = runs.iter().map(|r| r.1.len()).max().unwrap_or(0);
    if cols == 0 {
        return Ok(());
    }
    let size = (300 * cols as u32, 190 * runs.len() as u32);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(io_err)?;
    let areas = root.split_evenly((runs.len(), cols));
    for (row, (app, rs)) in runs.iter().enumerate() {
        let scales = Scales::of(rs);
        let cells = areas[row * cols..(row + 1) * cols].iter();
        for (i, (area, r)) in cells.zip(rs).enumerate() {
            let legend = row == 0 && i == 0;
            timeline_panel(area, &format!("{app} / {}", r.policy), r, &scales, legend)?;
        }
    }
    root.present().map_err(io_err)
}

/// The axes' ends shared by one app's panels.
struct Scales {
    t_end: f64,
    y_max: f64,
    w_max: f64,
}

impl Scales {
    fn of(rs: &[E2eResult]) -> Scales {
        let t_end = rs
            .iter()
            .flat_map(|r| r.timeline.last().map(|x| x.0))
            .fold(1.0, f64::max);
        let y_max = rs
            .iter()
            .flat_map(|r| r.timeline.iter().map(|x| x.1.max(x.2)))
            .fold(1.0, f64::max)
            * 1.1;
        let w_max = rs
            .iter()
            .flat_map(|r| r.timeline.iter().map(|x| x.3))
            .max()
            .unwrap_or(1) as f64
            + 1.0;
        Scales {
            t_end,
            y_max,
            w_max,
        }
    }
}

/// One run's timeline: input (black) and throughput (blue) per s, workers (red, right axis).
fn timeline_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    r: &E2eResult,
    sc: &Scales,
    legend: bool,
) -> std::io::Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 13))
        .margin(5)
        .x_label_area_size(20)
        .y_label_area_size(45)
        .right_y_label_area_size(25)
        .build_cartesian_2d(0.0..sc.t_end, 0.0..sc.y_max)
        .map_err(io_err)?
        .set_secondary_coord(0.0..sc.t_end, 0.0..sc.w_max);
    chart
        .configure_mesh()
        .y_desc("per s")
        .draw()
        .map_err(io_err)?;
    chart
        .configure_secondary_axes()
        .y_desc("workers")
        .draw()
        .map_err(io_err)?;
    let line =
        |c: RGBColor| move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 12, y)], c);
    chart
        .draw_series(LineSeries::new(
            r.timeline.iter().map(|x| (x.0, x.1)),
            BLACK,
        ))
        .map_err(io_err)?
        .label("input")
        .legend(line(BLACK));
    chart
        .draw_series(LineSeries::new(
            r.timeline.iter().map(|x| (x.0, x.2)),
            COLORS[0],
        ))
        .map_err(io_err)?
        .label("throughput")
        .legend(line(COLORS[0]));
    chart
        .draw_secondary_series(LineSeries::new(
            r.timeline.iter().map(|x| (x.0, x.3 as f64)),
            COLORS[3],
        ))
        .map_err(io_err)?
        .label("workers")
        .legend(line(COLORS[3]));
    if legend {
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 10))
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(io_err)?;
    }
    Ok(())
}
