//! Each operator on hand-made inputs.

mod common;

use clasp_operators::apps::{aa, etl, nwm, pl, sd, wc, wc_words};
use clasp_operators::codec::{Reader, Writer};
use clasp_operators::key::{encode_u32, encode_u64};
use clasp_operators::{Determinism, Target};
use common::{Harness, u64_le};

#[test]
fn wc_split_and_count() {
    let mut h = Harness::new(wc::Split, 1, Determinism::Stateless);
    let e = h.process(&encode_u64(0), b"the cat  the").unwrap();
    let words: Vec<&[u8]> = e.iter().map(|(_, k, _)| &k[..]).collect();
    assert_eq!(words, [&b"the"[..], b"cat", b"the"]);
    assert!(e.iter().all(|(t, _, _)| *t == Target::Operator(1)));
    assert_eq!(
        h.process(b"x", b"Hello world").unwrap_err(),
        "sentence has a character that is not a lowercase letter"
    );
    assert_eq!(h.process(b"x", b"   ").unwrap_err(), "empty sentence");
    // Longer than the word-at-a-time scan takes: the byte loop, with the same results.
    let long: Vec<u8> = b"ab  cde ".repeat(40);
    assert!(long.len() > wc_words::SCAN_BYTES_MAX);
    let e = h.process(b"x", &long).unwrap();
    assert_eq!(e.len(), 80);
    assert!(
        e.iter()
            .enumerate()
            .all(|(i, (_, k, _))| { k.as_slice() == if i % 2 == 0 { &b"ab"[..] } else { b"cde" } })
    );
    let mut bad = long.clone();
    bad[300] = b'A';
    assert_eq!(
        h.process(b"x", &bad).unwrap_err(),
        "sentence has a character that is not a lowercase letter"
    );
    assert_eq!(h.process(b"x", &[b' '; 300]).unwrap_err(), "empty sentence");

    let mut c = Harness::new(wc::Count { window_words: 2 }, 0, Determinism::OrderFree);
    assert!(c.process(b"the", b"").unwrap().is_empty());
    let e = c.process(b"the", b"").unwrap();
    assert_eq!(
        e,
        vec![(Target::Output, b"the".to_vec(), 2u64.to_le_bytes().to_vec())]
    );
    assert_eq!(c.rt.state_of(b"the"), Some(&2));
}

fn sd_line(sensor: u32, t: f64) -> Vec<u8> {
    format!("2004-02-28 00:58:46.1 1 {sensor} {t} 40.0 100.0 2.5").into_bytes()
}

#[test]
fn sd_window_edges_and_spike_threshold() {
    let mut h = Harness::new(sd::MovingAvg { window: 3 }, 1, Determinism::PathOrdered);
    let key = encode_u32(7);
    let mut avgs = Vec::new();
    for t in [10.0, 20.0, 30.0, 40.0] {
        let e = h.process(&key, &sd_line(7, t)).unwrap();
        let mut r = Reader::new(&e[0].2);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.f64().unwrap(), t);
        avgs.push(r.f64().unwrap());
    }
    // The window holds 3 readings: the 4th evicts the 1st.
    assert_eq!(avgs, [10.0, 15.0, 20.0, 30.0]);
    assert_eq!(
        h.process(&key, b"2004-02-28 00:58:46.1 1 7 21.5")
            .unwrap_err(),
        "missing humidity"
    );
    assert_eq!(
        h.process(&encode_u32(8), &sd_line(7, 1.0)).unwrap_err(),
        "sensor id does not match the key"
    );
    assert_eq!(
        h.process(&key, &sd_line(7, f64::NAN)).unwrap_err(),
        "bad temperature"
    );

    let mut s = Harness::new(
        sd::SpikeDetect { threshold: 0.03 },
        0,
        Determinism::Stateless,
    );
    let mut req = |v: f64, a: f64| {
        let mut p = Vec::new();
        p.put_u32(1);
        p.put_f64(v);
        p.put_f64(a);
        s.process(&encode_u32(1), &p).unwrap().len()
    };
    assert_eq!(req(103.0, 100.0), 0, "exactly 3 % is not a spike");
    assert_eq!(req(103.01, 100.0), 1);
    assert_eq!(req(96.9, 100.0), 1);
    assert_eq!(req(100.0, 100.0), 0);
    // A negative average: as far from -100 as 103 is from 100.
    assert_eq!(req(-100.0, -100.0), 0);
    assert_eq!(req(-103.01, -100.0), 1);
}

