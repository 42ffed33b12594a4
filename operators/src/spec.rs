//! App specs: operators, their kinds and parameters, edges; validation; the TOML format.
//!
//! See the crate docs for the TOML format. An [`AppSpec`] is built from an [`AppDef`] (what the
//! TOML file says) and a [`Registry`] of operator kinds (the built-in ones plus any a user
//! registers), and is valid by construction: [`AppSpec::from_def`] refuses duplicate names,
//! unknown kinds, bad parameters, unknown successors, a graph without a source, cycles and
//! operators the source cannot reach.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::operator::{InstanceContext, Operator, OperatorInstance, Runtime};

/// Most operators an app may have (operator indices travel as `u16` in request headers; this
/// is a far lower, sane bound).
pub const OPERATORS_MAX: usize = 1024;

/// How a distributed run is compared with the oracle for this operator (see
/// [`crate::compare`] for what "equal to the oracle" means).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Determinism {
    /// Final state and the multiset of emissions do not depend on arrival order.
    OrderFree,
    /// Depends on order, but each key has a single FIFO path to it: compared like order-free.
    PathOrdered,
    /// Merges several paths per key: only the multiset of its processed inputs is compared.
    Racy,
    /// No state; its emissions are a function of each input.
    Stateless,
}

impl Determinism {
    /// The snake-case name used in TOML and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Determinism::OrderFree => "order_free",
            Determinism::PathOrdered => "path_ordered",
            Determinism::Racy => "racy",
            Determinism::Stateless => "stateless",
        }
    }
}

/// What a kind of operator is, independent of the app it is placed in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KindInfo {
    /// One line.
    pub description: String,
    /// Keeps per-key state.
    pub stateful: bool,
    /// For a stateful kind, what its key is; for a stateless one, what it is routed by.
    pub keyed_by: String,
    /// Determinism class.
    pub determinism: Determinism,
    /// Whether the multiset of what it emits (outputs and chained requests) is deterministic.
    /// False for operators whose emissions depend on arrival order (PL's running averages);
    /// everything downstream of such an operator is left out of the output comparison.
    pub emissions_deterministic: bool,
}

impl KindInfo {
    /// A keyed (partitioned-stateful) kind.
    pub fn keyed(description: &str, key: &str, determinism: Determinism) -> Self {
        KindInfo {
            description: description.into(),
            stateful: true,
            keyed_by: key.into(),
            determinism,
            emissions_deterministic: determinism != Determinism::Racy,
        }
    }

    /// A stateless kind routed by `routed_by`.
    pub fn stateless(description: &str, routed_by: &str) -> Self {
        KindInfo {
            description: description.into(),
            stateful: false,
            keyed_by: routed_by.into(),
            determinism: Determinism::Stateless,
            emissions_deterministic: true,
        }
    }

    /// Marks the kind's emissions as order-dependent.
    pub fn order_dependent_emissions(mut self) -> Self {
        self.emissions_deterministic = false;
        self
    }
}

/// Parameters of one operator, read by its kind's constructor. Unknown parameters are an error
/// ([`Params::finish`]), so a typo in an app file does not silently fall back to a default.
pub struct Params<'a> {
    table: &'a toml::Table,
    used: BTreeSet<String>,
}

impl<'a> Params<'a> {
    /// Wraps a parameter table.
    pub fn new(table: &'a toml::Table) -> Self {
        Params {
            table,
            used: BTreeSet::new(),
        }
    }

