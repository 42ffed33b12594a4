//! NWM — Network Monitor (10 operators). Every operator is routed or keyed by host.
//!
//! `parse_lines` → `split` → two branches joined at the end:
//! `success_filter` → `success_parse` → `join`, and
//! `fail_filter` → `fail_parse` → `fail_aggregate` (per host: (day, failures)) →
//! `aggr_filter` (failures ≥ 3) → `fail_functor` (per host: last day flagged) → `join`.
//! `join` (racy: the branches race) outputs "host locked today" for a success of a host that
//! was flagged that day.

use std::borrow::Cow;
use std::io::Write as _;

use serde::Deserialize;

use crate::codec::{Reader, Writer};
use crate::emitter::Out;
use crate::generate::{Generator, RecordRng, chacha_key, yyyymmdd};
use crate::operator::{Malformed, Operator};
use crate::output_line::OutputText;
use crate::spec::{AppDef, Determinism, KindInfo, Registry};

/// Hosts.
pub const HOSTS: u64 = 30;
/// Records per simulated day (so each host sees ~100 events a day).
pub const RECORDS_PER_DAY: u64 = 3000;
/// Day of record 0 (days since 1970-01-01: 2024-01-01).
pub const FIRST_DAY: i64 = 19_723;
/// Failures per 10 events.
pub const FAILURES_PER_10: u64 = 9;
/// One line in this many is malformed.
pub const MALFORMED_ONE_IN: u64 = 5000;
const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];
const REGIONS: [&str; 4] = ["eu-west", "eu-north", "us-east", "ap-south"];
const STATUS_SUCCESS: u32 = 1;
const STATUS_FAIL: u32 = 0;
const FROM_SUCCESS: u32 = 0;
const FROM_FLAG: u32 = 1;

/// The NWM app.
pub fn def() -> AppDef {
    super::app(
        "nwm",
        "network monitor: lock hosts with a success after ≥ 3 failures the same day",
        vec![
            super::op("parse_lines", "nwm_parse_lines", &["split"]),
            super::op("split", "nwm_split", &["success_filter", "fail_filter"]),
            super::op("success_filter", "nwm_status_filter", &["success_parse"])
                .with("status", "success"),
            super::op("success_parse", "nwm_success_parse", &["join"]),
            super::op("fail_filter", "nwm_status_filter", &["fail_parse"]).with("status", "fail"),
            super::op("fail_parse", "nwm_fail_parse", &["fail_aggregate"]),
            super::op("fail_aggregate", "nwm_fail_aggregate", &["aggr_filter"]),
            super::op("aggr_filter", "nwm_aggr_filter", &["fail_functor"]),
            super::op("fail_functor", "nwm_fail_functor", &["join"]),
            super::op("join", "nwm_join", &[]),
        ],
    )
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "nwm_parse_lines",
        KindInfo::stateless(
            "JSON event → binary (host, status, method, region, day)",
            "host",
        ),
        |_| Ok(ParseLines),
    );
    r.register(
        "nwm_split",
        KindInfo::stateless("sends each event to both branches", "host"),
        |_| Ok(Split),
    );
    r.register(
        "nwm_status_filter",
        KindInfo::stateless("keeps events with the given status", "host"),
        |p| {
            let status = match p.str("status", "success")?.as_str() {
                "success" => STATUS_SUCCESS,
                "fail" => STATUS_FAIL,
                other => {
                    return Err(format!(
                        "parameter `status` must be \"success\" or \"fail\", got {other:?}"
                    ));
                }
            };
            Ok(StatusFilter { status })
        },
    );
    r.register(
        "nwm_success_parse",
        KindInfo::stateless("success → (day) for the join", "host"),
        |_| Ok(SuccessParse),
    );
    r.register(
        "nwm_fail_parse",
        KindInfo::stateless("failure → (day)", "host"),
        |_| Ok(FailParse),
    );
    r.register(
        "nwm_fail_aggregate",
        KindInfo::keyed(
            "failures of a host on its current day; emits (day, count)",
            "host",
            Determinism::PathOrdered,
        ),
        |_| Ok(FailAggregate),
    );
    r.register(
        "nwm_aggr_filter",
        KindInfo::stateless("keeps counts ≥ failures_min", "host"),
        |p| {
            Ok(AggrFilter {
                failures_min: p.u64_in("failures_min", 3, 1..=u64::from(u32::MAX))?,
            })
        },
    );
    r.register(
        "nwm_fail_functor",
        KindInfo::keyed(
            "flags a host once per day",
            "host",
            Determinism::PathOrdered,
        ),
        |_| Ok(FailFunctor),
    );
    r.register(
        "nwm_join",
        KindInfo::keyed(
            "success of a host flagged that day → \"host locked today\"",
            "host",
            Determinism::Racy,
        ),
        |_| Ok(Join),
    );
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    host: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    region: Cow<'a, str>,
    #[serde(borrow)]
    event_time: Cow<'a, str>,
}

/// Parses `event_time` `yyyymmdd`.
pub fn parse_day(s: &str) -> Result<u32, Malformed> {
    if s.len() != 8 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Malformed::new("event_time is not yyyymmdd"));
    }
    s.parse()
        .map_err(|_| Malformed::new("event_time is not yyyymmdd"))
}

/// JSON → `(status u32, day u32, method, region)`.
pub struct ParseLines;

