//! ETL — Extract, Transform and Load (10 operators; RIoTBench).
//!
//! `senml_parse` (routed by sensor id) → `range_filter` (keyed by observation type) →
//! `bloom_filter` (keyed by observation type) → `interpolate` (keyed by (observation type,
//! sensor id), path-ordered) → `join` (keyed by msg id) → `annotate` (routed by sensor id) →
//! { `csv_to_senml` → `publish` → `sink` ; `store` (keyed by sensor id) → `sink` }.
//!
//! A reading of 0 is a missing value: `range_filter` lets it through and `interpolate`
//! replaces it. A message that loses an observation to a filter never completes its join; its
//! partial state stays (it is order-free, and it is what the original does).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::Write as _;

use serde::Deserialize;

use crate::codec::{Reader, Writer};
use crate::emitter::Out;
use crate::generate::{Generator, RecordRng, chacha_key};
use crate::key::{encode_u32, encode_u64, push_component};
use crate::operator::{Malformed, Operator};
use crate::spec::{AppDef, Determinism, KindInfo, Registry};

/// Registered sensors (ids `0..SENSORS`): what the Bloom filter is trained on.
pub const SENSORS: u32 = 12;
/// One message in this many comes from an unregistered sensor (ids 100..150).
pub const UNREGISTERED_ONE_IN: u64 = 50;
/// One observation in this many is out of range; as many are 0 (missing).
pub const ODD_VALUE_ONE_IN: u64 = 100;
/// Observation types of every message, in order.
pub const OBSERVATIONS: [(&str, &str); 3] =
    [("temperature", "Cel"), ("humidity", "%RH"), ("light", "lx")];
/// Bits of the Bloom filter.
pub const BLOOM_BITS: u32 = 50;
/// Hash functions of the Bloom filter.
pub const BLOOM_HASHES: u64 = 3;
/// Base time of the messages (s).
pub const BASE_TIME_S: u64 = 1_700_000_000;
const LOCATIONS: [&str; 4] = ["lab-floor-0", "lab-floor-1", "lab-floor-2", "lab-floor-3"];
const JOIN_PARTS: usize = OBSERVATIONS.len();

/// The ETL app.
pub fn def() -> AppDef {
    super::app(
        "etl",
        "extract, transform, load (RIoTBench): SenML messages through filters, join, annotate, store",
        vec![
            super::op("senml_parse", "etl_senml_parse", &["range_filter"]),
            super::op("range_filter", "etl_range_filter", &["bloom_filter"]),
            super::op("bloom_filter", "etl_bloom_filter", &["interpolate"]),
            super::op("interpolate", "etl_interpolate", &["join"]),
            super::op("join", "etl_join", &["annotate"]),
            super::op("annotate", "etl_annotate", &["csv_to_senml", "store"]),
            super::op("csv_to_senml", "etl_csv_to_senml", &["publish"]),
            super::op("publish", "etl_publish", &["sink"]),
            super::op("store", "etl_store", &["sink"]),
            super::op("sink", "sink", &[]),
        ],
    )
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "etl_senml_parse",
        KindInfo::stateless(
            "\"msg_id {SenML}\" → one record per observation",
            "sensor id",
        ),
        |_| Ok(SenmlParse),
    );
    r.register(
        "etl_range_filter",
        KindInfo::keyed(
            "drops values outside [min, max] (0 = missing passes)",
            "observation type",
            Determinism::OrderFree,
        ),
        |p| {
            Ok(RangeFilter {
                min: p.f64("min", 20.0)?,
                max: p.f64("max", 80.0)?,
            })
        },
    );
    r.register(
        "etl_bloom_filter",
        KindInfo::keyed(
            "drops sensors not in a 50-bit, 3-hash Bloom filter",
            "observation type",
            Determinism::OrderFree,
        ),
        |_| Ok(BloomFilter),
    );
    r.register(
        "etl_interpolate",
        KindInfo::keyed(
            "replaces a 0 by the mean of the last values",
            "(observation type, sensor id)",
            Determinism::PathOrdered,
        ),
        |p| {
            Ok(Interpolate {
                window: p.u64_in("window", 5, 1..=1000)? as usize,
            })
        },
    );
    r.register(
        "etl_join",
        KindInfo::keyed(
            "collects a message's observations; emits when complete",
            "msg id",
            Determinism::OrderFree,
        ),
        |_| Ok(Join),
    );
    r.register(
        "etl_annotate",
        KindInfo::stateless("adds the sensor's location; to both branches", "sensor id"),
        |_| Ok(Annotate),
    );
    r.register(
        "etl_csv_to_senml",
        KindInfo::stateless("record → SenML JSON text", "sensor id"),
        |_| Ok(CsvToSenml),
    );
    r.register(
        "etl_publish",
        KindInfo::stateless("adds the MQTT topic", "sensor id"),
        |_| Ok(Publish),
    );
    r.register(
        "etl_store",
        KindInfo::keyed(
            "batches a sensor's records; emits (sensor, batch no, size) per write",
            "sensor id",
            Determinism::OrderFree,
        ),
        |p| {
            Ok(Store {
                batch: p.u64_in("batch", 3, 1..=1000)?,
            })
        },
    );
}