    fn get(&mut self, name: &str) -> Option<&'a toml::Value> {
        self.used.insert(name.to_owned());
        self.table.get(name)
    }

    /// A non-negative integer parameter.
    pub fn u64(&mut self, name: &str, default: u64) -> Result<u64, String> {
        match self.get(name) {
            None => Ok(default),
            Some(toml::Value::Integer(v)) if *v >= 0 => Ok(*v as u64),
            Some(v) => Err(format!(
                "parameter `{name}` must be a non-negative integer, got {v}"
            )),
        }
    }

    /// A non-negative integer parameter within `range`.
    pub fn u64_in(
        &mut self,
        name: &str,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64, String> {
        let v = self.u64(name, default)?;
        if range.contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "parameter `{name}` = {v} is outside {}..={}",
                range.start(),
                range.end()
            ))
        }
    }

    /// A floating-point parameter (integers are accepted).
    pub fn f64(&mut self, name: &str, default: f64) -> Result<f64, String> {
        match self.get(name) {
            None => Ok(default),
            Some(toml::Value::Float(v)) if v.is_finite() => Ok(*v),
            Some(toml::Value::Integer(v)) => Ok(*v as f64),
            Some(v) => Err(format!("parameter `{name}` must be a number, got {v}")),
        }
    }

    /// A string parameter.
    pub fn str(&mut self, name: &str, default: &str) -> Result<String, String> {
        match self.get(name) {
            None => Ok(default.to_owned()),
            Some(toml::Value::String(v)) => Ok(v.clone()),
            Some(v) => Err(format!("parameter `{name}` must be a string, got {v}")),
        }
    }

    /// Fails if the table holds a parameter nobody asked for.
    pub fn finish(&self) -> Result<(), String> {
        let unknown: Vec<&str> = self
            .table
            .keys()
            .filter(|k| !self.used.contains(*k))
            .map(String::as_str)
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(format!("unknown parameter(s): {}", unknown.join(", ")))
        }
    }
}

type Factory = dyn Fn(&toml::Table, InstanceContext) -> Result<Box<dyn OperatorInstance>, String>
    + Send
    + Sync;

#[derive(Clone)]
struct Kind {
    info: KindInfo,
    factory: Arc<Factory>,
}

/// Operator kinds by name: [`Registry::builtin`] has every kind of the seven apps; a user adds
/// their own with [`Registry::register`].
#[derive(Clone)]
pub struct Registry {
    kinds: BTreeMap<String, Kind>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

impl Registry {
    /// No kinds at all.
    pub fn empty() -> Self {
        Registry {
            kinds: BTreeMap::new(),
        }
    }

    /// Every built-in kind (see `clasp apps show` and the crate docs for the list).
    pub fn builtin() -> Self {
        let mut r = Registry::empty();
        crate::apps::register_builtin_kinds(&mut r);
        r
    }

    /// Registers (or replaces) kind `kind`: `make` reads the operator's parameters and builds
    /// it; it should call [`Params::finish`] last.
    pub fn register<O, F>(&mut self, kind: &str, info: KindInfo, make: F)
    where
        O: Operator,
        F: Fn(&mut Params<'_>) -> Result<O, String> + Send + Sync + 'static,
    {
        let factory = move |table: &toml::Table, ctx: InstanceContext| {
            let mut params = Params::new(table);
            let op = make(&mut params)?;
            params.finish()?;
            Ok(Box::new(Runtime::new(op, ctx)) as Box<dyn OperatorInstance>)
        };
        self.kinds.insert(
            kind.to_owned(),
            Kind {
                info,
                factory: Arc::new(factory),
            },
        );
    }

    /// The kind named `kind`.
    pub fn kind(&self, kind: &str) -> Option<&KindInfo> {
        self.kinds.get(kind).map(|k| &k.info)
    }

    /// Every kind, by name.
    pub fn kinds(&self) -> impl Iterator<Item = (&str, &KindInfo)> + '_ {
        self.kinds.iter().map(|(n, k)| (n.as_str(), &k.info))
    }
}

/// One operator as written in an app file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorDef {
    /// Unique within the app.
    pub name: String,
    /// A registered kind.
    pub kind: String,
    /// Names of the operators it emits to, in port order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub successors: Vec<String>,
    /// Kind parameters.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub params: toml::Table,
}

