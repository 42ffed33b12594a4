//! Latency-aware headroom: each worker's packing headroom h_w chosen from a p95 latency target
//! and the queueing the run measures (off unless `AutoscaleConfig::latency_target_ms` is set).
//!
//! Why: packing every worker to one fixed h·W̄ fixes the utilisation, not the latency. How much
//! queueing a utilisation costs depends on the worker's service times, executors and how bursty
//! its arrivals are, so the same h is too tight for one worker and too loose for another. Here
//! every worker keeps a fitted relation between its utilisation ρ (modelled load / W̄, the
//! quantity the headroom bounds) and its queueing delay, and the planner packs it to the
//! largest ρ whose predicted p95 queueing stays within the target's share for one hop.
//!
//! The relation is M/M/c's closed form with c = the worker's executors, calibrated by what is
//! measured: the mean service time S (modelled load over requests processed) and one scale k
//! per worker — the measured mean queueing delay over M/M/c's mean at the measured ρ, smoothed
//! in log space. The p95 is M/M/c's p95 times k (the measured queueing keeps M/M/c's shape and
//! gets its own scale): with C the Erlang-C probability of waiting,
//! `mean = C·S / (c·(1−ρ))` and `p95 = max(0, ln(C/0.05))·S / (c·(1−ρ))`. Why the mean and not
//! a measured p95: the mean queueing delay is what every worker sample carries, live and in the
//! simulator, so the same rule runs in both.
//!
//! The end-to-end target is split evenly over the hops of the app's longest chain (a request
//! queues once per operator on its path), and h_w is the largest ρ in [floor, h] whose
//! predicted per-hop p95 meets that share: never above the fixed headroom h, never below the
//! floor (a target no utilisation meets would otherwise empty the worker). A worker with no fit
//! of its own (a new one) uses the mean fit of the others; before any fit, h.

use crate::metrics::WorkerSample;
use crate::model::CostModel;

/// The percentile the target is for.
pub const TARGET_QUANTILE: f64 = 0.95;
/// The lowest headroom the rule chooses.
pub const DEFAULT_HEADROOM_FLOOR: f64 = 0.5;
/// Weight of one interval in a worker's fitted scale (log space) and service time.
pub const FIT_SMOOTHING: f64 = 0.2;
/// Only intervals with ρ in this range calibrate: below it the queueing is too small to
/// measure, above it the worker is saturated and the queue grows without a steady state.
pub const FIT_UTILISATION_RANGE: std::ops::RangeInclusive<f64> = 0.3..=0.97;
/// The scale k stays within this range (a few odd intervals must not zero or explode it).
const SCALE_RANGE: std::ops::RangeInclusive<f64> = 0.05..=50.0;
/// Bisection steps on ρ (2^-30 resolution).
const BISECTION_STEPS: usize = 30;

/// The Erlang-C probability that an arrival waits in M/M/c with `c` servers at utilisation
/// `rho` (offered load c·ρ); 1 at or above saturation.
pub fn erlang_c(c: usize, rho: f64) -> f64 {
    let c = c.max(1);
    if rho.is_nan() || rho <= 0.0 {
        return 0.0;
    }
    if rho >= 1.0 {
        return 1.0;
    }
    let a = c as f64 * rho;
    // Σ_{k<c} a^k/k! and a^c/c!, term by term (no factorial overflow).
    let (mut sum, mut term) = (0.0, 1.0);
    for k in 0..c {
        sum += term;
        term *= a / (k + 1) as f64;
    }
    let top = term / (1.0 - rho);
    top / (sum + top)
}

/// M/M/c's mean queueing delay (µs) at utilisation `rho` with mean service time `service_us`.
pub fn mmc_wait_mean_us(c: usize, rho: f64, service_us: f64) -> f64 {
    if rho >= 1.0 {
        return f64::INFINITY;
    }
    erlang_c(c, rho) * service_us / (c.max(1) as f64 * (1.0 - rho))
}

/// M/M/c's p95 queueing delay (µs): the wait is 0 with probability 1 − C and exponential with
/// rate c·(1−ρ)/S otherwise.
pub fn mmc_wait_p95_us(c: usize, rho: f64, service_us: f64) -> f64 {
    if rho >= 1.0 {
        return f64::INFINITY;
    }
    let tail = 1.0 - TARGET_QUANTILE;
    let p = erlang_c(c, rho);
    if p <= tail {
        return 0.0;
    }
    (p / tail).ln() * service_us / (c.max(1) as f64 * (1.0 - rho))
}

