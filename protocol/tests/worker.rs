//! The worker state machine driven by hand through the protocol's key case: key group (0, 0) of
//! a source operator moves from worker 0 to worker 1 while the ingress keeps sending.

use std::sync::Arc;

use clasp_protocol::assignment::{Assignment, assignments};
use clasp_protocol::ids::{Epoch, KeyGroup, Slot};
use clasp_protocol::message::{Msg, Peer, Req};
use clasp_protocol::plan::plan;
use clasp_protocol::routing::RoutingTable;
use clasp_protocol::worker::{Action, Worker};

type A = Action<u32, &'static str>;
type W = Worker<u32, &'static str>;

fn req(epoch: u64, body: u32) -> Req<u32> {
    Req {
        operator: 0,
        key_group: KeyGroup(0),
        epoch: Epoch(epoch),
        from_moved: false,
        body,
    }
}

/// A table at `epoch` from rows of slot numbers.
fn table(epoch: u64, rows: &[&[u32]]) -> RoutingTable {
    let rows = rows
        .iter()
        .map(|r| r.iter().map(|&s| Slot(s)).collect())
        .collect();
    RoutingTable::from_rows(Epoch(epoch), rows).expect("rows of one length")
}

fn processed(acts: &[A]) -> Vec<u32> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Process(r) => Some(r.body),
            _ => None,
        })
        .collect()
}

#[test]
fn old_owner_forwards_ahead_of_seal_and_new_owner_holds_until_state_and_seal() {
    let old = table(0, &[&[0]]);
    let new = Arc::new(table(1, &[&[1]]));
    let preds = vec![vec![]];
    let p = plan(&old, &new, &preds);
    assert!(p.workers[0].hear_from_ingress);
    let parts = assignments(&p, &old, &new, &preds, 2);
    let mut a: Worker<u32, &str> = Worker::new(Slot(0), Arc::new(old.clone()), Epoch(0));
    let mut b: Worker<u32, &str> = Worker::new(Slot(1), Arc::new(old), Epoch(0));

    new_owner_holds_a_new_epoch_root(&mut b, parts[1].clone());
    old_owner_drains_then_exports(&mut a, parts[0].clone());
    old_owner_forwards_then_seals(&mut a);
    new_owner_installs_and_runs_in_order(&mut b);
    assert!(!a.in_migration() && !b.in_migration());
}

/// The new owner (B) hears of the new epoch first: it drains, executes again at once, and
/// holds a new-epoch root for the moving group until its state and seal are in.
fn new_owner_holds_a_new_epoch_root(b: &mut W, part: Assignment) {
    // B hears of the new epoch first: a new-epoch root for the group is held.
    assert_eq!(b.on_plan(10, part), vec![A::Drain]);
    assert!(b.paused(), "nothing starts before the drain");
    // B hears from A (its state sender): it resumes at the drain, not at A's marker.
    assert_eq!(
        b.on_drained(12),
        vec![A::Resume {
            epoch: Epoch(1),
            pause_ns: 2
        }]
    );
    assert!(!b.paused());
    assert!(processed(&b.on_message(13, Peer::Ingress, Msg::Request(req(1, 30)))).is_empty());
}

/// The old owner (A) takes the plan, runs an old root still queued locally, and on draining
/// sends its marker to B, then the export, with no seal yet.
fn old_owner_drains_then_exports(a: &mut W, part: Assignment) {
    // A: plan, an old root still queued locally, drain → marker to B, then the export (markers
    // first: B resumes on them), no seal yet.
    assert_eq!(a.on_plan(20, part), vec![A::Drain]);
    assert_eq!(
        processed(&a.on_message(21, Peer::Ingress, Msg::Request(req(0, 10)))),
        vec![10]
    );
    let acts = a.on_drained(25);
    assert_eq!(
        acts,
        vec![
            A::SendMarker {
                to: Slot(1),
                epoch: Epoch(1)
            },
            A::ExportState {
                to: Slot(1),
                epoch: Epoch(1),
                operator: 0,
                key_groups: vec![KeyGroup(0)]
            },
            A::Resume {
                epoch: Epoch(1),
                pause_ns: 5
            },
        ]
    );
    assert!(
        !a.paused(),
        "A runs what it keeps while it waits for the ingress marker"
    );
}

