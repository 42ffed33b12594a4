//! A user's own operators on a clasp cluster: the `k` hottest readings of each sensor in each
//! tumbling window of event time, over the Intel-lab sensor readings of the `sd` generator.
//!
//! Two kinds, registered by [`registry`] beside the built-in ones:
//!
//! * `topk_parse` ([`parse::Parse`]): a line of text → `(event time, epoch, temperature)`;
//!   stateless, routed by the sensor id, so each sensor's readings keep one FIFO path;
//! * `topk_window` ([`window::TopK`]): per sensor, the open window's `k` hottest readings.
//!
//! There are no timers yet, so nothing can close a window when its time has passed on the
//! wall clock or when a watermark passes it. The design does not need one: a sensor's
//! readings arrive in event-time order on their one path, so a window closes when the
//! sensor's first reading of a later window arrives (its final top-k is output then), and at
//! end of stream. While a window is open, every reading that enters its top-k outputs the
//! running top-k. A reading for a window that has already closed is late: counted in the
//! state and dropped. The price: the last window of a sensor that stops sending stays open
//! until the end of the stream.
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
