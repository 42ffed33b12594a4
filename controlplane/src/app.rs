//! The plain-data application model the simulator runs: operators with a mean execution time,
//! edges with a fan-out (chained requests per processed request), and a key-space model per
//! operator. The seven built-in apps follow APPS.md's shapes; `--app-file` takes the same
//! structure as JSON, and [`AppModel::from_counts`] builds one from an oracle run's processed
//! and emitted counts (the adapter for `clasp_operators` app specs).

use serde::{Deserialize, Serialize};

/// The paper's mean execution time of a request (µs, §5.3).
pub const DEFAULT_EXEC_US: f64 = 400.0;
/// Distinct keys per operator in the default key-space model.
pub const DEFAULT_KEYS: usize = 10_000;
/// Zipf exponent of key popularity in the default key-space model.
pub const DEFAULT_ZIPF: f64 = 0.5;

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

/// The built-in apps' names (APPS.md).
pub const BUILTIN_APPS: [&str; 7] = ["wc", "sd", "aa", "pl", "nwm", "etl", "syn"];

fn build(name: &str, ops: &[&str], edges: &[(&str, &str, f64)], exec_us: f64) -> AppModel {
    AppModel {
        name: name.to_string(),
        operators: ops
            .iter()
            .map(|n| AppOperator {
                name: n.to_string(),
                exec_us,
                keys: DEFAULT_KEYS,
                zipf: DEFAULT_ZIPF,
            })
            .collect(),
        edges: edges
            .iter()
            .map(|&(f, t, x)| AppEdge {
                from: f.into(),
                to: t.into(),
                fanout: x,
            })
            .collect(),
    }
}

impl AppModel {
    /// A built-in app with every operator's τ = `exec_us`.
    pub fn builtin(name: &str, exec_us: f64) -> Option<AppModel> {
        let app = match name {
            "wc" => build(
                "wc",
                &["split", "count"],
                &[("split", "count", 10.0)],
                exec_us,
            ),
            "sd" => build(
                "sd",
                &["moving_avg", "spike_detect"],
                &[("moving_avg", "spike_detect", 1.0)],
                exec_us,
            ),
            "aa" => build(
                "aa",
                &["deserialize", "filter", "project", "join", "campaign_count"],
                &[
                    ("deserialize", "filter", 1.0),
                    ("filter", "project", 0.9),
                    ("project", "join", 1.0),
                    ("join", "campaign_count", 1.0),
                ],
                exec_us,
            ),
            "pl" => build(
                "pl",
                &[
                    "parse",
                    "filter",
                    "join",
                    "filter_known",
                    "aggregate",
                    "sink",
                ],
                &[
                    ("parse", "filter", 1.0),
                    ("filter", "join", 0.8),
                    ("join", "filter_known", 1.0),
                    ("filter_known", "aggregate", 0.9),
                    ("aggregate", "sink", 0.01),
                ],
                exec_us,
            ),
            "nwm" => build(
                "nwm",
                &[
                    "parse_lines",
                    "split",
                    "success_filter",
                    "success_parse",
                    "fail_filter",
                    "fail_parse",
                    "fail_aggregate",
                    "aggr_filter",
                    "fail_functor",
                    "join",
                ],
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
                exec_us,
            ),
            "etl" => build(
                "etl",
                &[
                    "senml_parse",
                    "range_filter",
                    "bloom_filter",
                    "interpolate",
                    "join",
                    "annotate",
                    "csv_to_senml",
                    "publish",
                    "store",
                    "sink",
                ],
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
                exec_us,
            ),
            "syn" => {
                let names: Vec<String> = (0..10).map(|i| format!("op{i}")).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let edges: Vec<(&str, &str, f64)> =
                    (0..9).map(|i| (refs[i], refs[i + 1], 1.0)).collect();
                build("syn", &refs, &edges, exec_us)
            }
            _ => return None,
        };
        Some(app)
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
        for o in &self.operators {
            if !(o.exec_us.is_finite() && o.exec_us >= 0.0)
                || o.keys == 0
                || !(o.zipf.is_finite() && o.zipf >= 0.0)
            {
                return Err(format!(
                    "operator {:?}: exec_us, keys and zipf must be non-negative (keys ≥ 1)",
                    o.name
                ));
            }
        }
        let edges: Vec<(usize, usize, f64)> = self
            .edges
            .iter()
            .map(|e| {
                if !(e.fanout.is_finite() && e.fanout >= 0.0) {
                    return Err(format!(
                        "edge {} -> {}: fanout must be non-negative",
                        e.from, e.to
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
