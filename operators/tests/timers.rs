//! Timers through the operator runtime and the oracle: event-time timers fire in time order
//! per key at end of stream, a timer set twice fires once, a timer moves with its key group,
//! a timer set at or before the watermark is refused and counted, and processing-time
//! timers set at end of stream are dropped.

use clasp_operators::key::{key_group_of, key_hash};
use clasp_operators::oracle::{self, OracleOptions};
use clasp_operators::timers::LATE_TIMER;
use clasp_operators::{
    AppSpec, Determinism, Emitter, KindInfo, Malformed, Operator, OperatorInstance, Out, Registry,
    Target, TimeDomain, Timer,
};

/// Sets an event-time timer at the time its payload names (decimal text) and counts the
/// requests of its key; a fired timer outputs its time and, below 100, sets a follow-up 100
/// later.
struct Remind;

impl Operator for Remind {
    type State = u64;

    fn process(
        &mut self,
        _: &[u8],
        payload: &[u8],
        seen: &mut u64,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let at: u64 = std::str::from_utf8(payload)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or(Malformed::new("not a time"))?;
        out.set_timer_event(at);
        *seen += 1;
        Ok(())
    }

    fn on_timer(&mut self, key: &[u8], seen: &mut u64, timer: Timer, out: &mut Out<'_>) {
        assert_eq!(timer.domain, TimeDomain::Event);
        assert!(*seen > 0, "a timer fires with its key's state");
        out.output(key, timer.at.to_string().as_bytes());
        if timer.at < 100 {
            out.set_timer_event(timer.at + 100);
        }
    }
}

fn app() -> AppSpec {
    let mut registry = Registry::builtin();
    registry.register(
        "remind",
        KindInfo::keyed("reminders", "key", Determinism::PathOrdered),
        |_| Ok(Remind),
    );
    AppSpec::from_toml_str_with(
        &registry,
        "name = \"remind\"\ngenerator = \"wc\"\n[[operator]]\nname = \"r\"\nkind = \"remind\"\n",
    )
    .unwrap()
}

/// Every output of `e` as `(key, text)`.
fn outputs(e: &Emitter) -> Vec<(String, String)> {
    e.iter()
        .filter(|x| x.target == Target::Output)
        .map(|x| {
            let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
            (text(x.key), text(x.payload))
        })
        .collect()
}

fn feed(inst: &mut dyn OperatorInstance, inputs: &[(&str, &str)], e: &mut Emitter) {
    for (k, p) in inputs {
        let _ = inst.process(key_hash(k.as_bytes()), k.as_bytes(), p.as_bytes(), e);
    }
}

#[test]
fn end_of_stream_fires_event_timers_in_time_order_once_each() {
    let app = app();
    let inputs: [(&[u8], &[u8]); 5] = [
        (b"a", b"5"),
        (b"b", b"4"),
        (b"a", b"3"),
        (b"a", b"5"),
        (b"b", b"x"),
    ];
    let report = oracle::run_inputs(&app, inputs, &OracleOptions::default());
    let fired: Vec<(&[u8], &[u8])> = report
        .outputs
        .iter()
        .map(|o| (&o.key[..], &o.payload[..]))
        .collect();
    assert_eq!(
        fired,
        [(&b"a"[..], &b"3"[..]), (b"b", b"4"), (b"a", b"5")],
        "time order, and a timer set twice fires once"
    );
    assert_eq!(report.malformed["r"]["not a time"], 1);
    assert_eq!(
        report.malformed["r"][LATE_TIMER], 3,
        "at end of stream the watermark is +inf: the follow-ups are refused"
    );
}

#[test]
fn a_timer_may_set_a_later_one_and_a_malformed_request_sets_none() {
    let app = app();
    let mut inst = app.instantiate(0);
    let mut e = Emitter::new();
    feed(inst.as_mut(), &[("k", "3"), ("j", "x")], &mut e);
    assert_eq!(inst.pending_timers(), 1);
    inst.advance_watermark(5, &mut e);
    assert_eq!(outputs(&e), [("k".into(), "3".into())]);
    assert_eq!(inst.pending_timers(), 1, "the follow-up at 103");
    e.clear();
    inst.advance_watermark(200, &mut e);
    assert_eq!(outputs(&e), [("k".into(), "103".into())]);
    assert_eq!(inst.pending_timers(), 0);
}

