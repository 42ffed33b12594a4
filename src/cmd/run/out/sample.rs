//! A record with every kind of row (a NaN latency, a quoted reason, a policy and a chaos
//! migration), shared by the tests of the files and of the text.

use super::{DecisionRow, IntervalRow, MigrationRow, RunRecord, WorkerRow};

pub(super) fn record() -> RunRecord {
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
                admission_delay_p99_ms: 0.1 * t,
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
            narrowing_ms: 12.0,
            worker_pause_ms: 0.75,
            marker_wait_ms: 1.5,
            exported: 10,
            forwarded: 3,
            held: 7,
            gated: 2,
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
            narrowing_ms: 0.0,
            worker_pause_ms: 0.5,
            marker_wait_ms: 1.25,
            exported: 11,
            forwarded: 0,
            held: 1,
            gated: 0,
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
            "estimates": {
                "alpha_us": 38.5, "beta_us": 275.0, "gamma_us": 51500.0, "w_bar_us": 1e6,
                "alpha_samples": 120, "beta_samples": 80, "gamma_samples": 0,
                "estimator": "busy-time",
            },
        }),
        intervals,
        migrations,
        decisions,
        workers: worker_rows(),
    }
}

/// Four rows of `workers.csv`: two workers over two intervals (the first not yet measured).
fn worker_rows() -> Vec<WorkerRow> {
    (0..4)
        .map(|i| WorkerRow {
            t_s: 0.5 * (1 + i / 2) as f64,
            worker: i % 2,
            cpu_us_per_s: (i != 0).then_some(250_000.0),
            exec_us_per_s: 120_000.0,
            local_per_s: 40_000.0,
            remote_per_s: 5_000.0 * (i % 2) as f64,
            remote_received_per_s: 5_000.0 * ((i + 1) % 2) as f64,
            roots_per_s: 4_000.0,
            destinations: i % 2,
            busy_us_per_s: 200_000.0,
            sleeps_per_s: 3_000.0,
            sleep_cpu_us_per_s: 60_000.0,
            throttled_periods: Some((i % 3) as u64),
            batches_per_s: 2_000.0,
            exec_cpu_us_per_s: (i != 0).then_some(150_000.0),
            exec_sleep_cpu_us_per_s: 20_000.0,
            exec_sleeps_per_s: 1_000.0,
        })
        .collect()
}
