//! Live experiments: migrations at chosen moments (`migrations`), the estimates over a run
//! (`estimates`) and the policies side by side (`policies`).

use super::runner::Measured;
use super::scaling::{Maxima, cap_text, one_worker_max};
use super::table::{Line, Table, fmt, line_chart, write_all};
use super::{QUICK_SECONDS, Setup, progress};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The script of `migrations`: 1→2, 2→3, 3→2, 2→1, 1→3, 3→1, 3 s apart after 4 s of filling.
const SCRIPT: &str = "0:1,4:2,7:3,10:2,13:1,16:3,19:1";
/// The script with `--quick` (or fewer than three workers): 1→2→1, a second apart.
const QUICK_SCRIPT: &str = "0:1,1:2,2:1";
/// Its length (s): the last move plus time to finish it.
const SCRIPT_SECONDS: f64 = 21.0;
/// Fraction of one worker's maximum the migration runs are offered (one worker must hold it).
const MIGRATION_LOAD: f64 = 0.5;
/// The main job's length (s), which `estimates` runs.
const MAIN_JOB_SECONDS: f64 = 30.0;
/// Peak of the live patterns, as a multiple of one worker's maximum.
const PEAK_OF_ONE_WORKER: f64 = 1.6;
/// The policies compared.
const POLICIES: [&str; 6] = [
    "clasp",
    "faasflow",
    "zhang24",
    "faasflow-sp",
    "zhang24-sp",
    "static",
];

fn live_args(app: &str, s: &Setup, rate: f64, duration_s: f64, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--app".into(),
        app.into(),
        "--max-workers".into(),
        s.max_workers.to_string(),
        "--peak-rate".into(),
        format!("{rate:.0}"),
        "--duration".into(),
        duration_s.to_string(),
    ];
    a.extend(extra.iter().map(|x| (*x).to_owned()));
    a
}

/// Planner duration and worker pause of scripted moves, per app, after the state filled.
pub fn migrations(s: &Setup, dir: &Path, maxima: &Maxima) -> anyhow::Result<Vec<PathBuf>> {
    let (script, seconds) = if s.quick || s.max_workers < 3 {
        (QUICK_SCRIPT, QUICK_SECONDS)
    } else {
        (SCRIPT, SCRIPT_SECONDS.max(s.duration_s))
    };
    let mut t = Table::new(&[
        "app",
        "move",
        "t_s",
        "key_groups_moved",
        "exported",
        "planner_ms",
        "worker_pause_ms",
        "host_bound",
    ]);
    let mut lines: Vec<Line> = Vec::new();
    for app in &s.apps {
        let rate = one_worker_max(maxima, app)? * MIGRATION_LOAD;
        progress(&format!("migrations: {app} at {rate:.0}/s, moves {script}"));
        let extra = ["--pattern", "constant", "--moves", script];
        let m = s.runner.run(&live_args(app, s, rate, seconds, &extra))?;
        let mut pts = Vec::new();
        for (i, mig) in arr(&m.json, "migrations").iter().enumerate().skip(1) {
            let n = |k: &str| mig[k].as_f64().unwrap_or(f64::NAN);
            t.push(vec![
                app.clone(),
                format!("{}→{}", n("workers_before"), n("workers_after")),
                fmt(n("t_s"), 1),
                fmt(n("key_groups_moved"), 0),
                fmt(n("exported"), 0),
                fmt(n("planner_ms"), 1),
                fmt(n("worker_pause_ms"), 1),
                bound(&m),
            ]);
            pts.push((i as f64, n("worker_pause_ms")));
        }
        lines.push((app.clone(), pts));
    }
    let svg = line_chart("worker pause per scripted move", "move", "ms", &lines)
        .map_err(anyhow::Error::msg)?;
    let intro = format!(
        "# Migrations after the state filled\n\n{} `clasp run --pattern constant --moves \
         {script}` at {MIGRATION_LOAD}× one worker's maximum rate: the first move (t = 0, \
         before any state) is left out; the others move every app's full state. `planner_ms`: \
         plan sent → every slot done; `worker_pause_ms`: the longest any slot stopped.",
        cap_text(s)
    );
    write_all(dir, "migrations", &intro, &t, &svg).map_err(anyhow::Error::msg)
}

