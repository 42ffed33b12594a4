//! Received state installed one state message (at most 32 key groups) per turn of the
//! executor's loop, between batches of the requests it runs.
//!
//! Why not at once: an executor that receives most of a WC instance's 40 000 words spends
//! 8–15 ms importing them, and state often arrives before the executor's own plan (its sender
//! took the plan first), so all of it was installed while the plan was taken — a pause of every
//! key group, not only the ones that move. Installed a message per turn, the requests of the
//! key groups that do not move run in between. A request for a key group whose state is still
//! queued is parked until that state is in, in arrival order, so a key's requests still run in
//! order and after its state.
//!
//! Anything that reads or exports state — a new plan, a checkpoint's snapshot, the end of the
//! stream, the executor's stop — first installs everything queued ([`Engine::flush_installs`]).

use super::Engine;
use super::migrating::{Frame, State};
use crate::clock::monotonic_ns;
use crate::request::RequestHeader;
use std::collections::{HashMap, VecDeque};

/// State to install, and the requests waiting for it.
#[derive(Default)]
pub(super) struct Installs {
    /// Per received state message: its operator and its key groups' archives, in arrival order.
    queue: VecDeque<(usize, State)>,
    /// (operator, key group) → requests released for it before its state was installed, in
    /// order. A key group queued for installing has an entry (empty until a request comes).
    parked: HashMap<(u16, u16), Vec<Frame>>,
}

impl Installs {
    /// Nothing to install and nothing parked.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.parked.is_empty()
    }

    /// Queues `state` of `operator` for installing.
    pub(super) fn push(&mut self, operator: usize, state: State) {
        for (g, _) in &state {
            self.parked.entry((operator as u16, *g as u16)).or_default();
        }
        self.queue.push_back((operator, state));
    }

    /// `frame` back if it may run now, or `None` if it was parked behind its key group's state.
    pub(super) fn admit(&mut self, frame: Frame) -> Option<Frame> {
        if self.parked.is_empty() {
            return Some(frame);
        }
        let Ok(h) = RequestHeader::peek(&frame) else {
            return Some(frame);
        };
        match self.parked.get_mut(&(h.operator, h.key_group)) {
            Some(waiting) => {
                waiting.push(frame);
                None
            }
            None => Some(frame),
        }
    }
}

impl Engine {
    /// Installs the next queued state message, if any; its key groups' parked requests go to
    /// the front of the ready queue, in order. Returns whether it installed one.
    pub(super) fn install_next(&mut self) -> bool {
        let Some((operator, state)) = self.mig.installs.queue.pop_front() else {
            return false;
        };
        let start_ns = monotonic_ns();
        let groups = state.len();
        let mut released = Vec::new();
        for (g, bytes) in state {
            if let Err(e) = self.instances[operator].import_group(g as u16, &bytes) {
                self.report_error(format!("importing operator {operator} key group {g}: {e}"));
            }
            let parked = self
                .mig
                .installs
                .parked
                .remove(&(operator as u16, g as u16));
            released.extend(parked.unwrap_or_default());
        }
        // Each key group's requests keep their order; they all arrived after its state.
        for f in released.into_iter().rev() {
            self.mig.ready.push_front(f);
        }
        self.mig.spans.installed(start_ns, groups);
        true
    }

    /// Installs everything queued (before state is read, exported or a plan taken).
    pub(super) fn flush_installs(&mut self) {
        while self.install_next() {}
        debug_assert!(
            self.mig.installs.is_empty(),
            "every parked key group installed"
        );
        self.mig.refresh();
    }
}

#[cfg(test)]
mod tests {
    use super::Installs;
    use crate::request::{RequestHeader, frame_len};

    /// A request frame of `operator`, key group `key_group`, told apart by `payload`.
    fn frame(operator: u16, key_group: u16, payload: u8) -> Vec<u8> {
        let h = RequestHeader {
            operator,
            key_group,
            ..RequestHeader::default()
        };
        let mut f = vec![0; frame_len(1, 1)];
        h.write(b"k", &[payload], &mut f);
        f
    }

    #[test]
    fn requests_of_a_key_group_still_installing_are_parked_in_order_the_rest_pass() {
        let mut i = Installs::default();
        assert!(i.is_empty());
        i.push(1, vec![(7, b"archive".to_vec())]);
        assert!(
            !i.is_empty(),
            "a queued install keeps the executor off the fast path"
        );
        assert!(i.admit(frame(1, 7, 1)).is_none(), "its own key group waits");
        assert!(
            i.admit(frame(0, 7, 2)).is_some(),
            "another operator's does not"
        );
        assert!(
            i.admit(frame(1, 8, 3)).is_some(),
            "another key group's does not"
        );
        assert!(i.admit(frame(1, 7, 4)).is_none());
        let parked = &i.parked[&(1, 7)];
        let payloads: Vec<u8> = parked.iter().map(|f| f[f.len() - 1]).collect();
        assert_eq!(payloads, vec![1, 4], "in arrival order");
    }
}
