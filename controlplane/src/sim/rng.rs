//! The simulator's key-group sampler. Its random numbers come from
//! [`clasp_protocol::rng::SimRng`], the seeded generator it shares with the protocol's
//! simulation.

use clasp_protocol::rng::SimRng;

/// A key-group sampler: Zipf-popular keys hashed onto key groups, as a cumulative table.
pub struct KeyGroupSampler {
    cdf: Vec<f64>,
}

impl KeyGroupSampler {
    pub fn new(keys: usize, zipf: f64, key_groups: usize) -> Self {
        let mut w = vec![0.0; key_groups];
        for k in 0..keys {
            // A fixed integer mix stands in for the data plane's key hash.
            let mut h = (k as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
            h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            h ^= h >> 31;
            w[(h % key_groups as u64) as usize] += 1.0 / ((k + 1) as f64).powf(zipf);
        }
        let total: f64 = w.iter().sum();
        let mut acc = 0.0;
        let cdf = w
            .iter()
            .map(|x| {
                acc += x / total;
                acc
            })
            .collect();
        KeyGroupSampler { cdf }
    }

    pub fn sample(&self, rng: &mut SimRng) -> usize {
        let u = rng.uniform();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }

    /// The probability mass of each key group (for the documentation of skew).
    pub fn weights(&self) -> Vec<f64> {
        let mut prev = 0.0;
        self.cdf
            .iter()
            .map(|&c| {
                let w = c - prev;
                prev = c;
                w
            })
            .collect()
    }
}
