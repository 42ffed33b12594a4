//! Timers on a worker: processing-time timers fire from the executors' loops while the stream
//! flows, event-time timers all fire at end of stream, and nothing is left pending.

use clasp_dataplane::routing::Spread;
use clasp_dataplane::runtime::ingress::{IngressConfig, run_ingress};
use clasp_dataplane::runtime::{LocalConfig, run_local_worker};
use clasp_operators::{
    AppSpec, Determinism, KindInfo, Malformed, Operator, Out, Registry, TimeDomain, Timer, generate,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// Per key: a processing-time timer due at once and an event-time timer; each fired timer
/// outputs which clock it followed.
struct Alarm;

impl Operator for Alarm {
    type State = u64;

    fn process(
        &mut self,
        _: &[u8],
        _: &[u8],
        seen: &mut u64,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        out.set_timer_processing(out.processing_time_ms());
        out.set_timer_event(10);
        *seen += 1;
        Ok(())
    }

    fn on_timer(&mut self, key: &[u8], _: &mut u64, timer: Timer, out: &mut Out<'_>) {
        let clock: &[u8] = match timer.domain {
            TimeDomain::Event => b"event",
            TimeDomain::Processing => b"processing",
        };
        out.output(key, clock);
    }
}

#[test]
fn processing_timers_fire_while_the_stream_flows_and_event_timers_at_its_end() {
    let mut registry = Registry::builtin();
    registry.register(
        "alarm",
        KindInfo::keyed("alarms", "key", Determinism::Racy),
        |_| Ok(Alarm),
    );
    let text =
        "name = \"alarm\"\ngenerator = \"syn\"\n[[operator]]\nname = \"a\"\nkind = \"alarm\"\n";
    let spec = Arc::new(AppSpec::from_toml_str_with(&registry, text).unwrap());
    let records = 400;
    let generator = generate::generator("syn", 3).unwrap();
    let keys: BTreeSet<Vec<u8>> = (0..records).map(|i| generator.record(i).0).collect();
    let cfg = LocalConfig {
        segment_name: format!("clasp-timers-{}", std::process::id()),
        executors: 2,
        ring_bytes: 1 << 16,
        spread: Spread::Even,
        max_in_flight: 256,
        interval: Duration::from_millis(20),
        stall_timeout: Duration::from_secs(120),
        ..LocalConfig::default()
    };
    let ingress = std::sync::Mutex::new(None);
    let report = run_local_worker(
        spec.clone(),
        &cfg,
        |seg| {
            let cfg = IngressConfig {
                segment_name: seg.segment.name().unwrap().to_string(),
                records,
                seed: 3,
                rate_per_s: Some(2000.0),
                stop: None,
                source: Default::default(),
                generator: None,
            };
            let spec = spec.clone();
            *ingress.lock().unwrap() = Some(std::thread::spawn(move || run_ingress(&spec, &cfg)));
            Ok(())
        },
        || None,
    )
    .expect("the worker runs");
    let admitted = ingress.lock().unwrap().take().unwrap().join().unwrap();
    assert_eq!(admitted.expect("the ingress runs").admitted, records);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let outputs = report.summaries[0].outputs.count;
    let distinct = keys.len() as u64;
    // One event-time output per key at end of stream; the rest fired on the clock.
    assert!(
        outputs > distinct && outputs <= distinct + records,
        "{outputs} outputs for {distinct} keys and {records} records"
    );
    let pending: usize = report
        .instances
        .iter()
        .flatten()
        .map(|i| i.pending_timers())
        .sum();
    assert_eq!(
        pending, 0,
        "nothing is left pending after the end of stream"
    );
}
