//! A user's own operators on a clasp cluster: the `k` hottest readings of each sensor in each
//! tumbling window of event time, over the Intel-lab sensor readings of the `sd` generator.
//!
//! Two kinds, registered by [`registry`] beside the built-in ones:
//!
//! * `topk_parse` ([`parse::Parse`]): a line of text → `(event time, epoch, temperature)`;
//!   stateless, routed by the sensor id, so each sensor's readings keep one FIFO path;
//! * `topk_window` ([`window::TopK`]): per sensor, the open window's `k` hottest readings.
//!
//! A window closes when the watermark passes its end: opening it sets an event-time timer at
//! its last second, which outputs the final top-k. A sensor's readings arrive in event-time
//! order on their one path, so its first reading of a later window closes the open one
//! earlier (and deletes the timer); at end of stream the watermark is +∞ and the timers of the
//! windows still open fire. The timers live beside each sensor's state, so they move with it
//! when a migration moves its key group. While a window is open, every reading that enters its
//! top-k outputs the running top-k. A reading for a window that has already closed is late:
//! counted in the state and dropped.
//!
//! The app file is `topk.toml` beside this crate's manifest; `topk oracle --app-file
//! topk.toml` is its single-threaded reference run, which every cluster run must equal
//! (`tests/topk.rs`).

pub mod parse;
pub mod window;

use clasp_operators::{Determinism, KindInfo, Registry};

/// The built-in kinds plus `topk_parse` and `topk_window`.
pub fn registry() -> Registry {
    let mut r = Registry::builtin();
    r.register(
        "topk_parse",
        KindInfo::stateless(
            "an Intel-lab line → (event time, epoch, temperature)",
            "sensor id",
        ),
        |_| Ok(parse::Parse),
    );
    r.register(
        "topk_window",
        KindInfo::keyed(
            "the k hottest readings of a sensor per tumbling event-time window",
            "sensor id",
            Determinism::PathOrdered,
        ),
        |p| {
            Ok(window::TopK {
                k: p.u64_in("k", 3, 1..=window::K_MAX)? as usize,
                window_s: p.u64_in("window_s", 600, 1..=window::WINDOW_S_MAX)?,
            })
        },
    );
    r
}
