//! The report of a cluster run: the workers' summaries, checked against the app's shape and
//! summed per operator, with what the driver measured (latency, migrations, intervals).

use super::feed::Fed;
use super::{ClusterOperatorMetrics, ClusterReport, Driver};
use clasp_operators::{AppSpec, OperatorSummary};
use std::collections::BTreeMap;
use std::time::Duration;

/// The run's report: every worker's summary checked and summed, and what the driver measured.
pub(super) fn build(spec: &AppSpec, d: Driver, fed: Fed, elapsed: Duration) -> ClusterReport {
    let ops = spec.operators.len();
    let mut summaries = vec![OperatorSummary::default(); ops];
    let mut state_keys = vec![0u64; ops];
    let mut malformed: Vec<BTreeMap<String, u64>> = vec![Default::default(); ops];
    let mut metrics = vec![ClusterOperatorMetrics::default(); ops];
    let mut exec_ns = vec![0u64; ops];
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors = d.errors;
    let mut workers = d.barrier.summaries;
    workers.sort_by_key(|w| w.worker);
    for w in &workers {
        let ok = w.summaries.len() == ops
            && w.state_keys.len() == ops
            && w.malformed.len() == ops
            && w.processed.len() == ops
            && w.exec_ns.len() == ops
            && w.edges_local.len() == spec.edges.len()
            && w.edges_remote.len() == spec.edges.len();
        if !ok {
            errors.push(format!(
                "worker {} sent a summary of another shape",
                w.worker
            ));
            continue;
        }
        for op in 0..ops {
            summaries[op].combine(&w.summaries[op]);
            state_keys[op] += w.state_keys[op];
            for (r, n) in &w.malformed[op] {
                *malformed[op].entry(r.clone()).or_default() += n;
            }
            metrics[op].processed += w.processed[op];
            exec_ns[op] += w.exec_ns[op];
        }
        for (i, edge) in spec.edges.iter().enumerate() {
            let name = &spec.operators[edge.to].name;
            let m = &mut metrics[edge.from];
            for (edges, map) in [
                (&w.edges_local, &mut m.chained_local),
                (&w.edges_remote, &mut m.chained_remote),
            ] {
                if edges[i] > 0 {
                    *map.entry(name.clone()).or_default() += edges[i];
                }
            }
        }
        for (k, v) in &w.totals {
            if k == "remote_destinations" {
                let e = totals.entry(k.clone()).or_default();
                *e = (*e).max(*v);
            } else {
                *totals.entry(k.clone()).or_default() += v;
            }
        }
        for e in &w.errors {
            let e = format!("worker {}: {e}", w.worker);
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    add_base(&d.carry.base(ops), &mut summaries, &mut malformed);
    for op in 0..ops {
        metrics[op].exec_ns_mean = exec_ns[op] as f64 / metrics[op].processed.max(1) as f64;
    }
    totals.insert("driver_sent".into(), d.sent.values().sum());
    let mut carry = d.carry;
    let mut migrations = std::mem::take(&mut carry.migrations);
    migrations.extend(d.mig.migrations);
    let mut intervals = std::mem::take(&mut carry.intervals);
    intervals.extend(d.meter.intervals);
    totals.insert("migrations".into(), migrations.len() as u64);
    let refused_connections = d.t.counters().refused + totals.get("net_refused").unwrap_or(&0);
    ClusterReport {
        summaries,
        state_keys,
        malformed: malformed
            .into_iter()
            .map(|m| m.into_iter().collect())
            .collect(),
        operator_metrics: metrics,
        admitted: fed.admitted,
        latency: d.rx.ledger.summary(),
        admission_delay: d.meter.admission_delay.summary(),
        elapsed,
        totals,
        errors,
        workers,
        migrations,
        intervals,
        worker_seconds: d.meter.worker_seconds + carry.worker_seconds,
        refused_connections,
        sources: vec![fed.source],
        checkpoints: carry.checkpoint_report(d.cfg.checkpoint.is_some()),
        recoveries: carry.recoveries,
        resumed_from: carry.resumed_from,
        resumed_admitted: carry.resumed_admitted,
        resumed_run_s: carry.resumed_run_s,
    }
}

/// Adds what the operators did before the cut the last attempt started from (a recovery or a
/// resume: the checkpoint's counters and digests).
fn add_base(
    base: &[crate::checkpoint::OperatorBase],
    summaries: &mut [OperatorSummary],
    malformed: &mut [BTreeMap<String, u64>],
) {
    for ((b, s), m) in base.iter().zip(summaries).zip(malformed) {
        s.processed += b.processed;
        s.malformed += b.malformed;
        s.inputs.combine(&b.inputs);
        s.outputs.combine(&b.outputs);
        for (r, n) in &b.malformed_reasons {
            *m.entry(r.clone()).or_default() += n;
        }
    }
}
