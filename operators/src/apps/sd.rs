//! SD — Spike Detection (2 operators; DSPBench).
//!
//! `moving_avg` (keyed by sensor id, path-ordered: it is the first operator, so the ingress
//! keeps each sensor's readings in input order) keeps the last 100 temperature readings of a
//! sensor and emits `(sensor, value, average)`; `spike_detect` (stateless, routed by sensor id)
//! outputs the readings that deviate from the average by more than 3 %.

use std::collections::VecDeque;
use std::io::Write as _;

use crate::codec::{Reader, Writer};
use crate::emitter::Out;
use crate::generate::{Generator, RecordRng, chacha_key};
use crate::key::encode_u32;
use crate::operator::{Malformed, Operator};
use crate::output_line::OutputText;
use crate::spec::{AppDef, Determinism, KindInfo, Registry};

/// Sensors of the Intel Berkeley lab trace (ids 1..=54).
pub const SENSORS: u32 = 54;
/// Readings between two knots of a sensor's temperature drift.
pub const DRIFT_KNOT_EPOCHS: u64 = 256;
/// One reading in this many is an injected spike (+20 %).
pub const SPIKE_ONE_IN: u64 = 500;
/// One line in this many is truncated (malformed), as the real trace has broken lines.
pub const MALFORMED_ONE_IN: u64 = 2000;
/// Largest window accepted.
pub const WINDOW_MAX: u64 = 10_000;
/// Largest relative deviation `spike_detect` accepts as its threshold (a million times the
/// average: anything larger flags nothing a float can hold apart from it).
pub const THRESHOLD_MAX: f64 = 1e6;

/// The SD app.
pub fn def() -> AppDef {
    super::app(
        "sd",
        "spike detection: moving average per sensor, flag readings 3 % off it",
        vec![
            super::op("moving_avg", "sd_moving_avg", &["spike_detect"]),
            super::op("spike_detect", "sd_spike_detect", &[]),
        ],
    )
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "sd_moving_avg",
        KindInfo::keyed(
            "moving average of a sensor's last readings; emits (sensor, value, average)",
            "sensor id",
            Determinism::PathOrdered,
        ),
        |p| {
            Ok(MovingAvg {
                window: p.u64_in("window", 100, 1..=WINDOW_MAX)? as usize,
            })
        },
    );
    r.register(
        "sd_spike_detect",
        KindInfo::stateless(
            "outputs readings with |value − average| > threshold · |average|",
            "sensor id",
        ),
        |p| {
            Ok(SpikeDetect {
                threshold: p.f64_in("threshold", 0.03, 0.0..=THRESHOLD_MAX)?,
            })
        },
    );
}

/// Parses an Intel-lab line `date time epoch sensor_id temperature humidity light voltage`.
/// Returns `(sensor id, temperature)`.
pub fn parse_line(line: &[u8]) -> Result<(u32, f64), Malformed> {
    let line = std::str::from_utf8(line).map_err(|_| Malformed::new("line is not utf-8"))?;
    let mut fields = line.split_ascii_whitespace();
    let mut field = |what| fields.next().ok_or(Malformed::new(what));
    let (_date, _time, _epoch) = (
        field("missing date")?,
        field("missing time")?,
        field("missing epoch")?,
    );
    let sensor: u32 = field("missing sensor id")?
        .parse()
        .map_err(|_| Malformed::new("bad sensor id"))?;
    let temperature: f64 = field("missing temperature")?
        .parse()
        .map_err(|_| Malformed::new("bad temperature"))?;
    if !temperature.is_finite() {
        return Err(Malformed::new("bad temperature"));
    }
    let (_h, _l, _v) = (
        field("missing humidity")?,
        field("missing light")?,
        field("missing voltage")?,
    );
    Ok((sensor, temperature))
}

/// How many times larger than the sum left behind a reading leaving the window must be for
/// [`MovingAvg`] to sum the window afresh (its rounding error would then be more than about a
/// millionth of the sum).
const RESUM_RATIO: f64 = (1u64 << 20) as f64;

/// Moving average over the last `window` readings of a sensor. State: the readings (oldest
/// first) and their running sum, summed afresh from the window when a reading leaves it that
/// dwarfs what remains, or the sum is no longer finite: subtracted, one huge reading left its
/// rounding in the sum for good (a reading of 1e20 made every later average 0), and an
/// overflow to infinity stayed infinite.
pub struct MovingAvg {
    /// Readings averaged.
    pub window: usize,
}

