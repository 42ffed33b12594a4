//! The simulator's latency histogram: log-bucketed (2 % buckets from 1 µs), so a run of any
//! length records every root's latency in fixed memory and quantiles stay within 2 %.

/// A log-bucketed latency histogram (2% buckets from 1 µs).
#[derive(Clone, Debug)]
pub struct Histogram {
    buckets: Vec<u64>,
    pub count: u64,
}

const HIST_RATIO_LN: f64 = 0.019_802_627; // ln(1.02)
const HIST_BUCKETS: usize = 1500;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: vec![0; HIST_BUCKETS],
            count: 0,
        }
    }
}

impl Histogram {
    pub fn record(&mut self, us: f64) {
        let b = if us <= 1.0 {
            0
        } else {
            ((us.ln() / HIST_RATIO_LN) as usize).min(HIST_BUCKETS - 1)
        };
        self.buckets[b] += 1;
        self.count += 1;
    }
    /// The q-quantile in µs (upper edge of its bucket).
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            acc += n;
            if acc >= target {
                return ((b + 1) as f64 * HIST_RATIO_LN).exp();
            }
        }
        f64::INFINITY
    }
}
