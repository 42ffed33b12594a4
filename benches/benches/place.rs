//! Criterion benchmark of CLASP placement (10 × 100 and 100 × 1000), checked feasible first.
use clasp_benches::place::{check, problem};
use clasp_controlplane::placement::place;
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    for (ops, workers) in [(10, 100), (100, 1000)] {
        let p = problem(ops, workers);
        check(&p);
        c.bench_function(&format!("place_ops_{ops}_workers_{workers}"), |b| {
            b.iter(|| place(std::hint::black_box(&p)))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
