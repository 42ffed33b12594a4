//! The worker: executors, key-group routing, the state server, the transport and the metrics
//! monitor. It moves bytes and runs operators; it decides nothing (that is the control plane).

pub mod affinity;
pub mod cluster;
pub mod message;
pub mod migrate;
pub mod request;
pub mod routing;
pub mod transport;
pub mod worker;
