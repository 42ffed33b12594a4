//! The planner: capacity model (RLS), placement, parallelism, scaling policies (CLASP and the
//! baselines), migration planning and the cluster simulator. The algorithms are pure functions
//! over plain data, so the live planner, the simulator and the tests all drive the same code.
