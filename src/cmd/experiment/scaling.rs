//! Static experiments: throughput on 1..N workers (`scaling`) and latency at one worker's
//! maximum rate on 1..N workers (`latency`).

use super::runner::Measured;
use super::table::{Line, Table, fmt, line_chart, write_all};
use super::{QUICK_SECONDS, Setup, progress};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per app: what one worker sustains (records per second).
pub type Maxima = BTreeMap<String, f64>;

/// Fraction of one worker's maximum the latency points are offered.
const LATENCY_LOAD: f64 = 0.9;
/// Seconds of input per latency point.
const LATENCY_SECONDS: f64 = 5.0;
/// Fewest records of a latency point (a very slow app still gives percentiles).
const LATENCY_RECORDS_MIN: f64 = 100.0;

/// What one worker of `app` sustained (measured for every app before it is needed).
pub fn one_worker_max(maxima: &Maxima, app: &str) -> anyhow::Result<f64> {
    maxima
        .get(app)
        .copied()
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| anyhow::anyhow!("{app}: no one-worker maximum was measured"))
}

fn static_args(app: &str, workers: usize, records: u64, rate: Option<f64>) -> Vec<String> {
    let mut a: Vec<String> = ["--static", "--app", app, "--workers", &workers.to_string()]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    a.extend(["--records".into(), records.to_string()]);
    if let Some(r) = rate {
        a.extend(["--rate".into(), format!("{r:.0}")]);
    }
    a
}

fn host_cells(m: &Measured) -> Vec<String> {
    vec![
        fmt(m.host_idle, 2),
        fmt(m.driver_cores, 2),
        if m.host_bound() { "host-bound" } else { "" }.into(),
    ]
}

/// One worker's maximum for every app (one unthrottled run each).
pub fn single_worker_maxima(s: &Setup) -> anyhow::Result<Maxima> {
    let mut m = Maxima::new();
    for app in &s.apps {
        progress(&format!("{app}: one worker's maximum"));
        let r = s.runner.run(&static_args(app, 1, s.records(), None))?;
        m.insert(app.clone(), r.num("throughput_per_s"));
    }
    Ok(m)
}

/// Throughput of each app on 1..N workers, unthrottled.
pub fn scaling(s: &Setup, dir: &Path) -> anyhow::Result<(Vec<PathBuf>, Maxima)> {
    let mut t = Table::new(&[
        "app",
        "workers",
        "throughput_per_s",
        "vs_one_worker",
        "host_idle",
        "driver_cores",
        "host_bound",
    ]);
    let mut lines: Vec<Line> = Vec::new();
    let mut maxima = Maxima::new();
    for app in &s.apps {
        let mut pts = Vec::new();
        for n in 1..=s.max_workers {
            progress(&format!("scaling: {app} on {n} workers"));
            let m = s.runner.run(&static_args(app, n, s.records(), None))?;
            let tput = m.num("throughput_per_s");
            let one = *maxima.entry(app.clone()).or_insert(tput);
            let mut row = vec![app.clone(), n.to_string(), fmt(tput, 0), fmt(tput / one, 2)];
            row.extend(host_cells(&m));
            t.push(row);
            pts.push((n as f64, tput));
        }
        lines.push((app.clone(), pts));
    }
    let svg = line_chart(
        "throughput on 1..N workers (even spread, unthrottled)",
        "workers",
        "records/s",
        &lines,
    )
    .map_err(anyhow::Error::msg)?;
    let intro = format!(
        "# Throughput on 1..{} workers\n\n{} Each point is one `clasp run --static \
         --workers N --records {}` of the app.",
        s.max_workers,
        cap_text(s),
        s.records()
    );
    let files = write_all(dir, "scaling", &intro, &t, &svg).map_err(anyhow::Error::msg)?;
    Ok((files, maxima))
}

/// p50/p95/p99 latency at 0.9× one worker's maximum rate on 1..N workers.
pub fn latency(s: &Setup, dir: &Path, maxima: &Maxima) -> anyhow::Result<Vec<PathBuf>> {
    let mut t = Table::new(&[
        "app",
        "workers",
        "rate_per_s",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "host_idle",
        "driver_cores",
        "host_bound",
    ]);
    let mut lines: Vec<Line> = Vec::new();
    for app in &s.apps {
        let rate = one_worker_max(maxima, app)? * LATENCY_LOAD;
        let seconds = if s.quick {
            QUICK_SECONDS
        } else {
            LATENCY_SECONDS
        };
        let records = (rate * seconds).max(LATENCY_RECORDS_MIN) as u64;
        let mut pts = Vec::new();
        for n in 1..=s.max_workers {
            progress(&format!("latency: {app} on {n} workers at {rate:.0}/s"));
            let m = s.runner.run(&static_args(app, n, records, Some(rate)))?;
            let ms = |q: &str| m.num(&format!("latency_us.{q}")) / 1e3;
            let mut row = vec![
                app.clone(),
                n.to_string(),
                fmt(rate, 0),
                fmt(ms("p50"), 2),
                fmt(ms("p95"), 2),
                fmt(ms("p99"), 2),
            ];
            row.extend(host_cells(&m));
            t.push(row);
            pts.push((n as f64, ms("p95")));
        }
        lines.push((app.clone(), pts));
    }
    let svg = line_chart(
        "p95 latency at 0.9x one worker's maximum rate",
        "workers",
        "p95 latency (ms)",
        &lines,
    )
    .map_err(anyhow::Error::msg)?;
    let intro = format!(
        "# Latency at one worker's maximum rate, on 1..{} workers\n\n{} Each app is offered \
         {LATENCY_LOAD}× what one worker sustained (the `scaling` experiment's one-worker \
         point) for about {LATENCY_SECONDS} s; every root's latency is tracked.",
        s.max_workers,
        cap_text(s)
    );
    write_all(dir, "latency", &intro, &t, &svg).map_err(anyhow::Error::msg)
}

/// One sentence on the workers' caps.
pub fn cap_text(s: &Setup) -> String {
    match s.runner.worker_cpu {
        Some(f) => format!("Each worker process is capped at {f} of a core (`--worker-cpu {f}`)."),
        None => "The workers are uncapped: they share the host's cores.".into(),
    }
}
