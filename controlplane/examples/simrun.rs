use clasp_controlplane::app::{AppModel, BUILTIN_APPS};
use clasp_controlplane::sim::engine::ClusterConfig;
use clasp_controlplane::sim::{Experiment, SimSettings, run};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let exp = match args[1].as_str() {
        "wc" => Experiment::WorkerCount,
        "placement" => Experiment::Placement,
        "gap" => Experiment::Gap,
        "burst" => Experiment::E2e(clasp_controlplane::sim::e2e::Pattern::Burst),
        _ => Experiment::E2e(clasp_controlplane::sim::e2e::Pattern::Gradual),
    };
    let apps: Vec<AppModel> = match args.get(2) {
        Some(a) if a != "all" => vec![AppModel::builtin(a, 400.0).unwrap()],
        _ => BUILTIN_APPS
            .iter()
            .map(|n| AppModel::builtin(n, 400.0).unwrap())
            .collect(),
    };
    let h = if exp == Experiment::WorkerCount {
        1.0
    } else {
        0.9
    };
    let s = SimSettings {
        cluster: ClusterConfig::default(),
        workers: 10,
        headroom: h,
        seeds: vec![1, 2, 3],
    };
    let v = run(exp, &s, &apps, args.get(3).map(std::path::Path::new)).unwrap();
    println!("{}", serde_json::to_string(&v).unwrap());
}
