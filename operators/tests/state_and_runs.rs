//! State export → import, digests across instances, and a simulated distributed run: every
//! operator split over several instances by key group, requests interleaved at random between
//! FIFO paths, must pass the oracle comparison.

use std::collections::VecDeque;

use clasp_operators::generate::{RecordRng, chacha_key};
use clasp_operators::key::{KEY_GROUPS, key_group_of, key_hash};
use clasp_operators::{
    Comparable, Digest, Emitter, OperatorInstance, OperatorSummary, RequestRun, RequestSpan,
    Target, apps, oracle,
};
use proptest::prelude::*;

#[test]
fn export_import_round_trip_every_app() {
    for name in apps::builtin_names() {
        let spec = apps::builtin(name).unwrap();
        let inputs = oracle::capture_inputs(&spec, 300, 5, usize::MAX);
        for (op, reqs) in inputs.iter().enumerate() {
            let mut a = spec.instantiate(op);
            let mut out = Emitter::new();
            for (k, p) in reqs {
                let _ = a.process(key_hash(k), k, p, &mut out);
                out.clear();
            }
            let before = a.state_digest();
            let keys = a.state_keys();
            let mut b = spec.instantiate(op);
            for kg in 0..KEY_GROUPS {
                let bytes = a.export_group(kg);
                b.import_group(kg, &bytes).unwrap();
            }
            assert_eq!(a.state_keys(), 0, "{name}/{op}: export removes");
            assert_eq!(b.state_digest(), before, "{name}/{op}");
            assert_eq!(b.state_keys(), keys);
            if let Some(&kg) = b.groups_with_state().first() {
                let bytes = b.export_group(kg);
                assert!(
                    b.import_group(kg ^ 1, &bytes).is_err(),
                    "wrong group refused"
                );
                b.import_group(kg, &bytes).unwrap();
                assert!(
                    b.import_group(kg, &bytes).is_err(),
                    "occupied group refused"
                );
            }
        }
    }
}

/// A checkpoint's copy is the archive a migration's export would give, and leaves the state
/// (keys, digest, output numbering) where it was.
#[test]
fn copy_is_the_export_archive_and_keeps_the_state() {
    for name in apps::builtin_names() {
        let spec = apps::builtin(name).unwrap();
        let inputs = oracle::capture_inputs(&spec, 300, 5, usize::MAX);
        for (op, reqs) in inputs.iter().enumerate() {
            let mut a = spec.instantiate(op);
            a.track_output_seq();
            let mut out = Emitter::new();
            for (k, p) in reqs {
                let _ = a.process(key_hash(k), k, p, &mut out);
                out.clear();
            }
            let (before, keys) = (a.state_digest(), a.state_keys());
            let copies: Vec<Vec<u8>> = (0..KEY_GROUPS).map(|kg| a.copy_group(kg)).collect();
            assert_eq!(
                a.state_digest(),
                before,
                "{name}/{op}: copy keeps the state"
            );
            assert_eq!(a.state_keys(), keys, "{name}/{op}");
            let mut b = spec.instantiate(op);
            for (kg, copy) in (0..KEY_GROUPS).zip(&copies) {
                assert_eq!(*copy, a.export_group(kg), "{name}/{op}: key group {kg}");
                b.import_group(kg, copy).unwrap();
            }
            assert_eq!(b.state_digest(), before, "{name}/{op}: the copy imports");
        }
    }
}

/// WC's count after a few hundred records, and a key group it holds state of.
fn filled_count() -> (Box<dyn OperatorInstance>, u16) {
    let spec = apps::builtin("wc").unwrap();
    let count = spec.operators.len() - 1;
    let inputs = oracle::capture_inputs(&spec, 300, 5, usize::MAX);
    let mut a = spec.instantiate(count);
    let mut out = Emitter::new();
    for (k, p) in &inputs[count] {
        let _ = a.process(key_hash(k), k, p, &mut out);
        out.clear();
    }
    let kg = (0..KEY_GROUPS)
        .max_by_key(|&kg| a.copy_group(kg).len())
        .unwrap();
    (a, kg)
}

