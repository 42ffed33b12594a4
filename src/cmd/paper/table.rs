//! The `README.md` of `clasp paper`'s output: which mode and machine made it, the table of
//! figures (the original evaluation's headline numbers, ours, the tolerance, the verdict, the
//! command), what each row computes, and the parts that ran with their wall times.

use super::Plan;
use super::runs::Ran;

/// Whether a row's numbers agree with the reference figure, within the row's tolerance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Agree,
    Disagree,
    /// This data plane has no counterpart; the row says why.
    NoCounterpart,
    /// Not selected (`--only`).
    NotRun,
    /// The run's files lacked what the row reads (the row shows the error).
    Missing,
}

impl Verdict {
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Disagree => "disagree",
            Verdict::NoCounterpart => "no counterpart",
            Verdict::NotRun => "not run",
            Verdict::Missing => "missing",
        }
    }

    pub fn judged(ok: bool) -> Verdict {
        if ok {
            Verdict::Agree
        } else {
            Verdict::Disagree
        }
    }
}

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// `fig10`, …: the `--only` name.
    pub figure: &'static str,
    /// Which run: `sim, 10 workers`, `live, capped workers`, …
    pub setting: String,
    /// The reference figure's headline numbers (constants).
    pub paper: &'static str,
    /// Computed from this run's files.
    pub ours: String,
    pub tolerance: &'static str,
    pub verdict: Verdict,
    /// The command that reruns the part the row reads.
    pub command: String,
}

/// A markdown table cell: no line breaks, `|` escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The machine, from /proc/cpuinfo: "N-vCPU, MODEL".
fn machine() -> String {
    let model = clasp_benches::machine::cpu_model();
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    format!("{cpus}-vCPU, {model}")
}

/// The whole README.
pub fn readme(plan: &Plan, ran: &Ran, rows: &[Row], total_s: f64) -> String {
    let mode = if plan.quick {
        "`clasp paper --quick`"
    } else {
        "`clasp paper`"
    };
    let mut s = format!(
        "# The evaluation, reproduced\n\n\
         Made by {mode} (release build) on {}, in {:.0} s. Simulated clusters of {} workers \
         ({} seed{} per simulation); live runs on up to 3 worker processes of this machine, each \
         capped at 0.3 of a core ({} seed{} of the autoscaling runs, {} s of input each). Every \
         \"ours\" cell is computed from the files in this directory; every \"original\" cell is \
         the reference prototype's evaluation, figure by figure; below the table, each \
         figure's section says what its rows compute.\n\n",
        machine(),
        total_s,
        join(&plan.sim_workers),
        plan.sim_seeds,
        plural(plan.sim_seeds as u64),
        plan.live_seeds,
        plural(plan.live_seeds),
        plan.live_seconds,
    );
    let agree = rows.iter().filter(|r| r.verdict == Verdict::Agree).count();
    let judged = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Agree | Verdict::Disagree))
        .count();
    s += &format!("{agree} of {judged} judged rows agree within their tolerance.\n\n");
    s += "| figure | run | original evaluation | ours | tolerance | verdict | command |\n";
    s += "|---|---|---|---|---|---|---|\n";
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | **{}** | `{}` |\n",
            r.figure,
            cell(&r.setting),
            cell(r.paper),
            cell(&r.ours),
            cell(r.tolerance),
            r.verdict.word(),
            cell(&r.command),
        );
    }
    s += "\n## How each row is computed\n\n";
    for (fig, text) in super::explain::EXPLAINED {
        s += &format!("- **{fig}**: {text}\n");
    }
    s += "\n## The parts that ran\n\n| part | wall time (s) | command |\n|---|---|---|\n";
    for (key, p) in &ran.parts {
        s += &format!("| {key} | {:.0} | `{}` |\n", p.seconds, cell(&p.command));
    }
    s += "\nLive experiments that run together (`clasp experiment all`) share one wall time.\n";
    s
}

fn join(v: &[usize]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}
