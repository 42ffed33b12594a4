//! The worker runtime: the executor threads of one worker, the shared-memory segment they
//! share, and the one [`coordinator`] that starts them, talks to them and stops them.
//!
//! A worker is the same whether it runs on its own or in a cluster: E executors, each owning
//! the state of its key groups and handing chained requests to the others through the rings
//! of the segment ([`layout`]); a coordinator that reads their reports ([`messages`]). What
//! differs is the coordinator's front — where input comes from and where reports go:
//! - [`local`]: a worker on its own (`clasp local`), a cluster of one. A separate [`ingress`]
//!   process attaches to the segment by name and writes input into it; latency is measured
//!   here ([`ledger`]) and the end of stream sequenced here.
//! - `crate::cluster::node`: a worker of a cluster, whose network thread is the front. Input
//!   and chained requests from other workers arrive over the transport; ledger deltas and
//!   flush acknowledgements go to the driver, which sequences the end of stream.

pub mod coordinator;
pub(crate) mod deltas;
mod error;
pub mod executor;
pub mod idle;
pub mod ingress;
pub mod layout;
pub mod ledger;
pub mod local;
pub mod messages;
pub(crate) mod results;

pub use error::RuntimeError;
pub use idle::IdlePolicy;
pub use local::{IntervalSample, LocalConfig, LocalReport, OperatorMetrics, run_local_worker};
