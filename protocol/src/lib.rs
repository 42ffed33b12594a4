//! The coordinated live-migration protocol of clasp, and the vocabulary the control plane, the
//! data plane and the simulators share to speak about it: epochs, executor slots, key groups,
//! the routing table, the migration plan.
//!
//! Why its own crate: the planner (control plane) computes routing tables and plans, the data
//! plane carries the protocol out in its executors and driver, and the simulations check it.
//! Each needs the same types and the same state machines, and none should link the others: the
//! data plane has no use for the planner's estimator or plots, the planner none for io_uring.
//! This crate depends on nothing of either and does no I/O.
//!
//! Map:
//! - [`ids`]: [`Epoch`], [`Slot`], [`KeyGroup`];
//! - [`routing`]: the [`RoutingTable`], (operator, key group) → owning slot, with its epoch;
//! - [`split`]: a placement's shares → whole key groups, moving the fewest;
//! - [`plan`]: two tables diffed into each participant's sends and markers;
//! - [`message`]: what travels on a FIFO connection (requests, markers, state, seals);
//! - [`assignment`]: one participant's part of a migration as the planner broadcasts it;
//! - [`worker`], [`planner`]: the two state machines;
//! - [`sim`] (with [`rng`]): a seeded, deterministic simulation that checks them.
//!
//! # The protocol
//!
//! Why sans-I/O: the protocol's correctness hinges on message orders that a real cluster only
//! produces now and then (a marker overtaking a straggler, a seal racing a held request). Written
//! as plain state machines — inputs are messages, local events and an injected `now_ns`; outputs
//! are [`worker::Action`]s and [`planner::PlannerAction`]s the caller carries out in order — the
//! same code runs inside the live data plane and inside [`sim`], a seeded deterministic
//! simulation that reorders messages across connections, delays them and kills workers.
//!
//! Participants:
//! - [`worker::Worker`], one per participant (a worker process for the planner's model, an
//!   executor slot in the data plane), across any number of epochs;
//! - [`planner::Planner`], which runs the ingress (roots are routed by its table and tagged with
//!   its epoch; it switches epochs the moment it broadcasts a plan and sends its markers then),
//!   broadcasts plans, and waits for completions with a timeout that names a silent worker.
//!
//! The rule, per moved key group G = (operator o, key group g), old owner A, new owner B:
//! 1. on the plan, every worker stops starting executions and drains the running ones (their
//!    chained requests are still routed by the old table); then it switches its routing to the
//!    new table, sends an end-of-epoch marker to every peer in its plan — also when it had
//!    nothing else for it — and exports the state and queued requests of every group it gives
//!    up (markers first: receivers resume on markers, and packing state can take a while);
//! 2. A forwards every old-epoch request for G that reaches it after the export to B, and sends
//!    G's *seal* only once it has the marker of every peer that can send to o under the old
//!    table (hosts of o's predecessors and the ingress); markers and forwards share the FIFO
//!    connection A → B, so everything old for G is at B before the seal;
//! 3. B holds every request for G until G's state and seal are both in, then releases, in this
//!    order, the queued requests exported with the state, the forwarded ones, and the held
//!    new-epoch ones (each in arrival order);
//! 4. a worker resumes as soon as it has drained — no global barrier, and no wait for markers:
//!    what steps 2 and 3 and the gate below do not hold back is safe to run — and reports
//!    completion once it has also sealed what it gave up, installed what it receives, and
//!    collected its *fence* markers (below).
//!
//! **Upstream gate and fence (the simulation's first finding).** The rule above protects the
//! key group that moves, not the ones *downstream* of it. When upstream key group U moves from
//! C to D while downstream key group H stays on X, the requests of one key reach H over two
//! connections: C's old-epoch ones (emitted before C drained) and D's new-epoch ones (emitted
//! after D installed U). Nothing orders them: with the plan's markers alone 44 of 1000 pipeline
//! seeds and 110 of 1000 diamond seeds reordered a key (`without_the_gate_*` in `tests/sim.rs`
//! replay it). So:
//! - every worker also sends a marker on every connection it could have used under the old
//!   table (`fence_to`: to each old host of an operator it hosted a predecessor of);
//! - a worker holds new-epoch requests for an operator's key groups it *keeps* until the
//!   markers of every old host of that operator's predecessors are in (`upstream_old`); old-
//!   epoch requests still run at once — per key they all come first. Only requests emitted by
//!   an upstream key group that moved in this epoch ([`message::Req::from_moved`]) wait: one
//!   from a group that stayed follows its old-epoch requests on the same connection;
//! - a worker reports completion only once all those markers are in (`fence_from`).
//!
//! The last point also makes a completed migration a flush: no request routed by an older
//! table is still in flight, which is what lets the plan's hear-from lists look only at the old
//! and the new table (a worker that hosted a predecessor two tables ago is in neither). The
//! gate costs no pause: a worker resumes at its drain, and only the gated requests wait; fence markers are sent at the drain, unconditionally, so waiting on them cannot
//! deadlock.
//!
//! The data plane runs one machine per *executor* (its "worker" here is an executor slot), so a
//! key group moving between two executors of one worker follows the same rule as between
//! workers.

#![forbid(unsafe_code)]

pub mod assignment;
pub mod ids;
pub mod message;
pub mod plan;
pub mod planner;
pub mod recovery_sim;
pub mod rng;
pub mod routing;
pub mod sim;
pub mod split;
pub mod worker;

pub use ids::{Epoch, KeyGroup, Slot};
pub use routing::RoutingTable;
