//! The plain-data application model the simulator runs: operators with a mean execution time,
//! edges with a fan-out (chained requests per processed request), and a key-space model per
//! operator. Every app spec of the operators crate — the seven built-ins and any app file —
//! becomes one through [`AppModel::from_spec`], which measures the fan-outs with a short oracle
//! run; `clasp sim --app-file FILE.json` still takes this structure as JSON (for per-operator τ
//! or key models), and [`AppModel::from_counts`] builds one from counts gathered elsewhere.

use clasp_operators::AppSpec;
use serde::{Deserialize, Serialize};

/// Mean execution time of a request on the reference prototype (µs).
pub const DEFAULT_EXEC_US: f64 = 400.0;
/// Distinct keys per operator in the default key-space model.
pub const DEFAULT_KEYS: usize = 10_000;
/// Zipf exponent of key popularity in the default key-space model.
pub const DEFAULT_ZIPF: f64 = 0.5;

/// Most distinct keys per operator a model may give: the simulator's key sampler visits every
/// key once when it builds its table.
pub const MAX_KEYS: usize = 10_000_000;
/// Largest fan-out an edge may have: every processed request emits this many children on
/// average, so the simulated work grows with it along every path.
pub const MAX_FANOUT: f64 = 10_000.0;
/// Largest execution time of an operator in a model (µs): `clasp sim --exec-us`'s bound.
pub const MAX_EXEC_US: f64 = 1e9;