impl Operator for ParseLines {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let e: Event<'_> =
            serde_json::from_slice(payload).map_err(|_| Malformed::new("bad json event"))?;
        if e.host.as_bytes() != key {
            return Err(Malformed::new("host does not match the key"));
        }
        let status = match e.status.as_ref() {
            "success" => STATUS_SUCCESS,
            "fail" => STATUS_FAIL,
            _ => return Err(Malformed::new("unknown status")),
        };
        let day = parse_day(&e.event_time)?;
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_u32(status);
            p.put_u32(day);
            p.put_bytes(e.method.as_bytes());
            p.put_bytes(e.region.as_bytes());
        });
        Ok(())
    }

    /// The host of an event read from a source: its key, as the generator's.
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        key.clear();
        match serde_json::from_slice::<Event<'_>>(record) {
            Ok(e) => key.extend_from_slice(e.host.as_bytes()),
            Err(_) => key.extend_from_slice(&crate::key::encode_u64(ordinal)),
        }
    }
}

/// Sends each event to every successor (both branches).
pub struct Split;

impl Operator for Split {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        out.emit(key, payload);
        Ok(())
    }
}

/// Keeps events of one status.
pub struct StatusFilter {
    status: u32,
}

impl Operator for StatusFilter {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        if Reader::new(payload).u32()? == self.status {
            out.emit(key, payload);
        }
        Ok(())
    }
}

/// Success event → `(FROM_SUCCESS, day)` for the join.
pub struct SuccessParse;

impl Operator for SuccessParse {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (_status, day) = (r.u32()?, r.u32()?);
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_u32(FROM_SUCCESS);
            p.put_u32(day);
        });
        Ok(())
    }
}

/// Failure event → `(day)`.
pub struct FailParse;

impl Operator for FailParse {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (_status, day) = (r.u32()?, r.u32()?);
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_u32(day);
        });
        Ok(())
    }
}

/// Failures of a host on its current day: a failure of a new day restarts the count. Emits
/// `(day, count)`. Path-ordered: it relies on seeing a host's days in order.
pub struct FailAggregate;

impl Operator for FailAggregate {
    /// `(day, failures that day)`.
    type State = (u32, u64);
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        (cur, count): &mut (u32, u64),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let day = r.u32()?;
        r.finish()?;
        if day != *cur {
            (*cur, *count) = (day, 0);
        }
        *count += 1;
        let n = *count;
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_u32(day);
            p.put_u64(n);
        });
        Ok(())
    }
}

/// Keeps `(day, count)` with `count ≥ failures_min`.
pub struct AggrFilter {
    /// Failures that flag a host.
    pub failures_min: u64,
}

impl Operator for AggrFilter {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (_day, count) = (r.u32()?, r.u64()?);
        if count >= self.failures_min {
            out.emit(key, payload);
        }
        Ok(())
    }
}

/// Flags a host once per day: emits `(FROM_FLAG, day)` to the join the first time its day is
/// seen. State: the last day flagged.
pub struct FailFunctor;

impl Operator for FailFunctor {
    type State = u32;
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        flagged: &mut u32,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (day, _count) = (r.u32()?, r.u64()?);
        if *flagged != day {
            *flagged = day;
            out.emit_with(|k, p| {
                k.extend_from_slice(key);
                p.put_u32(FROM_FLAG);
                p.put_u32(day);
            });
        }
        Ok(())
    }
}

/// Joins the branches per host. State: `(day flagged, day a lock was output)`. A flag records
/// its day; a success on the flagged day outputs `"host locked today <day>"` once per day.
pub struct Join;

impl Operator for Join {
    type State = (u32, u32);
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        (flagged, locked): &mut (u32, u32),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (from, day) = (r.u32()?, r.u32()?);
        r.finish()?;
        match from {
            FROM_FLAG => *flagged = (*flagged).max(day),
            FROM_SUCCESS => {
                if *flagged == day && *locked != day {
                    *locked = day;
                    out.output_with(|k, p| {
                        k.extend_from_slice(key);
                        let _ = write!(p, "host locked today {day}");
                    });
                }
            }
            _ => return Err(Malformed::new("unknown join input")),
        }
        Ok(())
    }

    /// The host and what happened to it.
    fn output_text(&self, key: &[u8], value: &[u8], text: &mut OutputText) -> bool {
        let (Ok(host), Ok(what)) = (std::str::from_utf8(key), std::str::from_utf8(value)) else {
            return false;
        };
        text.key.push_str(host);
        text.value.push_str(what);
        true
    }
}

/// NWM input: JSON events of 30 hosts (uniform), 90 % failures, days advancing every 3000
/// records.
pub struct NwmGenerator {
    key: [u8; 32],
}

impl NwmGenerator {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        NwmGenerator {
            key: chacha_key(seed, "nwm"),
        }
    }
}

impl Generator for NwmGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        key.clear();
        payload.clear();
        let mut rng = RecordRng::new(&self.key, i);
        let host = rng.below(HOSTS);
        let _ = write!(key, "host-{host:02}");
        let status = if rng.below(10) < FAILURES_PER_10 {
            "fail"
        } else {
            "success"
        };
        let method = METHODS[rng.below(4) as usize];
        let region = REGIONS[(host % 4) as usize];
        let day = yyyymmdd(FIRST_DAY + (i / RECORDS_PER_DAY) as i64);
        let _ = write!(
            payload,
            "{{\"host\":\"host-{host:02}\",\"status\":\"{status}\",\"method\":\"{method}\",\"region\":\"{region}\",\"event_time\":\"{day}\"}}"
        );
        if rng.chance(1, MALFORMED_ONE_IN) {
            payload.truncate(payload.len() - 3);
        }
    }
}
