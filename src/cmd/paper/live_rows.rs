//! The table's rows for the live figures (2, 3, 4, 8, 9 and 14 on capped workers), read from
//! the CSVs `clasp experiment` wrote. The live clusters have at most 3 workers of 0.3 of a
//! core each (what a 2-core machine holds), so the trends, not the 5- and 10-worker factors,
//! are what these rows can judge.

use super::figures::{Checked, FIG14_PAPER, row, show};
use super::read::{csv, lead};
use super::runs::Ran;
use super::table::{Row, Verdict};
use std::collections::BTreeMap;
use std::path::Path;

type Records = Vec<BTreeMap<String, String>>;

const LIVE: &str = "live, ≤ 3 capped workers";

fn cell(r: &BTreeMap<String, String>, k: &str) -> f64 {
    lead(r.get(k))
}

fn text<'a>(r: &'a BTreeMap<String, String>, k: &str) -> &'a str {
    r.get(k).map_or("", String::as_str)
}

/// Per app, its rows at the fewest and at the most workers.
fn ends(rows: &Records) -> BTreeMap<String, (f64, f64, f64)> {
    let mut m: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for r in rows {
        let w = cell(r, "workers");
        m.entry(text(r, "app").to_owned())
            .and_modify(|e| e.2 = e.2.max(w))
            .or_insert((w, w, w));
    }
    m
}

/// A column's value for `app` at `workers`.
fn at(rows: &Records, app: &str, workers: f64, col: &str) -> f64 {
    rows.iter()
        .find(|r| text(r, "app") == app && cell(r, "workers") == workers)
        .map_or(f64::NAN, |r| cell(r, col))
}

/// Figures 2, 3, 4 and 8 (the motivation and the migration cost).
pub fn motivation(ran: &Ran) -> Vec<Row> {
    vec![
        fig2(ran),
        fig3(ran),
        fig4(ran),
        fig8_planner(ran),
        fig8_pause(ran),
    ]
}

fn fig2(ran: &Ran) -> Row {
    row(
        "fig2",
        LIVE.into(),
        "Fig. 2: throughput scales sub-linearly: SYN reaches 3.7× one worker's on 5 workers \
         (74 % of linear) and 5.5× on 10 (55 %); the other apps alike",
        "same trend: every app gains from more workers (above 1×) but stays below 90 % of \
         linear at the most workers",
        Some((ran, "live/scaling")),
        |dir: &Path| -> Checked {
            let rows = csv(&dir.join("scaling.csv"))?;
            let (mut below, mut parts, mut bound) = (0, Vec::new(), 0);
            for (app, (_, _, n)) in ends(&rows) {
                let x = at(&rows, &app, n, "vs_one_worker");
                let eff = x / n;
                below += usize::from(x > 1.0 && eff < 0.9);
                parts.push(format!("{app} {}× ({:.0} %)", show(x, 2), 100.0 * eff));
            }
            bound += rows
                .iter()
                .filter(|r| text(r, "host_bound") == "host-bound")
                .count();
            let apps = parts.len();
            let n = rows.iter().map(|r| cell(r, "workers")).fold(0.0, f64::max);
            Ok((
                format!(
                    "on {n} workers ÷ one: {}; above 1× and below 90 % of linear: {below} of \
                     {apps}; host-bound points: {bound}",
                    parts.join(", ")
                ),
                apps > 0 && below == apps,
            ))
        },
    )
}

fn fig3(ran: &Ran) -> Row {
    row(
        "fig3",
        LIVE.into(),
        "Fig. 3: at one worker's maximum rate, p95 latency is lower on fewer workers for every \
         app; SYN's p95 on 5 and 10 workers is 1.5× and 2.3× one worker's",
        "same trend: p95 on the most workers above one worker's for every app",
        Some((ran, "live/latency")),
        |dir: &Path| -> Checked {
            let rows = csv(&dir.join("latency.csv"))?;
            let (mut higher, mut parts) = (0, Vec::new());
            for (app, (lo, _, n)) in ends(&rows) {
                let r = at(&rows, &app, n, "p95_ms") / at(&rows, &app, lo, "p95_ms");
                higher += usize::from(r > 1.0);
                parts.push(format!("{app} {}×", show(r, 2)));
            }
            let apps = parts.len();
            Ok((
                format!(
                    "p95 on the most workers ÷ on one: {}; higher for {higher} of {apps} apps",
                    parts.join(", ")
                ),
                apps > 0 && higher == apps,
            ))
        },
    )
}

/// No counterpart: state is always local to the worker that runs its key group. The row shows
/// the measured moves that keep it so.
fn fig4(ran: &Ran) -> Row {
    let mut r = row(
        "fig4",
        LIVE.into(),
        "Fig. 4: local state access gives 3.5× the throughput of remote access on WC (90 % of \
         executions touch state) and 1.5× on PL (20 %)",
        "none: no counterpart",
        Some((ran, "live/migrations")),
        |dir: &Path| -> Checked {
            let rows = csv(&dir.join("migrations.csv"))?;
            let moved: f64 = rows.iter().map(|r| cell(r, "key_groups_moved")).sum();
            let exported: f64 = rows.iter().map(|r| cell(r, "exported")).sum();
            Ok((
                format!(
                    "no remote-state mode to compare: a key group's state lives in the memory \
                     of the worker that runs it and moves with it; measured here, {} moves \
                     carried {moved:.0} key groups ({exported:.0} exported)",
                    rows.len()
                ),
                false,
            ))
        },
    );
    match r.verdict {
        Verdict::Agree | Verdict::Disagree => r.verdict = Verdict::NoCounterpart,
        Verdict::NotRun => {
            r.ours = "no remote-state mode to compare: a key group's state lives in the memory \
                      of the worker that runs it and moves with it (fig8's migrations measure \
                      the moves)"
                .into();
            r.verdict = Verdict::NoCounterpart;
        }
        Verdict::NoCounterpart | Verdict::Missing => {}
    }
    r
}