#[test]
fn an_archive_of_another_format_is_refused_by_name() {
    let (a, kg) = filled_count();
    let spec = apps::builtin("wc").unwrap();
    let mut b = spec.instantiate(spec.operators.len() - 1);
    let mut bytes = a.copy_group(kg);
    bytes[4..8].copy_from_slice(&3u32.to_le_bytes());
    let err = b.import_group(kg, &bytes).unwrap_err().to_string();
    assert!(
        err.contains("archive of format 3; this build reads format 4"),
        "{err}"
    );
    // Format 3 and earlier had no header: their first bytes are not the magic.
    let err = b.import_group(kg, &bytes[16..]).unwrap_err().to_string();
    assert!(err.contains("not a key group archive of format 4"), "{err}");
    let mut reserved = a.copy_group(kg);
    reserved[12] = 1;
    let err = b.import_group(kg, &reserved).unwrap_err().to_string();
    assert!(
        err.contains("reserved key group archive header bytes"),
        "{err}"
    );
    assert_eq!(b.state_keys(), 0, "nothing was imported");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn import_of_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), kg in 0u16..1024) {
        let spec = apps::builtin("etl").unwrap();
        for op in 0..spec.operators.len() {
            let mut inst = spec.instantiate(op);
            let _ = inst.import_group(kg, &bytes);
        }
    }

    #[test]
    fn an_archive_with_one_byte_changed_never_panics(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let (a, kg) = filled_count();
        let spec = apps::builtin("wc").unwrap();
        let mut bytes = a.copy_group(kg);
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let mut b = spec.instantiate(spec.operators.len() - 1);
        let _ = b.import_group(kg, &bytes);
    }

    #[test]
    fn malformed_inputs_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut out = Emitter::new();
        for name in apps::builtin_names() {
            let spec = apps::builtin(name).unwrap();
            for op in 0..spec.operators.len() {
                let mut inst = spec.instantiate(op);
                let _ = inst.process(key_hash(&bytes), &bytes, &bytes, &mut out);
                out.clear();
            }
        }
    }

    #[test]
    fn digest_is_order_independent(mut items in proptest::collection::vec(any::<u128>(), 0..50), seed in any::<u64>()) {
        let a = items.iter().fold(Digest::EMPTY, |mut d, &h| { d.add_hash(h); d });
        let mut rng = RecordRng::new(&chacha_key(seed, "t"), 0);
        for i in (1..items.len()).rev() {
            items.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let b = items.iter().fold(Digest::EMPTY, |mut d, &h| { d.add_hash(h); d });
        prop_assert_eq!(a, b);
    }
}

/// A request in flight: target operator, target instance, key, payload.
type Req = (usize, usize, Vec<u8>, Vec<u8>);

/// Runs `spec` with `executors` instances of every operator; instance of a key = its key group
/// modulo `executors`. Every (sending instance, receiving instance) pair is one FIFO queue, and
/// the next queue to serve is chosen at random: the order a distributed run may see.
fn distributed(
    name: &str,
    records: u64,
    seed: u64,
    executors: usize,
    schedule_seed: u64,
) -> Comparable {
    let spec = apps::builtin(name).unwrap();
    let n = spec.operators.len();
    let mut inst: Vec<Vec<Box<dyn OperatorInstance>>> = (0..n)
        .map(|op| (0..executors).map(|_| spec.instantiate(op)).collect())
        .collect();
    // queues[(from_op, from_inst)][to_global] where to_global = op * executors + inst.
    let lanes = (n + 1) * executors;
    let mut queues: Vec<VecDeque<Req>> = (0..lanes * n * executors)
        .map(|_| VecDeque::new())
        .collect();
    let generator = clasp_operators::generate::generator(&spec.generator, seed).unwrap();
    let owner = |key: &[u8]| usize::from(key_group_of(key)) % executors;
    // Producers (lane n) feed the source in input order per executor.
    for i in 0..records {
        let (k, p) = generator.record(i);
        let to = owner(&k);
        queues[(n * executors + to) * n * executors + spec.source * executors + to].push_back((
            spec.source,
            to,
            k,
            p,
        ));
    }
    let key = chacha_key(schedule_seed, "schedule");
    let mut step = 0u64;
    let mut busy: Vec<usize> = Vec::new();
    let mut out = Emitter::new();
    let mut run = |queues: &mut Vec<VecDeque<Req>>,
                   inst: &mut Vec<Vec<Box<dyn OperatorInstance>>>| loop {
        if step % 64 == 0 || busy.is_empty() {
            busy = (0..queues.len())
                .filter(|&q| !queues[q].is_empty())
                .collect();
        }
        if busy.is_empty() {
            break;
        }
        step += 1;
        let at = RecordRng::new(&key, step).below(busy.len() as u64) as usize;
        let q = busy[at];
        let Some((op, e, k, p)) = queues[q].pop_front() else {
            busy.swap_remove(at);
            continue;
        };
        let _ = inst[op][e].process(key_hash(&k), &k, &p, &mut out);
        for em in out.iter() {
            if let Target::Operator(to) = em.target {
                let (to, te) = (usize::from(to), owner(em.key));
                queues[(op * executors + e) * n * executors + to * executors + te].push_back((
                    to,
                    te,
                    em.key.to_vec(),
                    em.payload.to_vec(),
                ));
            }
        }
        out.clear();
    };
    run(&mut queues, &mut inst);
    let mut eos_out = Emitter::new();
    for op in spec.topological_order() {
        for e in 0..executors {
            inst[op][e].end_of_stream(&mut eos_out);
            for em in eos_out.iter() {
                if let Target::Operator(to) = em.target {
                    let (to, te) = (usize::from(to), owner(em.key));
                    queues[(op * executors + e) * n * executors + to * executors + te].push_back((
                        to,
                        te,
                        em.key.to_vec(),
                        em.payload.to_vec(),
                    ));
                }
            }
            eos_out.clear();
        }
        run(&mut queues, &mut inst);
    }
    let summaries: Vec<OperatorSummary> = inst
        .iter()
        .map(|v| {
            v.iter().fold(OperatorSummary::default(), |mut s, i| {
                s.combine(&i.summary());
                s
            })
        })
        .collect();
    Comparable::from_summaries(&spec, &summaries)
}