#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(borrow)]
    n: Cow<'a, str>,
    #[serde(borrow)]
    u: Cow<'a, str>,
    v: f64,
}

#[derive(Deserialize)]
struct Senml<'a> {
    #[serde(borrow)]
    bn: Cow<'a, str>,
    bt: u64,
    #[serde(borrow)]
    e: [Entry<'a>; JOIN_PARTS],
}

/// The observation record passed from `senml_parse` to `join`:
/// `(msg_id u64, sensor u32, time u64, type, value f64)`.
fn put_observation(p: &mut Vec<u8>, msg: u64, sensor: u32, time: u64, kind: &[u8], value: f64) {
    p.put_u64(msg);
    p.put_u32(sensor);
    p.put_u64(time);
    p.put_bytes(kind);
    p.put_f64(value);
}

fn read_observation<'a>(r: &mut Reader<'a>) -> Result<(u64, u32, u64, &'a [u8], f64), Malformed> {
    Ok((r.u64()?, r.u32()?, r.u64()?, r.bytes()?, r.f64()?))
}

/// Parses `msg_id {SenML JSON with 3 entries}`, emits one observation per entry keyed by its
/// type.
pub struct SenmlParse;

impl Operator for SenmlParse {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let space = payload
            .iter()
            .position(|&b| b == b' ')
            .ok_or(Malformed::new("missing msg id"))?;
        let msg: u64 = std::str::from_utf8(&payload[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(Malformed::new("bad msg id"))?;
        let m: Senml<'_> = serde_json::from_slice(&payload[space + 1..])
            .map_err(|_| Malformed::new("bad senml"))?;
        let sensor: u32 =
            m.bn.strip_prefix("urn:dev:sensor:")
                .and_then(|s| s.parse().ok())
                .ok_or(Malformed::new("bad base name"))?;
        if key != encode_u32(sensor) {
            return Err(Malformed::new("sensor id does not match the key"));
        }
        if m.e.iter().any(|e| !e.v.is_finite() || e.n.is_empty()) {
            return Err(Malformed::new("bad observation"));
        }
        for e in &m.e {
            let _unit = &e.u;
            out.emit_with(|k, p| {
                k.extend_from_slice(e.n.as_bytes());
                put_observation(p, msg, sensor, m.bt, e.n.as_bytes(), e.v);
            });
        }
        Ok(())
    }

    /// The sensor of a message read from a source (`msg_id SENML`): its key, as the
    /// generator's.
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        key.clear();
        let sensor = record
            .iter()
            .position(|&b| b == b' ')
            .and_then(|space| serde_json::from_slice::<Senml<'_>>(&record[space + 1..]).ok())
            .and_then(|m| m.bn.strip_prefix("urn:dev:sensor:")?.parse::<u32>().ok());
        match sensor {
            Some(sensor) => key.extend_from_slice(&encode_u32(sensor)),
            None => key.extend_from_slice(&crate::key::encode_u64(ordinal)),
        }
    }
}

/// Drops values outside the type's valid range (0, a missing value, passes). State: the range
/// (set from the parameters on first use) and counts passed and dropped.
pub struct RangeFilter {
    /// Default lower bound.
    pub min: f64,
    /// Default upper bound.
    pub max: f64,
}

impl Operator for RangeFilter {
    /// `(Some((min, max)), passed, dropped)`.
    type State = (Option<(f64, f64)>, u64, u64);
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        state: &mut Self::State,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (_, _, _, _, value) = read_observation(&mut r)?;
        r.finish()?;
        let (range, passed, dropped) = state;
        let (min, max) = *range.get_or_insert((self.min, self.max));
        if value == 0.0 || (min..=max).contains(&value) {
            *passed += 1;
            out.emit(key, payload);
        } else {
            *dropped += 1;
        }
        Ok(())
    }
}

/// Bit positions of `sensor` in the Bloom filter.
pub fn bloom_bits(sensor: u32) -> [u32; BLOOM_HASHES as usize] {
    std::array::from_fn(|i| {
        (xxhash_rust::xxh3::xxh3_64_with_seed(&sensor.to_le_bytes(), i as u64 + 1)
            % u64::from(BLOOM_BITS)) as u32
    })
}

