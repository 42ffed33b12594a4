//! Where a request's outputs go: counted, formatted into the sink's buffer when there is a
//! sink, and — for a leaf, a request that emitted no chained request — the leaf's ledger delta.
//!
//! Why a leaf has its own route: ten of WC's eleven requests a sentence are counts, which emit
//! one output and no request. Through `Engine::route`'s general loop each paid for the
//! children's machinery — the emitter moved out of the engine and back, the children's ids set
//! up (the compiler hoisted the hash each child's id starts from out of the loop) and a large
//! stack frame — which cost WC 12–16 % of its throughput on one executor
//! (`benches/results/wc.md`).

use super::Engine;
use crate::request::{FLAG_TRACKED, RequestHeader};
use crate::runtime::layout::scalar;
use crate::runtime::ledger::Delta;
use crate::sink::SinkWriter;

impl Engine {
    /// Routes what a leaf emitted (outputs only, or nothing): a tracked leaf reports its id.
    #[inline]
    pub(super) fn route_outputs(&mut self, from: usize, parent: &RequestHeader) {
        self.route_outputs_of(from);
        if parent.flags & FLAG_TRACKED != 0 {
            // A request with no children reports its own id (`ChildIds::delta`).
            self.add_delta(Delta {
                root_id: parent.root_id,
                xor: parent.request_id,
                admitted_ns: parent.admitted_ns,
            });
        }
    }

    /// Routes the emitter's emissions, all outputs of operator `from`: counted, and formatted
    /// for the sink where there is one.
    #[inline]
    pub(super) fn route_outputs_of(&mut self, from: usize) {
        let outputs = self.emitter.len();
        if outputs > 0 {
            self.metrics.view().add(scalar::OUTPUTS, outputs as u64);
        }
        if let Some(w) = &mut self.sink {
            for (i, e) in self.emitter.iter().enumerate() {
                let seq = self.emitter.seq(i);
                self.instances[from].write_output_line(e.key, e.payload, seq, w.buffer());
            }
        }
        self.sink_lines_added();
        self.emitter.clear();
    }

    /// Routes one output `(key, payload)` of operator `from`, numbered `seq` (for the sink).
    #[inline]
    pub(super) fn route_output(&mut self, from: usize, key: &[u8], payload: &[u8], seq: u64) {
        self.metrics.view().add(scalar::OUTPUTS, 1);
        if let Some(w) = &mut self.sink {
            self.instances[from].write_output_line(key, payload, seq, w.buffer());
        }
    }

    /// Hands the sink its buffer once enough lines were added.
    #[inline]
    pub(super) fn sink_lines_added(&mut self) {
        if let Some(Err(e)) = self.sink.as_mut().map(SinkWriter::lines_added) {
            self.report_error(e);
        }
    }
}