#[test]
fn distributed_runs_match_the_oracle() {
    for name in apps::builtin_names() {
        let records = if *name == "nwm" { 4000 } else { 1000 };
        let expected = oracle::run(&apps::builtin(name).unwrap(), records, 11);
        for schedule in [1, 2] {
            let actual = distributed(name, records, 11, 3, schedule);
            if let Err(m) = expected.compare(&actual) {
                panic!("{name} (schedule {schedule}): {m}");
            }
        }
    }
}

/// Every emission of `out` as owned bytes, with its number.
fn emissions(out: &Emitter) -> Vec<(Target, Vec<u8>, Vec<u8>, u64)> {
    let all = out.iter().enumerate();
    all.map(|(i, e)| (e.target, e.key.to_vec(), e.payload.to_vec(), out.seq(i)))
        .collect()
}

/// Requests handed over in runs (`process_run`, as an executor does for operators without
/// successors) run exactly as one by one: the same emissions in the same order, numbers,
/// digests, counts of malformed requests and state, for every operator of every app. A key
/// too long for a request in the middle of a run (for WC's count) is dropped alone.
#[test]
fn runs_of_requests_process_as_one_by_one() {
    for name in apps::builtin_names() {
        let spec = apps::builtin(name).unwrap();
        let inputs = oracle::capture_inputs(&spec, 300, 3, usize::MAX);
        for (op, reqs) in inputs.iter().enumerate() {
            let mut reqs = reqs.clone();
            reqs.insert(reqs.len() / 2, (vec![b'k'; 2000], b"too long".to_vec()));
            let (mut one, mut run) = (spec.instantiate(op), spec.instantiate(op));
            one.track_output_seq();
            run.track_output_seq();
            let (mut out_one, mut out_run) = (Emitter::new(), Emitter::new());
            for (k, p) in &reqs {
                let _ = one.process(key_hash(k), k, p, &mut out_one);
            }
            // Runs of 1, 2, 3, … requests, as the queue would hand them over.
            let (mut bytes, mut spans) = (Vec::new(), Vec::new());
            for (k, p) in &reqs {
                let at = |b: &Vec<u8>| u32::try_from(b.len()).unwrap();
                let key_from = at(&bytes);
                bytes.extend_from_slice(k);
                let payload_from = at(&bytes);
                bytes.extend_from_slice(p);
                let key_hash = key_hash(k);
                let payload_to = at(&bytes);
                spans.push(RequestSpan {
                    key_hash,
                    key_from,
                    payload_from,
                    payload_to,
                });
            }
            let (mut from, mut len) = (0, 1);
            while from < spans.len() {
                let to = (from + len).min(spans.len());
                run.process_run(RequestRun::new(&bytes, &spans[from..to]), &mut out_run);
                (from, len) = (to, len + 1);
            }
            let what = format!("{name}/{op}");
            assert_eq!(emissions(&out_one), emissions(&out_run), "{what}");
            assert_eq!(one.summary(), run.summary(), "{what}");
            if spec.operators[op].name == "count" {
                // WC's count outputs its key: the long one is dropped as malformed.
                assert_eq!(one.summary().malformed, 1, "{what}: the long key");
            }
            assert_eq!(one.malformed_reasons(), run.malformed_reasons(), "{what}");
            assert_eq!(one.state_digest(), run.state_digest(), "{what}");
        }
    }
}

#[test]
fn comparison_reports_where() {
    let spec = apps::builtin("wc").unwrap();
    let a = oracle::run(&spec, 50, 1);
    let b = oracle::run(&spec, 51, 1);
    let m = a.compare(&b.comparable).unwrap_err();
    assert!(
        m.differences
            .iter()
            .any(|d| d.starts_with("split: processed 51, oracle 50")),
        "{m}"
    );
    assert!(
        m.differences
            .iter()
            .any(|d| d.starts_with("count: state digest")),
        "{m}"
    );
}
