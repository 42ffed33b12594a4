//! Cluster setup, shared by `clasp worker`, `clasp run` and `clasp planner`: the cluster file
//! and secret ([`mod@file`]), the transport options every process of a cluster must agree on
//! ([`net`]), and the worker processes `clasp run --workers N` starts on this machine
//! ([`spawn`]). Nothing here knows a command's arguments, so the commands depend on this
//! module and never the other way round (docs/cluster.md).

pub mod file;
mod launch;
pub mod net;
pub mod spawn;

pub use file::{ClusterFile, read_secret};
pub use net::NetArgs;
pub use spawn::{Spawned, WorkerLimits, spawn_workers};