/// One huge reading (or two that overflow a sum) affects the averages only while it is in the
/// window: a running sum kept its rounding, or an infinity, for good.
#[test]
fn sd_averages_forget_a_huge_reading_once_it_leaves_the_window() {
    for huge in [[1e20, 20.0], [1e308, 1e308]] {
        let mut h = Harness::new(sd::MovingAvg { window: 3 }, 1, Determinism::PathOrdered);
        let key = encode_u32(7);
        let mut average = |t: f64| {
            let e = h.process(&key, &sd_line(7, t)).unwrap();
            let mut r = Reader::new(&e[0].2);
            let _ = (r.u32().unwrap(), r.f64().unwrap());
            r.f64().unwrap()
        };
        for t in [20.0, huge[0], huge[1], 20.0, 20.0] {
            average(t);
        }
        assert_eq!(average(20.0), 20.0, "after {huge:?}");
    }
}

fn aa_event(ad: &str, event_type: &str, time: u64) -> Vec<u8> {
    format!(
        "{{\"user_id\":\"u\",\"page_id\":\"p\",\"ad_id\":\"{ad}\",\"ad_type\":\"banner\",\"event_type\":\"{event_type}\",\"event_time\":{time},\"ip_address\":\"1.2.3.4\"}}"
    )
    .into_bytes()
}

#[test]
fn aa_chain_and_windows() {
    let gen_ad = clasp_operators::generate::generator("aa", 1)
        .unwrap()
        .record(0)
        .0;
    let ad = std::str::from_utf8(&gen_ad).unwrap().to_owned();
    let mut d = Harness::new(aa::DeserializeEvent, 1, Determinism::Stateless);
    let rec = d
        .process(ad.as_bytes(), &aa_event(&ad, "view", 1500))
        .unwrap()
        .remove(0)
        .2;
    assert_eq!(
        d.process(ad.as_bytes(), b"{\"user_id\":").unwrap_err(),
        "bad json event"
    );
    let mut f = Harness::new(aa::Filter, 1, Determinism::Stateless);
    assert_eq!(f.process(ad.as_bytes(), &rec).unwrap().len(), 1);
    let click = d
        .process(ad.as_bytes(), &aa_event(&ad, "click", 1500))
        .unwrap()
        .remove(0)
        .2;
    assert!(f.process(ad.as_bytes(), &click).unwrap().is_empty());
    let mut p = Harness::new(aa::Project, 1, Determinism::Stateless);
    let projected = p.process(ad.as_bytes(), &rec).unwrap().remove(0).2;
    let mut j = Harness::new(aa::Join::new(), 1, Determinism::OrderFree);
    let joined = j.process(ad.as_bytes(), &projected).unwrap().remove(0);
    assert_eq!(j.rt.state_of(ad.as_bytes()), Some(&Some(ad_campaign(&ad))));
    assert_eq!(u64_le(&joined.2), 1500);
    let mut bad = Vec::new();
    bad.put_bytes(b"nope");
    bad.put_u64(1);
    assert_eq!(j.process(b"nope", &bad).unwrap_err(), "unknown ad");

    // Windows of 1000 ms, lateness 1 window.
    let mut c = Harness::new(
        aa::CampaignCount {
            window_ms: 1000,
            lateness_windows: 1,
        },
        0,
        Determinism::OrderFree,
    );
    let mut at = |t: u64| c.process(b"camp", &t.to_le_bytes()).unwrap();
    assert!(at(100).is_empty());
    assert!(at(999).is_empty());
    assert!(
        at(1000).is_empty(),
        "window 0 stays open for one more window"
    );
    let closed = at(2000);
    assert_eq!(closed.len(), 1);
    assert_eq!((u64_le(&closed[0].2), u64_le(&closed[0].2[8..])), (0, 2));
    assert!(at(500).is_empty(), "late: window 0 is closed");
    assert!(at(1999).is_empty(), "window 1 is still open");
    let flushed = c.end();
    let got: Vec<(u64, u64)> = flushed
        .iter()
        .map(|(_, _, p)| (u64_le(p), u64_le(&p[8..])))
        .collect();
    assert_eq!(got, [(1000, 2), (2000, 1)]);
    let state = c.rt.state_of(b"camp").unwrap();
    assert_eq!((state.0.len(), state.1, state.2), (0, Some(2), 1));
}

