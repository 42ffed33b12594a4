//! `topk_parse`: one Intel-lab line of text into the binary reading the window operator reads.
//!
//! A line is `date time epoch sensor temperature humidity light voltage`
//! (`2004-02-28 00:58:46.123456 0 1 19.9884 37.0933 45.08 2.69964`). A line that does not
//! parse (the data set has truncated lines) is malformed: counted under its reason and
//! dropped, never a panic.
//!
//! Its key is the line's sensor id (`encode_u32`, as the `sd` generator keys its records),
//! and it emits under that key: `topk_window` keeps one window per key and reads the key back
//! as the sensor in its sink text. A line read from a source (`--source`) gets that key from
//! [`Parse`]'s `record_key`, so a file of the generator's own lines gives the generated run.

use clasp_operators::codec::{Reader, Writer};
use clasp_operators::key::{encode_u32, encode_u64};
use clasp_operators::{Malformed, Operator, Out};

/// The parser (no state, no parameters).
pub struct Parse;

/// A parsed reading: what `topk_parse` emits and `topk_window` reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// Event time: seconds since 1970-01-01 UTC (the fraction of a second is dropped).
    pub time_s: u64,
    /// The data set's sequence number of the reading.
    pub epoch: u64,
    /// Degrees Celsius.
    pub celsius: f64,
}

impl Reading {
    /// Appends the binary form.
    pub fn write(&self, payload: &mut Vec<u8>) {
        payload.put_u64(self.time_s);
        payload.put_u64(self.epoch);
        payload.put_f64(self.celsius);
    }

    /// Reads the binary form [`Reading::write`] wrote.
    pub fn read(payload: &[u8]) -> Result<Reading, Malformed> {
        let mut r = Reader::new(payload);
        let reading = Reading {
            time_s: r.u64()?,
            epoch: r.u64()?,
            celsius: r.f64()?,
        };
        r.finish()?;
        Ok(reading)
    }
}

impl Operator for Parse {
    type State = ();

    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let (sensor, reading) = parse_line(payload)?;
        // `top` keeps a sensor's window under the key this emits with, and reads it back as the
        // sensor: a line under another key would start a window of its own.
        if key != encode_u32(sensor) {
            return Err(Malformed::new("sensor id does not match the key"));
        }
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            reading.write(p);
        });
        Ok(())
    }

    /// The sensor id of a line read from a source, as the `sd` generator keys its records.
    /// The default (the line's number) would route a sensor's readings to `top` on many paths
    /// out of order and give it a window per line, not per sensor. A line whose sensor id does
    /// not parse gets its number, and `process` counts it malformed; a truncated line keeps
    /// its sensor (as the generator's do) and is counted malformed all the same.
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        key.clear();
        match sensor_of(record) {
            Some(sensor) => key.extend_from_slice(&encode_u32(sensor)),
            None => key.extend_from_slice(&encode_u64(ordinal)),
        }
    }
}

/// The sensor id of a line (its fourth field), if it has one; the rest of the line is not
/// checked. [`parse_line`] reads the same field the same way, so a line this keys by its
/// ordinal never parses.
pub fn sensor_of(line: &[u8]) -> Option<u32> {
    let line = std::str::from_utf8(line).ok()?;
    line.split_ascii_whitespace().nth(3)?.parse().ok()
}

/// Parses a whole line into its sensor id and reading; every field must be present.
pub fn parse_line(line: &[u8]) -> Result<(u32, Reading), Malformed> {
    let line = std::str::from_utf8(line).map_err(|_| Malformed::new("line is not utf-8"))?;
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let [
        date,
        time,
        epoch,
        sensor,
        celsius,
        _humidity,
        _light,
        _voltage,
    ] = fields[..]
    else {
        return Err(Malformed::new("not 8 fields"));
    };
    let sensor: u32 = sensor
        .parse()
        .map_err(|_| Malformed::new("bad sensor id"))?;
    let celsius: f64 = celsius
        .parse()
        .map_err(|_| Malformed::new("bad temperature"))?;
    if !celsius.is_finite() {
        return Err(Malformed::new("bad temperature"));
    }
    let reading = Reading {
        time_s: event_time_s(date, time).ok_or(Malformed::new("bad date or time"))?,
        epoch: epoch.parse().map_err(|_| Malformed::new("bad epoch"))?,
        celsius,
    };
    Ok((sensor, reading))
}

/// `YYYY-MM-DD` and `HH:MM:SS[.ffffff]` (UTC) as seconds since 1970-01-01; `None` when either
/// is not a valid date or time of day from 1970 on.
pub fn event_time_s(date: &str, time: &str) -> Option<u64> {
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (year, month, day) = (d.next()??, d.next()??, d.next()??);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let whole = time.split('.').next()?;
    let mut t = whole.splitn(3, ':').map(|x| x.parse::<u64>().ok());
    let (h, m, s) = (t.next()??, t.next()??, t.next()??);
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm, integer
/// only).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_line_parses_and_a_truncated_one_is_malformed() {
        let (sensor, r) =
            parse_line(b"2004-02-28 00:58:46.123456 7 1 19.9884 37.0933 45.08 2.69964").unwrap();
        assert_eq!(sensor, 1);
        // 2004-02-28 is day 12 476 since the epoch.
        assert_eq!(r.time_s, 12_476 * 86_400 + 3526);
        assert_eq!((r.epoch, r.celsius), (7, 19.9884));
        let mut bytes = Vec::new();
        r.write(&mut bytes);
        assert_eq!(Reading::read(&bytes).unwrap(), r);
        assert!(parse_line(b"2004-02-28 00:58:46.123456 7 1 19.9884").is_err());
        assert!(parse_line(b"2004-13-28 00:58:46 7 1 19.9 1 1 1").is_err());
        assert!(parse_line(b"2004-02-28 00:58:46 7 1 NaN 1 1 1").is_err());
        assert!(parse_line(b"2004-02-28 00:58:46 7 x1 19.9 1 1 1").is_err());
        assert!(parse_line(&[0xff, b' ']).is_err());
        assert!(Reading::read(&bytes[..10]).is_err());
    }

    /// Every line of the `sd` generator, truncated ones included, is keyed as the generator
    /// keys it: by its sensor, never by its number.
    #[test]
    fn a_source_line_is_keyed_by_its_sensor_as_the_generator_keys_it() {
        let generator = clasp_operators::generate::generator("sd", 2).unwrap();
        let mut key = Vec::new();
        for i in 0..6000 {
            let (want, line) = generator.record(i);
            Parse.record_key(i, &line, &mut key);
            assert_eq!(key, want, "record {i}");
            assert_eq!(key.len(), 4, "record {i}");
        }
        // No sensor id: the line's number, and the line does not parse.
        let line = b"2004-02-28 00:58:46 7 x1 19.9 1 1 1";
        Parse.record_key(9, line, &mut key);
        assert_eq!(key, encode_u64(9));
        assert!(parse_line(line).is_err());
        Parse.record_key(10, b"too short", &mut key);
        assert_eq!(key, encode_u64(10));
    }

    #[test]
    fn days_match_the_civil_calendar() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }
}