/// An app as written in an app file (see the crate docs for the format).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppDef {
    /// App name.
    pub name: String,
    /// One line.
    #[serde(default)]
    pub description: String,
    /// The generator that feeds the source operator: one of [`crate::generate::generator_names`].
    pub generator: String,
    /// Operators; the first one without predecessors is the source.
    #[serde(rename = "operator", default)]
    pub operators: Vec<OperatorDef>,
    /// Settings of `clasp run` this app runs best with (the `[run]` table, keys named like the
    /// command's flags). The app crate keeps them as written; the command checks them, and a
    /// flag or a run file overrides each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<toml::Table>,
}

/// A validated operator of an app.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperatorSpec {
    /// Unique within the app.
    pub name: String,
    /// Its kind in the [`Registry`].
    pub kind: String,
    /// Kind parameters.
    pub params: toml::Table,
    /// Keeps per-key state.
    pub stateful: bool,
    /// Key (stateful) or routing key (stateless).
    pub keyed_by: String,
    /// Determinism class.
    pub determinism: Determinism,
    /// The comparison with the oracle checks its state digest.
    pub compare_state: bool,
    /// The comparison checks the digest of its sink outputs.
    pub compare_outputs: bool,
    /// The comparison checks the digest of its processed inputs (racy operators).
    pub compare_inputs: bool,
}

/// A chained-request edge `from → to` (operator indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Edge {
    /// Emitting operator.
    pub from: usize,
    /// Successor.
    pub to: usize,
}

/// Why an app spec is invalid. Every message names the operators involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The TOML did not parse or does not have the app-file shape.
    #[error("app file: {0}")]
    Toml(String),
    /// The file could not be read.
    #[error("cannot read app file {path}: {message}")]
    Io {
        /// Path given.
        path: String,
        /// OS error.
        message: String,
    },
    /// No operators.
    #[error("app `{0}` has no operators")]
    Empty(String),
    /// More than [`OPERATORS_MAX`] operators.
    #[error("app has {0} operators, more than the limit of {OPERATORS_MAX}")]
    TooManyOperators(usize),
    /// Two operators share a name.
    #[error("operator name `{0}` is used twice")]
    DuplicateOperator(String),
    /// A kind that is not registered.
    #[error("operator `{operator}`: unknown operator kind `{kind}` (known kinds: {known})")]
    UnknownKind {
        /// Operator.
        operator: String,
        /// Kind written.
        kind: String,
        /// Registered kinds.
        known: String,
    },
    /// The kind's constructor refused the parameters.
    #[error("operator `{operator}` (kind `{kind}`): {message}")]
    BadParams {
        /// Operator.
        operator: String,
        /// Its kind.
        kind: String,
        /// What is wrong.
        message: String,
    },
    /// A successor that names no operator.
    #[error("operator `{operator}`: unknown successor `{successor}`")]
    UnknownSuccessor {
        /// Operator.
        operator: String,
        /// Successor written.
        successor: String,
    },
    /// The same successor listed twice.
    #[error("operator `{operator}` lists successor `{successor}` twice")]
    DuplicateEdge {
        /// Operator.
        operator: String,
        /// Successor.
        successor: String,
    },
    /// Every operator has a predecessor.
    #[error("no source: every operator has a predecessor, so no operator can take the input")]
    NoSource,
    /// A cycle, named in order.
    #[error("cycle: {}", .0.join(" → "))]
    Cycle(Vec<String>),
    /// Operators the source does not reach.
    #[error("unreachable from the source `{source_op}`: {}", .unreachable.join(", "))]
    Unreachable {
        /// The source.
        source_op: String,
        /// Operators not reached.
        unreachable: Vec<String>,
    },
    /// An unknown generator.
    #[error("unknown generator `{0}` (known: {known})", known = crate::generate::generator_names().join(", "))]
    UnknownGenerator(String),
}

/// A validated app: operators, edges, the generator that feeds it, and the registry that builds
/// its operator instances.
#[derive(Clone, Debug)]
pub struct AppSpec {
    /// App name.
    pub name: String,
    /// One line.
    pub description: String,
    /// Generator feeding the source operator.
    pub generator: String,
    /// Operators; index = operator id in requests.
    pub operators: Vec<OperatorSpec>,
    /// Edges, grouped by `from` in successor (port) order.
    pub edges: Vec<Edge>,
    /// Index of the source operator.
    pub source: usize,
    def: AppDef,
    registry: Registry,
}

