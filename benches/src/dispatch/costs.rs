//! The remote costs the planner starts from, measured briefly (`clasp calibrate`): β at every
//! batch size of the full benchmark and at the transport's default batch, and γ, without the
//! baseline and the latency runs the full `clasp bench dispatch` adds for comparison.
//!
//! The runs are the very ones of the full benchmark (`remote_run`, `gamma_run`), so a figure
//! here means what the same figure of `clasp bench dispatch --json` means.

use super::harness::{KEY_BYTES, PAYLOAD_BYTES, Sends, median};
use super::transport::{gamma_run, remote_run};
use super::{BATCH_SIZES, DESTINATIONS, DispatchOpts};
use clasp_dataplane::request::frame_len;
use clasp_dataplane::transport::{DEFAULT_BATCH_BYTES_MAX, wire};
use std::collections::BTreeMap;
use std::time::Instant;

/// Requests of the benchmark's size (an 8-byte key, a 16-byte payload) in one batch of the
/// transport's default size: the batch a saturated sender's batches leave with.
pub fn default_batch_requests() -> usize {
    let entry = wire::entry_bytes(frame_len(KEY_BYTES, PAYLOAD_BYTES));
    (DEFAULT_BATCH_BYTES_MAX - wire::NET_HEADER_BYTES) / entry
}

/// What [`remote_costs`] measured.
#[derive(Clone, Debug)]
pub struct RemoteCosts {
    /// CPU ns per remote chained request, both sides, by batch size (requests per batch):
    /// [`BATCH_SIZES`] and [`default_batch_requests`].
    pub ns_per_request_by_batch: BTreeMap<usize, f64>,
    /// The transport's default batch in requests ([`default_batch_requests`]).
    pub default_batch: usize,
    /// CPU ns added per request by each extra destination at `gamma_rate_per_s` (what the full
    /// benchmark's `per_destination_ns` measures, as a median of per-round slopes).
    pub per_destination_ns: f64,
    /// The total request rate of the γ runs.
    pub gamma_rate_per_s: u64,
}

impl RemoteCosts {
    /// γ in the planner's unit: CPU µs per second per remote destination (the extra CPU per
    /// request of one more destination, times the requests per second).
    pub fn gamma_us_per_s(&self) -> f64 {
        self.per_destination_ns * self.gamma_rate_per_s as f64 / 1e3
    }
}

/// Runs β at every batch size in `opts.repetitions` interleaved rounds, one batch a send (a
/// live worker's network thread seldom finds more than one full batch waiting behind a send:
/// the planner's prior is that cost, not a saturated sender's), then γ in
/// `gamma_rounds` rounds (1, 2 and 4 destinations each); medians.
///
/// γ is a small difference between larger figures, so other work on the machine moves it
/// most: each round gives its own slope (least squares over the destination counts, runs close
/// together in time so a change of background load hits them alike), and γ is the median
/// slope. While that median is not positive, more rounds are run until `extra_rounds_until`.
pub fn remote_costs(
    opts: &DispatchOpts,
    gamma_rounds: usize,
    extra_rounds_until: Instant,
) -> RemoteCosts {
    let default_batch = default_batch_requests();
    let mut batches: Vec<usize> = BATCH_SIZES.to_vec();
    if !batches.contains(&default_batch) {
        batches.push(default_batch);
    }
    let mut beta: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for _ in 0..opts.repetitions.max(1) {
        for &b in &batches {
            beta.entry(b)
                .or_default()
                .push(remote_run(b, opts.requests_for(b), Sends::OnePerBatch).ns);
        }
    }
    let round = || {
        let ns: Vec<f64> = DESTINATIONS
            .iter()
            .map(|&d| {
                gamma_run(
                    d,
                    opts.gamma_rate_per_s,
                    opts.gamma_run_ms,
                    opts.gamma_flush_us,
                )
            })
            .collect();
        slope(&DESTINATIONS.map(|d| d as f64), &ns)
    };
    let mut slopes: Vec<f64> = (0..gamma_rounds.max(1)).map(|_| round()).collect();
    while Instant::now() < extra_rounds_until && median(slopes.clone()) <= 0.0 {
        slopes.push(round());
    }
    RemoteCosts {
        ns_per_request_by_batch: beta.into_iter().map(|(b, v)| (b, median(v))).collect(),
        default_batch,
        per_destination_ns: median(slopes),
        gamma_rate_per_s: opts.gamma_rate_per_s,
    }
}

/// The least-squares slope of `y` over `x`.
fn slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx) * (a - mx)).sum();
    sxy / sxx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_its_slope() {
        assert!((slope(&[1.0, 2.0, 4.0], &[5.0, 7.0, 11.0]) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn the_default_batch_fills_the_default_batch_bytes() {
        let b = default_batch_requests();
        let entry = wire::entry_bytes(frame_len(KEY_BYTES, PAYLOAD_BYTES));
        assert!(b > 128, "{b}");
        assert!(wire::NET_HEADER_BYTES + b * entry <= DEFAULT_BATCH_BYTES_MAX);
        assert!(wire::NET_HEADER_BYTES + (b + 1) * entry > DEFAULT_BATCH_BYTES_MAX);
    }
}
