//! Measurement harnesses behind `clasp bench ...`, shared with the criterion benches in
//! `benches/benches/`. Each harness checks that what it measures works before timing it.

pub mod affinity;
pub mod dispatch;
pub mod dispatch_idle;
pub mod dispatch_local;
pub mod hop;
pub mod machine;
pub mod place;
pub mod ring;
pub mod segments;
pub mod wake;
pub mod wc;
#[cfg(feature = "baselines")]
pub mod wc_timely;
