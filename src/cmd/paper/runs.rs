//! The runs behind the figures: the simulator's experiments at each cluster size and the live
//! experiments on capped workers, each called in-process and writing its usual files into its
//! own directory under `--out` (the same files `clasp sim --out` and `clasp experiment --out`
//! write, so a reader can rerun any one part with the command its table row names).

use super::{Plan, progress};
use crate::cmd::experiment::{Experiment as Live, ExperimentArgs, run_experiments};
use clasp_controlplane::app::{AppModel, DEFAULT_EXEC_US, SPEC_RECORDS, SPEC_SEED};
use clasp_controlplane::sim::e2e::Pattern;
use clasp_controlplane::sim::{Experiment, SimSettings};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Records of each live throughput point with `--quick`: `clasp experiment --quick`'s 4 000 end
/// SYN's points within milliseconds of their start, so one run's figure swung 0.4–2.9×.
const QUICK_SCALING_RECORDS: u64 = 30_000;

/// The headroom the worker-count experiment is judged at besides h = 1 (the planner's default).
pub const PLANNER_HEADROOM: f64 = clasp_controlplane::model::DEFAULT_HEADROOM;
/// Headroom of the worker-count experiment: its observed optimum is defined at maximum
/// throughput (as `clasp sim` uses by default).
const WORKER_COUNT_HEADROOM: f64 = 1.0;
/// `--quick` simulates e2e on every app and both patterns only up to this many workers; above
/// it, burst on [`QUICK_LARGE_E2E_APPS`] (one e2e run of all apps on 100 workers takes ~5 min).
pub const QUICK_FULL_E2E_UP_TO: usize = 10;
/// The apps of `--quick`'s large e2e runs: the original's two it singles out (WC, the largest
/// fan-out; SYN, the uniform pipeline).
pub const QUICK_LARGE_E2E_APPS: [&str; 2] = ["wc", "syn"];

/// One part that ran: where its files are, the command that reruns it, and its wall time.
#[derive(Debug, Clone)]
pub struct Part {
    pub dir: PathBuf,
    pub command: String,
    pub seconds: f64,
}

/// Every part that ran, by key (`sim-10/placement`, `sim-10/worker-count-h0.9`,
/// `sim-100/e2e-burst`, `live/scaling`, …).
#[derive(Debug, Default)]
pub struct Ran {
    pub parts: BTreeMap<String, Part>,
}

impl Ran {
    pub fn get(&self, key: &str) -> Option<&Part> {
        self.parts.get(key)
    }
}

/// Key of a simulated part.
pub fn sim_key(workers: usize, name: &str) -> String {
    format!("sim-{workers}/{name}")
}

/// Runs every part the plan's figures need.
pub fn run_all(plan: &Plan) -> anyhow::Result<Ran> {
    let mut ran = Ran::default();
    let sim_wanted = ["fig9", "fig10", "fig11", "fig12", "fig13", "fig14"]
        .iter()
        .any(|f| plan.wants(f));
    if sim_wanted {
        let apps = sim_apps(&plan.sim_apps)?;
        let jobs = plan.sim_workers.iter().flat_map(|&n| sim_jobs(plan, n));
        ran = run_sims(plan, &apps, jobs.collect())?;
    }
    live(plan, &mut ran)?;
    Ok(ran)
}

fn sim_apps(names: &[String]) -> anyhow::Result<Vec<AppModel>> {
    names
        .iter()
        .map(|n| {
            let spec = crate::cmd::apps::load_app(Some(n), None)?;
            Ok(AppModel::from_spec(
                &spec,
                SPEC_RECORDS,
                SPEC_SEED,
                DEFAULT_EXEC_US,
            ))
        })
        .collect()
}

/// One simulation to run: its key in [`Ran`], the experiment, the size, the headroom flag.
struct SimJob {
    key: String,
    exp: Experiment,
    workers: usize,
    headroom: Option<f64>,
    dir: PathBuf,
    /// Only these of the plan's apps (None: all of them).
    only_apps: Option<&'static [&'static str]>,
}

impl SimJob {
    /// Relative cost, to start the longest first (e2e simulates minutes of input per policy).
    fn weight(&self) -> usize {
        let per_worker = match self.exp {
            Experiment::E2e(_) => 8,
            Experiment::WorkerCount => 2,
            Experiment::Placement | Experiment::Gap => 1,
        };
        per_worker * self.workers
    }
}

/// The simulations at one cluster size. `--quick` simulates one input pattern at sizes above
/// the original testbed's (each e2e run at 100 workers takes minutes).
fn sim_jobs(plan: &Plan, n: usize) -> Vec<SimJob> {
    let dir = plan.out.join(format!("sim-{n}"));
    let job = |name: &str, exp, headroom, dir: PathBuf| SimJob {
        key: sim_key(n, name),
        exp,
        workers: n,
        headroom,
        dir,
        only_apps: None,
    };
    let mut jobs = Vec::new();
    if plan.wants("fig10") {
        jobs.push(job("placement", Experiment::Placement, None, dir.clone()));
    }
    if ["fig9", "fig11", "fig12", "fig13"]
        .iter()
        .any(|f| plan.wants(f))
    {
        jobs.push(job(
            "worker-count",
            Experiment::WorkerCount,
            None,
            dir.clone(),
        ));
    }
    if plan.wants("fig11") {
        let sub = dir.join("headroom-0.9");
        let h = Some(PLANNER_HEADROOM);
        jobs.push(job("worker-count-h0.9", Experiment::WorkerCount, h, sub));
    }
    if plan.wants("fig14") {
        let small = !plan.quick || n <= QUICK_FULL_E2E_UP_TO;
        let patterns: &[Pattern] = if small {
            &[Pattern::Burst, Pattern::Gradual]
        } else {
            &[Pattern::Burst]
        };
        for &p in patterns {
            let name = format!("e2e-{}", p.name());
            let mut j = job(&name, Experiment::E2e(p), None, dir.clone());
            j.only_apps = (!small).then_some(&QUICK_LARGE_E2E_APPS[..]);
            jobs.push(j);
        }
    }
    jobs
}

