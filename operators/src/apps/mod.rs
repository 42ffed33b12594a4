//! The seven benchmark apps (WC, SD, AA, PL, NWM, ETL, SYN), one module each: its operator kinds, its app
//! definition and its generator; and `wc-text`, WC over raw text lines (not a benchmark app).

pub mod aa;
pub mod common;
pub mod etl;
pub mod nwm;
pub mod pl;
pub mod sd;
pub mod syn;
pub mod wc;
pub mod wc_text;
pub mod wc_words;

use crate::spec::{AppDef, AppSpec, OperatorDef, Registry};

/// Names of the built-in apps, in their canonical order.
pub fn builtin_names() -> &'static [&'static str] {
    &["wc", "sd", "aa", "pl", "nwm", "etl", "syn"]
}

/// Every built-in app: the benchmark apps, then the others (`wc-text`).
pub fn all_names() -> &'static [&'static str] {
    &["wc", "sd", "aa", "pl", "nwm", "etl", "syn", "wc-text"]
}

/// The definition (app-file form) of built-in app `name`.
pub fn builtin_def(name: &str) -> Option<AppDef> {
    Some(match name {
        "wc" => wc::def(),
        "sd" => sd::def(),
        "aa" => aa::def(),
        "pl" => pl::def(),
        "nwm" => nwm::def(),
        "etl" => etl::def(),
        "syn" => syn::def(syn::STAGES),
        "wc-text" => wc_text::def(),
        _ => return None,
    })
}

/// The validated built-in app `name`.
pub fn builtin(name: &str) -> Option<AppSpec> {
    let def = builtin_def(name)?;
    Some(AppSpec::from_def(&Registry::builtin(), def).expect("built-in apps are valid"))
}

pub(crate) fn register_builtin_kinds(r: &mut Registry) {
    common::register(r);
    wc::register(r);
    wc_text::register(r);
    sd::register(r);
    aa::register(r);
    pl::register(r);
    nwm::register(r);
    etl::register(r);
}

/// An operator definition without parameters.
pub(crate) fn op(name: &str, kind: &str, successors: &[&str]) -> OperatorDef {
    OperatorDef {
        name: name.into(),
        kind: kind.into(),
        successors: successors.iter().map(|s| (*s).into()).collect(),
        params: toml::Table::new(),
    }
}

impl OperatorDef {
    /// With a string parameter.
    pub(crate) fn with(mut self, name: &str, value: &str) -> Self {
        self.params
            .insert(name.into(), toml::Value::String(value.into()));
        self
    }
}

/// An app definition.
pub(crate) fn app(name: &str, description: &str, operators: Vec<OperatorDef>) -> AppDef {
    AppDef {
        name: name.into(),
        description: description.into(),
        generator: name.into(),
        operators,
        run: None,
    }
}