/// α, β, γ over the main job (`clasp run` with its defaults) started from the built-in priors,
/// against `clasp calibrate`.
pub fn estimates(s: &Setup, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let app = s.apps.first().map_or("wc", String::as_str);
    let cal = calibrate(s)?;
    progress(&format!(
        "estimates: {app}, the main job's pattern, built-in priors"
    ));
    let duration = if s.quick {
        QUICK_SECONDS.to_string()
    } else {
        MAIN_JOB_SECONDS.to_string()
    };
    let args: Vec<String> = ["--app", app, "--duration", &duration, "--no-profile"]
        .iter()
        .map(|a| (*a).to_owned())
        .chain(["--max-workers".to_owned(), s.max_workers.to_string()])
        .collect();
    let m = s.runner.run(&args)?;
    let mut t = Table::new(&[
        "t_s",
        "workers",
        "alpha_us",
        "beta_us",
        "gamma_us",
        "migrating",
    ]);
    let mut lines: Vec<Line> = vec![("α (µs)".into(), Vec::new()), ("β (µs)".into(), Vec::new())];
    for iv in arr(&m.json, "intervals") {
        let n = |k: &str| iv[k].as_f64().unwrap_or(f64::NAN);
        t.push(vec![
            fmt(n("t_s"), 2),
            fmt(n("workers"), 0),
            fmt(n("alpha_us"), 4),
            fmt(n("beta_us"), 4),
            fmt(n("gamma_us"), 2),
            iv["migrating"].to_string(),
        ]);
        lines[0].1.push((n("t_s"), n("alpha_us")));
        lines[1].1.push((n("t_s"), n("beta_us")));
    }
    let end = m.num("duration_s").max(s.duration_s);
    lines.push(("calibrate α".into(), vec![(0.0, cal.0), (end, cal.0)]));
    lines.push(("calibrate β".into(), vec![(0.0, cal.1), (end, cal.1)]));
    let svg = line_chart(
        "estimates over a live run vs clasp calibrate",
        "time (s)",
        "µs",
        &lines,
    )
    .map_err(anyhow::Error::msg)?;
    let e = &m.json["estimates"];
    let intro = format!(
        "# The estimates over a live run\n\n{} `clasp run --app {app} --no-profile` (the main \
         job, started from the built-in priors; its default peak rate). `clasp calibrate` on \
         the same machine: α {} µs, β {} µs (at the transport's default batch; by requests \
         per batch: {}), γ {} µs/s. The run's final estimates: α {} µs ({} samples), β {} µs \
         ({} samples), γ {} µs/s ({} samples); estimator `{}`.",
        cap_text(s),
        fmt(cal.0, 4),
        fmt(cal.1, 4),
        cal.3,
        fmt(cal.2, 2),
        fmt(e["alpha_us"].as_f64().unwrap_or(f64::NAN), 4),
        e["alpha_samples"],
        fmt(e["beta_us"].as_f64().unwrap_or(f64::NAN), 4),
        e["beta_samples"],
        fmt(e["gamma_us"].as_f64().unwrap_or(f64::NAN), 2),
        e["gamma_samples"],
        e["estimator"].as_str().unwrap_or("?"),
    );
    write_all(dir, "estimates", &intro, &t, &svg).map_err(anyhow::Error::msg)
}

