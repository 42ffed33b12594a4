//! The RLS estimator recovers known α, β, γ from noisy synthetic saturated samples, follows a
//! change, and respects its guards.

use clasp_controlplane::estimator::{
    CapacityEstimator, EstimatorConfig, SaturatedPoint, StepOutcome,
};
use clasp_controlplane::model::CostModel;
use clasp_protocol::rng::SimRng;

const CAPACITY: f64 = 2_000_000.0;

fn sample(rng: &mut SimRng, truth: CostModel, noise: f64) -> SaturatedPoint {
    let local = 5000.0 * rng.uniform();
    let remote = 3000.0 * rng.uniform();
    let dests = rng.below(10) as f64;
    let exec = CAPACITY - truth.alpha_us * local - truth.beta_us * remote - truth.gamma_us * dests;
    SaturatedPoint {
        exec_us_per_s: exec * (1.0 + noise * rng.normal()),
        local_per_s: local,
        remote_per_s: remote,
        destinations: dests,
    }
}

fn truth() -> CostModel {
    CostModel {
        alpha_us: 38.5,
        beta_us: 275.0,
        gamma_us: 51_500.0,
    }
}

fn priors_off(t: CostModel) -> CostModel {
    CostModel {
        alpha_us: t.alpha_us * 3.0,
        beta_us: t.beta_us / 3.0,
        gamma_us: t.gamma_us * 3.0,
    }
}

fn within(a: f64, b: f64, tol: f64) -> bool {
    ((a - b) / b).abs() <= tol
}

#[test]
fn recovers_alpha_beta_gamma_within_5_percent() {
    let t = truth();
    let mut est = CapacityEstimator::new(priors_off(t), None, EstimatorConfig::default());
    let mut rng = SimRng::new(7);
    for _ in 0..400 {
        est.observe(sample(&mut rng, t, 0.002));
    }
    let c = est.costs();
    assert!(within(c.alpha_us, t.alpha_us, 0.05), "alpha {c:?}");
    assert!(within(c.beta_us, t.beta_us, 0.05), "beta {c:?}");
    assert!(within(c.gamma_us, t.gamma_us, 0.05), "gamma {c:?}");
    let w = est.capacity_us_per_s().expect("seen samples");
    assert!(within(w, CAPACITY, 0.05), "W {w}");
}

#[test]
fn follows_a_change() {
    let t = truth();
    let mut est = CapacityEstimator::new(t, None, EstimatorConfig::default());
    let mut rng = SimRng::new(8);
    for _ in 0..200 {
        est.observe(sample(&mut rng, t, 0.002));
    }
    let changed = CostModel {
        beta_us: 2.0 * t.beta_us,
        ..t
    };
    for _ in 0..400 {
        est.observe(sample(&mut rng, changed, 0.002));
    }
    let c = est.costs();
    assert!(
        within(c.beta_us, changed.beta_us, 0.05),
        "beta did not follow: {c:?}"
    );
}

#[test]
fn skips_flat_and_remote_free_differences_and_bounds_covariance() {
    let t = truth();
    let cfg = EstimatorConfig::default();
    let mut est = CapacityEstimator::new(t, None, cfg);
    let p = SaturatedPoint {
        exec_us_per_s: 1e6,
        local_per_s: 100.0,
        remote_per_s: 100.0,
        destinations: 2.0,
    };
    assert_eq!(est.observe(p), StepOutcome::First);
    assert_eq!(est.observe(p), StepOutcome::SkippedFlat);
    let no_remote = SaturatedPoint {
        remote_per_s: 0.0,
        local_per_s: 0.0,
        ..p
    };
    let mut est2 = CapacityEstimator::new(t, None, cfg);
    est2.observe(SaturatedPoint {
        local_per_s: 4000.0,
        ..no_remote
    });
    assert_eq!(est2.observe(no_remote), StepOutcome::SkippedNoRemote);
    // A long run of one-directional excitation must not wind the covariance up.
    let mut rng = SimRng::new(9);
    for i in 0..2000 {
        let q = SaturatedPoint {
            local_per_s: 1000.0 + (i % 2) as f64 * 3000.0,
            remote_per_s: 500.0,
            ..p
        };
        est.observe(SaturatedPoint {
            exec_us_per_s: q.exec_us_per_s * (1.0 + 0.001 * rng.normal()),
            ..q
        });
        assert!(
            est.covariance_trace()
                <= cfg.covariance_trace_bound * 3.0 * cfg.initial_covariance * (1.0 + 1e-9)
        );
    }
    let c = est.costs();
    assert!(c.alpha_us >= 0.0 && c.beta_us >= 0.0 && c.gamma_us >= 0.0);
}
