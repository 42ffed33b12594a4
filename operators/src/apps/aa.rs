//! AA — Advertisement Analytics (5 operators; Yahoo Streaming Benchmark).
//!
//! `deserialize` → `filter` (views) → `project` (ad, time) → `join` (ad → campaign, cached in
//! state; keyed by ad id) → `campaign_count` (per-campaign counts per 1 s event-time window;
//! keyed by campaign id). The first three are routed by ad id.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write as _;

use serde::Deserialize;

use crate::codec::{Reader, Writer};
use crate::emitter::Out;
use crate::generate::{Generator, RecordRng, chacha_key};
use crate::operator::{Malformed, Operator};
use crate::output_line::OutputText;
use crate::spec::{AppDef, Determinism, KindInfo, Registry};

/// Campaigns in the static ad table.
pub const CAMPAIGNS: u32 = 100;
/// Ads per campaign.
pub const ADS_PER_CAMPAIGN: u32 = 10;
/// Ad types.
pub const AD_TYPES: [&str; 5] = ["banner", "modal", "sponsored-search", "mail", "mobile"];
/// Event time of record 0 (ms since the epoch).
pub const EVENT_TIME_START_MS: u64 = 1_700_000_000_000;
/// Events per second of event time (so a 1 s window holds 10 000 events, ~100 per campaign).
pub const EVENTS_PER_S: u64 = 10_000;
/// Event times are up to this much earlier than their record's nominal time (disorder).
pub const JITTER_MS_MAX: u64 = 200;
/// One event in this many is truncated JSON.
pub const MALFORMED_ONE_IN: u64 = 5000;
/// Open windows a campaign keeps at most; beyond it the oldest closes early.
pub const OPEN_WINDOWS_MAX: usize = 64;

/// The AA app.
pub fn def() -> AppDef {
    super::app(
        "aa",
        "advertisement analytics (YSB): views per campaign per 1 s event-time window",
        vec![
            super::op("deserialize", "aa_deserialize", &["filter"]),
            super::op("filter", "aa_filter", &["project"]),
            super::op("project", "aa_project", &["join"]),
            super::op("join", "aa_join", &["campaign_count"]),
            super::op("campaign_count", "aa_campaign_count", &[]),
        ],
    )
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "aa_deserialize",
        KindInfo::stateless("JSON ad event → binary record", "ad id"),
        |_| Ok(DeserializeEvent),
    );
    r.register(
        "aa_filter",
        KindInfo::stateless("keeps event_type == \"view\"", "ad id"),
        |_| Ok(Filter),
    );
    r.register(
        "aa_project",
        KindInfo::stateless("keeps (ad id, event time)", "ad id"),
        |_| Ok(Project),
    );
    r.register(
        "aa_join",
        KindInfo::keyed(
            "ad → campaign from the static table, cached in state",
            "ad id",
            Determinism::OrderFree,
        ),
        |_| Ok(Join::new()),
    );
    r.register(
        "aa_campaign_count",
        KindInfo::keyed(
            "views per campaign per event-time window, output when the window closes",
            "campaign id",
            Determinism::OrderFree,
        ),
        |p| {
            Ok(CampaignCount {
                window_ms: p.u64_in("window_ms", 1000, 1..=86_400_000)?,
                lateness_windows: p.u64_in(
                    "lateness_windows",
                    2,
                    0..=(OPEN_WINDOWS_MAX as u64 - 1),
                )?,
            })
        },
    );
}

/// A uuid-shaped id derived from `(domain, n)`: the static ad/campaign ids (the same for every
/// seed) and the random user/page ids.
pub fn uuid(out: &mut Vec<u8>, domain: &str, n: u64) {
    let h = xxhash_rust::xxh3::xxh3_128_with_seed(
        &n.to_le_bytes(),
        xxhash_rust::xxh3::xxh3_64(domain.as_bytes()),
    );
    let hex = format!("{h:032x}");
    let _ = write!(
        out,
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    );
}

fn ad_id(ad: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(36);
    uuid(&mut v, "ad", u64::from(ad));
    v
}

