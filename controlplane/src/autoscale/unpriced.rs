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
///
/// What is smoothed is the work, not the gap: the mean active worker's CPU beyond its
/// operators' execution, and its chained requests and destinations. The gap is priced from
/// those with the costs at hand when it is asked for, so a cost the estimator has just learnt
/// applies to the recent intervals at once. Smoothing gaps priced with the costs of their own
/// interval left the priors' price in the estimate for several intervals after a cost was
/// learnt: in the main job, β falling from its 1 µs prior to 0.24 µs left W̄ at the cap, and
/// the planner dropped a worker the peak needed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unpriced {
    smoothed: Option<Work>,
}

/// One interval's work, per active worker (means; see [`Unpriced`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Work {
    /// CPU beyond the operators' execution (µs per second).
    cpu_beyond_exec_us_per_s: f64,
    local_per_s: f64,
    sent_per_s: f64,
    received_per_s: f64,
    destinations: f64,
}

impl Work {
    /// A worker's work; None without a measured CPU time, or with a reading that is not finite.
    fn of(s: &WorkerSample) -> Option<Work> {
        let w = Work {
            cpu_beyond_exec_us_per_s: s.cpu_us_per_s? - s.exec_load_us_per_s(),
            local_per_s: s.local_per_s,
            sent_per_s: s.remote_per_s,
            received_per_s: s.remote_received_per_s.unwrap_or(0.0),
            destinations: s.destinations as f64,
        };
        w.fields().iter().all(|v| v.is_finite()).then_some(w)
    }

    fn fields(&self) -> [f64; 5] {
        [
            self.cpu_beyond_exec_us_per_s,
            self.local_per_s,
            self.sent_per_s,
            self.received_per_s,
            self.destinations,
        ]
    }

    fn from_fields(f: [f64; 5]) -> Work {
        Work {
            cpu_beyond_exec_us_per_s: f[0],
            local_per_s: f[1],
            sent_per_s: f[2],
            received_per_s: f[3],
            destinations: f[4],
        }
    }

    /// The CPU the model does not price: what it used beyond execution, less α per local
    /// chained request, (1−r)·β per remote one sent and r·β per remote one received, and γ per
    /// remote destination (as placement charges them).
    fn unpriced_us_per_s(&self, c: CostModel, r: f64) -> f64 {
        self.cpu_beyond_exec_us_per_s
            - c.alpha_us * self.local_per_s
            - c.beta_us * ((1.0 - r) * self.sent_per_s + r * self.received_per_s)
            - c.gamma_us * self.destinations
    }
}

impl Unpriced {
    /// One interval of the active workers' samples. Workers without a measured CPU time are
    /// left out; an interval with none leaves the estimate as it was.
    pub fn observe(&mut self, active: &[WorkerSample]) {
        let works: Vec<Work> = active.iter().filter_map(Work::of).collect();
        if works.is_empty() {
            return;
        }
        let mut sum = [0.0; 5];
        for w in &works {
            sum.iter_mut().zip(w.fields()).for_each(|(s, v)| *s += v);
        }
        let mean = sum.map(|s| s / works.len() as f64);
        let next = match self.smoothed {
            None => mean,
            Some(old) => {
                let old = old.fields();
                std::array::from_fn(|i| old[i] + UNPRICED_SMOOTHING * (mean[i] - old[i]))
            }
        };
        self.smoothed = Some(Work::from_fields(next));
    }

