//! Rows of the busy-time regression from a CSV: a run's `workers.csv`, or a fixture recorded
//! from one, replayed through the estimator offline (tests, and checking a run afterwards).

use std::fmt;

use super::busy::BusyRow;

/// The optional column of wake-ups: times per second a thread of the worker went to sleep.
pub const SLEEPS_COLUMN: &str = "sleeps_per_s";
/// The optional column of CPU-quota periods throttled in the interval (empty: uncapped).
pub const THROTTLED_COLUMN: &str = "throttled_periods";
/// The optional column of remote requests received per second (CSVs written before it
/// existed lack it: their rows price a remote request on its sender's row only).
pub const RECEIVED_COLUMN: &str = "remote_received_per_s";
/// The optional column of input records per second taken in from the ingress.
pub const ROOTS_COLUMN: &str = "roots_per_s";
/// The optional column of CPU µs per second spent going to sleep and waking up (CSVs written
/// before it existed lack it: their rows leave that CPU in what the requests explain).
pub const SLEEP_CPU_COLUMN: &str = "sleep_cpu_us_per_s";
/// The optional columns of the executors' part of the CPU, of the sleeping CPU and of the
/// sleeps (CSVs written before they existed lack them: their rows are used whole).
pub const EXEC_CPU_COLUMN: &str = "exec_cpu_us_per_s";
pub const EXEC_SLEEP_CPU_COLUMN: &str = "exec_sleep_cpu_us_per_s";
pub const EXEC_SLEEPS_COLUMN: &str = "exec_sleeps_per_s";

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

/// The columns a rows CSV must have (in any order; others are ignored). `sleeps_per_s`,
/// `remote_received_per_s`, `roots_per_s`, `throttled_periods` and `sleep_cpu_us_per_s` may be
/// there too (CSVs written before they existed lack them: their rows have no wake-up count, no
/// count of what they received and of input records taken in, are taken as not throttled, and
/// have no sleeping CPU measured apart).
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
    let optional = Optional {
        sleeps_at: names.iter().position(|n| *n == SLEEPS_COLUMN),
        received_at: names.iter().position(|n| *n == RECEIVED_COLUMN),
        roots_at: names.iter().position(|n| *n == ROOTS_COLUMN),
        throttled_at: names.iter().position(|n| *n == THROTTLED_COLUMN),
        sleep_cpu_at: names.iter().position(|n| *n == SLEEP_CPU_COLUMN),
        exec_cpu_at: names.iter().position(|n| *n == EXEC_CPU_COLUMN),
        exec_sleep_cpu_at: names.iter().position(|n| *n == EXEC_SLEEP_CPU_COLUMN),
        exec_sleeps_at: names.iter().position(|n| *n == EXEC_SLEEPS_COLUMN),
    };
    let mut rows = Vec::new();
    for (line, l) in lines {
        if let Some(r) = csv_row(line, l, &at, optional)? {
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

/// Where the optional columns are, if there.
#[derive(Clone, Copy)]
struct Optional {
    sleeps_at: Option<usize>,
    received_at: Option<usize>,
    roots_at: Option<usize>,
    throttled_at: Option<usize>,
    sleep_cpu_at: Option<usize>,
    exec_cpu_at: Option<usize>,
    exec_sleep_cpu_at: Option<usize>,
    exec_sleeps_at: Option<usize>,
}

/// The optional number in column `at` of `fields`: None when the column or its value is
/// missing.
fn optional_num(
    line: usize,
    fields: &[&str],
    at: Option<usize>,
    name: &str,
) -> Result<Option<f64>, BusyCsvError> {
    match at.and_then(|k| fields.get(k)) {
        None | Some(&"") => Ok(None),
        Some(f) => f.parse::<f64>().map(Some).map_err(|_| BusyCsvError {
            line,
            message: format!("{name}: {f:?} is not a number"),
        }),
    }
}

/// One data line; None when its CPU time is empty (not measured).
fn csv_row(
    line: usize,
    l: &str,
    at: &[usize; 7],
    optional: Optional,
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
    let sleeps_per_s =
        optional_num(line, &fields, optional.sleeps_at, SLEEPS_COLUMN)?.unwrap_or(0.0);
    let remote_received_per_s = optional_num(line, &fields, optional.received_at, RECEIVED_COLUMN)?;
    let roots_per_s = optional_num(line, &fields, optional.roots_at, ROOTS_COLUMN)?.unwrap_or(0.0);
    let sleep_cpu_us_per_s =
        optional_num(line, &fields, optional.sleep_cpu_at, SLEEP_CPU_COLUMN)?.unwrap_or(0.0);
    let exec_cpu_us_per_s = optional_num(line, &fields, optional.exec_cpu_at, EXEC_CPU_COLUMN)?;
    let exec_sleep_cpu_us_per_s = optional_num(
        line,
        &fields,
        optional.exec_sleep_cpu_at,
        EXEC_SLEEP_CPU_COLUMN,
    )?
    .unwrap_or(0.0);
    let exec_sleeps_per_s =
        optional_num(line, &fields, optional.exec_sleeps_at, EXEC_SLEEPS_COLUMN)?.unwrap_or(0.0);
    let throttled_periods = optional_num(line, &fields, optional.throttled_at, THROTTLED_COLUMN)?
        .map(|n| {
            if n.is_finite() && n >= 0.0 && n.fract() == 0.0 {
                Ok(n as u64)
            } else {
                Err(BusyCsvError {
                    line,
                    message: format!("{THROTTLED_COLUMN}: {n} is not a count"),
                })
            }
        })
        .transpose()?;
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
        remote_received_per_s,
        destinations: num(6)?,
        sleeps_per_s,
        sleep_cpu_us_per_s,
        roots_per_s,
        throttled_periods,
        exec_cpu_us_per_s,
        exec_sleep_cpu_us_per_s,
        exec_sleeps_per_s,
    }))
}
