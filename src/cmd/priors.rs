//! Which α, β, γ a live run's estimator starts from, and saying so. The estimator refines its
//! costs as the run goes, but it starts from these, and until it has learned they decide the
//! first placements and scale-ups: a start several times off this machine's costs shows up as
//! a needless scale-up. So the order is: `--cost-priors-us` given on the command line, else the
//! machine profile `clasp calibrate` wrote, else the built-in priors.

use super::profile;
use super::usage_error;
use clasp_controlplane::model::{CostModel, MAX_QUANTITY};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The built-in priors, α,β,γ in µs: a generic start for a machine without a profile.
pub const BUILT_IN_PRIORS_US: &str = "0.3,1,50";

/// Where a run's priors came from.
#[derive(Clone, Debug, PartialEq)]
pub enum PriorsSource {
    /// `--cost-priors-us`.
    Flag,
    /// The machine profile at this path.
    Profile(PathBuf),
    /// [`BUILT_IN_PRIORS_US`].
    BuiltIn,
}

/// The priors a run starts from, and their source.
#[derive(Clone, Debug)]
pub struct Priors {
    /// Where they came from.
    pub source: PriorsSource,
    /// α, β, γ.
    pub costs: CostModel,
}

impl Priors {
    /// The line a run prints at its start.
    pub fn line(&self) -> String {
        let c = &self.costs;
        let source = match &self.source {
            PriorsSource::Flag => "--cost-priors-us".to_string(),
            PriorsSource::Profile(p) => format!("profile {}", p.display()),
            PriorsSource::BuiltIn => "built-in".to_string(),
        };
        format!(
            "priors: {source} (α {:.3} µs, β {:.3} µs, γ {:.0} µs/s)",
            c.alpha_us, c.beta_us, c.gamma_us
        )
    }

    /// `priors` in `clasp run --json`.
    pub fn json(&self) -> serde_json::Value {
        let (source, path) = match &self.source {
            PriorsSource::Flag => ("flag", None),
            PriorsSource::Profile(p) => ("profile", Some(p.display().to_string())),
            PriorsSource::BuiltIn => ("built-in", None),
        };
        serde_json::json!({
            "source": source,
            "path": path,
            "alpha_us": self.costs.alpha_us,
            "beta_us": self.costs.beta_us,
            "gamma_us": self.costs.gamma_us,
        })
    }
}

/// The priors of a run: `flag` (`--cost-priors-us`) wins; else the profile at `profile_path`
/// (`--profile`: one that cannot be used is an error), else the one at the default path unless
/// `no_profile` (one that cannot be used is a warning, and the built-ins are used).
pub fn resolve(
    flag: Option<&str>,
    profile_path: Option<&Path>,
    no_profile: bool,
) -> anyhow::Result<Priors> {
    if let Some(s) = flag {
        return Ok(Priors {
            source: PriorsSource::Flag,
            costs: parse(s)?,
        });
    }
    let built_in = Priors {
        source: PriorsSource::BuiltIn,
        costs: parse(BUILT_IN_PRIORS_US)?,
    };
    if let Some(path) = profile_path {
        let p = profile::load(path)
            .map_err(|e| usage_error(format!("--profile {}: {e}", path.display())))?;
        return Ok(from_profile(path, &p));
    }
    let path = match profile::default_path() {
        Some(path) if !no_profile && path.exists() => path,
        _ => return Ok(built_in),
    };
    match profile::load(&path) {
        Ok(p) => Ok(from_profile(&path, &p)),
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "clasp: warning: the machine profile {} cannot be used ({e}); starting from the \
                 built-in priors (`clasp calibrate` writes a new profile)",
                path.display()
            );
            Ok(built_in)
        }
    }
}

fn from_profile(path: &Path, p: &profile::Profile) -> Priors {
    Priors {
        source: PriorsSource::Profile(path.to_path_buf()),
        costs: p.costs(),
    }
}

/// `--cost-priors-us A,B,G`.
pub fn parse(s: &str) -> anyhow::Result<CostModel> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            usage_error(format!(
                "--cost-priors-us {s:?}: three numbers, e.g. {BUILT_IN_PRIORS_US}"
            ))
        })?;
    match v[..] {
        [a, b, g] if [a, b, g].iter().all(|&x| x > 0.0 && x <= MAX_QUANTITY) => Ok(CostModel {
            alpha_us: a,
            beta_us: b,
            gamma_us: g,
        }),
        _ => Err(usage_error(format!(
            "--cost-priors-us {s:?}: three positive numbers up to {MAX_QUANTITY:e} (α,β,γ in µs)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_and_the_built_ins_parse() {
        let p = resolve(Some("1,2,3"), Some(Path::new("/nonexistent")), false).expect("flag");
        assert_eq!(p.source, PriorsSource::Flag);
        assert_eq!(p.costs.beta_us, 2.0);
        assert_eq!(p.json()["source"], "flag");
        assert!(parse(BUILT_IN_PRIORS_US).is_ok());
        assert!(parse("1,2").is_err());
        assert!(parse("1,0,3").is_err());
        assert!(parse("1e300,1,50").is_err(), "past the planner's bound");
        assert!(parse("1e15,1,50").is_ok());
    }

    #[test]
    fn an_explicit_profile_that_cannot_be_read_is_an_error() {
        let err = resolve(None, Some(Path::new("/nonexistent/profile.json")), false)
            .expect_err("missing");
        assert!(format!("{err:#}").contains("/nonexistent/profile.json"));
    }
}
