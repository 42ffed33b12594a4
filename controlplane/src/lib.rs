//! The planner: capacity model (RLS), placement, parallelism, scaling policies (CLASP and the
//! baselines), migration planning and the cluster simulator. The algorithms are pure functions
//! over plain data, so the live planner, the simulator and the tests all drive the same code.
//!
//! Map (DESIGN.md §6–8):
//! - [`model`]: the placement problem, the load model `L_w(Φ)` (eq. 5), the problem file;
//! - [`placement`]: CLASP's reverse-topological packing and the bisection on s;
//! - [`exact`]: the exhaustive reference for small instances (the heuristic's gap);
//! - [`baselines`]: the `Policy` interface; FaaSFlow, Zhang24 and their -SP ablations;
//! - [`metrics`]: Table 2, saturation detection, load derivation and projection;
//! - [`estimator`]: RLS of α, β, γ and W̄ smoothing;
//! - [`scaling`]: parallelism, triggers, the one-line decision explanation;
//! - [`autoscale`]: the whole autoscaling loop as one pure state machine (metrics in,
//!   decisions out), which the simulator and the live planner both drive;
//! - [`pattern`]: input-rate patterns (the paper's Burst and Gradual, constant, steps, a file);
//! - [`migration`]: shares → key groups with the fewest moves, and the epoch-tagged plan;
//! - [`protocol`]: the coordinated migration itself (DESIGN.md §7, plus the gate rule its
//!   simulation showed was missing), as sans-I/O state machines for workers and the planner;
//! - [`app`]: the plain-data application model the simulator runs;
//! - [`sim`]: the discrete-event cluster simulator and the paper's experiments.

pub mod app;
pub mod autoscale;
pub mod baselines;
pub mod estimator;
pub mod exact;
pub mod metrics;
pub mod migration;
pub mod model;
pub mod pattern;
pub mod placement;
pub mod protocol;
pub mod scaling;
pub mod sim;
