//! `clasp run --static`: a fixed set of workers and a fixed placement (moved only by
//! `--chaos-migrations`, for testing). `--workers N` starts N `clasp worker` processes on
//! 127.0.0.1; `--cluster FILE` drives workers that are already running, on this host or
//! others. Either way it prints what `clasp local` prints (docs/cluster.md).

use super::args::RunArgs;
use super::recovery::failed;
use super::setup::{drive, prepare};
use super::view::print_report;
use crate::cmd::apps::load_app;
use crate::cmd::usage_error;
use clasp_dataplane::cluster::control::{Chaos, Controller, Static};
use clasp_dataplane::routing::Slots;

/// Input records a static run admits without `--records`.
const DEFAULT_RECORDS: u64 = 100_000;

/// `clasp run --static`.
pub fn run_static(args: RunArgs) -> anyhow::Result<()> {
    if args.workers.is_none() && args.cluster.is_none() {
        return Err(usage_error(
            "clasp run --static needs --workers N or --cluster FILE",
        ));
    }
    // The live run's own options (--moves, --out, --peak-rate, ...) conflict with --static
    // in clap (args.rs).
    if args.migration_timeout_s == 0 {
        return Err(usage_error("--migration-timeout-s must be at least 1"));
    }
    let spec = load_app(args.app.as_deref(), args.app_file.as_deref())?;
    args.check_chaos_source()?;
    let records = crate::cmd::source::records(&args.source, args.records, DEFAULT_RECORDS);
    let (cfg, spawned) = prepare(&args, args.workers, 0, &spec, records)?;
    let mut chaos;
    let ctl: &mut dyn Controller = if args.chaos_migrations > 0 {
        let slots = Slots {
            workers: cfg.workers.iter().map(|w| w.0).collect(),
            executors: usize::from(args.executors),
        };
        chaos = Chaos::new(
            args.chaos_migrations,
            records,
            slots,
            spec.operators.len(),
            args.seed,
        );
        &mut chaos
    } else {
        &mut Static
    };
    let report =
        drive(spawned, &spec, &cfg, ctl).inspect_err(|_| failed(&args, cfg.checkpoint.as_ref()))?;
    if args.chaos_migrations > report.migrations.len() && report.admitted < records {
        // Spaced over --records: an input that ended sooner leaves the later ones unmade.
        note!(
            "{} of the {} chaos migrations were made: the input ended after {} \
             records, before the others fell due (spaced over --records {records})",
            report.migrations.len(),
            args.chaos_migrations,
            report.admitted
        );
    }
    let shown = if args.source.is_generator() {
        records
    } else {
        report.admitted
    };
    let printed = print_report(&spec, &args, shown, cfg.workers.len(), &report);
    let result = crate::cmd::output::run_result(printed, &report.errors);
    super::recovery::finish(&args, cfg.checkpoint.as_ref(), &result);
    result
}
