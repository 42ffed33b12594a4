//! Lock-free single-producer single-consumer rings of variable-length frames in shared memory.