/// Runs the simulations on every core (each is single-threaded and writes its own files),
/// longest first; the first error ends the run.
fn run_sims(plan: &Plan, apps: &[AppModel], mut jobs: Vec<SimJob>) -> anyhow::Result<Ran> {
    jobs.sort_by_key(SimJob::weight);
    let queue = std::sync::Mutex::new(jobs);
    let done = std::sync::Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().expect("sim queue").pop();
                    let Some(j) = next else { break };
                    let some: Vec<AppModel>;
                    let apps = match j.only_apps {
                        Some(names) => {
                            some = apps
                                .iter()
                                .filter(|a| names.contains(&a.name.as_str()))
                                .cloned()
                                .collect();
                            if some.is_empty() { apps } else { &some[..] }
                        }
                        None => apps,
                    };
                    let r = sim_part(plan, apps, j.exp, j.workers, j.headroom, &j.dir);
                    let failed = r.is_err();
                    done.lock().expect("sim results").push((j.key, r));
                    if failed {
                        queue.lock().expect("sim queue").clear();
                    }
                }
            });
        }
    });
    let mut ran = Ran::default();
    for (key, r) in done.into_inner().expect("sim results") {
        ran.parts.insert(key, r?);
    }
    Ok(ran)
}

/// One simulator experiment, as `clasp sim --experiment … --workers N --seeds K --out DIR`.
fn sim_part(
    plan: &Plan,
    apps: &[AppModel],
    exp: Experiment,
    workers: usize,
    headroom: Option<f64>,
    dir: &Path,
) -> anyhow::Result<Part> {
    let (name, pattern) = match exp {
        Experiment::Placement => ("placement", String::new()),
        Experiment::WorkerCount => ("worker-count", String::new()),
        Experiment::E2e(p) => ("e2e", format!(" --pattern {}", p.name())),
        Experiment::Gap => ("gap", String::new()),
    };
    let default_headroom = if exp == Experiment::WorkerCount {
        WORKER_COUNT_HEADROOM
    } else {
        PLANNER_HEADROOM
    };
    let settings = SimSettings {
        workers,
        headroom: headroom.unwrap_or(default_headroom),
        seeds: (1..=plan.sim_seeds as u64).collect(),
        ..SimSettings::default()
    };
    let flag = headroom.map_or(String::new(), |h| format!(" --headroom {h}"));
    let command = format!(
        "clasp sim --experiment {name}{pattern} --workers {workers} --seeds {}{flag}{} --out {}",
        plan.sim_seeds,
        app_flag(apps),
        dir.display()
    );
    progress(&command);
    let t0 = Instant::now();
    clasp_controlplane::sim::run(exp, &settings, apps, Some(dir))?;
    Ok(Part {
        dir: dir.to_owned(),
        command,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// ` --app NAME` for one app, nothing for all; `clasp sim` takes one app or all, so a subset
/// is one `--app` per run.
fn app_flag(apps: &[AppModel]) -> String {
    match apps {
        [one] => format!(" --app {}", one.name),
        _ if apps.len() == clasp_controlplane::app::BUILTIN_APPS.len() => String::new(),
        more => {
            let names: Vec<&str> = more.iter().map(|a| a.name.as_str()).collect();
            format!(" --app {} (one run per app)", names.join("|"))
        }
    }
}

/// The live experiments the plan's figures need, in `OUT/live/`.
fn live(plan: &Plan, ran: &mut Ran) -> anyhow::Result<()> {
    let wanted: Vec<(Live, &str)> = [
        (Live::Scaling, "scaling", plan.wants("fig2")),
        (Live::Latency, "latency", plan.wants("fig3")),
        (
            Live::Migrations,
            "migrations",
            plan.wants("fig8") || plan.wants("fig4"),
        ),
        (Live::Estimates, "estimates", plan.wants("fig9")),
        (Live::Policies, "policies", plan.wants("fig14")),
    ]
    .into_iter()
    .filter(|w| w.2)
    .map(|(e, n, _)| (e, n))
    .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let dir = plan.out.join("live");
    // All five share one measurement of each app's one-worker maximum.
    let batches: Vec<(Live, Vec<&str>)> = if wanted.len() == 5 {
        vec![(Live::All, wanted.iter().map(|w| w.1).collect())]
    } else {
        wanted.iter().map(|&(e, n)| (e, vec![n])).collect()
    };
    for (exp, names) in batches {
        let label = if exp == Live::All { "all" } else { names[0] };
        let quick = if plan.quick {
            format!(" --quick --records {QUICK_SCALING_RECORDS}")
        } else {
            String::new()
        };
        let command = format!(
            "clasp experiment {label}{quick} --seeds {} --duration {} --out {}",
            plan.live_seeds,
            plan.live_seconds,
            dir.display()
        );
        progress(&command);
        let t0 = Instant::now();
        let mut args = ExperimentArgs::new(
            exp,
            dir.clone(),
            plan.quick,
            plan.live_seeds,
            plan.live_seconds,
        );
        if plan.quick {
            args = args.with_records(QUICK_SCALING_RECORDS);
        }
        run_experiments(&args)?;
        let seconds = t0.elapsed().as_secs_f64();
        for n in names {
            ran.parts.insert(
                format!("live/{n}"),
                Part {
                    dir: dir.clone(),
                    command: command.clone(),
                    seconds,
                },
            );
        }
    }
    Ok(())
}