fn campaign_id(campaign: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(36);
    uuid(&mut v, "campaign", u64::from(campaign));
    v
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    user_id: Cow<'a, str>,
    #[serde(borrow)]
    page_id: Cow<'a, str>,
    #[serde(borrow)]
    ad_id: Cow<'a, str>,
    #[serde(borrow)]
    ad_type: Cow<'a, str>,
    #[serde(borrow)]
    event_type: Cow<'a, str>,
    event_time: u64,
    #[serde(borrow)]
    ip_address: Cow<'a, str>,
}

/// Parses the JSON event into the binary record
/// `(event_type, ad_id, event_time, user_id, page_id, ad_type, ip_address)`.
pub struct DeserializeEvent;

impl Operator for DeserializeEvent {
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
        if e.ad_id.as_bytes() != key {
            return Err(Malformed::new("ad id does not match the key"));
        }
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_bytes(e.event_type.as_bytes());
            p.put_bytes(e.ad_id.as_bytes());
            p.put_u64(e.event_time);
            p.put_bytes(e.user_id.as_bytes());
            p.put_bytes(e.page_id.as_bytes());
            p.put_bytes(e.ad_type.as_bytes());
            p.put_bytes(e.ip_address.as_bytes());
        });
        Ok(())
    }

    /// The ad id of an event read from a source: its key, as the generator's.
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        key.clear();
        match serde_json::from_slice::<Event<'_>>(record) {
            Ok(e) => key.extend_from_slice(e.ad_id.as_bytes()),
            Err(_) => key.extend_from_slice(&crate::key::encode_u64(ordinal)),
        }
    }
}

/// Keeps view events.
pub struct Filter;

impl Operator for Filter {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        if Reader::new(payload).bytes()? == b"view" {
            out.emit(key, payload);
        }
        Ok(())
    }
}

/// Keeps `(ad_id, event_time)`.
pub struct Project;

impl Operator for Project {
    type State = ();
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let _event_type = r.bytes()?;
        let (ad, time) = (r.bytes()?, r.u64()?);
        out.emit_with(|k, p| {
            k.extend_from_slice(key);
            p.put_bytes(ad);
            p.put_u64(time);
        });
        Ok(())
    }
}

/// Looks the ad's campaign up in the static table (the original asks Redis) and caches it in
/// the ad's state; emits `(event_time)` keyed by campaign id.
pub struct Join {
    table: HashMap<Vec<u8>, u32>,
    campaign_ids: Vec<Vec<u8>>,
}

impl Join {
    /// With the static ad → campaign table.
    pub fn new() -> Self {
        let table = (0..CAMPAIGNS * ADS_PER_CAMPAIGN)
            .map(|ad| (ad_id(ad), ad / ADS_PER_CAMPAIGN))
            .collect();
        Join {
            table,
            campaign_ids: (0..CAMPAIGNS).map(campaign_id).collect(),
        }
    }
}

impl Default for Join {
    fn default() -> Self {
        Self::new()
    }
}

impl Operator for Join {
    /// The cached campaign index.
    type State = Option<u32>;
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        cached: &mut Option<u32>,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let (_ad, time) = (r.bytes()?, r.u64()?);
        r.finish()?;
        let campaign = match *cached {
            Some(c) => c,
            None => {
                let c = *self.table.get(key).ok_or(Malformed::new("unknown ad"))?;
                *cached = Some(c);
                c
            }
        };
        let id = &self.campaign_ids[campaign as usize];
        out.emit_with(|k, p| {
            k.extend_from_slice(id);
            p.put_u64(time);
        });
        Ok(())
    }
}

/// Per-campaign view counts per event-time window.
///
/// State: open windows `(window index, count)` ascending, the highest window index closed, and
/// the number of late events dropped. An event for window `w` counts in `w`; then every open
/// window older than `newest − lateness_windows` closes and is output as
/// `(window start ms, count)`; at end of stream every open window closes. An event for a
/// window already closed is late: counted and dropped. With lateness above the disorder
/// between paths no event is late, and then state and outputs are order-free.
pub struct CampaignCount {
    /// Window length.
    pub window_ms: u64,
    /// Windows a window stays open after a newer one appears.
    pub lateness_windows: u64,
}

type Windows = (Vec<(u64, u64)>, Option<u64>, u64);