/// After the export, A forwards an old root to B; the ingress marker lets A seal and finish.
fn old_owner_forwards_then_seals(a: &mut W) {
    // An old root arriving after the export is forwarded; the ingress marker lets A seal.
    assert_eq!(
        a.on_message(26, Peer::Ingress, Msg::Request(req(0, 20))),
        vec![A::ForwardRequest {
            to: Slot(1),
            req: req(0, 20)
        }]
    );
    let acts = a.on_message(30, Peer::Ingress, Msg::Marker { epoch: Epoch(1) });
    assert_eq!(
        acts[0],
        A::SendSeal {
            to: Slot(1),
            epoch: Epoch(1),
            operator: 0,
            key_groups: vec![KeyGroup(0)]
        }
    );
    let Some(A::Completed(r)) = acts.get(1) else {
        panic!("A completes once sealed: {acts:?}");
    };
    assert_eq!((r.pause_ns, r.marker_wait_ns), (5, 10));
}

/// B, on A's FIFO connection, gets the state (with the queued root), the forward, the marker
/// and the seal: it resumes on the marker and runs exported, forwarded, then held requests.
fn new_owner_installs_and_runs_in_order(b: &mut W) {
    // B, on A's FIFO connection: state (with the queued root), the forward, the marker, the seal.
    let state = Msg::State {
        epoch: Epoch(1),
        operator: 0,
        key_groups: vec![KeyGroup(0)],
        state: "counts",
        queued: vec![req(0, 10)],
    };
    let acts = b.on_message(31, Peer::Worker(Slot(0)), state);
    assert!(matches!(
        acts[0],
        A::InstallState {
            state: "counts",
            ..
        }
    ));
    assert!(
        processed(&acts).is_empty(),
        "no request runs before the seal"
    );
    assert!(
        processed(&b.on_message(32, Peer::Worker(Slot(0)), Msg::Request(req(0, 20)))).is_empty()
    );
    let acts = b.on_message(33, Peer::Worker(Slot(0)), Msg::Marker { epoch: Epoch(1) });
    assert!(
        acts.is_empty(),
        "the marker alone releases nothing: {acts:?}"
    );
    let acts = b.on_message(
        34,
        Peer::Worker(Slot(0)),
        Msg::Seal {
            epoch: Epoch(1),
            operator: 0,
            key_groups: vec![KeyGroup(0)],
        },
    );
    assert_eq!(
        processed(&acts),
        vec![10, 20, 30],
        "exported, forwarded, then held, in order"
    );
    let Some(A::Completed(r)) = acts.last() else {
        panic!("B completes once the group is installed: {acts:?}");
    };
    assert_eq!((r.received_queued, r.held), (1, 1));
    assert_eq!((r.pause_ns, r.marker_wait_ns), (2, 23));
}

#[test]
fn markers_go_to_every_peer_in_the_plan_even_with_nothing_else() {
    // Operator 1 (fed by operator 0 on worker 0) moves from worker 1 to worker 2: worker 0
    // gives up nothing, yet owes worker 1 a marker (it is an upstream sender of operator 1).
    let old = table(0, &[&[0], &[1]]);
    let new = Arc::new(table(1, &[&[0], &[2]]));
    let preds = vec![vec![], vec![0]];
    let p = plan(&old, &new, &preds);
    let parts = assignments(&p, &old, &new, &preds, 3);
    let mut w0: Worker<u32, ()> = Worker::new(Slot(0), Arc::new(old), Epoch(0));
    assert_eq!(w0.on_plan(0, parts[0].clone()), vec![Action::Drain]);
    let acts = w0.on_drained(1);
    assert!(
        acts.contains(&Action::SendMarker {
            to: Slot(1),
            epoch: Epoch(1)
        }),
        "{acts:?}"
    );
    assert!(acts.iter().any(|a| matches!(a, Action::Completed(_))));
}

