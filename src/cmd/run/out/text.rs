//! The text a live run prints: the summary at its end and the progress line a terminal shows
//! while it runs. Both read the record only, so they print the same for a run and a test.

use std::fmt::Write as _;

use serde_json::Value;

use super::{IntervalRow, RunRecord};

/// The human summary printed at the end of a run: throughput, latency p50/p95/p99,
/// worker-seconds, every decision line, every migration with its durations and counts, the
/// final α/β/γ/W̄ estimates, and the estimator with each cost's samples. Missing summary keys
/// print as `n/a`.
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
             longest pause {:.3} ms, marker wait {:.3} ms; exported {}, forwarded {}, held {}, \
             gated {}, admitted during {}",
            m.epoch,
            m.t_s,
            m.reason,
            m.workers_before,
            m.workers_after,
            m.key_groups_moved,
            m.planner_ms,
            m.worker_pause_ms,
            m.marker_wait_ms,
            m.exported,
            m.forwarded,
            m.held,
            m.gated,
            m.admitted_during,
        );
    }
    match rec.intervals.last() {
        // No policy ran (`--policy static`, `--moves`): nothing estimated anything.
        Some(_) if s["estimates"].is_null() && s.get("estimates").is_some() => {
            let _ = writeln!(
                out,
                "estimates: none (no policy ran, so no costs were learnt)"
            );
        }
        Some(r) => {
            let _ = writeln!(
                out,
                "estimates at t={:.1}s: α {} µs, β {} µs, γ {} µs/s, W̄ {:.0} µs/s",
                r.t_s,
                cost(r.alpha_us),
                cost(r.beta_us),
                cost(r.gamma_us),
                r.w_bar_us
            );
        }
        None => {
            let _ = writeln!(out, "estimates: n/a (no intervals)");
        }
    }
    let e = &s["estimates"];
    if e.is_object() {
        let _ = writeln!(
            out,
            "estimator {}: samples α {}, β {}, γ {} (0: not learnt, still the prior); \
             a sleep and wake-up: {}; an input record: {}",
            text_or_na(&e["estimator"]),
            text_or_na(&e["alpha_samples"]),
            text_or_na(&e["beta_samples"]),
            text_or_na(&e["gamma_samples"]),
            e["wake_us"]
                .as_f64()
                .map_or_else(|| "not learnt".to_owned(), |w| format!("{} µs", cost(w))),
            e["root_us"]
                .as_f64()
                .map_or_else(|| "not learnt".to_owned(), |w| format!("{} µs", cost(w))),
        );
        if let Some(u) = e["unpriced_us_per_s"].as_f64().filter(|u| *u > 0.0) {
            let _ = writeln!(
                out,
                "unpriced: {u:.0} µs/s of an active worker's CPU is not in α, β, γ or execution \
                 (wake-ups, ingress, timers): W̄ is the cap less that"
            );
        }
    }
    out
}

/// A cost in µs: one decimal from 10 up, three below (α and β are fractions of a µs).
fn cost(us: f64) -> String {
    if us.abs() >= 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.3}")
    }
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

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    #[test]
    fn run_out_summary_of_an_empty_record_says_n_a() {
        let rec = RunRecord {
            summary: serde_json::json!({}),
            intervals: vec![],
            migrations: vec![],
            decisions: vec![],
            workers: vec![],
        };
        let text = render_summary(&rec);
        assert!(text.contains("policy n/a"), "{text}");
        assert!(text.contains("throughput n/a"), "{text}");
        assert!(text.contains("p99 n/a"), "{text}");
        assert!(text.contains("worker-seconds n/a"), "{text}");
        assert!(text.contains("estimates: n/a"), "{text}");
    }

    #[test]
    fn run_out_summary_mentions_every_migration_and_decision() {
        let rec = sample::record();
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
                format!("marker wait {:.3} ms", m.marker_wait_ms),
                format!("exported {}", m.exported),
                format!("forwarded {}", m.forwarded),
                format!("held {}", m.held),
                format!("gated {}", m.gated),
                format!("admitted during {}", m.admitted_during),
            ] {
                assert!(line.contains(&part), "{part} not in {line}");
            }
        }
        assert!(text.contains("α 38.5 µs"), "{text}");
        assert!(text.contains("W̄ 1000000 µs"), "{text}");
        assert!(
            text.contains("estimator busy-time: samples α 120, β 80, γ 0"),
            "{text}"
        );
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