impl CampaignCount {
    fn close(&self, key: &[u8], w: u64, count: u64, closed: &mut Option<u64>, out: &mut Out<'_>) {
        *closed = Some(closed.map_or(w, |c| c.max(w)));
        let start_ms = w * self.window_ms;
        out.output_with(|k, p| {
            k.extend_from_slice(key);
            p.put_u64(start_ms);
            p.put_u64(count);
        });
    }
}

impl Operator for CampaignCount {
    type State = Windows;
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        state: &mut Windows,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(payload);
        let time = r.u64()?;
        r.finish()?;
        let (open, closed, late) = state;
        let w = time / self.window_ms;
        if closed.is_some_and(|c| w <= c) {
            *late += 1;
            return Ok(());
        }
        match open.binary_search_by_key(&w, |&(x, _)| x) {
            Ok(i) => open[i].1 += 1,
            Err(i) => open.insert(i, (w, 1)),
        }
        let newest = open.last().expect("non-empty").0;
        let mut n_close = open
            .iter()
            .take_while(|&&(x, _)| x + self.lateness_windows < newest)
            .count();
        n_close = n_close.max(open.len().saturating_sub(OPEN_WINDOWS_MAX));
        for (x, c) in open.drain(..n_close).collect::<Vec<_>>() {
            self.close(key, x, c, closed, out);
        }
        Ok(())
    }

    fn end_of_key(&mut self, key: &[u8], state: &mut Windows, out: &mut Out<'_>) {
        let (open, closed, _) = state;
        for (x, c) in std::mem::take(open) {
            self.close(key, x, c, closed, out);
        }
    }

    /// The campaign id, and the window's start and count: `window_start_ms=S views=N`.
    fn output_text(&self, key: &[u8], value: &[u8], text: &mut OutputText) -> bool {
        let mut r = Reader::new(value);
        let (Ok(campaign), Ok(start_ms), Ok(views)) = (std::str::from_utf8(key), r.u64(), r.u64())
        else {
            return false;
        };
        if r.finish().is_err() {
            return false;
        }
        text.key.push_str(campaign);
        // Writing into a String cannot fail.
        let _ = std::fmt::Write::write_fmt(
            &mut text.value,
            format_args!("window_start_ms={start_ms} views={views}"),
        );
        true
    }
}

/// AA input: JSON events over 100 campaigns × 10 ads (uniform), 5 ad types, 90 % views and
/// 5 % each clicks and purchases; event time advances 10 000 events per second with up to
/// 200 ms of disorder.
pub struct AaGenerator {
    key: [u8; 32],
    ads: Vec<Vec<u8>>,
}

impl AaGenerator {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        AaGenerator {
            key: chacha_key(seed, "aa"),
            ads: (0..CAMPAIGNS * ADS_PER_CAMPAIGN).map(ad_id).collect(),
        }
    }
}

impl Generator for AaGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        key.clear();
        payload.clear();
        let mut rng = RecordRng::new(&self.key, i);
        let ad = &self.ads[rng.below(self.ads.len() as u64) as usize];
        key.extend_from_slice(ad);
        let event_type = match rng.below(20) {
            0 => "click",
            1 => "purchase",
            _ => "view",
        };
        let ad_type = AD_TYPES[rng.below(AD_TYPES.len() as u64) as usize];
        let time = EVENT_TIME_START_MS + i * 1000 / EVENTS_PER_S - rng.below(JITTER_MS_MAX + 1);
        payload.extend_from_slice(b"{\"user_id\":\"");
        uuid(payload, "user", rng.next_u64());
        payload.extend_from_slice(b"\",\"page_id\":\"");
        uuid(payload, "page", rng.next_u64());
        payload.extend_from_slice(b"\",\"ad_id\":\"");
        payload.extend_from_slice(ad);
        let ip = rng.next_u64();
        let _ = write!(
            payload,
            "\",\"ad_type\":\"{ad_type}\",\"event_type\":\"{event_type}\",\"event_time\":{time},\"ip_address\":\"{}.{}.{}.{}\"}}",
            ip & 0xff,
            (ip >> 8) & 0xff,
            (ip >> 16) & 0xff,
            (ip >> 24) & 0xff
        );
        if rng.chance(1, MALFORMED_ONE_IN) {
            payload.truncate(payload.len() / 2);
        }
    }
}
