//! A user's own operators on a clasp cluster: the `k` hottest readings of each sensor in each
//! tumbling window of event time, over the Intel-lab sensor readings of the `sd` generator.
//!
//! Two kinds, registered by [`registry`] beside the built-in ones:
//!
//! * `topk_parse` ([`parse::Parse`]): a line of text → `(event time, epoch, temperature)`;
//!   stateless, routed by the sensor id, so each sensor's readings keep one FIFO path. It is
//!   the app's first operator, so it also keys the lines a source reads (`record_key`) by
//!   their sensor, as the `sd` generator keys its records: a file of the generator's lines
//!   gives the generated run's digests;
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

#[cfg(test)]
mod tests {
    use clasp_operators::AppSpec;
    use clasp_operators::key::encode_u32;
    use clasp_operators::oracle::{self, OracleOptions};

    use super::registry;

    /// The example's app file.
    fn app() -> AppSpec {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/topk.toml");
        AppSpec::from_toml_file_with(&registry(), path).unwrap()
    }

    /// The generator's own lines, keyed as a source's records are (by the app's first
    /// operator), give the generated run: one window per sensor, the same digests.
    #[test]
    fn the_generators_lines_from_a_source_give_the_generated_run() {
        let spec = app();
        let generator = clasp_operators::generate::generator(&spec.generator, 2).unwrap();
        let first = spec.instantiate(spec.source);
        let inputs: Vec<(Vec<u8>, Vec<u8>)> = (0..6000)
            .map(|i| {
                let (_, line) = generator.record(i);
                let mut key = Vec::new();
                first.record_key(i, &line, &mut key);
                (key, line)
            })
            .collect();
        let options = OracleOptions::default();
        let read = oracle::run_inputs(
            &spec,
            inputs.iter().map(|(k, l)| (&k[..], &l[..])),
            &options,
        );
        let generated = oracle::run_with(&spec, 6000, 2, &options);
        assert_eq!(read.state_keys["top"], 54);
        assert_eq!(read.state_digest(), generated.state_digest());
        assert_eq!(read.output_digest(), generated.output_digest());
    }

    /// A line that reaches `parse` under another sensor's key is malformed, not a window of
    /// its own.
    #[test]
    fn a_line_under_another_sensors_key_is_malformed() {
        let line = &b"2004-02-28 00:58:46.123456 7 1 19.9884 37.0933 45.08 2.69964"[..];
        let report = oracle::run_inputs(
            &app(),
            [(&encode_u32(2)[..], line), (&encode_u32(1)[..], line)],
            &OracleOptions::default(),
        );
        assert_eq!(
            report.malformed["parse"]["sensor id does not match the key"],
            1
        );
        assert_eq!(report.state_keys["top"], 1);
    }
}
