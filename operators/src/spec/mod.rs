//! App specs: operators, their kinds and parameters, edges; validation; the TOML format.
//!
//! See the crate docs for the TOML format. An [`AppSpec`] is built from an [`AppDef`] (what the
//! TOML file says) and a [`Registry`] of operator kinds (the built-in ones plus any a user
//! registers), and is valid by construction: [`AppSpec::from_def`] refuses duplicate names,
//! unknown kinds, bad parameters, unknown successors, a graph without a source, cycles and
//! operators the source cannot reach.

mod graph;
mod registry;

use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::operator::{InstanceContext, OperatorInstance};
pub use graph::NAME_SEPARATORS;
use graph::{
    acyclic_source, check_names, check_reachable, check_size_and_generator, edges_of, kind_infos,
    operator_index, operator_specs, topo_order,
};
pub use registry::{Determinism, KindInfo, Params, Registry};

/// Most operators an app may have: what a worker runs (each executor keeps an operators ×
/// operators table of chained-request counters in shared memory, 1 MiB at this bound). An app
/// over it is refused when it is loaded, before any worker starts.
pub const OPERATORS_MAX: usize = 256;
/// Most bytes of an app file read (an app file of the most operators is far smaller).
pub const APP_FILE_BYTES_MAX: u64 = 16 << 20;

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
    /// A name that the text outputs (decision lines, logs, CSV files) could not carry.
    #[error(
        "{what} name {name:?}: a name is not empty and holds no whitespace, control \
         characters or any of {NAME_SEPARATORS:?}, which separate names in the outputs"
    )]
    BadName {
        /// `app` or `operator`.
        what: &'static str,
        /// The name as written.
        name: String,
    },
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
        use std::io::Read as _;
        let path = path.as_ref();
        let io = |message: String| SpecError::Io {
            path: path.display().to_string(),
            message,
        };
        // An app file is a few kilobytes; `/dev/zero` or a data file given by mistake must not
        // fill the memory.
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(APP_FILE_BYTES_MAX + 1).read_to_string(&mut text))
            .map_err(|e| io(e.to_string()))?;
        if text.len() as u64 > APP_FILE_BYTES_MAX {
            return Err(io(format!("larger than {APP_FILE_BYTES_MAX} bytes")));
        }
        Self::from_toml_str_with(registry, &text)
    }

    /// The app file text of this spec (round-trips through [`AppSpec::from_toml_str`]).
    pub fn to_toml_string(&self) -> String {
        toml::to_string(&self.def).expect("an app definition serializes")
    }

    /// The app's operators (name, kind and parameters, in id order) and edges, on one line:
    /// what its state is made by. A checkpoint records it, and a run resumes only from the
    /// checkpoint of an app of the same shape: state restored by operator id into another
    /// graph that happens to share the app's name would be wrong, not refused.
    pub fn shape(&self) -> String {
        let operators: Vec<String> = self
            .operators
            .iter()
            .map(|o| match o.params.is_empty() {
                true => format!("{} ({})", o.name, o.kind),
                false => format!(
                    "{} ({} {})",
                    o.name,
                    o.kind,
                    toml::Value::from(o.params.clone())
                ),
            })
            .collect();
        let edges: Vec<String> = self
            .edges
            .iter()
            .map(|e| {
                format!(
                    "{} -> {}",
                    self.operators[e.from].name, self.operators[e.to].name
                )
            })
            .collect();
        format!(
            "operators {}; edges {}",
            operators.join(", "),
            edges.join(", ")
        )
    }

    /// The definition this spec was built from.
    pub fn def(&self) -> &AppDef {
        &self.def
    }

    /// Validates `def` against `registry`.
    pub fn from_def(registry: &Registry, def: AppDef) -> Result<AppSpec, SpecError> {
        check_size_and_generator(&def)?;
        check_names(&def)?;
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
