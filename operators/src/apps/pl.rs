//! PL — Page Load (6 operators).
//!
//! `parse` → `filter` (known URL prefix) → `join` (url → category, static table) →
//! `filter_known` (drop "unknown") → `aggregate` (keyed by category: sum and count of load
//! times; outputs the running average every 1000 records) → `sink`. `parse`, `filter` and
//! `join` are routed by url, `filter_known` by category.

use std::io::Write as _;

use crate::codec::{Reader, Writer};
use crate::emitter::Out;
use crate::generate::{Generator, RecordRng, chacha_key};
use crate::operator::{Malformed, Operator};
use crate::spec::{AppDef, Determinism, KindInfo, Registry};

/// The prefix `filter` keeps by default.
pub const KNOWN_PREFIX: &str = "https://www.example.com/";
/// URLs of the generator: `(url, category in the static table, or None if absent)`. Every
/// 4th is 20× more frequent; two have an unknown prefix, one is absent from the table and one
/// is listed as "unknown", so every filter has something to drop.
pub const URLS: [(&str, Option<&str>); 20] = [
    ("https://www.example.com/", Some("home")),
    ("https://www.example.com/news/world", Some("news")),
    ("https://www.example.com/news/local", Some("news")),
    ("https://www.example.com/shop/cart", Some("shop")),
    ("https://www.example.com/shop/item", Some("shop")),
    ("https://www.example.com/video/live", Some("video")),
    ("https://www.example.com/video/clips", Some("video")),
    ("https://www.example.com/sports", Some("sports")),
    ("https://www.example.com/news/tech", Some("news")),
    ("https://www.example.com/help", Some("unknown")),
    ("https://www.example.com/shop/checkout", Some("shop")),
    ("https://www.example.com/sports/scores", Some("sports")),
    ("https://www.example.com/video/search", Some("video")),
    ("https://www.example.com/about", None),
    ("https://cdn.other.net/lib.js", Some("static")),
    ("https://www.example.com/news/weather", Some("news")),
    ("https://www.example.com/shop/deals", Some("shop")),
    ("https://ads.tracker.io/pixel", None),
    ("https://www.example.com/sports/live", Some("sports")),
    ("https://www.example.com/account", Some("home")),
];
/// Weight of every 4th URL (the others weigh 1).
pub const HOT_URL_WEIGHT: u64 = 20;
/// Median load time (ms) of the log-normal distribution.
pub const LOAD_MS_MEDIAN: f64 = 800.0;
/// σ of the log-normal distribution of load times.
pub const LOAD_SIGMA: f64 = 0.6;
/// One line in this many is malformed.
pub const MALFORMED_ONE_IN: u64 = 5000;

/// The PL app.
pub fn def() -> AppDef {
    super::app(
        "pl",
        "page load: average load time per page category",
        vec![
            super::op("parse", "pl_parse", &["filter"]),
            super::op("filter", "pl_filter", &["join"]),
            super::op("join", "pl_join", &["filter_known"]),
            super::op("filter_known", "pl_filter_known", &["aggregate"]),
            super::op("aggregate", "pl_aggregate", &["sink"]),
            super::op("sink", "sink", &[]),
        ],
    )
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "pl_parse",
        KindInfo::stateless("\"url user_id load_time_ms\" → record", "url"),
        |_| Ok(Parse),
    );
    r.register(
        "pl_filter",
        KindInfo::stateless("keeps URLs with a known prefix", "url"),
        |p| {
            Ok(Filter {
                prefix: p.str("prefix", KNOWN_PREFIX)?,
            })
        },
    );
    r.register(
        "pl_join",
        KindInfo::stateless(
            "url → category (static table); emits keyed by category",
            "url",
        ),
        |_| Ok(Join),
    );
    r.register(
        "pl_filter_known",
        KindInfo::stateless("drops category \"unknown\"", "category"),
        |_| Ok(FilterKnown),
    );
    r.register(
        "pl_aggregate",
        KindInfo::keyed(
            "sum and count of load times; emits the running average every `every` records",
            "category",
            Determinism::OrderFree,
        )
        .order_dependent_emissions(),
        |p| {
            Ok(Aggregate {
                every: p.u64_in("every", 1000, 1..=u64::from(u32::MAX))?,
            })
        },
    );
}

/// Parses `url user_id load_time_ms` into `(url, user_id, load_time_ms)`.
pub struct Parse;