/// The filter trained on the registered sensors.
pub fn bloom_trained() -> u64 {
    (0..SENSORS)
        .flat_map(bloom_bits)
        .fold(0u64, |f, b| f | (1 << b))
}

/// Keeps observations of sensors in a Bloom filter of the registered sensors (false positives
/// pass, as with any Bloom filter). State: the filter bits (trained on first use) and counts.
pub struct BloomFilter;

impl Operator for BloomFilter {
    /// `(filter bits, passed, dropped)`.
    type State = (u64, u64, u64);
    fn process(
        &mut self,
        _key: &[u8],
        payload: &[u8],
        state: &mut Self::State,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (_, sensor, _, kind, _) = read_observation(&mut r)?;
        r.finish()?;
        let (filter, passed, dropped) = state;
        if *filter == 0 {
            *filter = bloom_trained();
        }
        if bloom_bits(sensor).iter().all(|&b| *filter & (1 << b) != 0) {
            *passed += 1;
            out.emit_with(|k, p| {
                push_component(k, kind);
                push_component(k, &encode_u32(sensor));
                p.extend_from_slice(payload);
            });
        } else {
            *dropped += 1;
        }
        Ok(())
    }
}

/// Replaces a 0 by the mean of the last `window` values of the (type, sensor) (50 when there
/// are none); the value used joins the window. Emits keyed by msg id.
pub struct Interpolate {
    /// Values remembered.
    pub window: usize,
}

impl Operator for Interpolate {
    type State = VecDeque<f64>;
    fn process(
        &mut self,
        _key: &[u8],
        payload: &[u8],
        last: &mut VecDeque<f64>,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (msg, sensor, time, kind, value) = read_observation(&mut r)?;
        r.finish()?;
        let value = if value == 0.0 {
            if last.is_empty() {
                50.0
            } else {
                last.iter().sum::<f64>() / last.len() as f64
            }
        } else {
            value
        };
        last.push_back(value);
        if last.len() > self.window {
            last.pop_front();
        }
        out.emit_with(|k, p| {
            k.extend_from_slice(&encode_u64(msg));
            put_observation(p, msg, sensor, time, kind, value);
        });
        Ok(())
    }
}

/// Collects a message's observations; when all three are in, emits
/// `(msg, sensor, time, [(type, value)] sorted by type)` keyed by sensor and frees the state.
pub struct Join;

impl Operator for Join {
    /// `(sensor, time, [(type, value)] sorted by type)`.
    type State = (u32, u64, Vec<(String, f64)>);
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        state: &mut Self::State,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (msg, sensor, time, kind, value) = read_observation(&mut r)?;
        r.finish()?;
        let kind = std::str::from_utf8(kind).map_err(|_| Malformed::new("type is not utf-8"))?;
        let (s, t, parts) = state;
        if !parts.is_empty() && (*s != sensor || *t != time) {
            return Err(Malformed::new("observations of one message disagree"));
        }
        if parts.iter().any(|(k, _)| k == kind) {
            return Err(Malformed::new("duplicate observation"));
        }
        (*s, *t) = (sensor, time);
        // Kept sorted by type, so the state does not depend on arrival order.
        let at = parts.partition_point(|(k, _)| k.as_str() < kind);
        parts.insert(at, (kind.to_owned(), value));
        if parts.len() == JOIN_PARTS {
            out.emit_with(|k, p| {
                k.extend_from_slice(&encode_u32(sensor));
                p.put_u64(msg);
                p.put_u32(sensor);
                p.put_u64(time);
                for (kind, v) in parts.iter() {
                    p.put_bytes(kind.as_bytes());
                    p.put_f64(*v);
                }
            });
            let _ = key;
            *state = Default::default();
        }
        Ok(())
    }
}

/// Appends the sensor's location (metadata) and sends the record to both branches.
pub struct Annotate;

impl Operator for Annotate {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (_msg, sensor) = (r.u64()?, r.u32()?);
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.extend_from_slice(payload);
            p.put_bytes(LOCATIONS[(sensor % 4) as usize].as_bytes());
        });
        Ok(())
    }
}

/// A joined, annotated record: `(msg, sensor, time, [(type, value)], location)`.
type Joined<'a> = (u64, u32, u64, [(&'a [u8], f64); JOIN_PARTS], &'a [u8]);

