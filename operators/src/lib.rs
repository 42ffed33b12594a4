//! The operator model, the seven benchmark applications, their seeded generators and the
//! single-threaded reference executor (the oracle). No threads, no sockets: the data plane and
//! the control plane both build on this crate and it depends on neither.