#[test]
fn a_kept_key_group_runs_between_the_drain_and_the_markers() {
    // Key group 1 moves from worker 0 to worker 1; worker 0 keeps key group 0. Between its
    // drain and the ingress marker it may execute: an old-epoch root of the kept group is
    // released at once, one of the group it gave up is forwarded, and the seal waits.
    let old = table(0, &[&[0, 0]]);
    let new = Arc::new(table(1, &[&[0, 1]]));
    let preds = vec![vec![]];
    let p = plan(&old, &new, &preds);
    let parts = assignments(&p, &old, &new, &preds, 2);
    let mut a: W = Worker::new(Slot(0), Arc::new(old), Epoch(0));
    assert_eq!(a.on_plan(0, parts[0].clone()), vec![A::Drain]);
    let acts = a.on_drained(1);
    assert!(acts.contains(&A::Resume {
        epoch: Epoch(1),
        pause_ns: 1
    }));
    assert!(!a.paused() && a.in_migration());
    let kept = a.on_message(2, Peer::Ingress, Msg::Request(req(0, 7)));
    assert_eq!(processed(&kept), vec![7]);
    let moved = Req {
        key_group: KeyGroup(1),
        ..req(0, 8)
    };
    let acts = a.on_message(3, Peer::Ingress, Msg::Request(moved.clone()));
    assert_eq!(
        acts,
        vec![A::ForwardRequest {
            to: Slot(1),
            req: moved
        }]
    );
    let acts = a.on_message(9, Peer::Ingress, Msg::Marker { epoch: Epoch(1) });
    assert!(
        matches!(acts.first(), Some(A::SendSeal { .. })),
        "seals on the marker: {acts:?}"
    );
    let Some(A::Completed(r)) = acts.last() else {
        panic!("completes once sealed: {acts:?}");
    };
    assert_eq!((r.pause_ns, r.marker_wait_ns, r.forwarded), (1, 9, 1));
}

#[test]
fn only_what_a_moved_upstream_key_group_emits_waits_at_the_gate() {
    // Operator 0's key group 1 moves from slot 1 to slot 2; operator 1 stays on slot 0. What
    // slot 2 emits from key group 1 may overtake slot 1's old-epoch requests for the same key,
    // so slot 0 holds it until slot 1's marker; what slot 1 emits from the key group it kept
    // comes on the connection its old-epoch requests took, and runs at once.
    let old = table(0, &[&[1, 1], &[0, 0]]);
    let new = Arc::new(table(1, &[&[1, 2], &[0, 0]]));
    let preds = vec![vec![], vec![0]];
    let p = plan(&old, &new, &preds);
    let parts = assignments(&p, &old, &new, &preds, 3);

    let mut up: W = Worker::new(Slot(2), Arc::new(old.clone()), Epoch(0));
    assert!(!up.emits_from_moved((0, KeyGroup(1))));
    assert_eq!(up.on_plan(0, parts[2].clone()), vec![A::Drain]);
    assert!(
        !up.emits_from_moved((0, KeyGroup(1))),
        "before the drain, emissions are routed by the old table"
    );
    up.on_drained(1);
    assert!(up.emits_from_moved((0, KeyGroup(1))));
    assert!(!up.emits_from_moved((0, KeyGroup(0))));
    assert!(!up.emits_from_moved((1, KeyGroup(0))));
    let sent = up.on_emit((0, KeyGroup(1)), 1, KeyGroup(0), 5);
    let [A::SendRequest { to, req: moved }] = &sent[..] else {
        panic!("sent to operator 1's owner: {sent:?}");
    };
    assert_eq!(
        (*to, moved.epoch, moved.from_moved),
        (Slot(0), Epoch(1), true)
    );

    let mut down: W = Worker::new(Slot(0), Arc::new(old), Epoch(0));
    assert_eq!(down.on_plan(0, parts[0].clone()), vec![A::Drain]);
    down.on_drained(1);
    let kept = Req {
        operator: 1,
        ..req(1, 4)
    };
    let acts = down.on_message(2, Peer::Worker(Slot(1)), Msg::Request(kept));
    assert_eq!(
        processed(&acts),
        vec![4],
        "from a kept key group: runs at once"
    );
    let acts = down.on_message(3, Peer::Worker(Slot(2)), Msg::Request(moved.clone()));
    assert_eq!(
        processed(&acts),
        Vec::<u32>::new(),
        "from the moved one: gated"
    );
    let acts = down.on_message(4, Peer::Worker(Slot(1)), Msg::Marker { epoch: Epoch(1) });
    assert_eq!(
        processed(&acts),
        vec![5],
        "released by the old owner's marker"
    );
}
