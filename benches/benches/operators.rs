//! τ: execution time of each operator of each built-in app, per request, on the inputs that
//! operator receives in an oracle run (captured with `oracle::capture_inputs`), with its state
//! warm. This is the τ of the capacity model. Run:
//! `cargo bench -p clasp-benches --bench operators`.

use std::hint::black_box;
use std::time::Duration;

use clasp_operators::key::key_hash;
use clasp_operators::{Emitter, apps, oracle};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Records of the oracle run whose requests are replayed.
const RECORDS: u64 = 5000;
/// Requests kept per operator.
const REQUESTS_MAX: usize = 8192;

fn operators(c: &mut Criterion) {
    for name in apps::builtin_names() {
        let spec = apps::builtin(name).expect("built-in app");
        let inputs = oracle::capture_inputs(&spec, RECORDS, 1, REQUESTS_MAX);
        let mut group = c.benchmark_group(format!("tau/{name}"));
        group.throughput(Throughput::Elements(1));
        group
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20);
        for (op, reqs) in inputs.iter().enumerate() {
            let reqs: Vec<(u64, &[u8], &[u8])> = reqs
                .iter()
                .map(|(k, p)| (key_hash(k), &k[..], &p[..]))
                .collect();
            assert!(!reqs.is_empty(), "{name}/{op} receives requests");
            let mut instance = spec.instantiate(op);
            let mut out = Emitter::new();
            // Check it works before timing it: most captured requests are well-formed.
            let ok = reqs
                .iter()
                .filter(|(hash, k, p)| {
                    let r = instance.process(*hash, k, p, &mut out).is_ok();
                    out.clear();
                    r
                })
                .count();
            assert!(
                ok * 100 >= reqs.len() * 99,
                "{name}/{op}: {ok} of {} ok",
                reqs.len()
            );
            let mut i = 0;
            group.bench_function(spec.operators[op].name.as_str(), |b| {
                b.iter(|| {
                    let (hash, k, p) = reqs[i];
                    i = (i + 1) % reqs.len();
                    let r = instance.process(hash, k, p, &mut out);
                    out.clear();
                    black_box(r)
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, operators);
criterion_main!(benches);
