//! `topk_window`: per sensor, the `k` hottest readings of the open tumbling window.
//!
//! Why it needs no timer: a sensor's readings reach this operator on one FIFO path in
//! event-time order, so the first reading of a later window is the moment the open one is
//! complete (see the crate docs). Outputs, keyed by the sensor id, are text:
//! `WINDOW_START_S running|final CELSIUS@EPOCH,...` (hottest first): `running` each time a
//! reading enters the open window's top-k, `final` when the window closes.
//!
//! The state is a plain struct with `#[derive(StateCodec)]`: the runtime exports, imports and
//! digests it in a migration without a hand-written codec.

use std::fmt::Write as _;

use clasp_operators::{Malformed, Operator, Out, StateCodec};

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
                self.output(key, open, &state.top, "final", out);
                state.top.clear();
                state.closed += 1;
            }
            _ => {}
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

    fn end_of_key(&mut self, key: &[u8], state: &mut Window, out: &mut Out<'_>) {
        if let Some(open) = state.open.take() {
            self.output(key, open, &state.top, "final", out);
            state.top.clear();
            state.closed += 1;
        }
    }
}
