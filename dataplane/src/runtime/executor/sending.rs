//! Writing an executor's chained requests and frames down its lanes, and counting them: the
//! edge counters the capacity model reads (local and remote chained requests per edge), the
//! destinations reached, and what waited in an overflow queue or could not be sent.

use super::Engine;
use super::outbound::{Lane, Sent};
use crate::request::{RequestHeader, frame_len};
use crate::runtime::layout::scalar;

impl Engine {
    /// Counts `run.1` local chained requests on edge `from → run.0` (none: nothing).
    #[inline]
    pub(super) fn count_local(&self, from: usize, run: (usize, u64)) {
        if run.1 > 0 {
            let m = self.metrics.view();
            m.add(m.edge_local(from, run.0), run.1);
            m.add(scalar::LOCAL_SENT, run.1);
        }
    }

    /// Counts a remote chained request on edge `from → to` sent to `slot`.
    #[inline]
    pub(super) fn count_remote(&mut self, from: usize, to: usize, slot: u16) {
        let m = self.metrics.view();
        m.add(m.edge_remote(from, to), 1);
        m.add(scalar::REMOTE_SENT, 1);
        let bit = 1u64 << (slot as usize / self.executors % 64);
        if self.remote_mask & bit == 0 {
            self.remote_mask |= bit;
            m.set(scalar::REMOTE_DESTINATIONS, self.remote_mask);
        }
    }

    /// Writes a request frame down `lane` (or into its overflow).
    #[inline]
    pub(super) fn send_request(
        &mut self,
        lane: Lane,
        header: &RequestHeader,
        key: &[u8],
        payload: &[u8],
    ) {
        let len = frame_len(key.len(), payload.len());
        let sent = self
            .out
            .send_with(lane, len, |out| header.write(key, payload, out));
        self.count_sent(sent);
    }

    /// Writes a whole encoded frame down `lane` (or into its overflow).
    pub(super) fn send_frame(&mut self, lane: Lane, frame: &[u8]) {
        let sent = self
            .out
            .send_with(lane, frame.len(), |out| out.copy_from_slice(frame));
        self.count_sent(sent);
    }

    #[inline]
    fn count_sent(&mut self, sent: Sent) {
        match sent {
            Sent::Written => {}
            Sent::Queued => self.metrics.view().add(scalar::OVERFLOWED, 1),
            Sent::Dropped(why) => self.report_error(why),
        }
    }
}
