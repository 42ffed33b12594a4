use clasp_controlplane::estimator::{CapacityEstimator, EstimatorConfig, SaturatedPoint};
use clasp_controlplane::model::CostModel;
fn main() {
    let text = std::fs::read_to_string("/tmp/sat.txt").unwrap();
    let pts: Vec<SaturatedPoint> = text
        .lines()
        .filter(|l| l.starts_with("SAT"))
        .map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .skip(1)
                .take(4)
                .map(|x| x.parse().unwrap())
                .collect();
            SaturatedPoint {
                exec_us_per_s: v[0],
                local_per_s: v[1],
                remote_per_s: v[2],
                destinations: v[3],
            }
        })
        .collect();
    let priors = CostModel {
        alpha_us: 115.5,
        beta_us: 91.67,
        gamma_us: 154500.0,
    };
    for (name, cfg) in [
        ("default", EstimatorConfig::default()),
        (
            "noclamp",
            EstimatorConfig {
                step_clamp: 1e9,
                ..Default::default()
            },
        ),
        (
            "minreg1",
            EstimatorConfig {
                min_regressor: 1.0,
                ..Default::default()
            },
        ),
        (
            "minreg2",
            EstimatorConfig {
                min_regressor: 2.0,
                ..Default::default()
            },
        ),
        (
            "minreg05",
            EstimatorConfig {
                min_regressor: 0.5,
                ..Default::default()
            },
        ),
    ] {
        let mut e = CapacityEstimator::new(priors, None, cfg);
        for p in &pts {
            e.observe(*p);
        }
        println!(
            "{name}: {:?} {:?} updates={}",
            e.costs(),
            e.capacity_us_per_s(),
            e.updates
        );
    }
    let truth = CostModel {
        alpha_us: 38.5,
        beta_us: 220.0,
        gamma_us: 51500.0,
    };
    let mut e = CapacityEstimator::new(truth, None, EstimatorConfig::default());
    for p in &pts {
        e.observe(*p);
    }
    println!("from truth: {:?} {:?}", e.costs(), e.capacity_us_per_s());
}
