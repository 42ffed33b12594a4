//! Where an executor's part of a migration spends its time, logged at `debug` level
//! (`RUST_LOG=clasp_dataplane::runtime::executor=debug`): the drain (its pause), the wait for
//! its markers, packing and sending the state it gives up, installing the state it receives.
//! At `trace` level, each step on its own, timed from the plan: every marker's arrival and its
//! sender, every chunk of state packed and installed, every seal sent — the timeline of one
//! move across its slots.
//!
//! Why logs and not report fields: packing runs after the executor reported its part complete
//! (the receivers' completions wait for it, not the sender's), so a per-migration report cannot
//! hold it; and these are for finding where a slow move goes, not for the planner.

use crate::clock::{monotonic_ns, thread_cpu_ns};
use clasp_protocol::Epoch;
use clasp_protocol::worker::WorkerReport;
use tracing::{debug, trace};

/// One executor's running totals for the current migration.
#[derive(Default)]
pub(super) struct Spans {
    /// The executor's slot (for the traces).
    slot: u16,
    /// When the executor took the plan.
    plan_ns: u64,
    /// Packing state (archives, the message, its parts) and handing the parts to the rings.
    pack_ns: u64,
    /// This thread's CPU time in those spans: less than `pack_ns` when it was preempted.
    pack_cpu_ns: u64,
    packed_groups: u64,
    packed_bytes: u64,
    /// Installing received state.
    install_ns: u64,
    installed_groups: u64,
}

impl Spans {
    /// A plan was taken: the totals start again.
    pub(super) fn plan(&mut self, slot: u16) {
        *self = Spans {
            slot,
            plan_ns: monotonic_ns(),
            ..Spans::default()
        };
    }

    /// Microseconds from the plan to `now_ns`.
    fn since_plan_us(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.plan_ns) / 1000
    }

    /// `groups` key groups were packed into `bytes` and sent, from `start_ns` to now; this
    /// thread's CPU clock read `start_cpu_ns` at the start.
    pub(super) fn packed(&mut self, start_ns: u64, start_cpu_ns: u64, groups: usize, bytes: usize) {
        let (now_ns, slot) = (monotonic_ns(), self.slot);
        let took_ns = now_ns.saturating_sub(start_ns);
        let (at_us, took_us) = (self.since_plan_us(now_ns), took_ns / 1000);
        trace!(slot, at_us, took_us, groups, bytes, "state chunk packed");
        self.pack_ns += took_ns;
        self.pack_cpu_ns += thread_cpu_ns().saturating_sub(start_cpu_ns);
        self.packed_groups += groups as u64;
        self.packed_bytes += bytes as u64;
    }

    /// A marker came from `from`.
    pub(super) fn marker(&self, from: u16) {
        let at_us = self.since_plan_us(monotonic_ns());
        trace!(slot = self.slot, from, at_us, "marker in");
    }

    /// A seal went out to `to`.
    pub(super) fn sealed(&self, to: u32) {
        let at_us = self.since_plan_us(monotonic_ns());
        trace!(slot = self.slot, to, at_us, "seal sent");
    }

    /// `groups` key groups were installed, from `start_ns` to now.
    pub(super) fn installed(&mut self, start_ns: u64, groups: usize) {
        let (now_ns, slot) = (monotonic_ns(), self.slot);
        let took_ns = now_ns.saturating_sub(start_ns);
        let (at_us, took_us) = (self.since_plan_us(now_ns), took_ns / 1000);
        trace!(slot, at_us, took_us, groups, "state installed");
        self.install_ns += took_ns;
        self.installed_groups += groups as u64;
    }

    /// The executor's part is complete (what it gives up may still be packing).
    pub(super) fn completed(&self, slot: u16, r: &WorkerReport) {
        debug!(
            slot,
            epoch = r.epoch.0,
            pause_us = r.pause_ns / 1000,
            marker_wait_us = r.marker_wait_ns / 1000,
            installed_groups = self.installed_groups,
            install_us = self.install_ns / 1000,
            complete_after_us = self.since_plan_us(monotonic_ns()),
            "migration part complete"
        );
    }

    /// Everything this executor owed for `epoch` is packed and sent.
    pub(super) fn exported(&self, slot: u16, epoch: Epoch) {
        debug!(
            slot,
            epoch = epoch.0,
            packed_groups = self.packed_groups,
            packed_bytes = self.packed_bytes,
            pack_us = self.pack_ns / 1000,
            pack_cpu_us = self.pack_cpu_ns / 1000,
            sent_after_us = self.since_plan_us(monotonic_ns()),
            "migration state sent"
        );
    }
}
