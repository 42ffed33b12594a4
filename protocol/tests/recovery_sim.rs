//! Checkpoints and recovery in their seeded simulation (`clasp_protocol::recovery_sim`): many
//! seeds with one and with two kills (a second failure during a recovery or a checkpoint
//! included), and the broken variant that takes the cut without draining, which the checker
//! must catch. Replay one seed with
//! `RECOVERY_SEED=<seed> cargo test -p clasp-protocol --test recovery_sim one_seed -- --nocapture`.

mod common;

use clasp_protocol::recovery_sim::{RecoveryOutcome, RecoverySimConfig, run};

/// Seeds per scenario (debug build: well under a second each).
const SEEDS: u64 = 300;

fn run_seeds(name: &str, cfg: &RecoverySimConfig) -> Vec<RecoveryOutcome> {
    common::run_seeds(name, 0..SEEDS, |seed| run(seed, cfg))
}

#[test]
fn one_kill_is_recovered_exactly_on_every_seed() {
    let outs = run_seeds("one kill", &RecoverySimConfig::default());
    let sum = |f: fn(&RecoveryOutcome) -> u64| outs.iter().map(f).sum::<u64>();
    // The seeds reach what they are for: recoveries, replays, kills during a checkpoint.
    assert!(sum(|o| o.recoveries) > SEEDS / 2, "{outs:?}");
    assert!(sum(|o| o.replayed) > 0);
    assert!(sum(|o| o.during_checkpoint) > 0);
    assert!(sum(|o| o.during_persist) > 0);
    assert!(sum(|o| o.checkpoints) > SEEDS);
}

#[test]
fn two_kills_and_more_workers_are_recovered_exactly_on_every_seed() {
    let cfg = RecoverySimConfig {
        workers: 4,
        kills: 2,
        checkpoint_every: 40,
        ..RecoverySimConfig::default()
    };
    let outs = run_seeds("two kills", &cfg);
    assert!(outs.iter().any(|o| o.recoveries >= 2));
}

#[test]
fn no_kill_takes_checkpoints_and_loses_nothing() {
    let cfg = RecoverySimConfig {
        kills: 0,
        ..RecoverySimConfig::default()
    };
    let outs = run_seeds("no kill", &cfg);
    assert!(outs.iter().all(|o| o.recoveries == 0));
    assert!(outs.iter().map(|o| o.checkpoints).sum::<u64>() > SEEDS);
}

/// Without the drain, a cut saves an operator's state ahead of the request still in flight to
/// the next one; a recovery from it loses that request. The checker must see it.
#[test]
fn a_cut_taken_without_draining_is_caught() {
    let cfg = RecoverySimConfig {
        drain: false,
        kills: 2,
        ..RecoverySimConfig::default()
    };
    let failing = (0..SEEDS).filter(|&s| run(s, &cfg).is_err()).count();
    assert!(failing > 0, "no seed caught the undrained cut");
}

#[test]
fn one_seed() {
    let Some(seed) = std::env::var("RECOVERY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    else {
        return;
    };
    println!("{:?}", run(seed, &RecoverySimConfig::default()));
}
