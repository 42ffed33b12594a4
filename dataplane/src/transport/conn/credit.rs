//! Credit: byte-counted flow control, per connection and per class (data, control).
//!
//! Why: a sender never has more bytes in flight than the receiver granted, so a slow worker
//! slows its senders instead of growing their memory or its own. The receiver grants a window
//! in its Welcome and returns credit for a data frame only once every request of it has been
//! accepted into a ring; control frames have their own window and are returned at once, so
//! held data never blocks the control traffic that would release it.
//!
//! An outbound connection spends credit (`data_bytes`, `control_bytes`) and takes it back from
//! credit frames, never beyond the window. An inbound connection counts the bytes it has
//! received and not yet returned (`*_in_use_bytes`, bounded by the window it granted) and the
//! grants it owes, sent as one credit frame once they reach a quarter of a window or the oldest
//! is [`grant_age`] old.
//!
//! Why a grant waits: each credit frame is a send, and at low load it wakes the sender's
//! network thread — one wake-up for every batch or report that crossed the connection when
//! grants went back after the batch age (50 µs). Throughput does not need them sooner: while
//! less than a quarter of a window is owed, a sender whose bytes were all taken in still has
//! three quarters of its window. The age bound is for liveness: a frame larger than that
//! waits for it at most.

use super::super::auth::Welcome;
use super::super::framing::BadFrame;
use super::super::{Direction, Limits};
use std::time::{Duration, Instant};

/// The least a grant waits, unless a quarter of a window is owed.
pub(crate) const GRANT_AGE_MIN: Duration = Duration::from_millis(1);

/// How old an owed grant may get: the batch age limit, but at least [`GRANT_AGE_MIN`].
pub(crate) fn grant_age(batch_age: Duration) -> Duration {
    batch_age.max(GRANT_AGE_MIN)
}

/// One connection's credit, both roles (only one is used, by [`Direction`]).
pub(crate) struct Credit {
    /// Outbound: data bytes we may still send.
    pub data_bytes: u64,
    /// Outbound: control bytes we may still send.
    pub control_bytes: u64,
    /// The data window: granted by the peer (outbound) or by us (inbound).
    pub data_window_bytes: u64,
    /// The control window, likewise.
    pub control_window_bytes: u64,
    /// Inbound: data bytes received and not yet returned.
    data_in_use_bytes: u64,
    /// Inbound: control bytes received and not yet returned.
    control_in_use_bytes: u64,
    /// Inbound: data credit owed to the sender.
    grant_data_bytes: u64,
    /// Inbound: control credit owed to the sender.
    grant_control_bytes: u64,
    /// Inbound: when the oldest grant still owed was earned.
    pub grant_since: Option<Instant>,
}

impl Credit {
    /// Credit for a new connection: the peer's grant on an outbound one, our own windows on
    /// an inbound one (`welcome` is all zeros there).
    pub(crate) fn new(direction: Direction, welcome: &Welcome, limits: &Limits) -> Credit {
        let (data_window_bytes, control_window_bytes) = match direction {
            Direction::Outbound => (
                welcome.data_credit_bytes as u64,
                welcome.control_credit_bytes as u64,
            ),
            Direction::Inbound => (
                limits.data_credit_bytes as u64,
                limits.control_credit_bytes as u64,
            ),
        };
        Credit {
            data_bytes: welcome.data_credit_bytes as u64,
            control_bytes: welcome.control_credit_bytes as u64,
            data_window_bytes,
            control_window_bytes,
            data_in_use_bytes: 0,
            control_in_use_bytes: 0,
            grant_data_bytes: 0,
            grant_control_bytes: 0,
            grant_since: None,
        }
    }

    /// Outbound: a credit frame returned `data` and `control` bytes.
    pub(crate) fn returned(&mut self, data: u32, control: u32) -> Result<(), BadFrame> {
        let (d, c) = (data as u64, control as u64);
        if self.data_bytes + d > self.data_window_bytes
            || self.control_bytes + c > self.control_window_bytes
        {
            return Err(BadFrame::CreditBeyondWindow);
        }
        self.data_bytes += d;
        self.control_bytes += c;
        Ok(())
    }

    /// Outbound: spends `bytes` of data credit on a batch.
    #[inline]
    pub(crate) fn spend_data(&mut self, bytes: u64) {
        debug_assert!(bytes <= self.data_bytes, "a batch beyond its credit");
        self.data_bytes -= bytes;
    }

    /// Outbound: spends `bytes` of control credit on a control frame.
    #[inline]
    pub(crate) fn spend_control(&mut self, bytes: u64) {
        debug_assert!(
            bytes <= self.control_bytes,
            "a control frame beyond its credit"
        );
        self.control_bytes -= bytes;
    }

