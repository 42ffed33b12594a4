//! Tiny simulator checks: deterministic per seed, migration keeps every request, and FaaSFlow
//! shows its scale-up / scale-down asymmetry (over-provisioning more on the way down).

use clasp_controlplane::app::AppModel;
use clasp_controlplane::sim::engine::{Cluster, ClusterConfig};
use clasp_controlplane::sim::{Experiment, SimSettings, run};

fn tiny_cluster(seed: u64) -> (u64, u64, f64) {
    let app = AppModel::builtin("wc", 400.0).expect("builtin");
    let shares = vec![vec![0.5, 0.5], vec![0.5, 0.5]];
    let mut c = Cluster::new(&app, ClusterConfig::default(), 3, &shares, seed);
    c.set_input_rate(200.0);
    c.run_until(300_000.0);
    c.migrate(&vec![vec![0.2, 0.3, 0.5], vec![0.0, 0.5, 0.5]]);
    c.run_until(600_000.0);
    c.set_input_rate(0.0);
    c.run_until(1_500_000.0);
    (
        c.total_admitted,
        c.total_completed,
        c.latency.quantile_us(0.5),
    )
}

#[test]
fn deterministic_per_seed_and_nothing_lost_across_a_migration() {
    let a = tiny_cluster(5);
    assert_eq!(a, tiny_cluster(5));
    assert_ne!(a, tiny_cluster(6));
    assert!(a.0 > 50);
    assert_eq!(
        a.0, a.1,
        "every admitted root completes after the input stops"
    );
}

#[test]
fn faasflow_over_provisions_more_when_scaling_down() {
    let app = AppModel::builtin("sd", 400.0).expect("builtin");
    let s = SimSettings {
        cluster: ClusterConfig::default(),
        workers: 3,
        headroom: 1.0,
        seeds: vec![1],
    };
    let v = run(Experiment::WorkerCount, &s, &[app], None).expect("no output dir");
    let ff = &v["mae_by_direction"]["faasflow"];
    let up = ff["up_mean_signed_error"].as_f64().expect("number");
    let down = ff["down_mean_signed_error"].as_f64().expect("number");
    assert!(down > up, "faasflow up {up} down {down}");
    assert!(v["mae"]["clasp"]["sd"].as_f64().expect("number") <= 1.0);
}