impl Operator for MovingAvg {
    type State = (VecDeque<f64>, f64);
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        (readings, sum): &mut Self::State,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let (sensor, value) = parse_line(payload)?;
        if key != encode_u32(sensor) {
            return Err(Malformed::new("sensor id does not match the key"));
        }
        readings.push_back(value);
        *sum += value;
        if readings.len() > self.window {
            let left = readings.pop_front().expect("non-empty");
            *sum -= left;
            if !sum.is_finite() || left.abs() > sum.abs() * RESUM_RATIO {
                *sum = readings.iter().sum();
            }
        }
        let average = *sum / readings.len() as f64;
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_u32(sensor);
            p.put_f64(value);
            p.put_f64(average);
        });
        Ok(())
    }

    /// The sensor id of a line read from a source: its key, as the generator's.
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        key.clear();
        match parse_line(record) {
            Ok((sensor, _)) => key.extend_from_slice(&encode_u32(sensor)),
            Err(_) => key.extend_from_slice(&crate::key::encode_u64(ordinal)),
        }
    }
}

/// Outputs `(sensor, value, average)` (as text) when `|value − average| > threshold · |average|`
/// (a negative average is as far from its readings as a positive one).
pub struct SpikeDetect {
    /// Relative deviation that makes a spike.
    pub threshold: f64,
}

impl Operator for SpikeDetect {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (sensor, value, average) = (r.u32()?, r.f64()?, r.f64()?);
        r.finish()?;
        if (value - average).abs() > self.threshold * average.abs() {
            out.output_with(|k, p| {
                k.extend_from_slice(key);
                let _ = write!(
                    p,
                    "spike sensor {sensor} value {value:.4} average {average:.4}"
                );
            });
        }
        Ok(())
    }

    /// The sensor id in decimal and the spike's description.
    fn output_text(&self, key: &[u8], value: &[u8], text: &mut OutputText) -> bool {
        let (Ok(sensor), Ok(line)) = (<[u8; 4]>::try_from(key), std::str::from_utf8(value)) else {
            return false;
        };
        // Writing into a String cannot fail.
        let _ = std::fmt::Write::write_fmt(
            &mut text.key,
            format_args!("{}", u32::from_le_bytes(sensor)),
        );
        text.value.push_str(line);
        true
    }
}

/// SD input: reading `i` is sensor `i % 54 + 1` at epoch `i / 54`; each sensor's temperature
/// drifts slowly (linear between random knots every 256 readings, 20–22 °C, slow enough that the
/// 100-reading average lags it by well under the 3 % threshold) with small noise and
/// rare spikes.
pub struct SdGenerator {
    key: [u8; 32],
}

impl SdGenerator {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        SdGenerator {
            key: chacha_key(seed, "sd"),
        }
    }

    /// Knot value (centi-degrees) of `sensor`'s drift at knot `k`: a hash, so any knot can be
    /// computed directly.
    fn knot(&self, sensor: u32, k: u64) -> f64 {
        let mut b = [0u8; 44];
        b[..32].copy_from_slice(&self.key);
        b[32..36].copy_from_slice(&sensor.to_le_bytes());
        b[36..].copy_from_slice(&k.to_le_bytes());
        2000.0 + (xxhash_rust::xxh3::xxh3_64(&b) % 200) as f64
    }
}

impl Generator for SdGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        key.clear();
        payload.clear();
        let sensor = (i % u64::from(SENSORS)) as u32 + 1;
        let epoch = i / u64::from(SENSORS);
        key.extend_from_slice(&encode_u32(sensor));
        let mut rng = RecordRng::new(&self.key, i);
        let (k, frac) = (epoch / DRIFT_KNOT_EPOCHS, epoch % DRIFT_KNOT_EPOCHS);
        let (a, b) = (self.knot(sensor, k), self.knot(sensor, k + 1));
        let centi = a + (b - a) * frac as f64 / DRIFT_KNOT_EPOCHS as f64;
        let noise = (rng.below(11) as f64 - 5.0) / 100.0;
        let mut temperature = centi / 100.0 + noise;
        if rng.chance(1, SPIKE_ONE_IN) {
            temperature *= 1.2;
        }
        // The trace samples every ~31 s from 2004-02-28 00:58:46.
        let seconds = 31 * epoch + 3526;
        let day = 12_476 + (seconds / 86_400) as i64; // 2004-02-28
        let date = crate::generate::yyyymmdd(day);
        let sod = seconds % 86_400;
        let _ = write!(
            payload,
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06} {} {} {:.4}",
            date / 10_000,
            date / 100 % 100,
            date % 100,
            sod / 3600,
            sod / 60 % 60,
            sod % 60,
            rng.below(1_000_000),
            epoch,
            sensor,
            temperature
        );
        if rng.chance(1, MALFORMED_ONE_IN) {
            return; // a truncated line: humidity, light and voltage missing
        }
        let humidity = 30.0 + rng.below(2000) as f64 / 100.0;
        let light = rng.below(100_000) as f64 / 100.0;
        let voltage = 2.3 + rng.below(500) as f64 / 1000.0;
        let _ = write!(payload, " {humidity:.4} {light:.2} {voltage:.5}");
    }
}
