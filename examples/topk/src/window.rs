//! `topk_window`: per sensor, the `k` hottest readings of the open tumbling window.
//!
//! A window closes when its end passes: opening a window sets an event-time timer at its last
//! second, and the timer outputs the final list. A sensor's readings reach this operator on
//! one FIFO path in event-time order, so its first reading of a later window also proves the
//! open one complete: that closes it at once (and deletes its timer), which keeps one window
//! per sensor in memory whatever the watermark does. At end of stream the watermark is +∞ and
//! the timers of the windows still open fire, before the runtime's final flush. Outputs, keyed
//! by the sensor id (`encode_u32`, the key `topk_parse` emits with), are text:
//! `WINDOW_START_S running|final CELSIUS@EPOCH,...` (hottest first): `running` each time a
//! reading enters the open window's top-k, `final` when the window closes.
//!
//! The state is a plain struct with `#[derive(StateCodec)]`: the runtime exports, imports and
//! digests it in a migration without a hand-written codec.

use std::fmt::Write as _;

use clasp_operators::{Malformed, Operator, Out, OutputText, StateCodec, Timer};

use crate::parse::Reading;

/// Largest `k` accepted.
pub const K_MAX: u64 = 100;
/// Longest window accepted: one week.
pub const WINDOW_S_MAX: u64 = 7 * 86_400;

/// The operator: its parameters (the state is per sensor, in [`Window`]).
pub struct TopK {
    /// Readings kept per window.
    pub k: usize,
    /// Window length in seconds of event time.
    pub window_s: u64,
}

/// One reading in a top-k list.
#[derive(StateCodec, Clone, Copy, Debug, Default, PartialEq)]
pub struct Hot {
    /// Degrees Celsius.
    pub celsius: f64,
    /// The reading's sequence number (breaks ties: the earlier reading ranks first).
    pub epoch: u64,
}

/// A sensor's state (the default, and so not stored, before its first reading).
#[derive(StateCodec, Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// Index (start time / window length) of the open window.
    pub open: Option<u64>,
    /// The open window's hottest readings, hottest first; at most `k`.
    pub top: Vec<Hot>,
    /// Windows closed so far.
    pub closed: u64,
    /// Readings dropped because their window had closed.
    pub late: u64,
    /// Index of the last window closed.
    pub last_closed: Option<u64>,
}

impl TopK {
    /// Puts `hot` into its rank in `top` if it makes the top `k`; whether it did.
    fn rank(&self, top: &mut Vec<Hot>, hot: Hot) -> bool {
        let at = top.partition_point(|h| {
            h.celsius.total_cmp(&hot.celsius).is_gt()
                || (h.celsius == hot.celsius && h.epoch <= hot.epoch)
        });
        if at >= self.k {
            return false;
        }
        top.insert(at, hot);
        top.truncate(self.k);
        true
    }

    /// The event time of window `index`'s last second: its timer's time.
    fn last_second(&self, index: u64) -> u64 {
        (index + 1) * self.window_s - 1
    }

    /// Outputs the open window's final list and closes it.
    fn close(&self, key: &[u8], state: &mut Window, out: &mut Out<'_>) {
        if let Some(open) = state.open.take() {
            self.output(key, open, &state.top, "final", out);
            state.top.clear();
            state.closed += 1;
            state.last_closed = Some(open);
        }
    }

    /// Outputs window `index`'s list, marked `running` or `final`.
    fn output(&self, key: &[u8], index: u64, top: &[Hot], phase: &str, out: &mut Out<'_>) {
        out.output_with(|k, p| {
            k.extend_from_slice(key);
            let mut text = format!("{} {phase} ", index * self.window_s);
            for (i, h) in top.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(text, "{sep}{:.4}@{}", h.celsius, h.epoch);
            }
            p.extend_from_slice(text.as_bytes());
        });
    }
}