fn ad_campaign(ad: &str) -> u32 {
    (0..1000u32)
        .find(|&i| {
            let mut v = Vec::new();
            aa::uuid(&mut v, "ad", u64::from(i));
            v == ad.as_bytes()
        })
        .unwrap()
        / 10
}

#[test]
fn pl_operators() {
    let url = "https://www.example.com/news/world";
    let mut p = Harness::new(pl::Parse, 1, Determinism::Stateless);
    let rec = p
        .process(url.as_bytes(), format!("{url} 12 345").as_bytes())
        .unwrap()
        .remove(0)
        .2;
    assert_eq!(
        p.process(url.as_bytes(), b"u x 1").unwrap_err(),
        "bad user id"
    );
    let mut f = Harness::new(
        pl::Filter {
            prefix: pl::KNOWN_PREFIX.into(),
        },
        1,
        Determinism::Stateless,
    );
    assert_eq!(f.process(url.as_bytes(), &rec).unwrap().len(), 1);
    let mut j = Harness::new(pl::Join, 1, Determinism::Stateless);
    let joined = j.process(url.as_bytes(), &rec).unwrap().remove(0);
    assert_eq!((&joined.1[..], u64_le(&joined.2)), (&b"news"[..], 345));
    assert_eq!(pl::category_of(b"https://www.example.com/about"), "unknown");
    let mut fk = Harness::new(pl::FilterKnown, 1, Determinism::Stateless);
    assert!(fk.process(b"unknown", &joined.2).unwrap().is_empty());
    let mut a = Harness::new(pl::Aggregate { every: 2 }, 1, Determinism::OrderFree);
    assert!(
        a.process(b"news", &100u64.to_le_bytes())
            .unwrap()
            .is_empty()
    );
    let e = a.process(b"news", &300u64.to_le_bytes()).unwrap();
    assert_eq!(e[0].2, b"average_load_ms 200.000 after 2");
    assert_eq!(a.rt.state_of(b"news"), Some(&(400, 2)));
}

#[test]
fn nwm_lock_rule() {
    let json = |status: &str, day: &str| {
        format!(
            "{{\"host\":\"h\",\"status\":\"{status}\",\"method\":\"GET\",\"region\":\"eu\",\"event_time\":\"{day}\"}}"
        )
    };
    let app = clasp_operators::apps::builtin("nwm").unwrap();
    let day1 = "20240101";
    let day2 = "20240102";
    // success, 3 failures, success (locks), success (already locked), then a new day: 2
    // failures and a success (no lock), then a malformed date.
    let lines = [
        json("success", day1),
        json("fail", day1),
        json("fail", day1),
        json("fail", day1),
        json("success", day1),
        json("success", day1),
        json("fail", day2),
        json("fail", day2),
        json("success", day2),
        json("fail", "2024-01-02"),
    ];
    let inputs: Vec<(&[u8], &[u8])> = lines.iter().map(|l| (&b"h"[..], l.as_bytes())).collect();
    let report = clasp_operators::oracle::run_inputs(&app, inputs, &Default::default());
    let outs: Vec<&[u8]> = report.outputs.iter().map(|o| &o.payload[..]).collect();
    assert_eq!(outs, [&b"host locked today 20240101"[..]]);
    assert_eq!(report.processed["fail_functor"], 1);
    assert_eq!(
        report.malformed["parse_lines"]["event_time is not yyyymmdd"],
        1
    );

    let mut agg = Harness::new(nwm::FailAggregate, 1, Determinism::PathOrdered);
    for (day, expect) in [(1u32, 1u64), (1, 2), (2, 1)] {
        let e = agg.process(b"h", &day.to_le_bytes()).unwrap();
        assert_eq!(u64_le(&e[0].2[4..]), expect);
    }
}

