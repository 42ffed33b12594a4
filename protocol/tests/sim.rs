//! The migration protocol in the seeded simulation (`clasp_protocol::sim`):
//! many seeds of each shape, with and without a killed worker. A failure prints its seed;
//! replay one with `PROTOCOL_SEED=<seed> cargo test -p clasp-protocol --test sim one_seed -- --nocapture`.

mod common;

use clasp_protocol::sim::{Shape, SimConfig, SimOutcome, run};

/// Seeds per shape in CI-sized tests (debug build: a few seconds in all).
const SEEDS: u64 = 250;
/// Seeds of the kill scenario per shape.
const KILL_SEEDS: u64 = 100;

fn run_seeds(name: &str, cfg: &SimConfig, seeds: std::ops::Range<u64>) -> Vec<SimOutcome> {
    common::run_seeds(name, seeds, |seed| run(seed, cfg))
}

#[test]
fn pipeline_many_seeds() {
    let cfg = SimConfig::default();
    let outs = run_seeds("pipeline", &cfg, 0..SEEDS);
    summary("pipeline", &outs);
}

#[test]
fn diamond_many_seeds() {
    let cfg = SimConfig {
        shape: Shape::Diamond,
        ..SimConfig::default()
    };
    let outs = run_seeds("diamond", &cfg, 0..SEEDS);
    summary("diamond", &outs);
}

/// How often the rule with the plan's markers only breaks (run by hand for the docs).
#[test]
#[ignore]
fn without_the_gate_failure_rate() {
    for shape in [Shape::Pipeline, Shape::Diamond] {
        let cfg = SimConfig {
            shape,
            fence: false,
            ..SimConfig::default()
        };
        let bad = (0..1000).filter(|&s| run(s, &cfg).is_err()).count();
        eprintln!("{shape:?} without gate: {bad} of 1000 seeds fail");
    }
}

fn summary(name: &str, outs: &[SimOutcome]) {
    let migs: Vec<_> = outs.iter().flat_map(|o| &o.migrations).collect();
    let sum = |f: &dyn Fn(&clasp_protocol::planner::MigrationReport) -> u64| -> u64 {
        migs.iter().map(|m| f(m)).sum()
    };
    eprintln!(
        "{name}: {} runs, {} migrations, {} events; moved {} key groups, exported {}, forwarded {}, held {}, gated {}, admitted during {}",
        outs.len(),
        migs.len(),
        outs.iter().map(|o| o.events).sum::<u64>(),
        sum(&|m| m.key_groups_moved as u64),
        sum(&|m| m.exported),
        sum(&|m| m.forwarded),
        sum(&|m| m.held),
        sum(&|m| m.gated),
        sum(&|m| m.admitted_during),
    );
}

#[test]
fn killed_worker_is_named_and_nobody_waits_forever() {
    for shape in [Shape::Pipeline, Shape::Diamond] {
        let cfg = SimConfig {
            shape,
            kill: true,
            ..SimConfig::default()
        };
        let outs = run_seeds(&format!("{shape:?} kill"), &cfg, 0..KILL_SEEDS);
        for o in &outs {
            let f = o.failure.as_ref().expect("checked by run");
            assert_eq!(f.silent, vec![o.killed.expect("checked by run")]);
        }
        eprintln!(
            "{shape:?} kill: e.g. {}",
            outs[0].failure.as_ref().expect("failed")
        );
    }
}

/// The rule without the upstream gate and fence (the plan's markers only) reorders a key at a
/// key group that stays put while its upstream key group moves: the simulation's first finding.
#[test]
fn without_the_gate_a_moved_upstream_reorders_a_key() {
    for shape in [Shape::Pipeline, Shape::Diamond] {
        let cfg = SimConfig {
            shape,
            fence: false,
            ..SimConfig::default()
        };
        let broken = (0..SEEDS)
            .filter_map(|seed| run(seed, &cfg).err().map(|e| (seed, e)))
            .find(|(_, e)| e.contains(" after "));
        let (seed, e) = broken.expect("some seed reorders without the gate");
        eprintln!("{shape:?} without gate: seed {seed}: {e}");
    }
}

/// `PROTOCOL_SEED=<n> [PROTOCOL_SHAPE=diamond] [PROTOCOL_KILL=1]` replays one seed and prints
/// its migrations.
#[test]
fn one_seed() {
    let seed = std::env::var("PROTOCOL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let shape = match std::env::var("PROTOCOL_SHAPE").as_deref() {
        Ok("diamond") => Shape::Diamond,
        _ => Shape::Pipeline,
    };
    let cfg = SimConfig {
        shape,
        kill: std::env::var("PROTOCOL_KILL").is_ok_and(|v| v == "1"),
        ..SimConfig::default()
    };
    match run(seed, &cfg) {
        Ok(o) => {
            for m in &o.migrations {
                eprintln!("seed {seed}: {m:?}");
            }
            if let Some(f) = &o.failure {
                eprintln!("seed {seed}: {f}");
            }
            eprintln!(
                "seed {seed}: admitted {}, processed {}, {} events, ended at {} ns",
                o.admitted, o.processed, o.events, o.end_ns
            );
        }
        Err(e) => panic!("seed {seed}: {e}"),
    }
}

#[test]
fn same_seed_same_run() {
    let cfg = SimConfig {
        shape: Shape::Diamond,
        ..SimConfig::default()
    };
    let a = run(11, &cfg).expect("seed 11");
    let b = run(11, &cfg).expect("seed 11");
    assert_eq!(a.migrations, b.migrations);
    assert_eq!(
        (a.events, a.processed, a.end_ns),
        (b.events, b.processed, b.end_ns)
    );
}

/// A heavier sweep, not in CI: `PROTOCOL_STRESS_SEEDS=5000 cargo test --release -p
/// clasp-protocol --test sim stress -- --ignored --nocapture`.
#[test]
#[ignore]
fn stress() {
    let seeds: u64 = std::env::var("PROTOCOL_STRESS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    for shape in [Shape::Pipeline, Shape::Diamond] {
        for kill in [false, true] {
            let cfg = SimConfig {
                shape,
                kill,
                workers_max: 6,
                key_groups: 6,
                keys: 20,
                inputs: 300,
                migrations_max: 8,
                slow_link_p: 0.1,
                ..SimConfig::default()
            };
            let t = std::time::Instant::now();
            let outs = run_seeds(&format!("stress {shape:?} kill={kill}"), &cfg, 0..seeds);
            summary(
                &format!("stress {shape:?} kill={kill} ({:?})", t.elapsed()),
                &outs,
            );
        }
    }
}
