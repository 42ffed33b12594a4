//! How a run is printed, shared by `clasp local` and `clasp run --static`: the same keys as
//! `clasp oracle --json` (so digests compare directly) plus throughput, latency and metrics.

use clasp_dataplane::runtime::ledger::LatencySummary;
use clasp_operators::{AppSpec, Comparable, OperatorSummary};
use std::io::Write;
use std::time::Duration;

/// One finished run, as both printers see it.
pub struct RunView<'a> {
    pub spec: &'a AppSpec,
    pub records: u64,
    pub seed: u64,
    /// Whether the input was the generator's (the seed means nothing for another source, and
    /// the text header leaves it out).
    pub generated: bool,
    pub executors: usize,
    /// Workers of a cluster run (`None` for `clasp local`).
    pub workers: Option<usize>,
    pub summaries: &'a [OperatorSummary],
    /// Per operator.
    pub state_keys: Vec<u64>,
    /// Per operator, sampled mean execution time.
    pub exec_ns_mean: Vec<f64>,
    /// Per operator, the metrics as JSON.
    pub operators_json: Vec<serde_json::Value>,
    pub malformed: &'a [Vec<(String, u64)>],
    pub latency: &'a LatencySummary,
    pub elapsed: Duration,
    pub admitted: u64,
    /// Of those, the records this process admitted (a run resumed from a checkpoint admitted
    /// the rest before it): what the throughput counts over `elapsed`.
    pub admitted_here: u64,
    pub totals: serde_json::Value,
    /// The counters' one-line summary in the text output.
    pub totals_line: String,
    pub intervals: serde_json::Value,
    pub errors: &'a [String],
    /// More JSON keys (e.g. a cluster run's `migrations`).
    pub extra: Vec<(String, serde_json::Value)>,
    /// More lines of text output (printed before the faults).
    pub extra_lines: Vec<String>,
    /// The signal (its name) that stopped the input early, if one did.
    pub interrupted: Option<&'static str>,
}

impl RunView<'_> {
    /// The signal that stopped this process's run early, as the run view holds it.
    pub fn interrupted_now() -> Option<&'static str> {
        crate::signals::interrupted().map(crate::signals::name)
    }

    /// The records the run is about: those asked for, or, when a signal stopped the input or
    /// it ended early (a source that ran dry, an ingress that died), those admitted (the
    /// shorter run every other figure describes).
    fn records_run(&self) -> u64 {
        match self.interrupted {
            Some(_) => self.admitted,
            None => self.records.min(self.admitted),
        }
    }
}

/// The run as one JSON object (what `--json` prints).
pub fn json(v: &RunView<'_>) -> serde_json::Value {
    let comparable = Comparable::from_summaries(v.spec, v.summaries);
    let names: Vec<&str> = v.spec.operators.iter().map(|o| o.name.as_str()).collect();
    let throughput = v.admitted_here as f64 / v.elapsed.as_secs_f64().max(1e-9);
    let l = v.latency;
    let by_name = |f: &dyn Fn(usize) -> serde_json::Value| -> serde_json::Map<_, _> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), f(i)))
            .collect()
    };
    let mut o = serde_json::json!({
        "app": v.spec.name,
        "records": v.records_run(),
        "seed": v.seed,
        "state_digest": comparable.state_digest().to_hex(),
        "output_digest": comparable.output_digest().to_hex(),
        "processed": by_name(&|i| v.summaries[i].processed.into()),
        "state_digests": by_name(&|i| v.summaries[i].state.to_hex().into()),
        "malformed": by_name(&|i| {
            let reasons = v.malformed.get(i).map_or(&[][..], Vec::as_slice);
            reasons.iter().map(|(r, n)| (r.clone(), (*n).into())).collect::<serde_json::Map<_, _>>().into()
        }),
        "throughput_per_s": throughput,
        "latency_us": {"p50": l.p50, "p95": l.p95, "p99": l.p99, "max": l.max},
        "executors": v.executors,
        "elapsed_s": v.elapsed.as_secs_f64(),
        "operators": by_name(&|i| v.operators_json[i].clone()),
        "totals": v.totals,
        "intervals": v.intervals,
        "errors": v.errors,
        "interrupted": v.interrupted.is_some(),
    });
    if let Some(w) = v.workers {
        o["workers"] = w.into();
    }
    for (k, x) in &v.extra {
        o[k.as_str()] = x.clone();
    }
    o
}

/// Prints the run as text, or as one JSON object, to `out`.
pub fn print(out: &mut impl Write, v: &RunView<'_>, json: bool) -> anyhow::Result<()> {
    let comparable = Comparable::from_summaries(v.spec, v.summaries);
    let names: Vec<&str> = v.spec.operators.iter().map(|o| o.name.as_str()).collect();
    let throughput = v.admitted_here as f64 / v.elapsed.as_secs_f64().max(1e-9);
    let l = v.latency;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&self::json(v))?)?;
        return Ok(());
    }
    let workers = v
        .workers
        .map(|w| format!("  workers {w}"))
        .unwrap_or_default();
    let seed = if v.generated {
        format!("  seed {}", v.seed)
    } else {
        String::new()
    };
    writeln!(
        out,
        "app {}  records {}{seed}{workers}  executors {}",
        v.spec.name,
        v.records_run(),
        v.executors
    )?;
    writeln!(out, "state_digest  {}", comparable.state_digest())?;
    writeln!(out, "output_digest {}", comparable.output_digest())?;
    writeln!(
        out,
        "throughput {throughput:.0} records/s over {:.3} s; latency µs p50 {:.1} p95 {:.1} \
         p99 {:.1} max {:.1} ({} trees)",
        v.elapsed.as_secs_f64(),
        l.p50,
        l.p95,
        l.p99,
        l.max,
        l.count
    )?;
    writeln!(
        out,
        "{:<16} {:>10} {:>9} {:>10} {:>12}  state digest",
        "operator", "processed", "malformed", "state keys", "exec ns/req"
    )?;
    for (i, n) in names.iter().enumerate() {
        let s = &v.summaries[i];
        writeln!(
            out,
            "{n:<16} {:>10} {:>9} {:>10} {:>12.0}  {}",
            s.processed, s.malformed, v.state_keys[i], v.exec_ns_mean[i], s.state
        )?;
    }
    writeln!(out, "{}", v.totals_line)?;
    for (op, reasons) in names.iter().zip(v.malformed) {
        for (reason, n) in reasons {
            writeln!(out, "malformed at {op}: {n} × {reason}")?;
        }
    }
    for line in &v.extra_lines {
        writeln!(out, "{line}")?;
    }
    if let Some(signal) = v.interrupted {
        writeln!(
            out,
            "interrupted by {signal}: the input stopped after {} records, and all of them \
             were processed",
            v.admitted
        )?;
    }
    for e in v.errors {
        writeln!(out, "fault: {e}")?;
    }
    Ok(())
}

/// How late records were admitted, as a line of the text output (`None` at no rate).
pub(crate) fn admission_delay_line(
    d: &clasp_dataplane::runtime::ledger::LatencySummary,
) -> Option<String> {
    (d.count > 0).then(|| {
        format!(
            "admission delay µs p50 {:.1} p99 {:.1} max {:.1} (after falling due by the rate; \
             not part of the latency)",
            d.p50, d.p99, d.max
        )
    })
}