fn observation(msg: u64, sensor: u32, kind: &str, value: f64) -> Vec<u8> {
    let mut p = Vec::new();
    p.put_u64(msg);
    p.put_u32(sensor);
    p.put_u64(0);
    p.put_bytes(kind.as_bytes());
    p.put_f64(value);
    p
}

#[test]
fn etl_filters_interpolation_join_store() {
    etl_range_filter();
    etl_bloom_filter();
    etl_interpolate();
    etl_join();
    etl_store();
}

/// The range filter passes readings inside its bounds and counts the ones it drops.
fn etl_range_filter() {
    let mut rf = Harness::new(
        etl::RangeFilter {
            min: 20.0,
            max: 80.0,
        },
        1,
        Determinism::OrderFree,
    );
    assert_eq!(
        rf.process(b"temperature", &observation(1, 1, "temperature", 50.0))
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        rf.process(b"temperature", &observation(1, 1, "temperature", 0.0))
            .unwrap()
            .len(),
        1
    );
    assert!(
        rf.process(b"temperature", &observation(1, 1, "temperature", 80.5))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        rf.rt.state_of(b"temperature"),
        Some(&(Some((20.0, 80.0)), 2, 1))
    );
}

/// The Bloom filter never rejects a trained sensor and rejects an untrained one.
fn etl_bloom_filter() {
    let mut bf = Harness::new(etl::BloomFilter, 1, Determinism::OrderFree);
    for s in 0..etl::SENSORS {
        assert_eq!(
            bf.process(b"light", &observation(1, s, "light", 30.0))
                .unwrap()
                .len(),
            1,
            "no false negatives"
        );
    }
    let filter = etl::bloom_trained();
    let rejected = (100..150)
        .find(|&s| etl::bloom_bits(s).iter().any(|&b| filter & (1 << b) == 0))
        .unwrap();
    assert!(
        bf.process(b"light", &observation(1, rejected, "light", 30.0))
            .unwrap()
            .is_empty()
    );
    assert!(filter < 1 << etl::BLOOM_BITS);
}

/// Interpolation replaces a reading with the mean of the last `window` values (50 with none).
fn etl_interpolate() {
    let mut ip = Harness::new(etl::Interpolate { window: 5 }, 1, Determinism::PathOrdered);
    let value_of = |e: &common::Emitted| {
        let mut r = Reader::new(&e[0].2);
        let _ = (r.u64(), r.u32(), r.u64(), r.bytes());
        r.f64().unwrap()
    };
    assert_eq!(
        value_of(&ip.process(b"k", &observation(1, 1, "t", 0.0)).unwrap()),
        50.0,
        "no history: 50"
    );
    for v in [10.0, 20.0, 30.0, 40.0, 60.0] {
        ip.process(b"k", &observation(1, 1, "t", v)).unwrap();
    }
    // Last 5 values: 10, 20, 30, 40, 60 → mean 32.
    assert_eq!(
        value_of(&ip.process(b"k", &observation(1, 1, "t", 0.0)).unwrap()),
        32.0
    );
}

