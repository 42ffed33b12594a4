//! Criterion benchmark of the SPSC hand-off: one-way latency (half a ping-pong round trip) of
//! a 64-byte payload for every implementation of `clasp bench ring`, two pinned threads.
//! `clasp bench ring` gives the full table (sizes, throughput) in one interleaved run.

use clasp_benches::ring::{IMPLS, default_cpus, measure_cell};
use criterion::{Criterion, criterion_group, criterion_main};
use std::time::Duration;

fn one_way_latency(c: &mut Criterion) {
    let cpus = default_cpus();
    let mut group = c.benchmark_group("ring_one_way_64B");
    group
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    for &implementation in IMPLS {
        group.bench_function(implementation, |b| {
            b.iter_custom(|iters| {
                // Each sample is one ping-pong run of `iters` round trips; the harness checks
                // the echoed bytes before it times anything.
                let rt = iters.max(1000);
                let (one_way_ns, _) =
                    measure_cell(implementation, 64, cpus, rt, 4).expect("ring benchmark cell");
                Duration::from_nanos((one_way_ns * iters as f64) as u64)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, one_way_latency);
criterion_main!(benches);