#[test]
fn a_pending_timer_moves_with_its_key_group() {
    let app = app();
    let (mut a, mut b) = (app.instantiate(0), app.instantiate(0));
    let mut e = Emitter::new();
    feed(a.as_mut(), &[("k", "7"), ("k", "2")], &mut e);
    assert_eq!(a.pending_timers(), 2);
    let kg = key_group_of(b"k");
    let bytes = a.export_group(kg);
    assert_eq!(a.pending_timers(), 0);
    b.import_group(kg, &bytes).unwrap();
    assert!(
        b.import_group(kg, &bytes).is_err(),
        "occupied group refused"
    );
    a.end_of_stream(&mut e);
    assert!(outputs(&e).is_empty(), "nothing stayed behind");
    b.end_of_stream(&mut e);
    assert_eq!(
        outputs(&e),
        [("k".into(), "2".into()), ("k".into(), "7".into())]
    );
    let summary = b.summary();
    assert_eq!(summary.outputs.count, 2, "fired outputs are digested");
}

#[test]
fn copied_timers_stay_and_import_elsewhere() {
    let app = app();
    let (mut a, mut b) = (app.instantiate(0), app.instantiate(0));
    let mut e = Emitter::new();
    feed(a.as_mut(), &[("k", "7"), ("k", "2")], &mut e);
    let kg = key_group_of(b"k");
    let bytes = a.copy_group(kg);
    assert_eq!(a.pending_timers(), 2, "a copy leaves the timers");
    b.import_group(kg, &bytes).unwrap();
    assert_eq!(b.pending_timers(), 2);
    for inst in [&mut a, &mut b] {
        let mut e = Emitter::new();
        inst.end_of_stream(&mut e);
        assert_eq!(
            outputs(&e),
            [("k".into(), "2".into()), ("k".into(), "7".into())]
        );
    }
}

#[test]
fn a_timer_at_or_before_the_watermark_is_refused_and_counted() {
    let app = app();
    let mut inst = app.instantiate(0);
    let mut e = Emitter::new();
    inst.advance_watermark(10, &mut e);
    feed(
        inst.as_mut(),
        &[("k", "10"), ("k", "11"), ("k", "3")],
        &mut e,
    );
    assert_eq!(inst.pending_timers(), 1);
    let reasons = inst.malformed_reasons();
    assert_eq!(reasons, [(LATE_TIMER, 2)]);
    inst.advance_watermark(11, &mut e);
    assert_eq!(outputs(&e), [("k".into(), "11".into())]);
    inst.advance_watermark(u64::MAX, &mut e);
    assert_eq!(inst.pending_timers(), 0);
}

/// Counts its key's requests, and at end of stream asks for a processing-time timer per key
/// (which can never fire: the stream has ended).
struct Linger;

impl Operator for Linger {
    type State = u64;

    fn process(
        &mut self,
        _: &[u8],
        _: &[u8],
        seen: &mut u64,
        _: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        *seen += 1;
        Ok(())
    }

    fn end_of_key(&mut self, _: &[u8], seen: &mut u64, out: &mut Out<'_>) {
        out.set_timer_processing(*seen);
    }
}

#[test]
fn processing_timers_set_at_end_of_stream_are_dropped() {
    let mut registry = Registry::builtin();
    registry.register(
        "linger",
        KindInfo::keyed("seen", "key", Determinism::PathOrdered),
        |_| Ok(Linger),
    );
    let toml =
        "name = \"linger\"\ngenerator = \"wc\"\n[[operator]]\nname = \"l\"\nkind = \"linger\"\n";
    let app = AppSpec::from_toml_str_with(&registry, toml).unwrap();
    let mut inst = app.instantiate(0);
    let mut e = Emitter::new();
    let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    for k in &keys {
        let _ = inst.process(key_hash(k.as_bytes()), k.as_bytes(), b"", &mut e);
    }
    inst.end_of_stream(&mut e);
    assert_eq!(inst.pending_timers(), 0, "every key's timer dropped");
    assert_eq!(inst.next_processing_timer_ms(), None);
}