fn default_keys() -> usize {
    DEFAULT_KEYS
}
fn default_zipf() -> f64 {
    DEFAULT_ZIPF
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppOperator {
    pub name: String,
    /// Mean execution time τ_o (µs).
    pub exec_us: f64,
    #[serde(default = "default_keys")]
    pub keys: usize,
    #[serde(default = "default_zipf")]
    pub zipf: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppEdge {
    pub from: String,
    pub to: String,
    /// Mean chained requests per processed request of `from`.
    pub fanout: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppModel {
    pub name: String,
    pub operators: Vec<AppOperator>,
    pub edges: Vec<AppEdge>,
}

/// The built-in apps' names (the same list as `clasp_operators::apps::builtin_names`).
pub const BUILTIN_APPS: [&str; 7] = ["wc", "sd", "aa", "pl", "nwm", "etl", "syn"];

/// Input records of the oracle run behind [`AppModel::builtin`] and the default of
/// `clasp sim`: fan-outs are measured over the second half (records 2000..4000), see
/// [`SpecProfile::measure`].
pub const SPEC_RECORDS: u64 = 4000;
/// Generator seed of that oracle run.
pub const SPEC_SEED: u64 = 1;

/// What a reference (oracle) run of an app spec says about its traffic, per input record.
///
/// Measured over a steady window: the oracle runs `records / 2` and then `records` records
/// (the first half is the same records both times, the generator being random access) and
/// every count is the difference of the two runs. That removes what a short run gets wrong
/// and a long-running cluster never sees: the end-of-stream flushes (ETL `store`'s last partial
/// batches, windows closed early) and part of the warm-up (NWM's `fail_functor` flags a host once
/// per day, so its rate falls as the run goes on). An edge whose sender processed nothing in the
/// window falls back to the whole run's ratio.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecProfile {
    /// App name.
    pub name: String,
    /// Input records of the longer run.
    pub records: u64,
    /// The source operator (the only operator without predecessors).
    pub source: String,
    /// Requests each operator processes per input record, in spec order (the source's is 1).
    pub rate_per_input: Vec<(String, f64)>,
    /// Per spec edge `(from, to, fan-out)`: chained requests per processed request of `from`
    /// (`emitted[(from, to)] / processed[from]`); 0 for an edge the run never used.
    pub fanout: Vec<(String, String, f64)>,
}

impl SpecProfile {
    /// Runs the oracle on `spec` (`records` records of its generator, `seed`), as above.
    pub fn measure(spec: &AppSpec, records: u64, seed: u64) -> SpecProfile {
        let full = clasp_operators::oracle::run(spec, records, seed);
        let half_records = records / 2;
        let half = (half_records > 0 && half_records < records)
            .then(|| clasp_operators::oracle::run(spec, half_records, seed));
        let processed = |r: &clasp_operators::oracle::OracleReport, op: &str| {
            r.processed.get(op).copied().unwrap_or(0)
        };
        let emitted = |r: &clasp_operators::oracle::OracleReport, f: &str, t: &str| {
            r.emitted
                .get(&(f.to_string(), t.to_string()))
                .copied()
                .unwrap_or(0)
        };
        // Counts over the window (saturating: a flush can make the shorter run emit more).
        let window = |count: &dyn Fn(&clasp_operators::oracle::OracleReport) -> u64| match &half {
            Some(h) => count(&full).saturating_sub(count(h)),
            None => count(&full),
        };
        let window_records = records - half.as_ref().map_or(0, |_| half_records);
        let rate_per_input = spec
            .operators
            .iter()
            .map(|o| {
                let n = window(&|r| processed(r, &o.name));
                (o.name.clone(), n as f64 / window_records.max(1) as f64)
            })
            .collect();
        let fanout = spec
            .edges
            .iter()
            .map(|e| {
                let (f, t) = (
                    spec.operators[e.from].name.as_str(),
                    spec.operators[e.to].name.as_str(),
                );
                let sent = window(&|r| processed(r, f));
                let x = if sent > 0 {
                    window(&|r| emitted(r, f, t)) as f64 / sent as f64
                } else {
                    emitted(&full, f, t) as f64 / processed(&full, f).max(1) as f64
                };
                (f.to_string(), t.to_string(), x)
            })
            .collect();
        SpecProfile {
            name: spec.name.clone(),
            records,
            source: spec.operators[spec.source].name.clone(),
            rate_per_input,
            fanout,
        }
    }
}

impl AppModel {
    /// Built-in app `name` (see [`BUILTIN_APPS`]) with every operator's τ = `exec_us`: the
    /// operators crate's spec through [`AppModel::from_spec`] with [`SPEC_RECORDS`] and
    /// [`SPEC_SEED`].
    ///
    /// There are no hand-written models any more: they carried nothing the oracle cannot give
    /// (every τ was `exec_us` and the key model the default; only the fan-outs were specific,
    /// and the oracle measures those from the apps' real operators — where the two differed the
    /// hand-written guess was wrong, see docs/controlplane.md).
    pub fn builtin(name: &str, exec_us: f64) -> Option<AppModel> {
        let spec = clasp_operators::apps::builtin(name)?;
        Some(AppModel::from_spec(&spec, SPEC_RECORDS, SPEC_SEED, exec_us))
    }

    /// The simulator's model of an app spec (built-in or from an app file): operators and edges
    /// in spec order, fan-outs and per-input rates from an oracle run ([`SpecProfile::measure`],
    /// `records` records — a few thousand take well under a second), every operator's τ =
    /// `exec_us` (the simulator's setting: the oracle's cost is not the reference prototype's) and
    /// the default key model. The spec's validation guarantees one source, which the simulator
    /// finds again as the only operator without predecessors; its relative input rates are
    /// [`AppModel::visits_per_input`] of the derived fan-outs, equal to the oracle's
    /// processed / records over the window.
    pub fn from_spec(spec: &AppSpec, records: u64, seed: u64, exec_us: f64) -> AppModel {
        AppModel::from_profile(&SpecProfile::measure(spec, records, seed), exec_us)
    }

    /// The model of a measured profile (see [`AppModel::from_spec`]).
    pub fn from_profile(profile: &SpecProfile, exec_us: f64) -> AppModel {
        AppModel {
            name: profile.name.clone(),
            operators: profile
                .rate_per_input
                .iter()
                .map(|(n, _)| AppOperator {
                    name: n.clone(),
                    exec_us,
                    keys: DEFAULT_KEYS,
                    zipf: DEFAULT_ZIPF,
                })
                .collect(),
            edges: profile
                .fanout
                .iter()
                .map(|(f, t, x)| AppEdge {
                    from: f.clone(),
                    to: t.clone(),
                    fanout: *x,
                })
                .collect(),
        }
    }

    /// Builds a model from an oracle run: per-operator processed counts and per-edge emitted
    /// counts (fan-out = emitted / processed of the sender).
    pub fn from_counts(
        name: &str,
        operators: &[(String, u64)],
        edges: &[(String, String, u64)],
        exec_us: f64,
    ) -> AppModel {
        let processed: std::collections::HashMap<&str, u64> =
            operators.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        AppModel {
            name: name.to_string(),
            operators: operators
                .iter()
                .map(|(n, _)| AppOperator {
                    name: n.clone(),
                    exec_us,
                    keys: DEFAULT_KEYS,
                    zipf: DEFAULT_ZIPF,
                })
                .collect(),
            edges: edges
                .iter()
                .map(|(f, t, emitted)| AppEdge {
                    from: f.clone(),
                    to: t.clone(),
                    fanout: *emitted as f64
                        / processed.get(f.as_str()).copied().unwrap_or(1).max(1) as f64,
                })
                .collect(),
        }
    }

    /// Edge list as operator indices; an error names an unknown operator, a cycle or a bad number.
    pub fn resolve(&self) -> Result<Vec<(usize, usize, f64)>, String> {
        let idx = |n: &str| {
            self.operators
                .iter()
                .position(|o| o.name == n)
                .ok_or_else(|| format!("unknown operator {n:?}"))
        };
        if self.operators.is_empty() {
            return Err("the app has no operators".into());
        }
        if self.operators.len() > crate::model::MAX_OPERATORS {
            return Err(format!(
                "operators: at most {}, got {}",
                crate::model::MAX_OPERATORS,
                self.operators.len()
            ));
        }
        for (i, o) in self.operators.iter().enumerate() {
            if self.operators[..i].iter().any(|p| p.name == o.name) {
                return Err(format!("operator name {:?} is used twice", o.name));
            }
            let why = if !(1..=MAX_KEYS).contains(&o.keys) {
                Some(format!("keys must be in 1..={MAX_KEYS}, got {}", o.keys))
            } else if !(o.exec_us.is_finite() && (0.0..=MAX_EXEC_US).contains(&o.exec_us)) {
                Some(format!(
                    "exec_us must be in 0..={MAX_EXEC_US:e}, got {}",
                    o.exec_us
                ))
            } else if !(o.zipf.is_finite() && o.zipf >= 0.0) {
                Some(format!(
                    "zipf must be a non-negative number, got {}",
                    o.zipf
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(format!("operator {:?}: {why}", o.name));
            }
        }
        let edges: Vec<(usize, usize, f64)> = self
            .edges
            .iter()
            .map(|e| {
                if !(e.fanout.is_finite() && (0.0..=MAX_FANOUT).contains(&e.fanout)) {
                    return Err(format!(
                        "edge {} -> {}: fanout must be in 0..={MAX_FANOUT}, got {}",
                        e.from, e.to, e.fanout
                    ));
                }
                Ok((idx(&e.from)?, idx(&e.to)?, e.fanout))
            })
            .collect::<Result<_, String>>()?;
        // Cycle check (Kahn).
        let n = self.operators.len();
        let mut indeg = vec![0; n];
        for &(_, t, _) in &edges {
            indeg[t] += 1;
        }
        let mut ready: Vec<usize> = (0..n).filter(|&o| indeg[o] == 0).collect();
        let mut seen = 0;
        while let Some(o) = ready.pop() {
            seen += 1;
            for &(f, t, _) in &edges {
                if f == o {
                    indeg[t] -= 1;
                    if indeg[t] == 0 {
                        ready.push(t);
                    }
                }
            }
        }
        if seen != n {
            return Err("the app's operator graph has a cycle".into());
        }
        Ok(edges)
    }

    /// Expected requests of each operator and chained requests of each edge per input record
    /// (inputs go to the sources, split evenly).
    pub fn visits_per_input(&self) -> (Vec<f64>, Vec<f64>) {
        let edges = self.resolve().unwrap_or_default();
        let n = self.operators.len();
        let mut has_pred = vec![false; n];
        for &(_, t, _) in &edges {
            has_pred[t] = true;
        }
        let sources = has_pred.iter().filter(|&&p| !p).count().max(1);
        let mut v: Vec<f64> = has_pred
            .iter()
            .map(|&p| if p { 0.0 } else { 1.0 / sources as f64 })
            .collect();
        // Relax in topological order: repeat n times (n is small).
        let mut ev = vec![0.0; edges.len()];
        for _ in 0..n {
            let mut next: Vec<f64> = has_pred
                .iter()
                .map(|&p| if p { 0.0 } else { 1.0 / sources as f64 })
                .collect();
            for (i, &(f, t, x)) in edges.iter().enumerate() {
                ev[i] = v[f] * x;
                next[t] += ev[i];
            }
            v = next;
        }
        (v, ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_file_with_absurd_sizes_is_refused_naming_the_bound() {
        let model = |keys: &str, fanout: &str| -> AppModel {
            serde_json::from_str(&format!(
                r#"{{"name": "m", "operators": [{{"name": "a", "exec_us": 1, "keys": {keys}}},
                {{"name": "b", "exec_us": 1}}], "edges": [{{"from": "a", "to": "b",
                "fanout": {fanout}}}]}}"#
            ))
            .expect("parses")
        };
        let e = model("1000000000000000000", "1").resolve().unwrap_err();
        assert!(
            e.contains("keys") && e.contains(&MAX_KEYS.to_string()),
            "{e}"
        );
        let e = model("10", "1e300").resolve().unwrap_err();
        assert!(e.contains("fanout") && e.contains("10000"), "{e}");
        assert!(model("10", "2").resolve().is_ok());
    }

    type Edges = &'static [(&'static str, &'static str, f64)];

    /// The hand-written models `AppModel::builtin` used before the adapter (SYN's `op0..op9`
    /// renamed to the spec's `s1..s10`), kept as the reference the derived fan-outs are
    /// compared with.
    const HAND_WRITTEN: [(&str, Edges); 7] = [
        ("wc", &[("split", "count", 10.0)]),
        ("sd", &[("moving_avg", "spike_detect", 1.0)]),
        (
            "aa",
            &[
                ("deserialize", "filter", 1.0),
                ("filter", "project", 0.9),
                ("project", "join", 1.0),
                ("join", "campaign_count", 1.0),
            ],
        ),
        (
            "pl",
            &[
                ("parse", "filter", 1.0),
                ("filter", "join", 0.8),
                ("join", "filter_known", 1.0),
                ("filter_known", "aggregate", 0.9),
                ("aggregate", "sink", 0.01),
            ],
        ),
        (
            "nwm",
            &[
                ("parse_lines", "split", 1.0),
                ("split", "success_filter", 1.0),
                ("split", "fail_filter", 1.0),
                ("success_filter", "success_parse", 0.1),
                ("fail_filter", "fail_parse", 0.9),
                ("fail_parse", "fail_aggregate", 1.0),
                ("fail_aggregate", "aggr_filter", 1.0),
                ("aggr_filter", "fail_functor", 0.3),
                ("fail_functor", "join", 1.0),
                ("success_parse", "join", 1.0),
            ],
        ),
        (
            "etl",
            &[
                ("senml_parse", "range_filter", 3.0),
                ("range_filter", "bloom_filter", 0.95),
                ("bloom_filter", "interpolate", 1.0),
                ("interpolate", "join", 1.0),
                ("join", "annotate", 0.33),
                ("annotate", "csv_to_senml", 1.0),
                ("annotate", "store", 1.0),
                ("csv_to_senml", "publish", 1.0),
                ("publish", "sink", 1.0),
                ("store", "sink", 0.33),
            ],
        ),
        (
            "syn",
            &[
                ("s1", "s2", 1.0),
                ("s2", "s3", 1.0),
                ("s3", "s4", 1.0),
                ("s4", "s5", 1.0),
                ("s5", "s6", 1.0),
                ("s6", "s7", 1.0),
                ("s7", "s8", 1.0),
                ("s8", "s9", 1.0),
                ("s9", "s10", 1.0),
            ],
        ),
    ];

    /// Where the oracle (the truth) and the hand-written models differ, with the oracle's
    /// value (docs/controlplane.md lists them).
    const KNOWN_DIFFERENCES: [(&str, &str, &str, f64); 7] = [
        ("pl", "filter", "join", 0.979),
        ("pl", "filter_known", "aggregate", 0.981),
        ("pl", "aggregate", "sink", 0.0005),
        ("nwm", "aggr_filter", "fail_functor", 0.967),
        ("nwm", "fail_functor", "join", 0.017),
        ("etl", "range_filter", "bloom_filter", 0.989),
        ("etl", "bloom_filter", "interpolate", 0.980),
    ];

    #[test]
    fn builtin_fanouts_vs_the_hand_written_models() {
        for (name, hand) in HAND_WRITTEN {
            let spec = clasp_operators::apps::builtin(name).expect("built-in");
            let profile = SpecProfile::measure(&spec, SPEC_RECORDS, SPEC_SEED);
            let model = AppModel::from_profile(&profile, DEFAULT_EXEC_US);
            assert_eq!(
                model,
                AppModel::builtin(name, DEFAULT_EXEC_US).expect("built-in")
            );
            model.resolve().expect("valid model");
            let mut derived: Vec<(&str, &str)> = model
                .edges
                .iter()
                .map(|e| (e.from.as_str(), e.to.as_str()))
                .collect();
            let mut expected: Vec<(&str, &str)> = hand.iter().map(|&(f, t, _)| (f, t)).collect();
            derived.sort_unstable();
            expected.sort_unstable();
            assert_eq!(derived, expected, "{name}: the same edges");
            for &(f, t, x) in hand {
                let e = model
                    .edges
                    .iter()
                    .find(|e| e.from == f && e.to == t)
                    .expect("edge");
                let known = KNOWN_DIFFERENCES
                    .iter()
                    .find(|&&(a, ef, et, _)| a == name && ef == f && et == t);
                println!(
                    "{name:4} {f:>15} -> {t:<15} hand-written {x:6.3}  oracle {:8.4}{}",
                    e.fanout,
                    if known.is_some() { "  DIFFERS" } else { "" }
                );
                // Sampling noise of a 2000-record window, with room.
                let close = |a: f64, b: f64| (a - b).abs() <= 0.01 + 0.05 * b;
                match known {
                    Some(&(_, _, _, documented)) => assert!(
                        close(e.fanout, documented),
                        "{name} {f}->{t}: oracle {} but docs/controlplane.md says {documented}",
                        e.fanout
                    ),
                    None => assert!(
                        close(e.fanout, x),
                        "{name} {f}->{t}: oracle {} vs hand-written {x}: a new difference",
                        e.fanout
                    ),
                }
            }
            // The relative input rates the model implies are the oracle's (an identity of the
            // window counts: every emitted request is processed).
            let (visits, _) = model.visits_per_input();
            for ((op, rate), v) in profile.rate_per_input.iter().zip(&visits) {
                assert!(
                    (rate - v).abs() < 1e-9,
                    "{name} {op}: oracle {rate} model {v}"
                );
            }
            assert_eq!(profile.source, spec.operators[spec.source].name);
        }
    }

    /// A hand-made app file: a SYN-like 3-stage pipeline with a shortcut (s1 feeds s2 and s3,
    /// s2 feeds s3), so s3 takes two requests per input.
    const DIAMOND_TOML: &str = r#"
name = "diamond3"
generator = "syn"

[[operator]]
name = "s1"
kind = "forward"
successors = ["s2", "s3"]

[[operator]]
name = "s2"
kind = "forward"
successors = ["s3"]

[[operator]]
name = "s3"
kind = "forward"
"#;

    /// A JSON model with two operators of one name, or an execution time past
    /// `clasp sim --exec-us`'s bound, is refused naming it.
    #[test]
    fn a_model_with_a_name_used_twice_or_a_huge_exec_time_is_refused() {
        let model = |ops: &str| -> AppModel {
            serde_json::from_str(&format!(r#"{{"name":"x","operators":[{ops}],"edges":[]}}"#))
                .expect("the model parses")
        };
        let twice = model(r#"{"name":"a","exec_us":10},{"name":"a","exec_us":10}"#);
        let e = twice.resolve().unwrap_err();
        assert!(e.contains("\"a\" is used twice"), "{e}");
        let huge = model(r#"{"name":"a","exec_us":1e300}"#);
        let e = huge.resolve().unwrap_err();
        assert!(e.contains("exec_us must be in 0..=1e9"), "{e}");
        assert!(model(r#"{"name":"a","exec_us":1e9}"#).resolve().is_ok());
        // Each bad field is named on its own, with its value.
        let no_keys = model(r#"{"name":"a","exec_us":1,"keys":0}"#);
        let e = no_keys.resolve().unwrap_err();
        assert!(
            e.contains("keys must be in 1..=") && e.contains("got 0"),
            "{e}"
        );
        let e = model(r#"{"name":"a","exec_us":1,"zipf":-1}"#)
            .resolve()
            .unwrap_err();
        assert!(
            e.contains("zipf must be a non-negative number, got -1"),
            "{e}"
        );
    }

    #[test]
    fn from_spec_measures_a_hand_made_app_file() {
        let spec = AppSpec::from_toml_str(DIAMOND_TOML).expect("valid app file");
        let profile = SpecProfile::measure(&spec, 1000, 7);
        assert_eq!(profile.name, "diamond3");
        assert_eq!(profile.source, "s1");
        assert_eq!(
            profile.rate_per_input,
            vec![("s1".into(), 1.0), ("s2".into(), 1.0), ("s3".into(), 2.0)]
        );
        let model = AppModel::from_spec(&spec, 1000, 7, 250.0);
        assert_eq!(model.name, "diamond3");
        let ops: Vec<(&str, f64)> = model
            .operators
            .iter()
            .map(|o| (o.name.as_str(), o.exec_us))
            .collect();
        assert_eq!(ops, [("s1", 250.0), ("s2", 250.0), ("s3", 250.0)]);
        assert_eq!(
            model.resolve().expect("valid"),
            vec![(0, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0)]
        );
        let (visits, per_edge) = model.visits_per_input();
        assert_eq!(visits, [1.0, 1.0, 2.0]);
        assert_eq!(per_edge, [1.0, 1.0, 1.0]);
        // One record: no window to difference, the whole run counts.
        let one = SpecProfile::measure(&spec, 1, 7);
        assert_eq!(one.fanout.len(), 3);
        assert!(one.fanout.iter().all(|(_, _, x)| *x == 1.0));
    }
}