impl AppSpec {
    /// Parses and validates an app file's text against the built-in kinds.
    pub fn from_toml_str(text: &str) -> Result<AppSpec, SpecError> {
        Self::from_toml_str_with(&Registry::builtin(), text)
    }

    /// Parses and validates an app file's text against `registry`.
    pub fn from_toml_str_with(registry: &Registry, text: &str) -> Result<AppSpec, SpecError> {
        let def: AppDef = toml::from_str(text).map_err(|e| SpecError::Toml(e.to_string()))?;
        Self::from_def(registry, def)
    }

    /// Reads, parses and validates an app file against the built-in kinds.
    pub fn from_toml_file(path: impl AsRef<std::path::Path>) -> Result<AppSpec, SpecError> {
        Self::from_toml_file_with(&Registry::builtin(), path)
    }

    /// Reads, parses and validates an app file against `registry`.
    pub fn from_toml_file_with(
        registry: &Registry,
        path: impl AsRef<std::path::Path>,
    ) -> Result<AppSpec, SpecError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| SpecError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_toml_str_with(registry, &text)
    }

    /// The app file text of this spec (round-trips through [`AppSpec::from_toml_str`]).
    pub fn to_toml_string(&self) -> String {
        toml::to_string(&self.def).expect("an app definition serializes")
    }

    /// The definition this spec was built from.
    pub fn def(&self) -> &AppDef {
        &self.def
    }

    /// Validates `def` against `registry`.
    pub fn from_def(registry: &Registry, def: AppDef) -> Result<AppSpec, SpecError> {
        check_size_and_generator(&def)?;
        let index = operator_index(&def)?;
        let infos = kind_infos(registry, &def)?;
        let edges = edges_of(&def, &index)?;
        let source = acyclic_source(&def, &edges)?;
        check_reachable(&def, &edges, source)?;
        let operators = operator_specs(&def, &infos, &edges);
        let spec = AppSpec {
            name: def.name.clone(),
            description: def.description.clone(),
            generator: def.generator.clone(),
            operators,
            edges,
            source,
            def,
            registry: registry.clone(),
        };
        // Build every operator once so bad parameters fail here, not in the middle of a run.
        for i in 0..spec.operators.len() {
            spec.try_instantiate(i)?;
        }
        Ok(spec)
    }

    /// Index of the operator named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.operators.iter().position(|o| o.name == name)
    }

    /// Successors of operator `op`, in port order.
    pub fn successors(&self, op: usize) -> Vec<usize> {
        self.edges
            .iter()
            .filter(|e| e.from == op)
            .map(|e| e.to)
            .collect()
    }

    /// Predecessors of operator `op`.
    pub fn predecessors(&self, op: usize) -> Vec<usize> {
        self.edges
            .iter()
            .filter(|e| e.to == op)
            .map(|e| e.from)
            .collect()
    }

    /// Operators in a topological order (source first); end of stream is signalled in this
    /// order so every flush reaches operators that have not flushed yet.
    pub fn topological_order(&self) -> Vec<usize> {
        topo_order(self.operators.len(), &self.edges)
    }

    /// A fresh instance of operator `op` (one per executor that runs it).
    ///
    /// # Panics
    /// If `op` is out of range. (Parameters were validated when the spec was built.)
    pub fn instantiate(&self, op: usize) -> Box<dyn OperatorInstance> {
        self.try_instantiate(op)
            .expect("parameters were validated when the spec was built")
    }

    fn try_instantiate(&self, op: usize) -> Result<Box<dyn OperatorInstance>, SpecError> {
        let o = &self.operators[op];
        let kind = &self.registry.kinds[&o.kind];
        let ctx = InstanceContext {
            operator: u16::try_from(op).expect("OPERATORS_MAX fits u16"),
            name: Arc::from(o.name.as_str()),
            successors: self
                .successors(op)
                .into_iter()
                .map(|s| u16::try_from(s).expect("OPERATORS_MAX fits u16"))
                .collect(),
            determinism: o.determinism,
        };
        (kind.factory)(&o.params, ctx).map_err(|message| SpecError::BadParams {
            operator: o.name.clone(),
            kind: o.kind.clone(),
            message,
        })
    }

    /// Graphviz `dot` text of the app (stateful operators as boxes, keyed-by on edges).
    pub fn to_dot(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "digraph \"{}\" {{\n  rankdir=LR;", self.name);
        for (i, o) in self.operators.iter().enumerate() {
            let shape = if o.stateful { "box" } else { "ellipse" };
            let _ = writeln!(
                s,
                "  op{i} [label=\"{}\\n{}\\n{}\", shape={shape}];",
                o.name,
                o.kind,
                o.determinism.as_str()
            );
        }
        for e in &self.edges {
            let _ = writeln!(
                s,
                "  op{} -> op{} [label=\"{}\"];",
                e.from, e.to, self.operators[e.to].keyed_by
            );
        }
        s.push_str("}\n");
        s
    }
}

