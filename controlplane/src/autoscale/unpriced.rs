//! The CPU a capped worker spends that the cost model does not price, and the W̄ that leaves
//! for what it does price.
//!
//! Why: placement packs every worker to h·W̄ in the model's units — its operators' execution
//! plus α, β and γ per chained request and remote destination. A capped worker's W̄ is its cap,
//! but the cap also pays for what the model has no term for: every thread's sleeps and
//! wake-ups, taking input in from the ingress and reporting completions, timers, the network
//! thread with little to do. On a 2-vCPU virtual machine that was 40–80 % of a capped worker's
//! CPU at moderate load (5 000–9 000 sleeps a second at about 20 µs each). Priced with α and β
//! as `clasp calibrate` measures them (the bare hand-off), the default job packed its whole
//! 90 000 records/s peak onto one worker that sustains about 60 000/s, and never scaled out.
//!
//! So each interval, every active worker's measured CPU less the model's price of the work it
//! did (with the costs the planner plans with, each remote request's β split between sender
//! and receiver as placement splits it) is what the model missed; the mean over the active
//! workers, smoothed over intervals, is taken off the cap. The correction is one-sided: when
//! the model prices more than the workers used (priors above the real costs), W̄ stays at the
//! cap, so packing is then conservative and never beyond what the cap holds. It never takes
//! W̄ below [`MIN_CAPACITY_FRACTION`] of the cap: an interval of odd readings must not ask for
//! every worker there is.
//!
//! Only for a known W̄ (a cap): an estimated one (the saturated estimator's) is already the
//! modelled load a worker sustains, in the model's own units.

use crate::metrics::WorkerSample;
use crate::model::CostModel;

/// The weight of one interval in the smoothed unpriced CPU (about 5 intervals' memory).
pub const UNPRICED_SMOOTHING: f64 = 0.2;
/// W̄ never goes below this fraction of the cap.
pub const MIN_CAPACITY_FRACTION: f64 = 0.25;

/// The smoothed CPU per active worker the model does not price (µs per second).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unpriced {
    smoothed_us_per_s: Option<f64>,
}

