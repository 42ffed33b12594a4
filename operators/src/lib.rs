//! The operator model, the seven benchmark applications, their seeded generators and the
//! single-threaded reference executor (the oracle). No threads, no sockets: the data plane and
//! the control plane both build on this crate and it depends on neither.
//!
//! # Why it looks like this
//!
//! Every claim of the project — throughput, latency, worker counts, lossless migration — is
//! made on these apps, and every distributed run is checked against the oracle's run of the
//! same input. That drives the design:
//!
//! * **Keys are bytes with a specified hash** ([`key`]): the ingress, every executor and the
//!   planner must agree on the key group of a key on every machine, forever.
//! * **State lives outside the operator, per key group** ([`OperatorInstance`]): a key group
//!   is the unit of migration, so its state must be exportable ([`OperatorInstance::export_group`],
//!   an rkyv archive) and importable elsewhere without the operator's help.
//! * **Emission into a caller-owned buffer** ([`Emitter`]): the hot path does not allocate per
//!   request; the data plane routes each emission by `(successor, key_group(key))`.
//! * **Digests that add** ([`Digest`]): a sum of 128-bit item hashes plus a count is
//!   independent of order and of how keys were spread over executors, so a distributed run sums
//!   its executors' digests and compares them with the oracle's ([`Comparable`]).
//! * **Determinism classes** ([`Determinism`]): what "equal to the oracle" means depends on
//!   whether an operator's result depends on arrival order; each kind declares it.
//! * **Generators with random access** ([`generate`]): record `i` is a pure function of
//!   `(seed, i)`, so producers can split a stream by key group and a run can be replayed.
//!
//! # Writing an operator
//!
//! Implement [`Operator`] (see its docs for a complete example that registers a kind in a
//! [`Registry`] and uses it from an app file). A state type needs no codec of its own:
//! `#[derive(StateCodec)]` ([`codec`]) gives it the canonical encoding that migrations move
//! and digests hash. To run your kinds on a cluster, your binary calls the `clasp` package's
//! `clasp::cli::main_with(registry)` (the repository's `docs/guide.md` and `examples/topk/`).
//!
//! Outputs are bytes in the app's own encoding; a run with a sink writes each as a JSON line
//! ([`output_line`]) with the kind's text form ([`Operator::output_text`], base64 without one)
//! and its `seq`, a per-key counter kept next to the state so that it moves with its key group
//! ([`output_seq`]).
//!
//! # Timers
//!
//! An operator can ask to be called back for the key it is processing ([`timers`]):
//! `out.set_timer_event(t)` calls [`Operator::on_timer`] once the watermark reaches event time
//! `t`, `out.set_timer_processing(ms)` once the executor's wall clock reaches `ms` (ms since
//! the Unix epoch). `on_timer` gets the key's state and may emit, set and delete timers like
//! `process`. A key's timers are kept beside its state in its key group, so they move with the
//! group in a migration (the group archive carries them); they fire in time order per key, and
//! one set twice for the same time fires once.
//!
//! * Event time is a number in the app's own unit that the operator reads from its payload.
//!   At end of stream the watermark is +∞: every pending event-time timer fires before
//!   [`Operator::end_of_key`], in the oracle and on a cluster alike, so they are checked
//!   against the oracle. A watermark that advances while the stream flows is not implemented
//!   yet: today event-time timers fire at end of stream (or when a caller of
//!   [`OperatorInstance::advance_watermark`] advances it).
//! * Processing-time timers fire from the executor's loop on its clock, outside migrations.
//!   The oracle has no clock and never fires them, and pending ones are dropped at end of
//!   stream: a run whose outputs depend on them cannot equal the oracle.
//! * An event-time timer at or before the watermark is refused and counted as malformed under
//!   [`timers::LATE_TIMER`]; a processing-time timer in the past fires at the executor's next
//!   look at its clock; a timer request outside a keyed call ([`Operator::end_of_stream`])
//!   does nothing.
//!
//! # App files (TOML)
//!
//! An app file composes registered operator kinds (`clasp apps show NAME` lists an app's;
//! [`Registry::builtin`] has them all) into a DAG:
//!
//! ```toml
//! name = "wc-window"            # app name
//! description = "word count that outputs every 100th occurrence"   # optional
//! generator = "wc"              # input generator: wc, sd, aa, pl, nwm, etl or syn
//!
//! [[operator]]                  # one table per operator; the first without predecessors is the source
//! name = "split"                # unique name
//! kind = "wc_split"             # a registered kind
//! successors = ["count"]        # operators it emits to, in port order (default: none)
//!
//! [[operator]]
//! name = "count"
//! kind = "wc_count"
//! params = { window = 100 }     # kind parameters (unknown parameters are an error)
//!
//! [run]                         # optional: `clasp run` settings for this app, keyed by flag
//! peak-rate = 50000.0           # name; a run file (`--config`) or a flag overrides each
//! ```
//!
//! Validation ([`AppSpec::from_toml_str`]) refuses, naming what is wrong: TOML errors and
//! unknown fields, duplicate operator names, an unknown kind, bad parameters, an unknown or
//! repeated successor, no source, a cycle, operators the source cannot reach, an unknown
//! generator. The generator must produce what the source kind parses (the built-in apps' first
//! operators); a mismatch is not an error but shows up as malformed requests.
//!
//! A 20-stage SYN is twenty `forward` operators chained by `successors`; `clasp apps show syn
//! --toml` prints the 10-stage one to start from.
//!
//! # Kind parameters
//!
//! | kind | parameter | default | meaning |
//! |---|---|---|---|
//! | `wc_count` | `window` | 1 | output a word's count every `window` occurrences |
//! | `sd_moving_avg` | `window` | 100 | readings per sensor in the moving average |
//! | `sd_spike_detect` | `threshold` | 0.03 | relative deviation that is a spike |
//! | `aa_campaign_count` | `window_ms`, `lateness_windows` | 1000, 2 | event-time window, allowed lateness |
//! | `pl_aggregate` | `every` | 1000 | output the running average every `every` records |
//! | `nwm_aggr_filter` | `failures_min` | 3 | failures of a host in a day that flag it |
//! | `etl_range_filter` | `min`, `max` | 20, 80 | valid range |
//! | `etl_interpolate` | `window` | 5 | past values averaged to replace a 0 |
//! | `etl_store` | `batch` | 3 | records per batched write |
//!
//! `text_split` (the first operator of `wc-text`) takes raw UTF-8 lines: it lowercases them and
//! splits them on anything that is not a letter, one request per word keyed by the word.

#![forbid(unsafe_code)]

// `#[derive(StateCodec)]` names the trait by its public path, `::clasp_operators::...`; this
// makes that path resolve inside the crate too (its own tests and docs use the derive).
extern crate self as clasp_operators;

pub mod apps;
pub mod codec;
pub mod compare;
pub mod digest;
pub mod emitter;
pub mod generate;
pub mod key;
pub mod operator;
pub mod oracle;
pub mod output_line;
pub mod output_seq;
pub mod spec;
pub mod timers;

pub use codec::StateCodec;
pub use compare::{Comparable, Mismatch};
pub use digest::Digest;
pub use emitter::{Emission, Emitter, Out, Port, Target};
pub use key::{KEY_GROUPS, key_group, key_hash};
pub use operator::{
    Malformed, Operator, OperatorInstance, OperatorSummary, RequestRun, RequestSpan, State,
    StateLines,
};
pub use output_line::OutputText;
pub use spec::{
    AppDef, AppSpec, Determinism, KindInfo, OperatorDef, OperatorSpec, Params, Registry, SpecError,
};
pub use timers::{TimeDomain, Timer, TimerRequests};