fn read_joined<'a>(r: &mut Reader<'a>) -> Result<Joined<'a>, Malformed> {
    let (msg, sensor, time) = (r.u64()?, r.u32()?, r.u64()?);
    let mut parts = [(&[][..], 0.0); JOIN_PARTS];
    for p in &mut parts {
        *p = (r.bytes()?, r.f64()?);
    }
    let location = r.bytes()?;
    Ok((msg, sensor, time, parts, location))
}

/// Writes the annotated record as SenML JSON text.
pub struct CsvToSenml;

impl Operator for CsvToSenml {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (msg, sensor, time, parts, location) = read_joined(&mut r)?;
        r.finish()?;
        let location =
            std::str::from_utf8(location).map_err(|_| Malformed::new("location is not utf-8"))?;
        let mut names = [""; JOIN_PARTS];
        for (n, (k, _)) in names.iter_mut().zip(&parts) {
            *n = std::str::from_utf8(k).map_err(|_| Malformed::new("type is not utf-8"))?;
        }
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            let _ = write!(p, "{{\"bn\":\"urn:dev:sensor:{sensor}\",\"bt\":{time},\"msg\":{msg},\"loc\":\"{location}\",\"e\":[");
            for (i, (n, (_, v))) in names.iter().zip(&parts).enumerate() {
                let sep = if i > 0 { "," } else { "" };
                let _ = write!(p, "{sep}{{\"n\":\"{n}\",\"v\":{v:.3}}}");
            }
            p.extend_from_slice(b"]}");
        });
        Ok(())
    }
}

/// Prefixes the MQTT topic of the sensor (the original publishes to a broker).
pub struct Publish;

impl Operator for Publish {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let sensor = u32::from_le_bytes(
            key.try_into()
                .map_err(|_| Malformed::new("key is not a sensor id"))?,
        );
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            let _ = write!(p, "etl/sensors/{sensor} ");
            p.extend_from_slice(payload);
        });
        Ok(())
    }
}

/// Buffers a sensor's records and writes them `batch` at a time. State: records stored,
/// batches written, and the msg ids of the pending batch (flushed at end of stream). A write
/// emits `(sensor, batch number, records)` — not the records, whose grouping into batches
/// depends on arrival order — so its emissions are order-free and can be compared.
pub struct Store {
    /// Records per write.
    pub batch: u64,
}

impl Store {
    fn write(&self, key: &[u8], state: &mut (u64, u64, Vec<u64>), out: &mut Out<'_>) {
        let (stored, batches, pending) = state;
        *stored += pending.len() as u64;
        *batches += 1;
        let (n, b) = (pending.len() as u64, *batches);
        pending.clear();
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            let _ = write!(p, "stored batch {b} of {n} records");
        });
    }
}

impl Operator for Store {
    /// `(records stored, batches written, pending msg ids)`.
    type State = (u64, u64, Vec<u64>);
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        state: &mut Self::State,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (msg, ..) = read_joined(&mut r)?;
        r.finish()?;
        state.2.push(msg);
        if state.2.len() as u64 >= self.batch {
            self.write(key, state, out);
        }
        Ok(())
    }

    fn end_of_key(&mut self, key: &[u8], state: &mut Self::State, out: &mut Out<'_>) {
        if !state.2.is_empty() {
            self.write(key, state, out);
        }
    }
}

/// ETL input: `msg_id {SenML}` with three observations per message from 12 registered sensors
/// (2 % from unregistered ones), values 20–80 with 1 % out of range and 1 % zeros per value.
pub struct EtlGenerator {
    key: [u8; 32],
}

impl EtlGenerator {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        EtlGenerator {
            key: chacha_key(seed, "etl"),
        }
    }
}

impl Generator for EtlGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        key.clear();
        payload.clear();
        let mut rng = RecordRng::new(&self.key, i);
        let sensor = if rng.chance(1, UNREGISTERED_ONE_IN) {
            100 + rng.below(50) as u32
        } else {
            rng.below(u64::from(SENSORS)) as u32
        };
        key.extend_from_slice(&encode_u32(sensor));
        let _ = write!(
            payload,
            "{i} {{\"bn\":\"urn:dev:sensor:{sensor}\",\"bt\":{},\"e\":[",
            BASE_TIME_S + i / 10
        );
        for (j, (n, u)) in OBSERVATIONS.iter().enumerate() {
            let v = match rng.below(ODD_VALUE_ONE_IN) {
                0 => 0.0,
                1 => 85.0 + rng.below(1000) as f64 / 100.0,
                _ => 20.0 + rng.below(6000) as f64 / 100.0,
            };
            let sep = if j > 0 { "," } else { "" };
            let _ = write!(payload, "{sep}{{\"n\":\"{n}\",\"u\":\"{u}\",\"v\":{v:.2}}}");
        }
        payload.extend_from_slice(b"]}");
    }
}