impl Operator for Parse {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let line = std::str::from_utf8(payload).map_err(|_| Malformed::new("line is not utf-8"))?;
        let mut f = line.split_ascii_whitespace();
        let url = f.next().ok_or(Malformed::new("missing url"))?;
        let user: u64 = f
            .next()
            .ok_or(Malformed::new("missing user id"))?
            .parse()
            .map_err(|_| Malformed::new("bad user id"))?;
        let load: u64 = f
            .next()
            .ok_or(Malformed::new("missing load time"))?
            .parse()
            .map_err(|_| Malformed::new("bad load time"))?;
        if f.next().is_some() {
            return Err(Malformed::new("extra fields"));
        }
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_bytes(url.as_bytes());
            p.put_u64(user);
            p.put_u64(load);
        });
        Ok(())
    }

    /// The URL (the first field) of a line read from a source: the key it is routed by, as
    /// the generator's.
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        key.clear();
        match record
            .split(u8::is_ascii_whitespace)
            .find(|f| !f.is_empty())
        {
            Some(url) => key.extend_from_slice(url),
            None => key.extend_from_slice(&crate::key::encode_u64(ordinal)),
        }
    }
}

/// Keeps URLs starting with `prefix`.
pub struct Filter {
    /// Known prefix.
    pub prefix: String,
}

impl Operator for Filter {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        if Reader::new(payload)
            .bytes()?
            .starts_with(self.prefix.as_bytes())
        {
            out.emit(key, payload);
        }
        Ok(())
    }
}

/// The category of `url` in the static table ("unknown" when absent).
pub fn category_of(url: &[u8]) -> &'static str {
    URLS.iter()
        .find(|(u, _)| u.as_bytes() == url)
        .and_then(|(_, c)| *c)
        .unwrap_or("unknown")
}

/// Looks the category up and emits `(load_time_ms)` keyed by category.
pub struct Join;

impl Operator for Join {
    type State = ();
    fn process(
        &mut self,
        _key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (url, _user, load) = (r.bytes()?, r.u64()?, r.u64()?);
        let category = category_of(url);
        out.emit_with(|k, p| {
            k.extend_from_slice(category.as_bytes());
            p.put_u64(load);
        });
        Ok(())
    }
}

/// Drops category "unknown".
pub struct FilterKnown;

impl Operator for FilterKnown {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        if key != b"unknown" {
            out.emit(key, payload);
        }
        Ok(())
    }
}

/// Sum and count of a category's load times; every `every` records emits the running average
/// (text) to its successors. The state is order-free; the averages emitted are not (they depend
/// on which records arrived first), so they and everything downstream are not compared.
pub struct Aggregate {
    /// Emit every this many records of a category.
    pub every: u64,
}

impl Operator for Aggregate {
    /// `(sum of load times in ms, count)`.
    type State = (u64, u64);
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        (sum, count): &mut (u64, u64),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let load = r.u64()?;
        r.finish()?;
        *sum = sum.saturating_add(load);
        *count += 1;
        if *count % self.every == 0 {
            let average = *sum as f64 / *count as f64;
            let n = *count;
            out.emit_with(|k, p| {
                k.extend_from_slice(key);
                let _ = write!(p, "average_load_ms {average:.3} after {n}");
            });
        }
        Ok(())
    }
}

/// PL input: `url user_id load_time_ms` lines.
pub struct PlGenerator {
    key: [u8; 32],
    /// Cumulative URL weights.
    cumulative: Vec<u64>,
}

impl PlGenerator {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut acc = 0;
        let cumulative = (0..URLS.len())
            .map(|i| {
                acc += if i % 4 == 0 { HOT_URL_WEIGHT } else { 1 };
                acc
            })
            .collect();
        PlGenerator {
            key: chacha_key(seed, "pl"),
            cumulative,
        }
    }
}

impl Generator for PlGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        key.clear();
        payload.clear();
        let mut rng = RecordRng::new(&self.key, i);
        let total = *self.cumulative.last().expect("URLs");
        let x = rng.below(total);
        let url = URLS[self.cumulative.partition_point(|&c| c <= x)].0;
        key.extend_from_slice(url.as_bytes());
        let load = libm::exp(libm::log(LOAD_MS_MEDIAN) + LOAD_SIGMA * rng.normal());
        let user = rng.below(100_000);
        if rng.chance(1, MALFORMED_ONE_IN) {
            let _ = write!(payload, "{url} user-{user}");
        } else {
            let _ = write!(payload, "{url} {user} {}", load.round() as u64);
        }
    }
}