/// Checks that the app has between 1 and [`OPERATORS_MAX`] operators and a known generator.
fn check_size_and_generator(def: &AppDef) -> Result<(), SpecError> {
    let n = def.operators.len();
    if n == 0 {
        return Err(SpecError::Empty(def.name.clone()));
    }
    if n > OPERATORS_MAX {
        return Err(SpecError::TooManyOperators(n));
    }
    if !crate::generate::generator_names().contains(&def.generator.as_str()) {
        return Err(SpecError::UnknownGenerator(def.generator.clone()));
    }
    Ok(())
}

/// Each operator's index by name; a name used twice is an error.
fn operator_index(def: &AppDef) -> Result<BTreeMap<&str, usize>, SpecError> {
    let mut index = BTreeMap::new();
    for (i, op) in def.operators.iter().enumerate() {
        if index.insert(op.name.as_str(), i).is_some() {
            return Err(SpecError::DuplicateOperator(op.name.clone()));
        }
    }
    Ok(index)
}

/// The registered kind of each operator, in operator order; an unknown kind is an error that
/// lists the known ones.
fn kind_infos(registry: &Registry, def: &AppDef) -> Result<Vec<KindInfo>, SpecError> {
    let mut infos = Vec::with_capacity(def.operators.len());
    for op in &def.operators {
        let Some(kind) = registry.kinds.get(&op.kind) else {
            return Err(SpecError::UnknownKind {
                operator: op.name.clone(),
                kind: op.kind.clone(),
                known: registry
                    .kinds
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        infos.push(kind.info.clone());
    }
    Ok(infos)
}

/// The edges named by the operators' successor lists, grouped by `from` in port order; an
/// unknown or repeated successor is an error.
fn edges_of(def: &AppDef, index: &BTreeMap<&str, usize>) -> Result<Vec<Edge>, SpecError> {
    let mut edges = Vec::new();
    for (i, op) in def.operators.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for s in &op.successors {
            let Some(&to) = index.get(s.as_str()) else {
                return Err(SpecError::UnknownSuccessor {
                    operator: op.name.clone(),
                    successor: s.clone(),
                });
            };
            if !seen.insert(to) {
                return Err(SpecError::DuplicateEdge {
                    operator: op.name.clone(),
                    successor: s.clone(),
                });
            }
            edges.push(Edge { from: i, to });
        }
    }
    Ok(edges)
}

/// The source (the first operator without predecessors) of an acyclic graph; no source or a
/// cycle is an error.
fn acyclic_source(def: &AppDef, edges: &[Edge]) -> Result<usize, SpecError> {
    let n = def.operators.len();
    let mut indegree = vec![0usize; n];
    for e in edges {
        indegree[e.to] += 1;
    }
    let Some(source) = indegree.iter().position(|&d| d == 0) else {
        return Err(SpecError::NoSource);
    };
    let succ = |i: usize| edges.iter().filter(move |e| e.from == i).map(|e| e.to);
    if let Some(cycle) = find_cycle(n, &succ) {
        return Err(SpecError::Cycle(
            cycle
                .iter()
                .map(|&i| def.operators[i].name.clone())
                .collect(),
        ));
    }
    Ok(source)
}

/// Checks that every operator is reachable from `source`; the error names those that are not.
fn check_reachable(def: &AppDef, edges: &[Edge], source: usize) -> Result<(), SpecError> {
    let n = def.operators.len();
    let mut reached = vec![false; n];
    let mut stack = vec![source];
    reached[source] = true;
    while let Some(i) = stack.pop() {
        for j in edges.iter().filter(|e| e.from == i).map(|e| e.to) {
            if !reached[j] {
                reached[j] = true;
                stack.push(j);
            }
        }
    }
    let unreachable: Vec<String> = (0..n)
        .filter(|&i| !reached[i])
        .map(|i| def.operators[i].name.clone())
        .collect();
    if !unreachable.is_empty() {
        return Err(SpecError::Unreachable {
            source_op: def.operators[source].name.clone(),
            unreachable,
        });
    }
    Ok(())
}

/// The validated operators, with what the oracle comparison may check of each: emissions stop
/// being deterministic at an order-dependent (or racy) operator and stay so downstream.
fn operator_specs(def: &AppDef, infos: &[KindInfo], edges: &[Edge]) -> Vec<OperatorSpec> {
    let n = def.operators.len();
    let mut inputs_det = vec![true; n];
    let mut emits_det = vec![true; n];
    for i in topo_order(n, edges) {
        inputs_det[i] = edges
            .iter()
            .filter(|e| e.to == i)
            .all(|e| emits_det[e.from]);
        emits_det[i] = inputs_det[i] && infos[i].emissions_deterministic;
    }
    def.operators
        .iter()
        .zip(infos)
        .enumerate()
        .map(|(i, (op, info))| {
            let det = info.determinism;
            OperatorSpec {
                name: op.name.clone(),
                kind: op.kind.clone(),
                params: op.params.clone(),
                stateful: info.stateful,
                keyed_by: info.keyed_by.clone(),
                determinism: det,
                compare_state: inputs_det[i]
                    && matches!(det, Determinism::OrderFree | Determinism::PathOrdered),
                compare_outputs: emits_det[i],
                compare_inputs: inputs_det[i] && det == Determinism::Racy,
            }
        })
        .collect()
}

fn topo_order(n: usize, edges: &[Edge]) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    for e in edges {
        indegree[e.to] += 1;
    }
    let mut ready: Vec<usize> = (0..n).rev().filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        order.push(i);
        for e in edges.iter().filter(|e| e.from == i).rev() {
            indegree[e.to] -= 1;
            if indegree[e.to] == 0 {
                ready.push(e.to);
            }
        }
    }
    order
}

/// A cycle as a list of operators ending where it starts, if the graph has one.
fn find_cycle<I: Iterator<Item = usize>>(
    n: usize,
    succ: &impl Fn(usize) -> I,
) -> Option<Vec<usize>> {
    // Iterative DFS with colours: 0 = new, 1 = on the stack, 2 = done.
    let mut colour = vec![0u8; n];
    for root in 0..n {
        if colour[root] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, Vec<usize>)> = vec![(root, succ(root).collect())];
        colour[root] = 1;
        while let Some((node, pending)) = stack.last_mut() {
            let node = *node;
            if let Some(next) = pending.pop() {
                match colour[next] {
                    0 => {
                        colour[next] = 1;
                        stack.push((next, succ(next).collect()));
                    }
                    1 => {
                        let start = stack
                            .iter()
                            .position(|(v, _)| *v == next)
                            .expect("on stack");
                        let mut cycle: Vec<usize> =
                            stack[start..].iter().map(|(v, _)| *v).collect();
                        cycle.push(next);
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour[node] = 2;
                stack.pop();
            }
        }
    }
    None
}
