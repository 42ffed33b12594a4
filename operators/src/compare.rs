//! What "equal to the oracle" means, as data: a [`Comparable`] holds exactly what a
//! run must reproduce, and [`Comparable::compare`] says which operator differs and how.
//!
//! * processed counts of every operator, always;
//! * state digests of order-free and path-ordered operators whose inputs are deterministic;
//! * output digests of operators whose emissions are deterministic (not racy, not downstream
//!   of an order-dependent emitter);
//! * input digests (the multiset of processed requests) of racy operators.
//!
//! A distributed run builds its own [`Comparable`] with [`Comparable::from_summaries`] from the
//! [`OperatorSummary`]s of its instances, summed per operator with
//! [`OperatorSummary::combine`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::operator::OperatorSummary;
use crate::spec::AppSpec;

/// What a run must reproduce of the oracle (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparable {
    /// Requests processed per operator (every operator).
    pub processed: BTreeMap<String, u64>,
    /// State digests of the operators whose state is compared.
    pub state: BTreeMap<String, Digest>,
    /// Output digests of the operators whose outputs are compared.
    pub outputs: BTreeMap<String, Digest>,
    /// Input digests of racy operators.
    pub inputs: BTreeMap<String, Digest>,
}

/// Where two runs differ; `Display` lists every difference, one per line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} difference(s) from the oracle:\n{}", differences.len(), differences.join("\n"))]
pub struct Mismatch {
    /// One line per difference, naming the operator.
    pub differences: Vec<String>,
}

impl Comparable {
    /// The comparable part of a run of `spec`, from one summary per operator (index = operator
    /// index), each the combination of all instances of that operator.
    pub fn from_summaries(spec: &AppSpec, summaries: &[OperatorSummary]) -> Comparable {
        assert_eq!(
            summaries.len(),
            spec.operators.len(),
            "one summary per operator"
        );
        let mut c = Comparable::default();
        for (op, s) in spec.operators.iter().zip(summaries) {
            c.processed.insert(op.name.clone(), s.processed);
            if op.compare_state {
                c.state.insert(op.name.clone(), s.state);
            }
            if op.compare_outputs {
                c.outputs.insert(op.name.clone(), s.outputs);
            }
            if op.compare_inputs {
                c.inputs.insert(op.name.clone(), s.inputs);
            }
        }
        c
    }

    /// Sum of the compared state digests and racy input digests: the `state_digest` the CLI
    /// prints.
    pub fn state_digest(&self) -> Digest {
        let mut d = Digest::sum_of(self.state.values());
        d.combine(&Digest::sum_of(self.inputs.values()));
        d
    }

    /// Sum of the compared output digests: the `output_digest` the CLI prints.
    pub fn output_digest(&self) -> Digest {
        Digest::sum_of(self.outputs.values())
    }

    /// `Ok` if `actual` reproduces `self` (the oracle); otherwise every difference.
    pub fn compare(&self, actual: &Comparable) -> Result<(), Mismatch> {
        let mut differences = Vec::new();
        diff(
            "processed",
            &self.processed,
            &actual.processed,
            &mut differences,
        );
        diff("state digest", &self.state, &actual.state, &mut differences);
        diff(
            "output digest",
            &self.outputs,
            &actual.outputs,
            &mut differences,
        );
        diff(
            "input digest",
            &self.inputs,
            &actual.inputs,
            &mut differences,
        );
        if differences.is_empty() {
            Ok(())
        } else {
            Err(Mismatch { differences })
        }
    }
}

fn diff<T: PartialEq + std::fmt::Display>(
    what: &str,
    expected: &BTreeMap<String, T>,
    actual: &BTreeMap<String, T>,
    out: &mut Vec<String>,
) {
    for (op, e) in expected {
        match actual.get(op) {
            None => out.push(format!("{op}: {what} missing (oracle: {e})")),
            Some(a) if a != e => out.push(format!("{op}: {what} {a}, oracle {e}")),
            Some(_) => {}
        }
    }
    for op in actual.keys().filter(|k| !expected.contains_key(*k)) {
        out.push(format!("{op}: {what} present but not in the oracle"));
    }
}
