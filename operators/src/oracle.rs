//! The oracle: a single-threaded executor that runs an app over generated input in order.
//!
//! Every distributed run is checked against it ([`OracleReport::compare`]). It processes each
//! input record's whole request tree before the next record (breadth first within a tree), then
//! signals end of stream to the operators in topological order, draining what each flush
//! emits before the next operator flushes — the order a data plane must also respect.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use crate::compare::{Comparable, Mismatch};
use crate::digest::Digest;
use crate::emitter::{Emitter, Target};
use crate::key::key_hash;
use crate::operator::{OperatorInstance, OperatorSummary};
use crate::spec::AppSpec;

/// Options of [`run_with`].
#[derive(Clone, Debug)]
pub struct OracleOptions {
    /// Keep at most this many sink outputs in [`OracleReport::outputs`] (their digests cover all
    /// of them regardless).
    pub outputs_kept_max: usize,
}

impl Default for OracleOptions {
    fn default() -> Self {
        OracleOptions {
            outputs_kept_max: 1000,
        }
    }
}

/// One sink output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutputRecord {
    /// Emitting operator.
    pub operator: String,
    /// Its key.
    pub key: Vec<u8>,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// What the oracle saw.
#[derive(Clone, Debug)]
pub struct OracleReport {
    /// App name.
    pub app: String,
    /// Input records.
    pub records: u64,
    /// Generator seed (0 for [`run_inputs`]).
    pub seed: u64,
    /// Requests processed per operator.
    pub processed: BTreeMap<String, u64>,
    /// Chained requests per edge `(from, to)`: fan-out ratios are `emitted / processed[from]`.
    pub emitted: BTreeMap<(String, String), u64>,
    /// Sink outputs per operator.
    pub outputs_emitted: BTreeMap<String, u64>,
    /// Malformed requests per operator and reason.
    pub malformed: BTreeMap<String, BTreeMap<String, u64>>,
    /// Counters and digests per operator.
    pub operators: BTreeMap<String, OperatorSummary>,
    /// Keys holding state per operator at the end.
    pub state_keys: BTreeMap<String, usize>,
    /// The first [`OracleOptions::outputs_kept_max`] outputs, in emission order.
    pub outputs: Vec<OutputRecord>,
    /// What a run must reproduce.
    pub comparable: Comparable,
}

impl OracleReport {
    /// Top-level state digest (compared state and racy inputs).
    pub fn state_digest(&self) -> Digest {
        self.comparable.state_digest()
    }

    /// Top-level output digest (compared outputs).
    pub fn output_digest(&self) -> Digest {
        self.comparable.output_digest()
    }

    /// Checks that `actual` (a distributed run's comparable summary) reproduces this run.
    pub fn compare(&self, actual: &Comparable) -> Result<(), Mismatch> {
        self.comparable.compare(actual)
    }
}

/// Runs `spec` over `records` records of its generator with `seed`.
pub fn run(spec: &AppSpec, records: u64, seed: u64) -> OracleReport {
    run_with(spec, records, seed, &OracleOptions::default())
}

/// [`run`] with options.
pub fn run_with(spec: &AppSpec, records: u64, seed: u64, options: &OracleOptions) -> OracleReport {
    let generator = crate::generate::generator(&spec.generator, seed)
        .expect("the spec's generator was validated");
    let mut oracle = Oracle::new(spec, options);
    let (mut key, mut payload) = (Vec::new(), Vec::new());
    for i in 0..records {
        generator.record_into(i, &mut key, &mut payload);
        oracle.input(&key, &payload);
    }
    oracle.finish(records, seed)
}

/// Runs `spec` over hand-made `(key, payload)` inputs to its source operator.
pub fn run_inputs<'a>(
    spec: &AppSpec,
    inputs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    options: &OracleOptions,
) -> OracleReport {
    let mut oracle = Oracle::new(spec, options);
    let mut n = 0;
    for (k, p) in inputs {
        oracle.input(k, p);
        n += 1;
    }
    oracle.finish(n, 0)
}

/// The requests each operator receives in an oracle run of `records` records (at most
/// `per_operator_max` each): realistic inputs for benchmarking one operator alone.
pub fn capture_inputs(
    spec: &AppSpec,
    records: u64,
    seed: u64,
    per_operator_max: usize,
) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let generator = crate::generate::generator(&spec.generator, seed)
        .expect("the spec's generator was validated");
    let mut oracle = Oracle::new(
        spec,
        &OracleOptions {
            outputs_kept_max: 0,
        },
    );
    oracle.capture = Some((per_operator_max, vec![Vec::new(); spec.operators.len()]));
    let (mut key, mut payload) = (Vec::new(), Vec::new());
    for i in 0..records {
        generator.record_into(i, &mut key, &mut payload);
        oracle.input(&key, &payload);
    }
    oracle.capture.take().map(|(_, c)| c).unwrap_or_default()
}