impl Operator for TopK {
    type State = Window;

    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        state: &mut Window,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let reading = Reading::read(payload)?;
        let index = reading.time_s / self.window_s;
        match state.open {
            Some(open) if index < open => {
                state.late += 1;
                return Ok(());
            }
            Some(open) if index > open => {
                out.delete_timer_event(self.last_second(open));
                self.close(key, state, out);
            }
            _ if state.last_closed.is_some_and(|closed| index <= closed) => {
                state.late += 1;
                return Ok(());
            }
            _ => {}
        }
        if state.open.is_none() {
            out.set_timer_event(self.last_second(index));
        }
        state.open = Some(index);
        let hot = Hot {
            celsius: reading.celsius,
            epoch: reading.epoch,
        };
        if self.rank(&mut state.top, hot) {
            self.output(key, index, &state.top, "running", out);
        }
        Ok(())
    }

    fn on_timer(&mut self, key: &[u8], state: &mut Window, timer: Timer, out: &mut Out<'_>) {
        if state
            .open
            .is_some_and(|open| self.last_second(open) == timer.at)
        {
            self.close(key, state, out);
        }
    }

    /// A sink line's text: the sensor as a number, the window's line as it is. The key is the
    /// sensor id as the `sd` generator encodes it (`encode_u32`), which is also how
    /// `topk_parse` keys a line read from a source; any other key has no text form.
    fn output_text(&self, key: &[u8], value: &[u8], text: &mut OutputText) -> bool {
        let (Ok(sensor), Ok(line)) = (<[u8; 4]>::try_from(key), std::str::from_utf8(value)) else {
            return false;
        };
        // Writing into a String cannot fail.
        let _ = write!(text.key, "{}", u32::from_le_bytes(sensor));
        text.value.push_str(line);
        true
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use clasp_operators::oracle::{self, OracleOptions};
    use clasp_operators::{AppSpec, generate};

    use super::*;
    use crate::parse::parse_line;

    /// Runs a `topk_window` of `k` and `window_s` alone, in the oracle (the operator runtime,
    /// its timers and the end of stream), over `(key, reading)`s; the outputs' texts per key.
    fn drive(
        k: u64,
        window_s: u64,
        input: &[(Vec<u8>, Reading)],
    ) -> BTreeMap<Vec<u8>, Vec<String>> {
        let text = format!(
            "name = \"w\"\ngenerator = \"sd\"\n[[operator]]\nname = \"top\"\n\
             kind = \"topk_window\"\nparams = {{ k = {k}, window_s = {window_s} }}\n"
        );
        let app = AppSpec::from_toml_str_with(&crate::registry(), &text).unwrap();
        let payloads: Vec<(Vec<u8>, Vec<u8>)> = input
            .iter()
            .map(|(key, r)| {
                let mut p = Vec::new();
                r.write(&mut p);
                (key.clone(), p)
            })
            .collect();
        let options = OracleOptions {
            outputs_kept_max: usize::MAX,
        };
        let inputs = payloads.iter().map(|(k, p)| (&k[..], &p[..]));
        let report = oracle::run_inputs(&app, inputs, &options);
        let mut out: BTreeMap<Vec<u8>, Vec<String>> = BTreeMap::new();
        for o in report.outputs {
            let text = String::from_utf8(o.payload).unwrap();
            out.entry(o.key).or_default().push(text);
        }
        out
    }

    fn reading(time_s: u64, epoch: u64, celsius: f64) -> Reading {
        Reading {
            time_s,
            epoch,
            celsius,
        }
    }

    #[test]
    fn a_later_window_closes_the_open_one_and_an_earlier_one_is_late() {
        let key = b"s".to_vec();
        let input: Vec<_> = [
            reading(1, 0, 20.0),
            reading(2, 1, 22.0),
            reading(3, 2, 21.0),
            reading(4, 3, 19.0), // not in the top 2: no output
            reading(12, 4, 18.0),
            reading(9, 5, 30.0), // late
        ]
        .into_iter()
        .map(|r| (key.clone(), r))
        .collect();
        let out = drive(2, 10, &input);
        assert_eq!(
            out[&key],
            [
                "0 running 20.0000@0",
                "0 running 22.0000@1,20.0000@0",
                "0 running 22.0000@1,21.0000@2",
                "0 final 22.0000@1,21.0000@2",
                "10 running 18.0000@4",
                "10 final 18.0000@4",
            ]
        );
    }

    /// Against an independent reference: each sensor's readings of the `sd` generator grouped
    /// by window and sorted, hottest first.
    #[test]
    fn final_lists_equal_a_sort_of_each_window() {
        let generator = generate::generator("sd", 2).unwrap();
        let input: Vec<(Vec<u8>, Reading)> = (0..6000)
            .filter_map(|i| {
                let (key, line) = generator.record(i);
                parse_line(&line).ok().map(|(_, r)| (key, r))
            })
            .collect();
        let finals: BTreeMap<Vec<u8>, Vec<String>> = drive(3, 600, &input)
            .into_iter()
            .map(|(k, texts)| {
                (
                    k,
                    texts
                        .into_iter()
                        .filter(|t| t.contains(" final "))
                        .collect(),
                )
            })
            .collect();
        let mut windows: BTreeMap<(Vec<u8>, u64), Vec<Reading>> = BTreeMap::new();
        for (key, r) in &input {
            windows
                .entry((key.clone(), r.time_s / 600))
                .or_default()
                .push(*r);
        }
        let mut expected: BTreeMap<Vec<u8>, Vec<String>> = BTreeMap::new();
        for ((key, index), mut readings) in windows {
            readings.sort_by(|a, b| b.celsius.total_cmp(&a.celsius).then(a.epoch.cmp(&b.epoch)));
            let top: Vec<String> = readings
                .iter()
                .take(3)
                .map(|r| format!("{:.4}@{}", r.celsius, r.epoch))
                .collect();
            let text = format!("{} final {}", index * 600, top.join(","));
            expected.entry(key).or_default().push(text);
        }
        assert_eq!(finals.len(), 54);
        assert_eq!(finals, expected);
    }

    /// The generator's keys (what reaches `top`, generated or read from a source) have a text
    /// form: the sensor as a number. Any other key falls back to base64.
    #[test]
    fn the_sink_text_is_the_sensor_as_a_number() {
        let top = TopK {
            k: 3,
            window_s: 600,
        };
        let generator = generate::generator("sd", 2).unwrap();
        let mut text = OutputText::default();
        for i in 0..54 {
            let (key, line) = generator.record(i);
            let sensor = crate::parse::sensor_of(&line).unwrap();
            text.clear();
            assert!(top.output_text(&key, b"0 final 20.0000@3", &mut text));
            assert_eq!(text.key, sensor.to_string());
            assert_eq!(text.value, "0 final 20.0000@3");
        }
        let key = clasp_operators::key::encode_u64(7);
        assert!(!top.output_text(&key, b"0 final 20.0000@3", &mut text));
    }
}