/// Median of finite values (NaN when none).
fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn fig8_planner(ran: &Ran) -> Row {
    row(
        "fig8",
        format!("{LIVE}, planner duration"),
        "Fig. 8: the planner duration of a migration is typically 10–20 ms; WC's (the largest \
         state) is the longest",
        "median within 2× the original's upper end (≤ 40 ms)",
        Some((ran, "live/migrations")),
        |dir: &Path| -> Checked {
            let rows = csv(&dir.join("migrations.csv"))?;
            let ms: Vec<f64> = rows.iter().map(|r| cell(r, "planner_ms")).collect();
            let m = median(ms.clone());
            let longest = rows
                .iter()
                .max_by(|a, b| cell(a, "planner_ms").total_cmp(&cell(b, "planner_ms")))
                .map_or("-", |r| text(r, "app"));
            let hi = ms.iter().copied().fold(0.0, f64::max);
            Ok((
                format!(
                    "median {} ms over {} moves (longest {} ms, {longest})",
                    show(m, 1),
                    ms.len(),
                    show(hi, 1)
                ),
                m <= 40.0,
            ))
        },
    )
}

fn fig8_pause(ran: &Ran) -> Row {
    row(
        "fig8",
        format!("{LIVE}, worker pause"),
        "Fig. 8: workers resume within 10 ms in most migrations",
        "median pause ≤ 10 ms",
        Some((ran, "live/migrations")),
        |dir: &Path| -> Checked {
            let rows = csv(&dir.join("migrations.csv"))?;
            let ms: Vec<f64> = rows.iter().map(|r| cell(r, "worker_pause_ms")).collect();
            let within = ms.iter().filter(|x| **x <= 10.0).count();
            let m = median(ms.clone());
            Ok((
                format!(
                    "median {} ms; within 10 ms: {within} of {} moves",
                    show(m, 1),
                    ms.len()
                ),
                m <= 10.0,
            ))
        },
    )
}

/// The live estimator's final α and β (and how many samples each learnt from, from the
/// experiment's markdown).
pub fn fig9_live(ran: &Ran) -> Row {
    row(
        "fig9",
        LIVE.into(),
        "Fig. 9: a remote chained request costs ≈ 7× a local one (β 275 vs α 38.5 µs)",
        "same sign: β above α, both learnt (an estimate from no samples is still the prior)",
        Some((ran, "live/estimates")),
        |dir: &Path| -> Checked {
            let rows = csv(&dir.join("estimates.csv"))?;
            let last = rows.last().ok_or("estimates.csv has no rows")?;
            let (a, b) = (cell(last, "alpha_us"), cell(last, "beta_us"));
            let md = std::fs::read_to_string(dir.join("estimates.md")).unwrap_or_default();
            let (sa, sb) = samples(&md);
            Ok((
                format!(
                    "at the run's end α {a:.3} µs ({} samples), β {b:.3} µs ({} samples); \
                     β÷α {}",
                    show(sa, 0),
                    show(sb, 0),
                    show(b / a, 2)
                ),
                sa > 0.0 && sb > 0.0 && b > a,
            ))
        },
    )
}

/// How many samples α and β were learnt from, from the markdown's "final estimates: α X µs (N
/// samples), β Y µs (M samples)" (NaN when absent).
fn samples(md: &str) -> (f64, f64) {
    let counts: Vec<f64> = md
        .split_once("final estimates:")
        .map(|(_, rest)| {
            rest.split(" samples)")
                .take(2)
                .filter_map(|s| s.rsplit('(').next()?.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match counts[..] {
        [a, b, ..] => (a, b),
        _ => (f64::NAN, f64::NAN),
    }
}

/// CLASP against FaaSFlow (and the others `policies` ran) on the live patterns.
pub fn fig14_live(ran: &Ran) -> Row {
    row(
        "fig14",
        LIVE.into(),
        FIG14_PAPER,
        "same direction in each pattern: CLASP ≥ 0.98× every other policy's throughput and a \
         lower p50 than FaaSFlow's and Zhang24's (those that ran)",
        Some((ran, "live/policies")),
        |dir: &Path| -> Checked {
            let rows = csv(&dir.join("policies.csv"))?;
            let (mut parts, mut ok) = (Vec::new(), true);
            for pattern in ["burst", "gradual"] {
                let of = |p: &str| {
                    rows.iter()
                        .find(|r| text(r, "pattern") == pattern && text(r, "policy") == p)
                };
                let Some(c) = of("clasp") else { continue };
                let others: Vec<_> = rows
                    .iter()
                    .filter(|r| text(r, "pattern") == pattern && text(r, "policy") != "clasp")
                    .collect();
                for o in others {
                    let p = text(o, "policy");
                    let r = cell(c, "throughput_per_s") / cell(o, "throughput_per_s");
                    let (lc, lo) = (cell(c, "p50_ms"), cell(o, "p50_ms"));
                    ok &= r >= 0.98 && (!matches!(p, "faasflow" | "zhang24") || lc < lo);
                    parts.push(format!(
                        "{pattern}: ÷{p} {}×, p50 {} vs {} ms",
                        show(r, 2),
                        show(lc, 1),
                        show(lo, 1)
                    ));
                }
            }
            if parts.is_empty() {
                return Err("policies.csv has no clasp row with another policy".into());
            }
            Ok((format!("throughput CLASP {}", parts.join("; ")), ok))
        },
    )
}
