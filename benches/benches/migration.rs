//! What the migration protocol's machine costs an executor at a heavy move: taking the plan
//! and draining (the worker pause, before its markers leave), and looking a request up while
//! the move runs (every request takes that path until the slot completes). The shape is the
//! heavy WC move of `benches/results/migrations.md`: two operators of 1 024 key groups each,
//! half of each moving from slot 1 to slot 0, seen from slot 0 (it receives) and slot 1 (it
//! gives up). Run: `cargo bench -p clasp-benches --bench migration`.

use std::hint::black_box;
use std::sync::Arc;

use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::assignment::{Assignment, assignments};
use clasp_protocol::message::{Msg, Peer, Req};
use clasp_protocol::plan::plan;
use clasp_protocol::worker::Worker;
use clasp_protocol::{Epoch, KeyGroup, RoutingTable, Slot};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

/// WC's operators: split feeds count.
const OPERATORS: usize = 2;

/// Every key group of both operators on slot 0 if `all_on_0`, else alternating 0 and 1.
fn table(epoch: u64, all_on_0: bool) -> RoutingTable {
    let row = |_| {
        (0..usize::from(KEY_GROUPS))
            .map(|g| Slot(if all_on_0 { 0 } else { (g % 2) as u32 }))
            .collect()
    };
    RoutingTable::from_rows(Epoch(epoch), (0..OPERATORS).map(row).collect())
        .expect("rows of one length")
}

/// The move onto slot 0 alone: the old table, and each slot's part.
fn heavy_move() -> (RoutingTable, Vec<Assignment>) {
    let (old, new) = (table(0, false), Arc::new(table(1, true)));
    let preds = vec![vec![], vec![0]];
    let p = plan(&old, &new, &preds);
    let parts = assignments(&p, &old, &new, &preds, 2);
    (old, parts)
}

fn migration(c: &mut Criterion) {
    let (old, parts) = heavy_move();
    let old = Arc::new(old);
    let mut g = c.benchmark_group("migration");
    for slot in [0u32, 1] {
        let part = &parts[slot as usize];
        g.bench_function(format!("plan and drain, slot {slot}"), |b| {
            b.iter_batched(
                || {
                    let w: Worker<u64, ()> = Worker::new(Slot(slot), Arc::clone(&old), Epoch(0));
                    (w, part.clone())
                },
                |(mut w, a)| {
                    black_box(w.on_plan(1, a));
                    black_box(w.on_drained(2));
                    w
                },
                BatchSize::SmallInput,
            )
        });
    }
    // In the move: slot 0 runs an old-epoch request for a key group it keeps; slot 1 forwards
    // one for a key group it gave up. Neither is held, so nothing piles up between iterations.
    for slot in [0u32, 1] {
        let mut w: Worker<u64, ()> = Worker::new(Slot(slot), Arc::clone(&old), Epoch(0));
        w.on_plan(1, parts[slot as usize].clone());
        w.on_drained(2);
        let groups: Vec<KeyGroup> = (0..KEY_GROUPS)
            .filter(|g| u32::from(g % 2) == slot)
            .map(KeyGroup)
            .collect();
        let mut n = 0usize;
        g.bench_function(format!("a request during the move, slot {slot}"), |b| {
            b.iter(|| {
                n += 1;
                let req = Req {
                    operator: 1,
                    key_group: groups[n % groups.len()],
                    epoch: Epoch(0),
                    from_moved: false,
                    body: n as u64,
                };
                black_box(w.on_message(3, Peer::Worker(Slot(slot)), Msg::Request(req)))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, migration);
criterion_main!(benches);
