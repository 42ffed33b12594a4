//! What moving and checkpointing operator state costs: exporting every key group of WC's count
//! (an archive per group, as a migration or a checkpoint takes it) and importing them again,
//! per key. The state is what the count holds after an oracle run of 600 000 records (about
//! 42 000 words), as in the heavy-move scenario of `benches/results/migrations.md`.
//!
//! And what looking it up costs, per request, in batches of 32 as an executor reads them:
//! with and without the first pass that prefetches each request's state
//! (`OperatorInstance::state_lines`, prefetched), on words of another seed. Run:
//! `cargo bench -p clasp-benches --bench state`.

use std::hint::black_box;
use std::time::Duration;

use clasp_operators::key::{KEY_GROUPS, key_group_of, key_hash};
use clasp_operators::{Emitter, OperatorInstance, apps, oracle};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

/// The `clasp` binary's allocator: the archives' cost is mostly allocation and copying.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Records of the oracle run whose words fill the count.
const RECORDS: u64 = 600_000;

/// WC's count with the state of `RECORDS` records.
fn filled_count() -> Box<dyn OperatorInstance> {
    let spec = apps::builtin("wc").expect("built-in app");
    let count = spec.operators.len() - 1;
    let inputs = oracle::capture_inputs(&spec, RECORDS, 1, usize::MAX);
    let mut instance = spec.instantiate(count);
    let mut out = Emitter::new();
    for (k, p) in &inputs[count] {
        let _ = instance.process(key_hash(k), k, p, &mut out);
        out.clear();
    }
    instance
}

fn state(c: &mut Criterion) {
    // As every clasp process runs (`src/hugepages.rs`): no huge-page faults in the figures.
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let full = filled_count();
    let keys = full.state_keys() as u64;
    let archives: Vec<Vec<u8>> = (0..KEY_GROUPS).map(|g| full.copy_group(g)).collect();
    let bytes: usize = archives.iter().map(Vec::len).sum();
    eprintln!("wc count: {keys} keys, {bytes} bytes archived over {KEY_GROUPS} key groups");
    let mut group = c.benchmark_group("state/wc");
    group
        .throughput(Throughput::Elements(keys))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    group.bench_function("copy every group", |b| {
        b.iter(|| {
            (0..KEY_GROUPS)
                .map(|g| black_box(full.copy_group(g)).len())
                .sum::<usize>()
        })
    });
    let spec = apps::builtin("wc").expect("built-in app");
    let count = spec.operators.len() - 1;
    group.bench_function("import every group", |b| {
        b.iter_batched(
            || spec.instantiate(count),
            |mut fresh| {
                for (g, a) in archives.iter().enumerate() {
                    fresh.import_group(g as u16, a).expect("a valid archive");
                }
                fresh
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// Requests per batch, as an executor reads them from one ring.
const BATCH: usize = 32;
/// Records whose words are looked up (of another seed than the fill's).
const LOOKUP_RECORDS: u64 = 50_000;

fn lookups(c: &mut Criterion) {
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let mut count = filled_count();
    let spec = apps::builtin("wc").expect("built-in app");
    let inputs = oracle::capture_inputs(&spec, LOOKUP_RECORDS, 2, usize::MAX);
    let reqs: Vec<(u16, u64, &[u8], &[u8])> = inputs[spec.operators.len() - 1]
        .iter()
        .map(|(k, p)| (key_group_of(k), key_hash(k), &k[..], &p[..]))
        .collect();
    let batches = reqs.len() / BATCH;
    assert!(batches > 0, "{} requests", reqs.len());
    // What is measured works: the filled count names lines for the words it holds.
    let named = reqs
        .iter()
        .filter(|r| count.state_lines(r.0, r.1).is_some());
    assert!(
        named.count() * 2 > reqs.len(),
        "the count names lines for most words"
    );
    let mut group = c.benchmark_group("state/wc lookups");
    group
        .throughput(Throughput::Elements(BATCH as u64))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut out = Emitter::new();
    for prefetch in [false, true] {
        let name = if prefetch {
            "32, prefetched first"
        } else {
            "32"
        };
        let mut next = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                let batch = &reqs[next * BATCH..(next + 1) * BATCH];
                next = (next + 1) % batches;
                if prefetch {
                    for &(kg, hash, _, _) in batch {
                        if let Some((ctrl, slot)) = count.state_lines(kg, hash) {
                            clasp_shmring::prefetch_read(ctrl.as_ptr());
                            clasp_shmring::prefetch_read(slot.as_ptr());
                        }
                    }
                }
                for &(_, hash, k, p) in batch {
                    let _ = black_box(count.process(hash, k, p, &mut out));
                    out.clear();
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, state, lookups);
criterion_main!(benches);