    /// The smoothed unpriced CPU per active worker, priced with `costs` and a receiver's share
    /// `receiver_share` of β (µs per second; 0 before any interval and when the model prices
    /// more than the workers used).
    pub fn us_per_s(&self, costs: CostModel, receiver_share: f64) -> f64 {
        let r = if receiver_share.is_finite() {
            receiver_share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.smoothed
            .map(|w| w.unpriced_us_per_s(costs, r))
            .filter(|u| u.is_finite())
            .map_or(0.0, |u| u.max(0.0))
    }

    /// The W̄ a worker capped at `cap_us_per_s` has for what the model prices (see
    /// [`Unpriced::us_per_s`]).
    pub fn capacity_us_per_s(
        &self,
        cap_us_per_s: f64,
        costs: CostModel,
        receiver_share: f64,
    ) -> f64 {
        (cap_us_per_s - self.us_per_s(costs, receiver_share))
            .max(MIN_CAPACITY_FRACTION * cap_us_per_s)
    }
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
            u.observe(&s);
        }
        assert!(
            (u.us_per_s(COSTS, 0.5) - 120_000.0).abs() < 1.0,
            "{}",
            u.us_per_s(COSTS, 0.5)
        );
        assert!((u.capacity_us_per_s(CAP, COSTS, 0.5) - 180_000.0).abs() < 1.0);
    }

    #[test]
    fn it_is_smoothed_and_averaged_over_the_active_workers() {
        let mut u = Unpriced::default();
        let w = |gap: f64| sample(Some(1_000.0 + gap), 0.0, 0.0, 0.0);
        u.observe(&[w(100_000.0), w(50_000.0)]);
        assert!(
            (u.us_per_s(COSTS, 0.5) - 75_000.0).abs() < 1e-6,
            "the first interval sets it"
        );
        u.observe(&[w(175_000.0), w(175_000.0)]);
        let want = 75_000.0 + UNPRICED_SMOOTHING * 100_000.0;
        assert!(
            (u.us_per_s(COSTS, 0.5) - want).abs() < 1e-6,
            "{}",
            u.us_per_s(COSTS, 0.5)
        );
    }

    #[test]
    fn a_model_that_prices_more_than_was_used_leaves_the_cap() {
        let mut u = Unpriced::default();
        u.observe(&[sample(Some(5_000.0), 1e6, 0.0, 0.0)]);
        assert_eq!(u.us_per_s(COSTS, 0.5), 0.0);
        assert_eq!(u.capacity_us_per_s(CAP, COSTS, 0.5), CAP);
    }

    #[test]
    fn capacity_has_a_floor_and_unmeasured_workers_are_left_out() {
        let mut u = Unpriced::default();
        u.observe(&[sample(None, 0.0, 0.0, 0.0)]);
        assert_eq!(u, Unpriced::default(), "no CPU time, no estimate");
        u.observe(&[sample(Some(10.0 * CAP), 0.0, 0.0, 0.0)]);
        assert_eq!(
            u.capacity_us_per_s(CAP, COSTS, 0.5),
            MIN_CAPACITY_FRACTION * CAP
        );
        u.observe(&[sample(Some(f64::NAN), 0.0, 0.0, 0.0)]);
        assert_eq!(
            u.capacity_us_per_s(CAP, COSTS, f64::NAN),
            MIN_CAPACITY_FRACTION * CAP,
            "NaN ignored"
        );
    }

    #[test]
    fn beta_is_split_between_sender_and_receiver_as_placement_splits_it() {
        let work = Work::of(&sample(Some(0.0), 0.0, 10_000.0, 30_000.0)).expect("measured");
        let sender_only = -work.unpriced_us_per_s(COSTS, 0.0);
        let halves = -work.unpriced_us_per_s(COSTS, 0.5);
        assert!((sender_only - (0.2 * 10_000.0 + 1_000.0)).abs() < 1e-9);
        assert!((halves - (0.2 * 20_000.0 + 1_000.0)).abs() < 1e-9);
    }

    #[test]
    fn a_cost_learnt_later_prices_the_earlier_intervals_at_once() {
        // 100 000 µs/s beyond execution, 400 000 remote requests a second each way.
        let mut u = Unpriced::default();
        for _ in 0..20 {
            u.observe(&[sample(Some(100_000.0), 0.0, 400_000.0, 400_000.0)]);
        }
        let prior = CostModel {
            beta_us: 1.0,
            ..COSTS
        };
        assert_eq!(
            u.capacity_us_per_s(CAP, prior, 0.5),
            CAP,
            "the prior prices it all"
        );
        // β learnt at 0.1 µs: 40 000 µs/s priced, so 60 000 − γ's 1 000 unpriced.
        let learnt = CostModel {
            beta_us: 0.1,
            ..COSTS
        };
        assert!((u.us_per_s(learnt, 0.5) - 59_000.0).abs() < 1e-6);
    }
}