/// Operators on the longest chain of the app (the hops a request queues at), at least 1.
/// Edges are (from, to) operator indices; a cycle counts each operator once.
pub fn chain_hops(operators: usize, edges: &[(usize, usize)]) -> usize {
    // Longest path by relaxation, at most `operators` rounds (a cycle stops growing there).
    let mut depth = vec![1usize; operators];
    for _ in 0..operators {
        let mut changed = false;
        for &(from, to) in edges {
            if from < operators && to < operators && depth[to] < depth[from] + 1 {
                depth[to] = (depth[from] + 1).min(operators);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    depth.into_iter().max().unwrap_or(1).max(1)
}

/// One worker's calibrated relation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueFit {
    /// ln k: measured mean queueing over M/M/c's.
    pub log_scale: f64,
    /// Mean service time of one request on one executor (µs), modelled load over requests.
    pub service_us: f64,
    /// Intervals behind the fit.
    pub samples: usize,
}

impl QueueFit {
    /// The predicted p95 queueing delay (µs) at utilisation `rho` on `executors` executors.
    pub fn p95_us(&self, executors: usize, rho: f64) -> f64 {
        self.log_scale.exp() * mmc_wait_p95_us(executors, rho, self.service_us)
    }
}

/// The rule's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadroomTarget {
    /// The end-to-end p95 latency target (µs); each hop of the longest chain gets an even share.
    pub target_us: f64,
    /// The lowest headroom chosen.
    pub floor: f64,
    /// The highest: the fixed headroom h.
    pub ceiling: f64,
    /// Executors per worker (c of M/M/c).
    pub executors: usize,
    /// Hops of the app's longest chain ([`chain_hops`]).
    pub hops: usize,
}

impl HeadroomTarget {
    /// The p95 queueing one hop may add (µs).
    pub fn per_hop_us(&self) -> f64 {
        self.target_us / self.hops.max(1) as f64
    }

    /// The largest ρ in [floor, ceiling] whose predicted per-hop p95 meets the target under
    /// `fit` (the floor when none does).
    pub fn headroom_for(&self, fit: &QueueFit) -> f64 {
        let (floor, ceiling) = (self.floor.min(self.ceiling), self.ceiling);
        let budget = self.per_hop_us();
        let meets = |rho: f64| fit.p95_us(self.executors, rho) <= budget;
        if meets(ceiling) {
            return ceiling;
        }
        if !meets(floor) {
            return floor;
        }
        // The prediction grows with ρ: bisect for the boundary.
        let (mut lo, mut hi) = (floor, ceiling);
        for _ in 0..BISECTION_STEPS {
            let mid = 0.5 * (lo + hi);
            if meets(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Every worker's fit and the headrooms they give.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadroomModel {
    pub target: HeadroomTarget,
    /// `fits[w]`: worker w's relation (None until an interval calibrated it).
    fits: Vec<Option<QueueFit>>,
}

impl HeadroomModel {
    pub fn new(target: HeadroomTarget) -> Self {
        assert!(
            target.target_us > 0.0,
            "the latency target must be positive"
        );
        HeadroomModel {
            target,
            fits: Vec::new(),
        }
    }

    /// One interval of worker `sample.worker`: its modelled load under `costs` over
    /// `capacity_us_per_s` is ρ, the load over its requests S, and its measured mean queueing
    /// delay refits k when ρ is in [`FIT_UTILISATION_RANGE`].
    pub fn observe(&mut self, sample: &WorkerSample, costs: CostModel, capacity_us_per_s: f64) {
        let requests_per_s: f64 = sample.operators.iter().map(|o| o.processed_per_s).sum();
        let load_us_per_s = sample.exec_load_us_per_s()
            + costs.alpha_us * sample.local_per_s
            + costs.beta_us * sample.remote_per_s
            + costs.gamma_us * sample.destinations as f64;
        let rho = load_us_per_s / capacity_us_per_s;
        let c = self.target.executors.max(1);
        // Service time per request on one executor: c executors serve W̄ µs per second.
        let service_us = load_us_per_s / requests_per_s * (c as f64 * 1e6 / capacity_us_per_s);
        let usable = rho.is_finite()
            && FIT_UTILISATION_RANGE.contains(&rho)
            && service_us.is_finite()
            && service_us > 0.0
            && sample.wait_mean_us.is_finite()
            && sample.wait_mean_us > 0.0;
        if !usable {
            return;
        }
        let model_us = mmc_wait_mean_us(c, rho, service_us);
        if !(model_us.is_finite() && model_us > 0.0) {
            return;
        }
        let log_k = (sample.wait_mean_us / model_us)
            .clamp(*SCALE_RANGE.start(), *SCALE_RANGE.end())
            .ln();
        if self.fits.len() <= sample.worker {
            self.fits.resize(sample.worker + 1, None);
        }
        let a = FIT_SMOOTHING;
        let fit = self.fits[sample.worker].get_or_insert(QueueFit {
            log_scale: log_k,
            service_us,
            samples: 0,
        });
        fit.log_scale = (1.0 - a) * fit.log_scale + a * log_k;
        fit.service_us = (1.0 - a) * fit.service_us + a * service_us;
        fit.samples += 1;
    }

    /// Worker `w`'s fit, else the mean of the others' (None before any).
    pub fn fit(&self, w: usize) -> Option<QueueFit> {
        if let Some(Some(f)) = self.fits.get(w) {
            return Some(*f);
        }
        let known: Vec<&QueueFit> = self.fits.iter().flatten().collect();
        if known.is_empty() {
            return None;
        }
        let n = known.len() as f64;
        Some(QueueFit {
            log_scale: known.iter().map(|f| f.log_scale).sum::<f64>() / n,
            service_us: known.iter().map(|f| f.service_us).sum::<f64>() / n,
            samples: 0,
        })
    }

    /// h_w for the first `workers` workers (the ceiling where nothing is known yet).
    pub fn headrooms(&self, workers: usize) -> Vec<f64> {
        (0..workers)
            .map(|w| {
                self.fit(w)
                    .map_or(self.target.ceiling, |f| self.target.headroom_for(&f))
            })
            .collect()
    }

    /// Worker `index` left: the workers after it move down one, as the driver renumbers them.
    pub fn worker_left(&mut self, index: usize) {
        if index < self.fits.len() {
            self.fits.remove(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::OperatorSample;

    fn target(target_ms: f64) -> HeadroomTarget {
        HeadroomTarget {
            target_us: target_ms * 1e3,
            floor: DEFAULT_HEADROOM_FLOOR,
            ceiling: 0.9,
            executors: 2,
            hops: 4,
        }
    }

    fn fit(scale: f64) -> QueueFit {
        QueueFit {
            log_scale: scale.ln(),
            service_us: 400.0,
            samples: 1,
        }
    }

    #[test]
    fn erlang_c_matches_closed_forms() {
        // c = 1: C = ρ; c = 2: C = 2ρ²/(1+ρ).
        assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
        assert!((erlang_c(2, 0.9) - 2.0 * 0.81 / 1.9).abs() < 1e-12);
        assert_eq!(erlang_c(4, 0.0), 0.0);
        assert_eq!(erlang_c(4, 1.2), 1.0);
        // M/M/1's mean wait: ρS/(1−ρ).
        assert!((mmc_wait_mean_us(1, 0.5, 100.0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn the_target_sets_the_headroom() {
        let f = fit(1.0);
        let loose = target(1000.0).headroom_for(&f);
        let mid = target(12.0).headroom_for(&f);
        let tight = target(6.0).headroom_for(&f);
        let impossible = target(0.001).headroom_for(&f);
        assert_eq!(loose, 0.9, "a loose target keeps the fixed headroom");
        assert!(
            mid < 0.9 && mid > tight,
            "loose {loose} mid {mid} tight {tight}"
        );
        assert!(tight > DEFAULT_HEADROOM_FLOOR);
        assert_eq!(impossible, DEFAULT_HEADROOM_FLOOR);
        // The chosen ρ meets the per-hop share, and a little more would not.
        let t = target(12.0);
        assert!(f.p95_us(2, mid) <= t.per_hop_us());
        assert!(f.p95_us(2, mid + 1e-3) > t.per_hop_us());
    }

    #[test]
    fn a_worse_fit_gets_less_headroom() {
        let t = target(12.0);
        assert!(t.headroom_for(&fit(3.0)) < t.headroom_for(&fit(1.0)));
    }

    fn sample(worker: usize, processed_per_s: f64, wait_mean_us: f64) -> WorkerSample {
        WorkerSample {
            worker,
            wait_mean_us,
            operators: vec![OperatorSample {
                processed_per_s,
                exec_us: 400.0,
            }],
            ..WorkerSample::default()
        }
    }

    #[test]
    fn the_fit_follows_the_measured_queueing() {
        let costs = CostModel {
            alpha_us: 0.0,
            beta_us: 0.0,
            gamma_us: 0.0,
        };
        let t = target(12.0);
        // 4000 requests/s × 400 µs on 2 executors (2·10^6 µs/s): ρ = 0.8.
        let model = mmc_wait_mean_us(2, 0.8, 400.0);
        let mut calm = HeadroomModel::new(t);
        let mut bursty = HeadroomModel::new(t);
        for _ in 0..50 {
            calm.observe(&sample(0, 4000.0, model), costs, 2e6);
            bursty.observe(&sample(0, 4000.0, 4.0 * model), costs, 2e6);
        }
        let (c, b) = (calm.fit(0).unwrap(), bursty.fit(0).unwrap());
        assert!(c.log_scale.abs() < 1e-9 && (c.service_us - 400.0).abs() < 1e-6);
        assert!((b.log_scale - 4f64.ln()).abs() < 1e-6);
        let (hc, hb) = (calm.headrooms(2), bursty.headrooms(2));
        assert!(hb[0] < hc[0], "more queueing, less headroom: {hb:?} {hc:?}");
        // Worker 1 has no fit of its own: it borrows worker 0's.
        assert_eq!(hc[0], hc[1]);
        // A saturated or idle interval does not calibrate.
        let mut m = HeadroomModel::new(t);
        m.observe(&sample(0, 5000.0, 1e6), costs, 2e6);
        m.observe(&sample(0, 100.0, 10.0), costs, 2e6);
        assert_eq!(m.fit(0), None);
        assert_eq!(m.headrooms(1), vec![0.9]);
    }

    #[test]
    fn chain_hops_is_the_longest_path() {
        assert_eq!(chain_hops(1, &[]), 1);
        assert_eq!(chain_hops(4, &[(0, 1), (1, 2), (0, 3)]), 3);
        assert_eq!(chain_hops(3, &[(0, 1), (1, 0), (1, 2)]), 3);
    }
}
