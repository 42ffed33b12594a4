//! Migration plans from the driver: checked against the job (a plan from a confused or hostile
//! driver must be an error here, not an index out of bounds in an executor), then each slot's
//! handed to its executor's mailbox.

use super::{Node, Running};
use crate::runtime::executor::PlanMail;
use crate::runtime::messages::Command;
use clasp_protocol::Slot;
use clasp_protocol::assignment::Assignment;

/// Hands each slot's plan to its executor.
pub(super) fn deliver_plans(node: &mut Node, run: &mut Running, parts: Vec<(Slot, Assignment)>) {
    let base = run.slots.slot(run.index, 0).index();
    for (slot, a) in parts {
        let e = slot.index().wrapping_sub(base);
        if e >= run.executors {
            node.fault(format!("a plan for slot {slot}, not on this worker"));
            continue;
        }
        tracing::trace!(slot = slot.0, epoch = a.epoch().0, "plan posted");
        post(node, run, e, PlanMail::Plan(a));
    }
}

/// Leaves `mail` in executor `e`'s mailbox and tells it so.
fn post(node: &mut Node, run: &mut Running, e: usize, mail: PlanMail) {
    match run.plans[e].lock() {
        Ok(mut q) => q.push_back(mail),
        Err(_) => return node.fault("a plan mailbox is poisoned".into()),
    }
    run.coordinator.command(e, Command::Plan);
}

/// Tells every executor that a move to `routing` is coming, so that each copies what it will
/// give up ahead (checked against the job first, as a plan is).
pub(super) fn deliver_copy_ahead(
    node: &mut Node,
    run: &mut Running,
    routing: &[crate::message::RoutingRow],
) {
    // The epoch is not used: an executor copies for its own next one.
    let table = crate::message::table_of(0, routing).map_err(|e| e.to_string());
    let table = table.and_then(|t| {
        let ops = run.spec.operators.len();
        run.slots
            .check(&t, ops)
            .map(|()| t)
            .map_err(|e| e.to_string())
    });
    let table = match table {
        Ok(t) => std::sync::Arc::new(t),
        Err(e) => return node.fault(format!("bad copy-ahead routing from the driver: {e}")),
    };
    for e in 0..run.executors {
        post(
            node,
            run,
            e,
            PlanMail::CopyAhead(std::sync::Arc::clone(&table)),
        );
    }
}

/// Checks decoded plans against the job (a plan from a confused or hostile driver must be an
/// error here, not an index out of bounds in an executor).
pub(super) fn check_plans(
    parts: Vec<(Slot, Assignment)>,
    run: &Running,
) -> Result<Vec<(Slot, Assignment)>, String> {
    let ops = run.spec.operators.len();
    for (slot, a) in &parts {
        run.slots
            .check(&a.routing, ops)
            .map_err(|e| e.to_string())?;
        if a.upstream_old.len() != ops {
            return Err(format!(
                "slot {slot}: upstream sets for {} operators",
                a.upstream_old.len()
            ));
        }
        let n = run.slots.len();
        let slot_ok = |s: &Slot| s.index() < n;
        let sets_ok = a.plan.markers_to.iter().all(slot_ok)
            && a.plan.hear_from.iter().all(slot_ok)
            && a.fence_to.iter().all(slot_ok)
            && a.fence_from.iter().all(slot_ok)
            && a.upstream_old.iter().flatten().all(slot_ok);
        let sends_ok = a
            .plan
            .sends
            .iter()
            .all(|t| t.operator < ops && t.to.index() < n);
        if !sets_ok || !sends_ok {
            return Err(format!(
                "slot {slot}: a plan naming an unknown slot or operator"
            ));
        }
    }
    Ok(parts)
}
