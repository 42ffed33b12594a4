//! Seeded randomness for the simulator: ChaCha8 (stable across versions and platforms, so a
//! seed reproduces a run anywhere) and the few distributions it needs, written out so their
//! definition cannot drift with a dependency's version.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

pub struct SimRng(ChaCha8Rng);

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-normal with the given mean and coefficient of variation.
    pub fn lognormal(&mut self, mean: f64, cv: f64) -> f64 {
        if cv <= 0.0 {
            return mean;
        }
        let sigma2 = (1.0 + cv * cv).ln();
        let mu = mean.ln() - 0.5 * sigma2;
        (mu + sigma2.sqrt() * self.normal()).exp()
    }

    /// ⌊x⌋ plus one more with probability frac(x): an integer count with mean x.
    pub fn count(&mut self, mean: f64) -> usize {
        let base = mean.floor();
        base as usize + usize::from(self.uniform() < mean - base)
    }

    pub fn below(&mut self, n: usize) -> usize {
        ((self.uniform() * n as f64) as usize).min(n.saturating_sub(1))
    }
}

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