/// The join emits once all three kinds of a message arrived, rejects duplicates and frees state.
fn etl_join() {
    let mut j = Harness::new(etl::Join, 1, Determinism::OrderFree);
    let key = encode_u64(9);
    assert!(
        j.process(&key, &observation(9, 3, "light", 1.0))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        j.process(&key, &observation(9, 3, "light", 1.0))
            .unwrap_err(),
        "duplicate observation"
    );
    assert!(
        j.process(&key, &observation(9, 3, "humidity", 2.0))
            .unwrap()
            .is_empty()
    );
    let done = j
        .process(&key, &observation(9, 3, "temperature", 3.0))
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].1, encode_u32(3));
    assert_eq!(
        j.rt.state_of(&key),
        None,
        "a completed join frees its state"
    );
}

/// The store writes full batches and flushes the partial one at the end.
fn etl_store() {
    let mut st = Harness::new(etl::Store { batch: 3 }, 1, Determinism::OrderFree);
    let mut rec = Vec::new();
    rec.put_u64(1);
    rec.put_u32(3);
    rec.put_u64(0);
    for (k, v) in [("humidity", 1.0), ("light", 2.0), ("temperature", 3.0)] {
        rec.put_bytes(k.as_bytes());
        rec.put_f64(v);
    }
    rec.put_bytes(b"lab");
    let sk = encode_u32(3);
    let mut writes = 0;
    for _ in 0..4 {
        writes += st.process(&sk, &rec).unwrap().len();
    }
    assert_eq!(writes, 1);
    let flushed = st.end();
    assert_eq!(flushed[0].2, b"stored batch 2 of 1 records");
    assert_eq!(st.rt.state_of(&sk), Some(&(4, 2, vec![])));
}

/// A source's record is keyed by the app's first operator as the generator keys it: SD and ETL
/// by the sensor, PL by the URL, AA by the ad, NWM by the host, WC and SYN by the record's
/// ordinal.
#[test]
fn first_operators_key_records_read_from_a_source_as_the_generators_do() {
    for app in clasp_operators::apps::builtin_names() {
        let spec = clasp_operators::apps::builtin(app).unwrap();
        let first = spec.instantiate(spec.source);
        let generator = clasp_operators::generate::generator(&spec.generator, 3).unwrap();
        let mut key = Vec::new();
        for i in 0..500 {
            let (want, payload) = generator.record(i);
            first.record_key(i, &payload, &mut key);
            assert_eq!(key, want, "{app} record {i}");
        }
    }
}

/// `json` with the first character of every string value written as a `\u` escape (what an
/// encoder that escapes non-ASCII, or `/`, writes): the same JSON value.
fn escape_string_starts(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() * 2);
    let mut i = 0;
    while i < json.len() {
        out.push(json[i]);
        if json[i..].starts_with(b":\"") && json.get(i + 2).is_some_and(u8::is_ascii_alphanumeric) {
            out.push(b'"');
            out.extend_from_slice(format!("\\u{:04x}", json[i + 2]).as_bytes());
            i += 3;
            continue;
        }
        i += 1;
    }
    out
}

/// Valid JSON with escaped strings parses as the same record in every app that reads JSON (its
/// string fields were borrowed from the input, which an escaped string cannot be).
#[test]
fn json_with_escaped_strings_parses_as_the_plain_record() {
    parses_escaped_as_plain("aa", || {
        Harness::new(aa::DeserializeEvent, 1, Determinism::Stateless)
    });
    parses_escaped_as_plain("nwm", || {
        Harness::new(nwm::ParseLines, 1, Determinism::Stateless)
    });
    parses_escaped_as_plain("etl", || {
        Harness::new(etl::SenmlParse, 1, Determinism::Stateless)
    });
}

/// `app`'s generated records, each with its string values escaped, emit what the plain ones do.
fn parses_escaped_as_plain<O: clasp_operators::Operator>(app: &str, make: impl Fn() -> Harness<O>) {
    let generator = clasp_operators::generate::generator(app, 3).unwrap();
    for i in 0..20 {
        let (key, payload) = generator.record(i);
        let escaped = escape_string_starts(&payload);
        assert_ne!(escaped, payload, "{app}: nothing escaped");
        let plain = make().process(&key, &payload).unwrap();
        assert_eq!(
            make().process(&key, &escaped).unwrap(),
            plain,
            "{app} record {i}"
        );
    }
}
