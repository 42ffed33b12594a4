//! A histogram whose buckets are filled in bulk: the driver's latency ledger counts every
//! completed tree into fixed buckets per interval, and this adds those counts — the
//! client's own `Histogram` takes one observation at a time, which would mean a call per tree.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::{Arc, Mutex};

/// Cumulative bucket counts (per bucket, not yet summed), their sum and count.
#[derive(Debug, Default)]
struct State {
    sum: f64,
    count: u64,
    per_bucket: Vec<u64>,
}

/// A histogram with fixed upper bounds (the last is +∞), shared between the updater and the
/// endpoint.
#[derive(Clone, Debug)]
pub struct BulkHistogram {
    bounds: Arc<Vec<f64>>,
    state: Arc<Mutex<State>>,
}

impl BulkHistogram {
    /// Upper bounds in the metric's unit, increasing; a +∞ bucket is added.
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let mut bounds: Vec<f64> = bounds.into_iter().collect();
        assert!(
            bounds.windows(2).all(|w| w[0] < w[1]),
            "histogram bounds must increase"
        );
        bounds.push(f64::INFINITY);
        let per_bucket = vec![0; bounds.len()];
        BulkHistogram {
            bounds: Arc::new(bounds),
            state: Arc::new(Mutex::new(State {
                per_bucket,
                ..State::default()
            })),
        }
    }

    /// Adds per-bucket counts (one per bound, the last for +∞; extra ones are ignored) and
    /// their sum.
    pub fn add(&self, per_bucket: &[u64], sum: f64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (slot, n) in s.per_bucket.iter_mut().zip(per_bucket) {
            *slot += n;
        }
        s.count += per_bucket.iter().take(self.bounds.len()).sum::<u64>();
        if sum.is_finite() {
            s.sum += sum;
        }
    }
}

impl TypedMetric for BulkHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for BulkHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .zip(s.per_bucket.iter().copied())
            .collect();
        encoder.encode_histogram::<NoLabelSet>(s.sum, s.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    #[test]
    fn bulk_counts_encode_as_cumulative_buckets() {
        let h = BulkHistogram::new([0.001, 0.01]);
        h.add(&[2, 3, 1], 0.05);
        h.add(&[1, 0, 0], 0.0005);
        let mut r = Registry::default();
        r.register("lat_seconds", "latency", h);
        let mut text = String::new();
        encode(&mut text, &r).unwrap();
        assert!(
            text.contains("lat_seconds_bucket{le=\"0.001\"} 3"),
            "{text}"
        );
        assert!(text.contains("lat_seconds_bucket{le=\"0.01\"} 6"), "{text}");
        assert!(text.contains("lat_seconds_bucket{le=\"+Inf\"} 7"), "{text}");
        assert!(text.contains("lat_seconds_count 7"), "{text}");
    }
}
