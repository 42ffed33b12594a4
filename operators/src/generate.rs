//! Seeded, deterministic input generators.
//!
//! Every app has a generator: the real data sets the apps model are not bundled, so each
//! generator produces records of the same shape and statistics. The rules that keep a run
//! reproducible on every machine and after every `cargo update`:
//!
//! * **Named, pinned RNG.** Draws come from ChaCha8 (`rand_chacha::ChaCha8Rng`, pinned with
//!   `rand_core` in the workspace manifest); never `StdRng`, whose algorithm may change.
//! * **Random access.** Record `i` is computed from `(seed, i)` alone: the generator keeps the
//!   32-byte ChaCha key derived from the seed, and record `i` uses ChaCha stream `i` of that key
//!   ([`RecordRng`]). So a producer can start anywhere, several producers need no coordination,
//!   and a test can look at record 1 000 000 without making the ones before it.
//! * **No platform maths.** Distributions use integer arithmetic, IEEE-exact operations
//!   (`+ − × ÷ √`) or the `libm` crate (pure Rust, the same bits everywhere), never the
//!   platform's `ln`/`exp`/`pow`.
//! * **Producers split by key group.** Several producers share a stream by the key group of the
//!   source operator's key ([`producer_of`]), never by record index: splitting by index would
//!   send one key's records through several producers and break its per-key order.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::key::key_group_of;

mod pregenerated;
pub use pregenerated::Pregenerated;

/// Produces the records of one app's input stream.
pub trait Generator: Send + Sync {
    /// Writes record `i`: the source operator's canonical key into `key` and the record's
    /// payload (one line of text, without newline) into `payload`. Both are cleared first.
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>);

    /// Record `i` as owned bytes.
    fn record(&self, i: u64) -> (Vec<u8>, Vec<u8>) {
        let (mut k, mut p) = (Vec::new(), Vec::new());
        self.record_into(i, &mut k, &mut p);
        (k, p)
    }
}

/// The generators of the built-in apps, by name.
pub fn generator_names() -> &'static [&'static str] {
    &["wc", "sd", "aa", "pl", "nwm", "etl", "syn", "wc-text"]
}

/// The generator `name` with `seed`.
pub fn generator(name: &str, seed: u64) -> Option<Box<dyn Generator>> {
    use crate::apps;
    Some(match name {
        "wc" => Box::new(apps::wc::WcGenerator::new(seed)),
        "sd" => Box::new(apps::sd::SdGenerator::new(seed)),
        "aa" => Box::new(apps::aa::AaGenerator::new(seed)),
        "pl" => Box::new(apps::pl::PlGenerator::new(seed)),
        "nwm" => Box::new(apps::nwm::NwmGenerator::new(seed)),
        "etl" => Box::new(apps::etl::EtlGenerator::new(seed)),
        "syn" => Box::new(apps::syn::SynGenerator::new(seed)),
        "wc-text" => Box::new(apps::wc_text::WcTextGenerator::new(seed)),
        _ => return None,
    })
}

/// Which of `producers` producers emits a record whose source key is `key`: the key group of
/// the key, modulo the number of producers. Every record of one key goes through one producer.
pub fn producer_of(key: &[u8], producers: u32) -> u32 {
    u32::from(key_group_of(key)) % producers.max(1)
}

/// The records of `range` that producer `producer` of `producers` emits, in index order.
pub fn producer_records<'a>(
    generator: &'a dyn Generator,
    range: std::ops::Range<u64>,
    producer: u32,
    producers: u32,
) -> impl Iterator<Item = (u64, Vec<u8>, Vec<u8>)> + 'a {
    range.filter_map(move |i| {
        let (k, p) = generator.record(i);
        (producer_of(&k, producers) == producer).then_some((i, k, p))
    })
}

/// The per-record random source: ChaCha8 keyed by the generator seed, on stream `i`.
pub struct RecordRng(ChaCha8Rng);

/// The ChaCha8 key of a generator seed (expanded with `rand_core`'s specified PCG32 expansion,
/// `SeedableRng::seed_from_u64`), mixed with the app name so two apps on one seed differ.
pub fn chacha_key(seed: u64, app: &str) -> [u8; 32] {
    let mixed = seed ^ xxhash_rust::xxh3::xxh3_64(app.as_bytes());
    let mut key = [0u8; 32];
    ChaCha8Rng::seed_from_u64(mixed).fill_bytes(&mut key);
    key
}

impl RecordRng {
    /// The random source of record `i` (stream `i` of the key).
    #[inline]
    pub fn new(key: &[u8; 32], i: u64) -> Self {
        let mut rng = ChaCha8Rng::from_seed(*key);
        rng.set_stream(i);
        RecordRng(rng)
    }

    /// 64 uniform bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`) by a 128-bit multiply: no rejection loop, so every record
    /// draws the same number of words; the bias is below 2⁻⁶⁴·n.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `num / den`.
    #[inline]
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// Uniform in `[0, 1)` with 53 bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal by Box–Muller with `libm`.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * std::f64::consts::PI * u2)
    }
}

