use clasp_controlplane::app::AppModel;
use clasp_controlplane::baselines::PolicyKind;
use clasp_controlplane::sim::engine::ClusterConfig;
use clasp_controlplane::sim::lab::{
    Lab, SIM_SATURATION_QUEUE_DEPTH, SIM_SATURATION_WAIT_US, SimSettings,
};
fn main() {
    let app = AppModel::builtin(&std::env::args().nth(1).unwrap_or("wc".into()), 400.0).unwrap();
    let s = SimSettings {
        cluster: ClusterConfig::default(),
        workers: 10,
        headroom: 1.0,
        seeds: vec![1],
    };
    let mut lab = Lab::new(&app, &s, 1);
    lab.calibrate();
    println!(
        "costs {:?} wbar {:?}",
        lab.estimator.costs(),
        lab.estimator.capacity_us_per_s()
    );
    for n in [1, 3, 6, 10] {
        let sh = lab.shares_for(PolicyKind::Clasp, n);
        let (t, samples) = lab.max_throughput(&sh, n, false);
        let sat: Vec<_> = samples
            .iter()
            .filter(|s| {
                s.queue_mean > SIM_SATURATION_QUEUE_DEPTH && s.wait_mean_us > SIM_SATURATION_WAIT_US
            })
            .collect();
        let busy: Vec<(u64, u64, u64, u64)> = sat
            .iter()
            .map(|s| {
                (
                    (s.exec_load_us_per_s() / 1000.0) as u64,
                    ((s.exec_load_us_per_s()
                        + 38.5 * s.local_per_s
                        + 220.0 * s.remote_per_s
                        + 51500.0 * s.destinations as f64)
                        / 1000.0) as u64,
                    s.destinations as u64,
                    s.executor_busy_us_per_s as u64 / 1000,
                )
            })
            .collect();
        let nonsat: Vec<u64> = samples
            .iter()
            .filter(|s| {
                !(s.queue_mean > SIM_SATURATION_QUEUE_DEPTH
                    && s.wait_mean_us > SIM_SATURATION_WAIT_US)
            })
            .map(|s| s.executor_busy_us_per_s as u64 / 1000)
            .collect();
        println!("n={n} thr={t:.0} sat busy(ms/s)={busy:?}\n   nonsat={nonsat:?}");
    }
}