/// `clasp calibrate --json`'s α, β, γ and β by batch size in words (its profile written to a
/// scratch file, so the user's own profile is left alone).
fn calibrate(s: &Setup) -> anyhow::Result<(f64, f64, f64, String)> {
    progress("estimates: clasp calibrate");
    let scratch = std::env::temp_dir().join(format!("clasp-calibrate-{}.json", std::process::id()));
    let mut cmd = crate::lifeline::this_exe()?;
    cmd.args(["calibrate", "--json", "--out"]).arg(&scratch);
    if s.quick {
        cmd.arg("--quick");
    }
    let out = cmd.output()?;
    let _ = std::fs::remove_file(&scratch);
    if !out.status.success() {
        anyhow::bail!(
            "clasp calibrate failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let mut by_batch: Vec<(u64, f64)> = v["beta_by_batch_us"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, b)| Some((k.parse().ok()?, b.as_f64()?)))
        .collect();
    by_batch.sort_by_key(|&(n, _)| n);
    let by_batch = by_batch
        .iter()
        .map(|(n, b)| format!("{n}: {} µs", fmt(*b, 4)))
        .collect::<Vec<_>>()
        .join(", ");
    Ok((f("alpha_us"), f("beta_us"), f("gamma_us"), by_batch))
}

/// The policies on burst and gradual input, over seeds: means with their spread.
pub fn policies(s: &Setup, dir: &Path, maxima: &Maxima) -> anyhow::Result<Vec<PathBuf>> {
    let app = s.apps.first().map_or("wc", String::as_str);
    let rate = one_worker_max(maxima, app)? * PEAK_OF_ONE_WORKER;
    let policies: &[&str] = if s.quick { &POLICIES[..2] } else { &POLICIES };
    let mut t = Table::new(&[
        "pattern",
        "policy",
        "throughput_per_s",
        "completed_fraction",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "worker_seconds",
        "decisions",
        "host_bound_runs",
    ]);
    let mut lines: Vec<Line> = Vec::new();
    for pattern in ["burst", "gradual"] {
        let mut pts = Vec::new();
        for (i, policy) in policies.iter().enumerate() {
            let mut runs = Vec::new();
            for seed in 1..=s.seeds {
                progress(&format!("policies: {pattern}, {policy}, seed {seed}"));
                let seed = seed.to_string();
                let extra = ["--pattern", pattern, "--policy", policy, "--seed", &seed];
                runs.push(
                    s.runner
                        .run(&live_args(app, s, rate, s.duration_s, &extra))?,
                );
            }
            let p95 = spread(&runs, |m| m.num("latency_us.p95") / 1e3);
            t.push(vec![
                pattern.into(),
                (*policy).into(),
                spread(&runs, |m| m.num("throughput_per_s")).text(0),
                spread(&runs, completed_fraction).text(3),
                spread(&runs, |m| m.num("latency_us.p50") / 1e3).text(1),
                p95.text(1),
                spread(&runs, |m| m.num("latency_us.p99") / 1e3).text(1),
                spread(&runs, |m| m.num("worker_seconds")).text(1),
                spread(&runs, |m| arr(&m.json, "decisions").len() as f64).text(1),
                runs.iter().filter(|m| m.host_bound()).count().to_string(),
            ]);
            pts.push((i as f64, p95.mean));
        }
        lines.push((format!("{pattern}: p95 (ms)"), pts));
    }
    let svg = line_chart(
        &format!("p95 latency by policy (0 = {})", policies.join(", ")),
        "policy",
        "ms",
        &lines,
    )
    .map_err(anyhow::Error::msg)?;
    let intro = format!(
        "# The policies side by side\n\n{} `clasp run --app {app} --max-workers {} --pattern P \
         --policy X --peak-rate {rate:.0} --duration {}` ({PEAK_OF_ONE_WORKER}× one worker's \
         maximum at the peak), seeds 1..={}: each cell is the mean with the lowest and highest \
         run in brackets. `completed_fraction`: inputs admitted (and so completed: a run \
         drains) ÷ inputs the pattern offered.",
        cap_text(s),
        s.max_workers,
        s.duration_s,
        s.seeds
    );
    write_all(dir, "policies", &intro, &t, &svg).map_err(anyhow::Error::msg)
}

/// Inputs admitted ÷ inputs the pattern offered (Σ offered rate × interval).
fn completed_fraction(m: &Measured) -> f64 {
    let mut offered = 0.0;
    let mut last_t = 0.0;
    for iv in arr(&m.json, "intervals") {
        let t = iv["t_s"].as_f64().unwrap_or(last_t);
        offered += iv["input_per_s"].as_f64().unwrap_or(0.0) * (t - last_t).max(0.0);
        last_t = t;
    }
    if offered > 0.0 {
        (m.num("records") / offered).min(1.0)
    } else {
        f64::NAN
    }
}

/// Mean, lowest and highest over runs.
struct Spread {
    mean: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn text(&self, digits: usize) -> String {
        format!(
            "{} [{}, {}]",
            fmt(self.mean, digits),
            fmt(self.min, digits),
            fmt(self.max, digits)
        )
    }
}

fn spread(runs: &[Measured], f: impl Fn(&Measured) -> f64) -> Spread {
    let v: Vec<f64> = runs.iter().map(f).filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Spread {
            mean: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        };
    }
    Spread {
        mean: v.iter().sum::<f64>() / v.len() as f64,
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key].as_array().map_or(&[], Vec::as_slice)
}

fn bound(m: &Measured) -> String {
    if m.host_bound() { "host-bound" } else { "" }.into()
}
