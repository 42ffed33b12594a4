//! `clasp place`: one placement decision on a problem file, for any policy.

use std::io::Write as _;

use clap::Args;
use clasp_controlplane::baselines::{PolicyKind, policy};
use clasp_controlplane::exact::{DEFAULT_GRID_STEPS, place_exact};
use clasp_controlplane::model::{parse_problem, worker_loads};
use clasp_controlplane::placement::Packing;

use super::limits::read_input_file;
use super::{output, usage_error};

#[derive(Args)]
pub struct PlaceArgs {
    /// The problem: JSON with capacity_us_per_s, headroom, alpha_us, beta_us, gamma_us,
    /// max_workers, slots_per_worker, operators [{name, demand_us_per_s, rate_per_s, exec_us}]
    /// and edges [{from, to, rate_per_s}].
    #[arg(long)]
    problem: std::path::PathBuf,
    /// clasp | faasflow | zhang24 | faasflow-sp | zhang24-sp | exact (≤ 4 operators, ≤ 3 workers).
    #[arg(long, default_value = "clasp")]
    policy: String,
    /// any-fit (every open worker, successor hosts first) | next-fit (only the last opened).
    #[arg(long, default_value = "any-fit")]
    placement: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: PlaceArgs) -> anyhow::Result<()> {
    let text = read_input_file(&args.problem)?;
    let mut problem = parse_problem(&text)
        .map_err(|e| usage_error(format!("{}: {e}", args.problem.display())))?;
    problem.packing = Packing::parse(&args.placement).ok_or_else(|| {
        usage_error(format!(
            "--placement {:?}: expected any-fit or next-fit",
            args.placement
        ))
    })?;
    let kind = PolicyKind::parse(&args.policy).ok_or_else(|| {
        usage_error(format!(
            "unknown policy {:?}; expected clasp, faasflow, zhang24, faasflow-sp, zhang24-sp or exact",
            args.policy
        ))
    })?;
    let (placement, reason) = if kind == PolicyKind::Exact {
        let p =
            place_exact(&problem, DEFAULT_GRID_STEPS).map_err(|e| usage_error(e.to_string()))?;
        let r = format!(
            "policy=exact workers={} grid_steps={DEFAULT_GRID_STEPS}",
            p.workers
        );
        (p, r)
    } else {
        let d = policy(kind).decide(&problem, None);
        (d.placement, d.reason)
    };
    // Loads of the placed fraction, recomputed independently of the policy's bookkeeping.
    let placed = problem.scaled(placement.fraction_placed);
    let loads = worker_loads(&placed, &placement.shares, placement.workers);
    let budget = problem.budget_us_per_s();
    let mut out = output::stdout();
    if args.json {
        let shares: serde_json::Map<String, serde_json::Value> = problem
            .operators
            .iter()
            .zip(&placement.shares)
            .map(|(o, row)| (o.name.clone(), serde_json::json!(row)))
            .collect();
        let v = serde_json::json!({
            "policy": kind.name(),
            "placement": problem.packing.name(),
            "workers": placement.workers,
            "saturated": placement.saturated,
            "fraction_placed": placement.fraction_placed,
            "shares": shares,
            "loads_us_per_s": loads,
            "budget_us_per_s": budget,
            "lower_bound_workers": problem.lower_bound_workers(),
            "feasible": loads.iter().all(|&l| l <= budget * (1.0 + 1e-9)),
            "explanation": reason,
        });
        writeln!(out, "{}", serde_json::to_string(&v)?)?;
        return out.finish();
    }
    writeln!(out, "{reason}")?;
    writeln!(
        out,
        "policy {}: {} workers, saturated {}, fraction placed {:.4}, budget B = {:.0} us/s",
        kind.name(),
        placement.workers,
        placement.saturated,
        placement.fraction_placed,
        budget
    )?;
    write!(out, "{:<20}", "operator")?;
    for w in 0..placement.workers {
        write!(out, " {:>8}", format!("w{w}"))?;
    }
    writeln!(out)?;
    for (o, row) in problem.operators.iter().zip(&placement.shares) {
        write!(out, "{:<20}", o.name)?;
        for s in row {
            write!(out, " {s:>8.3}")?;
        }
        writeln!(out)?;
    }
    write!(out, "{:<20}", "load us/s")?;
    for l in &loads {
        write!(out, " {l:>8.0}")?;
    }
    writeln!(out)?;
    out.finish()
}