    /// Inbound: a data frame of `bytes` arrived; refused if the sender exceeded its window.
    pub(crate) fn receive_data(&mut self, bytes: u64) -> Result<(), BadFrame> {
        if self.data_in_use_bytes + bytes > self.data_window_bytes {
            return Err(BadFrame::DataBeyondCredit {
                excess_bytes: self.data_in_use_bytes + bytes - self.data_window_bytes,
                window_bytes: self.data_window_bytes,
            });
        }
        self.data_in_use_bytes += bytes;
        Ok(())
    }

    /// Inbound: whether a control frame of `bytes` fits the window.
    pub(crate) fn check_control(&self, bytes: u64) -> Result<(), BadFrame> {
        if self.control_in_use_bytes + bytes > self.control_window_bytes {
            return Err(BadFrame::ControlBeyondCredit);
        }
        Ok(())
    }

    /// Inbound: a control frame of `bytes` was handed over; its credit is owed at once.
    pub(crate) fn control_delivered(&mut self, bytes: u64, now: Instant) {
        self.grant_control_bytes += bytes;
        self.grant_since.get_or_insert(now);
        self.control_in_use_bytes += bytes;
    }

    /// Inbound: every request of a data frame of `bytes` was accepted; its credit is owed.
    #[inline]
    pub(crate) fn data_delivered(&mut self, bytes: u64, now: Instant) {
        self.grant_data_bytes += bytes;
        self.grant_since.get_or_insert(now);
    }

    /// Inbound: whether the owed credit should be sent now (old, or a quarter of a window).
    pub(crate) fn grant_due(&self, now: Instant, age_max: Duration) -> bool {
        self.grant_since.is_some_and(|g| {
            now.saturating_duration_since(g) >= age_max
                || self.grant_data_bytes * 4 >= self.data_window_bytes
                || self.grant_control_bytes * 4 >= self.control_window_bytes
        })
    }

    /// Inbound: takes what is owed for one credit frame: (data, control) bytes.
    pub(crate) fn take_grant(&mut self) -> (u32, u32) {
        let d = self.grant_data_bytes.min(u32::MAX as u64);
        let c = self.grant_control_bytes.min(u32::MAX as u64);
        debug_assert!(d <= self.data_in_use_bytes && c <= self.control_in_use_bytes);
        self.grant_data_bytes -= d;
        self.grant_control_bytes -= c;
        self.data_in_use_bytes -= d;
        self.control_in_use_bytes -= c;
        self.grant_since = None;
        (d as u32, c as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbound() -> Credit {
        let none = Welcome {
            data_credit_bytes: 0,
            control_credit_bytes: 0,
            frame_bytes_max: 0,
        };
        let limits = Limits {
            data_credit_bytes: 1000,
            control_credit_bytes: 1000,
            ..Limits::default()
        };
        Credit::new(Direction::Inbound, &none, &limits)
    }

    #[test]
    fn a_sender_beyond_its_window_is_refused_and_returned_credit_frees_it() {
        let mut c = inbound();
        let now = Instant::now();
        c.receive_data(600).unwrap();
        assert!(matches!(
            c.receive_data(600),
            Err(BadFrame::DataBeyondCredit {
                excess_bytes: 200,
                window_bytes: 1000
            })
        ));
        c.data_delivered(600, now);
        assert!(c.grant_due(now, Duration::from_secs(1)), "over a quarter");
        assert_eq!(c.take_grant(), (600, 0));
        assert_eq!(c.grant_since, None);
        c.receive_data(1000).unwrap();
    }

    #[test]
    fn a_small_grant_waits_for_the_grant_age_not_the_batch_age() {
        let mut c = inbound();
        let now = Instant::now();
        c.receive_data(100).unwrap();
        c.data_delivered(100, now);
        let batch_age = Duration::from_micros(50);
        let age = grant_age(batch_age);
        assert_eq!(age, GRANT_AGE_MIN);
        assert!(
            !c.grant_due(now + batch_age, age),
            "under a quarter, younger than the age"
        );
        assert!(c.grant_due(now + age, age));
        assert_eq!(
            grant_age(Duration::from_millis(5)),
            Duration::from_millis(5)
        );
    }

    #[test]
    fn returned_credit_never_exceeds_the_window() {
        let welcome = Welcome {
            data_credit_bytes: 100,
            control_credit_bytes: 50,
            frame_bytes_max: 64,
        };
        let mut c = Credit::new(Direction::Outbound, &welcome, &Limits::default());
        c.spend_data(80);
        c.returned(80, 0).unwrap();
        assert!(matches!(
            c.returned(1, 0),
            Err(BadFrame::CreditBeyondWindow)
        ));
        assert_eq!((c.data_bytes, c.control_bytes), (100, 50));
    }
}
