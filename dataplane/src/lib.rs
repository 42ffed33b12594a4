//! The data plane: the worker runtime (executors over shared-memory rings and the coordinator
//! that runs them), key-group routing, the request frame, live migration of state between
//! executors, the io_uring transport between workers, and the static cluster (driver and
//! workers). It moves bytes and runs operators; it decides nothing (that is the control plane).

pub mod affinity;
pub mod cgroup_layout;
pub mod checkpoint;
pub mod clock;
pub mod cluster;
pub mod cpu_usage;
pub mod message;
pub mod migrate;
pub mod paths;
pub mod request;
pub mod routing;
pub mod runtime;
pub mod sink;
pub mod source;
pub mod transport;
