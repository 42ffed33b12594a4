//! Rows of the busy-time regression from a CSV: a run's `workers.csv`, or a fixture recorded
//! from one, replayed through the estimator offline (tests, and checking a run afterwards).

use std::fmt;

use super::busy::BusyRow;

/// The optional column of wake-ups: times per second a thread of the worker went to sleep.
pub const SLEEPS_COLUMN: &str = "sleeps_per_s";

/// A CSV of rows could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BusyCsvError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    pub message: String,
}

impl fmt::Display for BusyCsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for BusyCsvError {}

/// The columns a rows CSV must have (in any order; others are ignored). `sleeps_per_s` may be
/// there too (CSVs written before it existed lack it: their rows have no wake-up count).
pub const CSV_COLUMNS: [&str; 7] = [
    "worker",
    "t_s",
    "cpu_us_per_s",
    "exec_us_per_s",
    "local_per_s",
    "remote_per_s",
    "destinations",
];

/// Reads a CSV of rows (a header naming [`CSV_COLUMNS`], then one row per worker and interval;
/// `#` lines and blank lines ignored) into intervals: rows grouped by `t_s`, in time order. A
/// row with an empty `cpu_us_per_s` was not measured and is left out.
pub fn rows_from_csv(text: &str) -> Result<Vec<Vec<BusyRow>>, BusyCsvError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let (hline, header) = lines.next().ok_or(BusyCsvError {
        line: 0,
        message: "empty: expected a header line".into(),
    })?;
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let mut at = [0usize; 7];
    for (slot, want) in at.iter_mut().zip(CSV_COLUMNS) {
        *slot = names.iter().position(|n| *n == want).ok_or(BusyCsvError {
            line: hline,
            message: format!(
                "header lacks column {want:?} (needs {})",
                CSV_COLUMNS.join(",")
            ),
        })?;
    }
    let sleeps_at = names.iter().position(|n| *n == SLEEPS_COLUMN);
    let mut rows = Vec::new();
    for (line, l) in lines {
        if let Some(r) = csv_row(line, l, &at, sleeps_at)? {
            rows.push(r);
        }
    }
    rows.sort_by(|a: &BusyRow, b| a.t_s.total_cmp(&b.t_s));
    let mut intervals: Vec<Vec<BusyRow>> = Vec::new();
    for r in rows {
        match intervals.last_mut() {
            Some(iv) if iv[0].t_s == r.t_s => iv.push(r),
            _ => intervals.push(vec![r]),
        }
    }
    Ok(intervals)
}

/// One data line; None when its CPU time is empty (not measured).
fn csv_row(
    line: usize,
    l: &str,
    at: &[usize; 7],
    sleeps_at: Option<usize>,
) -> Result<Option<BusyRow>, BusyCsvError> {
    let fields: Vec<&str> = l.split(',').map(str::trim).collect();
    let get = |k: usize| -> Result<&str, BusyCsvError> {
        fields.get(at[k]).copied().ok_or_else(|| BusyCsvError {
            line,
            message: format!("missing field {:?}", CSV_COLUMNS[k]),
        })
    };
    let num = |k: usize| -> Result<f64, BusyCsvError> {
        let f = get(k)?;
        f.parse::<f64>().map_err(|_| BusyCsvError {
            line,
            message: format!("{}: {f:?} is not a number", CSV_COLUMNS[k]),
        })
    };
    if get(2)?.is_empty() {
        return Ok(None);
    }
    let sleeps_per_s = match sleeps_at.and_then(|k| fields.get(k)) {
        None | Some(&"") => 0.0,
        Some(f) => f.parse::<f64>().map_err(|_| BusyCsvError {
            line,
            message: format!("{SLEEPS_COLUMN}: {f:?} is not a number"),
        })?,
    };
    let worker = get(0)?.parse::<usize>().map_err(|_| BusyCsvError {
        line,
        message: format!("worker: {:?} is not an index", fields[at[0]]),
    })?;
    Ok(Some(BusyRow {
        worker,
        t_s: num(1)?,
        cpu_us_per_s: num(2)?,
        exec_us_per_s: num(3)?,
        local_per_s: num(4)?,
        remote_per_s: num(5)?,
        destinations: num(6)?,
        sleeps_per_s,
    }))
}
