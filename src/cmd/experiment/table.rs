//! An experiment's result as files a reader opens without clasp: a CSV (RFC 4180 quoting), a
//! markdown table for the docs, and an SVG chart — each written atomically.

use crate::cmd::run::out::{csv, write_atomic};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Rows of text cells under a header.
#[derive(Debug, Default, Clone)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| (*s).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.header.len(), "a row of {:?}", self.header);
        self.rows.push(row);
    }

    pub fn csv(&self) -> String {
        let header: Vec<&str> = self.header.iter().map(String::as_str).collect();
        csv(&header, self.rows.iter())
    }

    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let rule = format!("|{}\n", "---|".repeat(self.header.len()));
        std::iter::once(line(&self.header))
            .chain(std::iter::once(rule))
            .chain(self.rows.iter().map(|r| line(r)))
            .collect()
    }
}

/// A number with `digits` decimals; `-` for NaN.
pub fn fmt(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "-".into()
    }
}

/// One named line of (x, y) points.
pub type Line = (String, Vec<(f64, f64)>);

/// A line chart as SVG text.
pub fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let pts = || {
        lines
            .iter()
            .flat_map(|l| l.1.iter())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let x_max = pts().map(|p| p.0).fold(1e-9, f64::max) * 1.05;
    let x_min = pts().map(|p| p.0).fold(f64::INFINITY, f64::min).min(0.0);
    let y_max = pts().map(|p| p.1).fold(1e-9, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (label, points)) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let finite: Vec<(f64, f64)> = points
                .iter()
                .copied()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(
                    finite.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| err(&e))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
            chart
                .draw_series(finite.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// Writes `NAME.csv`, `NAME.md` (the table under `intro`) and `NAME.svg` into `dir`.
pub fn write_all(
    dir: &Path,
    name: &str,
    intro: &str,
    table: &Table,
    svg: &str,
) -> Result<Vec<PathBuf>, String> {
    let files = [
        (format!("{name}.csv"), table.csv()),
        (
            format!("{name}.md"),
            format!("{intro}\n\n{}", table.markdown()),
        ),
        (format!("{name}.svg"), svg.to_owned()),
    ];
    let mut written = Vec::new();
    for (file, text) in files {
        let path = dir.join(file);
        write_atomic(&path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_as_csv_and_markdown() {
        let mut t = Table::new(&["app", "x"]);
        t.push(vec!["wc".into(), "1,5".into()]);
        assert_eq!(t.csv(), "app,x\nwc,\"1,5\"\n");
        assert_eq!(t.markdown(), "| app | x |\n|---|---|\n| wc | 1,5 |\n");
        assert_eq!(fmt(f64::NAN, 1), "-");
    }

    #[test]
    fn a_chart_renders() {
        let svg = line_chart("t", "x", "y", &[("a".into(), vec![(1.0, 2.0), (2.0, 3.0)])]).unwrap();
        assert!(svg.contains("<svg"));
    }
}