impl Unpriced {
    /// One interval of the active workers' samples, priced with `costs` and a receiver's
    /// share `receiver_share` of β. Workers without a measured CPU time are left out; an
    /// interval with none leaves the estimate as it was.
    pub fn observe(&mut self, active: &[WorkerSample], costs: CostModel, receiver_share: f64) {
        let r = if receiver_share.is_finite() {
            receiver_share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let gaps: Vec<f64> = active
            .iter()
            .filter_map(|s| Some(s.cpu_us_per_s? - priced_us_per_s(s, costs, r)))
            .filter(|g| g.is_finite())
            .collect();
        if gaps.is_empty() {
            return;
        }
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        self.smoothed_us_per_s = Some(match self.smoothed_us_per_s {
            None => mean,
            Some(old) => old + UNPRICED_SMOOTHING * (mean - old),
        });
    }

    /// The smoothed unpriced CPU per active worker (µs per second; 0 before any interval and
    /// when the model prices more than the workers used).
    pub fn us_per_s(&self) -> f64 {
        self.smoothed_us_per_s.map_or(0.0, |u| u.max(0.0))
    }

    /// The W̄ a worker capped at `cap_us_per_s` has for what the model prices.
    pub fn capacity_us_per_s(&self, cap_us_per_s: f64) -> f64 {
        (cap_us_per_s - self.us_per_s()).max(MIN_CAPACITY_FRACTION * cap_us_per_s)
    }
}

/// What the model charges a worker for one interval's work: its operators' execution, α per
/// local chained request, (1−r)·β per remote one it sent and r·β per remote one it received,
/// γ per remote destination (as placement charges it).
fn priced_us_per_s(s: &WorkerSample, c: CostModel, r: f64) -> f64 {
    let received = s.remote_received_per_s.unwrap_or(0.0);
    s.exec_load_us_per_s()
        + c.alpha_us * s.local_per_s
        + c.beta_us * ((1.0 - r) * s.remote_per_s + r * received)
        + c.gamma_us * s.destinations as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const COSTS: CostModel = CostModel {
        alpha_us: 0.1,
        beta_us: 0.2,
        gamma_us: 1_000.0,
    };
    const CAP: f64 = 300_000.0;

    fn sample(cpu: Option<f64>, local: f64, sent: f64, received: f64) -> WorkerSample {
        WorkerSample {
            cpu_us_per_s: cpu,
            local_per_s: local,
            remote_per_s: sent,
            remote_received_per_s: Some(received),
            destinations: 1,
            ..WorkerSample::default()
        }
    }

    #[test]
    fn what_the_model_misses_comes_off_the_cap() {
        // Priced: 0.1·100 000 + 0.2·(0.5·50 000 + 0.5·30 000) + 1 000 = 19 000 µs/s.
        let priced = 19_000.0;
        let mut u = Unpriced::default();
        let s = [sample(
            Some(priced + 120_000.0),
            100_000.0,
            50_000.0,
            30_000.0,
        )];
        for _ in 0..100 {
            u.observe(&s, COSTS, 0.5);
        }
        assert!((u.us_per_s() - 120_000.0).abs() < 1.0, "{}", u.us_per_s());
        assert!((u.capacity_us_per_s(CAP) - 180_000.0).abs() < 1.0);
    }

    #[test]
    fn it_is_smoothed_and_averaged_over_the_active_workers() {
        let mut u = Unpriced::default();
        let w = |gap: f64| sample(Some(1_000.0 + gap), 0.0, 0.0, 0.0);
        u.observe(&[w(100_000.0), w(50_000.0)], COSTS, 0.5);
        assert!(
            (u.us_per_s() - 75_000.0).abs() < 1e-6,
            "the first interval sets it"
        );
        u.observe(&[w(175_000.0), w(175_000.0)], COSTS, 0.5);
        let want = 75_000.0 + UNPRICED_SMOOTHING * 100_000.0;
        assert!((u.us_per_s() - want).abs() < 1e-6, "{}", u.us_per_s());
    }

    #[test]
    fn a_model_that_prices_more_than_was_used_leaves_the_cap() {
        let mut u = Unpriced::default();
        u.observe(&[sample(Some(5_000.0), 1e6, 0.0, 0.0)], COSTS, 0.5);
        assert_eq!(u.us_per_s(), 0.0);
        assert_eq!(u.capacity_us_per_s(CAP), CAP);
    }

    #[test]
    fn capacity_has_a_floor_and_unmeasured_workers_are_left_out() {
        let mut u = Unpriced::default();
        u.observe(&[sample(None, 0.0, 0.0, 0.0)], COSTS, 0.5);
        assert_eq!(u, Unpriced::default(), "no CPU time, no estimate");
        u.observe(&[sample(Some(10.0 * CAP), 0.0, 0.0, 0.0)], COSTS, 0.5);
        assert_eq!(u.capacity_us_per_s(CAP), MIN_CAPACITY_FRACTION * CAP);
        u.observe(&[sample(Some(f64::NAN), 0.0, 0.0, 0.0)], COSTS, f64::NAN);
        assert_eq!(
            u.capacity_us_per_s(CAP),
            MIN_CAPACITY_FRACTION * CAP,
            "NaN ignored"
        );
    }

    #[test]
    fn beta_is_split_between_sender_and_receiver_as_placement_splits_it() {
        let s = sample(Some(0.0), 0.0, 10_000.0, 30_000.0);
        let sender_only = priced_us_per_s(&s, COSTS, 0.0);
        let halves = priced_us_per_s(&s, COSTS, 0.5);
        assert!((sender_only - (0.2 * 10_000.0 + 1_000.0)).abs() < 1e-9);
        assert!((halves - (0.2 * 20_000.0 + 1_000.0)).abs() < 1e-9);
    }
}
