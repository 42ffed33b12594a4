//! Runs one `clasp run` as a child process and measures the host around it.
//!
//! Every point of an experiment is a separate process tree (a driver and its workers, each in
//! its own cgroup when capped), so no run inherits another's state, and a failure is one
//! point's error, not the experiment's. The host's idle CPU over the run (from `/proc/stat`)
//! and the driver's CPU (its `driver_cpu_s`) say whether the point measured the cluster or the
//! host: on a small machine the driver and the planner share the cores with the workers.

use anyhow::Context as _;
use serde_json::Value;
use std::process::Stdio;
use std::time::Instant;

/// Below this idle fraction of the host's CPUs over a run, the point is host-bound.
pub const HOST_IDLE_MIN: f64 = 0.10;
/// Above this many cores of driver (planner) CPU, the point is host-bound.
pub const DRIVER_CORES_MAX: f64 = 0.8;

/// What one run printed, and how loaded the host was meanwhile.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The run's `--json` object.
    pub json: Value,
    /// Idle fraction of all the host's CPUs over the run.
    pub host_idle: f64,
    /// The driver's CPU (cores) over the run's wall time.
    pub driver_cores: f64,
}

impl Measured {
    /// Whether the host, not the cluster, bounded this point.
    pub fn host_bound(&self) -> bool {
        self.host_idle < HOST_IDLE_MIN || self.driver_cores > DRIVER_CORES_MAX
    }

    /// A number from the JSON (`a.b` paths), NaN when absent.
    pub fn num(&self, path: &str) -> f64 {
        path.split('.')
            .try_fold(&self.json, |v, k| v.get(k))
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN)
    }
}

/// Starts the children: this very binary.
pub struct Runner {
    /// `--worker-cpu` for every run (None: uncapped).
    pub worker_cpu: Option<f64>,
}

impl Runner {
    pub fn new(worker_cpu: Option<f64>) -> anyhow::Result<Self> {
        // Opened now, while the binary is the one that started.
        crate::lifeline::this_exe()?;
        Ok(Runner { worker_cpu })
    }

    /// `clasp run ARGS --json` (plus the cap); its JSON and the host's load meanwhile.
    pub fn run(&self, args: &[String]) -> anyhow::Result<Measured> {
        // It stops when this process goes (SIGHUP: drained, its workers and cgroups removed);
        // a Ctrl-C reaches only this process, whose end stops it.
        let mut cmd = crate::lifeline::command()?;
        cmd.arg("run").args(args).arg("--json");
        if let Some(f) = self.worker_cpu {
            cmd.args(["--worker-cpu", &f.to_string()]);
        }
        let before = cpu_times()?;
        let t0 = Instant::now();
        let out = cmd
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("starting clasp run")?;
        let wall_s = t0.elapsed().as_secs_f64().max(1e-9);
        let after = cpu_times()?;
        if !out.status.success() {
            anyhow::bail!(
                "clasp run {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let json: Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("clasp run {}: its JSON", args.join(" ")))?;
        let driver_s = json["driver_cpu_s"].as_f64().unwrap_or(0.0);
        Ok(Measured {
            json,
            host_idle: idle_fraction(before, after),
            driver_cores: driver_s / wall_s,
        })
    }
}

/// (idle, total) jiffies of all CPUs together, from `/proc/stat`'s first line.
fn cpu_times() -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    parse_cpu_line(text.lines().next().unwrap_or(""))
        .context("/proc/stat: no `cpu` line of numbers")
}

fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    (it.next()? == "cpu").then_some(())?;
    let v: Vec<u64> = it.map(str::parse).collect::<Result<_, _>>().ok()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((idle, total))
}

fn idle_fraction(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 1.0;
    }
    after.0.saturating_sub(before.0) as f64 / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_parses() {
        let l = "cpu  100 0 50 800 50 0 0 0 0 0";
        assert_eq!(parse_cpu_line(l), Some((850, 1000)));
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4"), None);
        assert_eq!(idle_fraction((850, 1000), (900, 1200)), 0.25);
    }
}