/// A Zipf distribution over ranks `0..n` with exponent `s`: P(rank k) ∝ 1/(k+1)^s, sampled by
/// binary search in a fixed-point CDF table (the table is computed once with `libm::pow`).
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<u64>,
    /// `guide[b]`: how many entries of `cdf` are below `b << GUIDE_SHIFT` (`guide[GUIDE_LEN]`:
    /// all of them). A draw `u` with top bits `b` has its rank in `guide[b]..=guide[b + 1]`,
    /// so [`Zipf::sample`] searches that stretch instead of the whole table: over 42 000
    /// ranks a plain binary search was a third of the WC generator's time, mostly misses.
    guide: Vec<u32>,
}

/// Top bits of a draw that index [`Zipf`]'s guide.
const GUIDE_BITS: u32 = 12;
const GUIDE_SHIFT: u32 = 64 - GUIDE_BITS;
const GUIDE_LEN: usize = 1 << GUIDE_BITS;

impl Zipf {
    /// The distribution over `n ≥ 1` ranks.
    pub fn new(n: usize, s: f64) -> Self {
        let weights: Vec<f64> = (1..=n).map(|k| 1.0 / libm::pow(k as f64, s)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<u64> = weights
            .iter()
            .map(|w| {
                acc += w;
                // 2^64 · acc/total, saturating.
                let x = acc / total * 18_446_744_073_709_551_616.0;
                if x >= 18_446_744_073_709_551_615.0 {
                    u64::MAX
                } else {
                    x as u64
                }
            })
            .collect();
        *cdf.last_mut().expect("n ≥ 1") = u64::MAX;
        assert!(u32::try_from(n).is_ok(), "at most u32::MAX ranks");
        let mut guide: Vec<u32> = (0..GUIDE_LEN as u64)
            .map(|b| cdf.partition_point(|&c| c < b << GUIDE_SHIFT) as u32)
            .collect();
        guide.push(n as u32);
        Zipf { cdf, guide }
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// Always false (n ≥ 1).
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// A rank in `0..len`.
    #[inline]
    pub fn sample(&self, rng: &mut RecordRng) -> usize {
        self.rank_of(rng.next_u64())
    }

    /// The rank a draw `u` picks: the first whose cumulative weight is at least `u` —
    /// `cdf.partition_point(|&c| c < u)`, searched within the guide's stretch.
    #[inline]
    fn rank_of(&self, u: u64) -> usize {
        let b = (u >> GUIDE_SHIFT) as usize;
        let (lo, hi) = (self.guide[b] as usize, self.guide[b + 1] as usize);
        // The rank lies in lo..=hi; hi may be the table's length (then the last rank).
        let end = (hi + 1).min(self.cdf.len());
        let rank = lo + self.cdf[lo..end].partition_point(|&c| c < u);
        rank.min(self.cdf.len() - 1)
    }
}

/// Appends `v` in decimal.
#[inline]
pub fn push_decimal(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// The civil date `yyyymmdd` of `days` since 1970-01-01 (Howard Hinnant's algorithm, integer
/// only).
pub fn yyyymmdd(days: i64) -> u32 {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y * 10_000 + m * 100 + d) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_rng_is_random_access() {
        let key = chacha_key(1, "x");
        let a: Vec<u64> = (0..3).map(|_| RecordRng::new(&key, 5).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            RecordRng::new(&key, 5).next_u64(),
            RecordRng::new(&key, 6).next_u64()
        );
        assert_ne!(chacha_key(1, "x"), chacha_key(1, "y"));
    }

    #[test]
    fn the_guided_search_picks_the_rank_a_whole_search_does() {
        for (n, s) in [(1, 1.0), (2, 1.0), (1000, 1.0), (42_000, 1.0), (5000, 0.5)] {
            let z = Zipf::new(n, s);
            let whole = |u: u64| z.cdf.partition_point(|&c| c < u).min(n - 1);
            let key = chacha_key(9, "guide");
            let mut rng = RecordRng::new(&key, 0);
            let draws = (0..200_000).map(|_| rng.next_u64());
            // The edges: every guide boundary, next to it, and the cumulative weights.
            let edges = (0..GUIDE_LEN as u64).flat_map(|b| {
                let at = b << GUIDE_SHIFT;
                [at, at.wrapping_sub(1), at.wrapping_add(1)]
            });
            let weights = z
                .cdf
                .iter()
                .flat_map(|&c| [c, c.wrapping_sub(1), c.wrapping_add(1)]);
            for u in draws.chain(edges).chain(weights).chain([0, u64::MAX]) {
                assert_eq!(z.rank_of(u), whole(u), "n {n}, u {u:#x}");
            }
        }
    }

    #[test]
    fn zipf_and_dates() {
        let z = Zipf::new(1000, 1.0);
        let key = chacha_key(3, "z");
        let mut top = 0;
        for i in 0..10_000 {
            let r = z.sample(&mut RecordRng::new(&key, i));
            assert!(r < 1000);
            top += usize::from(r == 0);
        }
        // P(rank 0) = 1/H_1000 ≈ 0.1336.
        assert!((1100..1600).contains(&top), "{top}");
        assert_eq!(yyyymmdd(0), 19_700_101);
        assert_eq!(yyyymmdd(19_723), 20_240_101);
        assert_eq!(yyyymmdd(19_782), 20_240_229);
        let mut s = Vec::new();
        push_decimal(&mut s, 0);
        s.push(b' ');
        push_decimal(&mut s, 18_446_744_073_709_551_615);
        assert_eq!(s, b"0 18446744073709551615");
    }
}
