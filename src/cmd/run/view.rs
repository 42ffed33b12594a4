//! A cluster run's report as the run view `clasp local` also prints (the same keys, so the
//! digests compare with `clasp oracle` directly), plus what only a cluster has: its workers,
//! worker-seconds and migrations.

use super::args::RunArgs;
use crate::cmd::report::{self, RunView};
use clasp_dataplane::cluster::control::MigrationRecord;
use clasp_dataplane::cluster::driver::ClusterReport;
use clasp_operators::AppSpec;

/// Prints the run as text, or as one JSON object with `--json`.
pub fn print_report(
    spec: &AppSpec,
    args: &RunArgs,
    records: u64,
    workers: usize,
    r: &ClusterReport,
) -> anyhow::Result<()> {
    let mut out = crate::cmd::output::stdout();
    report::print(
        &mut out,
        &run_view(spec, args, records, workers, r)?,
        args.json,
    )?;
    out.finish()
}

/// What `clasp run` prints, as the shared run view.
pub fn run_view<'a>(
    spec: &'a AppSpec,
    args: &RunArgs,
    records: u64,
    workers: usize,
    r: &'a ClusterReport,
) -> anyhow::Result<RunView<'a>> {
    let t = |k: &str| r.totals.get(k).copied().unwrap_or(0);
    let mut view = RunView {
        spec,
        records,
        seed: args.seed,
        generated: args.source.is_generator(),
        executors: usize::from(args.executors),
        workers: Some(workers),
        summaries: &r.summaries,
        state_keys: r.state_keys.clone(),
        exec_ns_mean: r.operator_metrics.iter().map(|m| m.exec_ns_mean).collect(),
        operators_json: r
            .operator_metrics
            .iter()
            .map(|m| serde_json::to_value(m).unwrap_or_default())
            .collect(),
        malformed: &r.malformed,
        latency: &r.latency,
        elapsed: r.elapsed,
        admitted: r.admitted,
        admitted_here: r.admitted.saturating_sub(r.resumed_admitted),
        totals: serde_json::to_value(&r.totals)?,
        totals_line: format!(
            "executors: {} frames in, {} local and {} remote chained requests, {} overflowed, \
             {} bad frames, {} idle waits, {} sleeps; {} batches sent in {} sends",
            t("frames_in"),
            t("local_sent"),
            t("remote_sent"),
            t("overflowed"),
            t("bad_frames"),
            t("parks"),
            t("sleeps"),
            t("net_batches_sent"),
            t("net_batch_sends")
        ),
        intervals: serde_json::to_value(&r.intervals)?,
        errors: &r.errors,
        extra: vec![
            ("migrations".into(), serde_json::to_value(&r.migrations)?),
            ("worker_seconds".into(), r.worker_seconds.into()),
            (
                "admission_delay_us".into(),
                serde_json::to_value(r.admission_delay)?,
            ),
            ("refused_connections".into(), r.refused_connections.into()),
            crate::cmd::source::json(&r.sources)?,
            // The driver's own CPU (planner included; the workers are other processes): a
            // run whose driver needed most of a core measured the host, not the cluster.
            (
                "driver_cpu_s".into(),
                (clasp_dataplane::cpu_usage::process_cpu_ns() as f64 / 1e9).into(),
            ),
        ],
        extra_lines: crate::cmd::report::admission_delay_line(&r.admission_delay)
            .into_iter()
            .chain(r.migrations.iter().map(migration_line))
            .chain((r.refused_connections > 0).then(|| {
                format!(
                    "refused {} connections that did not authenticate (the run is unaffected)",
                    r.refused_connections
                )
            }))
            .chain(crate::cmd::source::lines(&r.sources))
            .collect(),
        interrupted: RunView::interrupted_now(),
    };
    view.extra.extend(super::recovery::json(r)?);
    view.extra_lines.extend(super::recovery::lines(r));
    Ok(view)
}

/// One migration as a line of the text output.
fn migration_line(m: &MigrationRecord) -> String {
    format!(
        "migration to epoch {} at {:.3} s ({}): workers {} → {}, {} key groups moved; \
         planner {:.2} ms, longest pause {:.2} ms, marker wait {:.2} ms; exported {}, \
         forwarded {}, held {}, \
         gated {}; {} inputs admitted meanwhile",
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
        m.admitted_during
    )
}
