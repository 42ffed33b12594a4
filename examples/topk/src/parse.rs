//! `topk_parse`: one Intel-lab line of text into the binary reading the window operator reads.
//!
//! A line is `date time epoch sensor temperature humidity light voltage`
//! (`2004-02-28 00:58:46.123456 0 1 19.9884 37.0933 45.08 2.69964`). A line that does not
//! parse (the data set has truncated lines) is malformed: counted under its reason and
//! dropped, never a panic.

use clasp_operators::codec::{Reader, Writer};
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
        let reading = parse_line(payload)?;
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            reading.write(p);
        });
        Ok(())
    }
}

/// Parses a whole line; every field must be present.
pub fn parse_line(line: &[u8]) -> Result<Reading, Malformed> {
    let line = std::str::from_utf8(line).map_err(|_| Malformed::new("line is not utf-8"))?;
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let [
        date,
        time,
        epoch,
        _sensor,
        celsius,
        _humidity,
        _light,
        _voltage,
    ] = fields[..]
    else {
        return Err(Malformed::new("not 8 fields"));
    };
    let celsius: f64 = celsius
        .parse()
        .map_err(|_| Malformed::new("bad temperature"))?;
    if !celsius.is_finite() {
        return Err(Malformed::new("bad temperature"));
    }
    Ok(Reading {
        time_s: event_time_s(date, time).ok_or(Malformed::new("bad date or time"))?,
        epoch: epoch.parse().map_err(|_| Malformed::new("bad epoch"))?,
        celsius,
    })
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
        let r =
            parse_line(b"2004-02-28 00:58:46.123456 7 1 19.9884 37.0933 45.08 2.69964").unwrap();
        // 2004-02-28 is day 12 476 since the epoch.
        assert_eq!(r.time_s, 12_476 * 86_400 + 3526);
        assert_eq!((r.epoch, r.celsius), (7, 19.9884));
        let mut bytes = Vec::new();
        r.write(&mut bytes);
        assert_eq!(Reading::read(&bytes).unwrap(), r);
        assert!(parse_line(b"2004-02-28 00:58:46.123456 7 1 19.9884").is_err());
        assert!(parse_line(b"2004-13-28 00:58:46 7 1 19.9 1 1 1").is_err());
        assert!(parse_line(b"2004-02-28 00:58:46 7 1 NaN 1 1 1").is_err());
        assert!(parse_line(&[0xff, b' ']).is_err());
        assert!(Reading::read(&bytes[..10]).is_err());
    }

    #[test]
    fn days_match_the_civil_calendar() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }
}
