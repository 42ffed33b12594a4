//! Operator kinds: what each kind declares about itself ([`KindInfo`]), how it reads its
//! parameters ([`Params`]), and the [`Registry`] that maps a kind's name to its factory. Kept
//! apart from the app graph because a user extends it (their own kinds) without touching how
//! an app is validated.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::operator::{InstanceContext, Operator, OperatorInstance, Runtime};

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
        within(name, self.u64(name, default)?, &range)
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

    /// A float parameter within `range` (default `default`).
    pub fn f64_in(
        &mut self,
        name: &str,
        default: f64,
        range: std::ops::RangeInclusive<f64>,
    ) -> Result<f64, String> {
        within(name, self.f64(name, default)?, &range)
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
pub(super) struct Kind {
    pub(super) info: KindInfo,
    pub(super) factory: Arc<Factory>,
}

/// Operator kinds by name: [`Registry::builtin`] has every kind of the seven apps; a user adds
/// their own with [`Registry::register`].
#[derive(Clone)]
pub struct Registry {
    pub(super) kinds: BTreeMap<String, Kind>,
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

/// Parameter `name`'s value `v` if it lies in `range`, else an error naming both.
fn within<T: PartialOrd + std::fmt::Display>(
    name: &str,
    v: T,
    range: &std::ops::RangeInclusive<T>,
) -> Result<T, String> {
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