type Captured = (usize, Vec<Vec<(Vec<u8>, Vec<u8>)>>);

struct Oracle<'s> {
    spec: &'s AppSpec,
    instances: Vec<Box<dyn OperatorInstance>>,
    emitter: Emitter,
    /// Pending requests: (operator, key range, payload range) into `arena`.
    queue: VecDeque<(u16, usize, usize, usize)>,
    arena: Vec<u8>,
    emitted: BTreeMap<(usize, usize), u64>,
    outputs_emitted: Vec<u64>,
    outputs: Vec<OutputRecord>,
    outputs_kept_max: usize,
    capture: Option<Captured>,
}

impl<'s> Oracle<'s> {
    fn new(spec: &'s AppSpec, options: &OracleOptions) -> Self {
        Oracle {
            spec,
            instances: (0..spec.operators.len())
                .map(|i| spec.instantiate(i))
                .collect(),
            emitter: Emitter::new(),
            queue: VecDeque::new(),
            arena: Vec::new(),
            emitted: BTreeMap::new(),
            outputs_emitted: vec![0; spec.operators.len()],
            outputs: Vec::new(),
            outputs_kept_max: options.outputs_kept_max,
            capture: None,
        }
    }

    fn push(&mut self, op: u16, key: &[u8], payload: &[u8]) {
        let k = self.arena.len();
        self.arena.extend_from_slice(key);
        let p = self.arena.len();
        self.arena.extend_from_slice(payload);
        self.queue.push_back((op, k, p, self.arena.len()));
    }

    fn input(&mut self, key: &[u8], payload: &[u8]) {
        self.push(self.spec.source as u16, key, payload);
        self.drain();
    }

    /// Routes what `from` emitted into the queue and the counters.
    fn route(&mut self, from: usize) {
        let emitter = std::mem::take(&mut self.emitter);
        for e in emitter.iter() {
            match e.target {
                Target::Operator(to) => {
                    *self.emitted.entry((from, usize::from(to))).or_default() += 1;
                    self.push(to, e.key, e.payload);
                }
                Target::Output => {
                    self.outputs_emitted[from] += 1;
                    if self.outputs.len() < self.outputs_kept_max {
                        self.outputs.push(OutputRecord {
                            operator: self.spec.operators[from].name.clone(),
                            key: e.key.to_vec(),
                            payload: e.payload.to_vec(),
                        });
                    }
                }
            }
        }
        self.emitter = emitter;
        self.emitter.clear();
    }

    fn drain(&mut self) {
        while let Some((op, k, p, end)) = self.queue.pop_front() {
            let op = usize::from(op);
            let (key, payload) = (&self.arena[k..p], &self.arena[p..end]);
            if let Some((max, captured)) = &mut self.capture {
                if captured[op].len() < *max {
                    captured[op].push((key.to_vec(), payload.to_vec()));
                }
            }
            // A malformed request is counted by the instance and dropped; nothing to do here.
            let _ = self.instances[op].process(key_hash(key), key, payload, &mut self.emitter);
            self.route(op);
        }
        self.arena.clear();
    }

    fn finish(mut self, records: u64, seed: u64) -> OracleReport {
        for op in self.spec.topological_order() {
            self.instances[op].end_of_stream(&mut self.emitter);
            self.route(op);
            self.drain();
        }
        let names: Vec<String> = self.spec.operators.iter().map(|o| o.name.clone()).collect();
        let summaries: Vec<OperatorSummary> = self.instances.iter().map(|i| i.summary()).collect();
        let comparable = Comparable::from_summaries(self.spec, &summaries);
        OracleReport {
            app: self.spec.name.clone(),
            records,
            seed,
            processed: names
                .iter()
                .cloned()
                .zip(summaries.iter().map(|s| s.processed))
                .collect(),
            emitted: self
                .emitted
                .iter()
                .map(|(&(f, t), &n)| ((names[f].clone(), names[t].clone()), n))
                .collect(),
            outputs_emitted: names
                .iter()
                .cloned()
                .zip(self.outputs_emitted.iter().copied())
                .collect(),
            malformed: names
                .iter()
                .zip(&self.instances)
                .map(|(n, i)| {
                    let reasons = i
                        .malformed_reasons()
                        .into_iter()
                        .map(|(r, c)| (r.to_owned(), c))
                        .collect();
                    (n.clone(), reasons)
                })
                .collect(),
            operators: names
                .iter()
                .cloned()
                .zip(summaries.iter().copied())
                .collect(),
            state_keys: names
                .iter()
                .cloned()
                .zip(self.instances.iter().map(|i| i.state_keys()))
                .collect(),
            outputs: self.outputs,
            comparable,
        }
    }
}
