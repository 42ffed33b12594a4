//! The planner: capacity model (RLS), placement, parallelism, scaling policies (CLASP and the
//! baselines) and the cluster simulator. The algorithms are pure functions over plain data, so
//! the live planner, the simulator and the tests all drive the same code. Key-group routing,
//! migration plans and the migration protocol itself live in `clasp-protocol`, which the data
//! plane shares without linking the planner.
//!
//! Map:
//! - [`model`]: the placement problem, the load model `L_w(Φ)` (eq. 5), the problem file;
//! - [`placement`]: CLASP's reverse-topological packing and the bisection on s;
//! - [`exact`]: the exhaustive reference for small instances (the heuristic's gap);
//! - [`headroom`]: per-worker headroom from a p95 latency target and the measured queueing;
//! - [`baselines`]: the `Policy` interface; FaaSFlow, Zhang24 and their -SP ablations;
//! - [`metrics`]: Table 2, saturation detection, load derivation and projection;
//! - [`estimator`]: RLS of α, β, γ and W̄ smoothing;
//! - [`scaling`]: parallelism, triggers, the one-line decision explanation;
//! - [`autoscale`]: the whole autoscaling loop as one pure state machine (metrics in,
//!   decisions out), which the simulator and the live planner both drive;
//! - [`pattern`]: input-rate patterns (the paper's Burst and Gradual, constant, steps, a file);
//! - [`app`]: the plain-data application model the simulator runs;
//! - [`sim`]: the discrete-event cluster simulator and the paper's experiments.

#![forbid(unsafe_code)]

pub mod app;
pub mod autoscale;
pub mod baselines;
pub mod estimator;
pub mod exact;
pub mod headroom;
pub mod metrics;
pub mod model;
pub mod pattern;
pub mod placement;
pub mod scaling;
pub mod sim;
