//! The checks [`super::AppSpec::from_def`] runs, one per rule (size, names, kinds, edges, a
//! source, no cycle, reachability), and the graph walks they share. Each returns the first
//! [`SpecError`] it finds, naming the operators at fault.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    AppDef, Determinism, Edge, KindInfo, OPERATORS_MAX, OperatorSpec, Registry, SpecError,
};

/// Checks that the app has between 1 and [`OPERATORS_MAX`] operators and a known generator.
pub(super) fn check_size_and_generator(def: &AppDef) -> Result<(), SpecError> {
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

/// Characters that separate names in the text outputs (`parallelism=split:3->1,count:3->2`,
/// CSV fields, quoted log values): not allowed in a name.
pub const NAME_SEPARATORS: &str = ",:=;\"";

/// The app's and every operator's name can be written in the outputs as it is.
pub(super) fn check_names(def: &AppDef) -> Result<(), SpecError> {
    let bad = |name: &str| {
        name.is_empty()
            || name
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || NAME_SEPARATORS.contains(c))
    };
    if bad(&def.name) {
        return Err(SpecError::BadName {
            what: "app",
            name: def.name.clone(),
        });
    }
    match def.operators.iter().find(|o| bad(&o.name)) {
        Some(o) => Err(SpecError::BadName {
            what: "operator",
            name: o.name.clone(),
        }),
        None => Ok(()),
    }
}

/// Each operator's index by name; a name used twice is an error.
pub(super) fn operator_index(def: &AppDef) -> Result<BTreeMap<&str, usize>, SpecError> {
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
pub(super) fn kind_infos(registry: &Registry, def: &AppDef) -> Result<Vec<KindInfo>, SpecError> {
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
pub(super) fn edges_of(
    def: &AppDef,
    index: &BTreeMap<&str, usize>,
) -> Result<Vec<Edge>, SpecError> {
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
pub(super) fn acyclic_source(def: &AppDef, edges: &[Edge]) -> Result<usize, SpecError> {
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
pub(super) fn check_reachable(
    def: &AppDef,
    edges: &[Edge],
    source: usize,
) -> Result<(), SpecError> {
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
pub(super) fn operator_specs(
    def: &AppDef,
    infos: &[KindInfo],
    edges: &[Edge],
) -> Vec<OperatorSpec> {
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

pub(super) fn topo_order(n: usize, edges: &[Edge]) -> Vec<usize> {
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
