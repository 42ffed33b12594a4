//! The autoscaling loop through its public API: a synthetic cluster of two-operator pipelines
//! fed interval by interval, checking what the loop decides (and what it does not) — scale up
//! when saturated, down after the trigger's hold, one migration at a time, no scale-down while
//! a backlog drains, and bad input without a panic.

use clasp_controlplane::app::AppModel;
use clasp_controlplane::app::{AppEdge, AppOperator};
use clasp_controlplane::autoscale::{AutoscaleConfig, Autoscaler, ScaleDecision};
use clasp_controlplane::baselines::PolicyKind;
use clasp_controlplane::metrics::{PlannerSample, WorkerSample};
use clasp_controlplane::model::PAPER_COSTS;
use clasp_controlplane::scaling::parse_line;

const IV_US: f64 = 250_000.0;
const EXEC_US: f64 = 400.0;
const FANOUT: f64 = 2.0;
/// W̄ of the synthetic workers: two executors.
const CAPACITY_US_PER_S: f64 = 2_000_000.0;

/// A two-operator pipeline `a → b`, two chained requests per input.
fn app() -> AppModel {
    let op = |n: &str| AppOperator {
        name: n.into(),
        exec_us: EXEC_US,
        keys: 1000,
        zipf: 0.0,
    };
    AppModel {
        name: "pipe".into(),
        operators: vec![op("a"), op("b")],
        edges: vec![AppEdge {
            from: "a".into(),
            to: "b".into(),
            fanout: FANOUT,
        }],
    }
}

fn config() -> AutoscaleConfig {
    AutoscaleConfig {
        capacity_prior_us_per_s: Some(CAPACITY_US_PER_S),
        ..AutoscaleConfig::new(PolicyKind::Clasp, 8)
    }
}

/// One interval of a synthetic cluster of `workers` workers sharing `input` roots per
/// second evenly, of which it completes `throughput`; each worker's queue is `queue`.
fn interval(
    workers: usize,
    input: f64,
    throughput: f64,
    queue: usize,
) -> (Vec<WorkerSample>, PlannerSample) {
    let per = throughput / workers as f64;
    let samples = (0..workers)
        .map(|w| WorkerSample {
            worker: w,
            queue_len: queue,
            queue_mean: queue as f64,
            wait_mean_us: queue as f64 * EXEC_US / 2.0,
            local_per_s: per * FANOUT / workers as f64,
            remote_per_s: per * FANOUT * (workers - 1) as f64 / workers as f64,
            remote_received_per_s: None,
            roots_per_s: 0.0,
            destinations: workers - 1,
            operators: vec![
                clasp_controlplane::metrics::OperatorSample {
                    processed_per_s: per,
                    exec_us: EXEC_US,
                },
                clasp_controlplane::metrics::OperatorSample {
                    processed_per_s: per * FANOUT,
                    exec_us: EXEC_US,
                },
            ],
            edges_per_s: vec![per * FANOUT],
            executor_busy_us_per_s: 0.0,
            network_busy_us_per_s: 0.0,
            cpu_us_per_s: None,
            sleeps_per_s: 0.0,
            sleep_cpu_us_per_s: 0.0,
            throttled_periods: None,
            batches_per_s: 0.0,
            exec_cpu_us_per_s: None,
            exec_sleep_cpu_us_per_s: 0.0,
            exec_sleeps_per_s: 0.0,
        })
        .collect();
    let planner = PlannerSample {
        queue_len: queue * workers,
        input_per_s: input,
        refused_per_s: 0.0,
        throughput_per_s: throughput,
    };
    (samples, planner)
}

/// Feeds `intervals` intervals from `t_us` on; returns the decisions with their times.
fn run(
    a: &mut Autoscaler,
    t_us: &mut f64,
    intervals: usize,
    input: f64,
    throughput_of: impl Fn(usize) -> f64,
    queue_of: impl Fn(usize, usize) -> usize,
) -> Vec<ScaleDecision> {
    let mut out = Vec::new();
    for i in 0..intervals {
        *t_us += IV_US;
        let n = a.workers();
        let (s, p) = interval(n, input, throughput_of(n), queue_of(n, i));
        if let Some(d) = a.on_interval(*t_us, &s, &p) {
            a.migrated(*t_us);
            out.push(d);
        }
    }
    out
}

/// Roots per second `n` workers sustain in the synthetic cluster (3 executions per root).
fn capacity_roots(n: usize) -> f64 {
    n as f64 * CAPACITY_US_PER_S / ((1.0 + FANOUT) * EXEC_US) * 0.8
}

#[test]
fn initial_placement_fits_the_first_rate_and_explains_itself() {
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
    assert_eq!(a.workers(), 0);
    let d = a.initial();
    assert_eq!(d.workers_before, 0);
    assert!(d.workers >= 1 && d.workers == a.workers());
    assert_eq!(d.shares.len(), 2);
    assert_eq!(d.routing.operators(), 2);
    assert_eq!(d.trigger, "initial");
    let kv = parse_line(&d.explanation);
    assert_eq!(kv["policy"], "clasp");
    assert_eq!(kv["trigger"], "initial");
    assert_eq!(kv["workers"], format!("0->{}", d.workers));
    // 500 roots/s × 3 × 400 µs = 0.6 s/s of execution: one 2 s/s worker at h = 0.9.
    assert_eq!(d.workers, 1);
    let e = a.estimates();
    assert_eq!(e.capacity_us_per_s, Some(CAPACITY_US_PER_S));
    assert_eq!(e.w_bar_us, CAPACITY_US_PER_S);
    assert_eq!(e.alpha_us, PAPER_COSTS.alpha_us);
}

/// A run that starts on an even spread over its workers (the live run) is told what the
/// first plan changes from there: those workers and every executor before, and the key groups
/// that leave their worker.
#[test]
fn the_initial_placement_from_a_spread_counts_from_the_spread() {
    let started = 3;
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
    let d = a.initial_from_spread(started);
    assert_eq!(d.workers_before, started);
    assert_eq!(d.workers, 1, "one worker holds 500 roots/s");
    let kv = parse_line(&d.explanation);
    assert_eq!(kv["workers"], "3->1");
    let executors = config().executors_per_worker;
    assert_eq!(
        kv["parallelism"],
        format!(
            "a:{0}->{1},b:{0}->{1}",
            started * executors,
            d.parallelism[0].iter().sum::<usize>()
        )
    );
    // Onto one worker, the key groups of the other two leave: two thirds of each operator's
    // (the spread gives worker w the groups g with g·3/1024 = w).
    let groups = d.routing.key_groups();
    let stay = (0..groups).filter(|g| g * started / groups == 0).count();
    assert_eq!(d.key_groups_moved, 2 * (groups - stay));
    assert_eq!(kv["kg_moved"], d.key_groups_moved.to_string());
    // From one worker to one worker nothing moves.
    let mut one = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
    let d = one.initial_from_spread(1);
    assert_eq!((d.workers_before, d.workers, d.key_groups_moved), (1, 1, 0));
}

#[test]
fn an_unchanged_rate_decides_nothing() {
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 1000.0);
    a.initial();
    let n0 = a.workers();
    let mut t = 0.0;
    let ds = run(&mut a, &mut t, 240, 1000.0, |_| 1000.0, |_, _| 2);
    assert!(
        ds.is_empty(),
        "{:?}",
        ds.iter().map(|d| &d.explanation).collect::<Vec<_>>()
    );
    assert_eq!(a.workers(), n0);
}

#[test]
fn a_saturated_cluster_scales_up() {
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
    a.initial();
    assert_eq!(a.workers(), 1);
    let mut t = 0.0;
    let input = 4000.0;
    // The cluster completes what its workers can; queues grow every interval.
    let ds = run(
        &mut a,
        &mut t,
        40,
        input,
        |n| capacity_roots(n).min(input),
        |n, i| {
            if capacity_roots(n) < input {
                100 * (i + 1)
            } else {
                1
            }
        },
    );
    let first = ds.first().expect("a decision");
    assert!(
        first.workers > first.workers_before,
        "{}",
        first.explanation
    );
    // Eagerly: within two intervals of the rise, not after the 2 s hold of a fall.
    assert!(first.t_us <= 2.0 * IV_US, "decided at {} µs", first.t_us);
    assert!(
        capacity_roots(a.workers()) >= input,
        "ends with {} workers",
        a.workers()
    );
    assert!(
        parse_line(&first.explanation)["trigger"].starts_with("rate-changed"),
        "{}",
        first.explanation
    );
}

#[test]
fn a_falling_rate_scales_down_after_the_trigger_hold() {
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 6000.0);
    let d0 = a.initial();
    assert!(d0.workers >= 3, "{}", d0.explanation);
    let mut t = 0.0;
    assert!(run(&mut a, &mut t, 20, 6000.0, |_| 6000.0, |_, _| 1).is_empty());
    let fell_at = t;
    let ds = run(&mut a, &mut t, 40, 1000.0, |_| 1000.0, |_, _| 1);
    let d = ds.first().expect("a scale-down");
    assert!(d.workers < d0.workers, "{}", d.explanation);
    let hold = a.config().triggers.rate_hold_us as f64;
    assert!(
        d.t_us - fell_at >= hold,
        "decided {} µs after the fall",
        d.t_us - fell_at
    );
    assert!(d.key_groups_moved > 0);
    assert_eq!(ds.len(), 1, "one decision, then quiet");
}

#[test]
fn a_cluster_the_model_overrates_is_re_planned_at_once() {
    // The rate does not move, but the workers cannot keep up (the model overrates them):
    // saturation plus lag re-plans without waiting for the 3 s lag hold.
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 3000.0);
    let d0 = a.initial();
    let mut t = 0.0;
    let input = 3000.0;
    let real = |n: usize| 0.5 * capacity_roots(n);
    let ds = run(
        &mut a,
        &mut t,
        12,
        input,
        |n| real(n).min(input),
        |n, i| if real(n) < input { 100 * (i + 1) } else { 1 },
    );
    let d = ds.first().expect("a re-plan");
    assert!(d.trigger.starts_with("saturated"), "{}", d.explanation);
    assert!(d.workers > d0.workers, "{}", d.explanation);
    assert!(d.t_us < a.config().triggers.lag_hold_us as f64);
    // It planned for the input plus the backlog that built up.
    assert!(d.rate_per_s > input, "{}", d.explanation);
    assert!(a.backlog_roots() > 0.0);
}

#[test]
fn no_scale_down_while_a_backlog_drains() {
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 6000.0);
    let d0 = a.initial();
    let mut t = 0.0;
    // A backlog builds up (6000 in, 3000 out for 1 s)...
    run(&mut a, &mut t, 4, 6000.0, |_| 3000.0, |_, _| 1);
    assert!(a.backlog_roots() > 2000.0, "{}", a.backlog_roots());
    let n = a.workers();
    assert!(n >= d0.workers);
    // ...and the rate falls to 1000/s while it drains slowly (1100/s out).
    let ds = run(&mut a, &mut t, 16, 1000.0, |_| 1100.0, |_, _| 50);
    assert!(
        ds.iter().all(|d| d.workers >= n),
        "scaled down while draining: {:?}",
        ds.iter().map(|d| &d.explanation).collect::<Vec<_>>()
    );
    // Drained (fast now), the fall counts after its hold.
    let ds = run(&mut a, &mut t, 40, 1000.0, |_| 3000.0, |_, _| 1);
    assert!(a.backlog_roots() < 1.0);
    assert!(ds.iter().any(|d| d.workers < n), "never scaled down");
}

#[test]
fn one_migration_at_a_time() {
    let mut b = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
    b.initial();
    let mut t = 0.0;
    let mut decided = false;
    for _ in 0..40 {
        t += IV_US;
        let (s, p) = interval(b.workers(), 6000.0, 1000.0, 500);
        if let Some(d) = b.on_interval(t, &s, &p) {
            assert!(
                !decided,
                "a second decision before `migrated`: {}",
                d.explanation
            );
            decided = true;
        }
    }
    assert!(decided);
    b.migrated(t);
    let mut again = false;
    for _ in 0..40 {
        t += IV_US;
        let (s, p) = interval(b.workers(), 12_000.0, 1000.0, 500);
        again |= b.on_interval(t, &s, &p).is_some();
    }
    assert!(again, "decisions resume after `migrated`");
}

#[test]
fn a_plan_made_for_a_backlog_shrinks_once_it_is_drained() {
    let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 1000.0);
    a.initial();
    let mut t = 0.0;
    // The rate triples and the cluster lags for a while: the plan includes the backlog.
    let ds = run(&mut a, &mut t, 3, 3000.0, |_| 1000.0, |_, _| 300);
    let up = ds.last().expect("scaled up");
    assert!(up.rate_per_s > 3000.0, "{}", up.explanation);
    let peak = a.workers();
    // It drains quickly, then the input stays at 3000/s: the backlog's workers go again.
    let ds = run(&mut a, &mut t, 40, 3000.0, |_| 5000.0, |_, _| 1);
    let ds2 = run(&mut a, &mut t, 40, 3000.0, |_| 3000.0, |_, _| 1);
    let all: Vec<&ScaleDecision> = ds.iter().chain(&ds2).collect();
    assert!(
        all.iter()
            .any(|d| d.trigger.starts_with("drained") && d.workers < peak),
        "{:?}",
        all.iter().map(|d| &d.explanation).collect::<Vec<_>>()
    );
}

#[test]
fn bad_input_does_not_panic() {
    let cfg = AutoscaleConfig {
        max_workers: 0,
        headroom: f64::NAN,
        interval_us: -1.0,
        rate_window_intervals: 0,
        capacity_prior_us_per_s: Some(f64::INFINITY),
        ..AutoscaleConfig::new(PolicyKind::FaasFlow, 4)
    };
    let mut a = Autoscaler::new(&app(), cfg, PAPER_COSTS, f64::NAN);
    a.initial();
    let garbage = WorkerSample {
        worker: 7,
        operators: vec![],
        edges_per_s: vec![f64::NAN; 5],
        ..WorkerSample::default()
    };
    let p = PlannerSample {
        queue_len: 0,
        input_per_s: f64::NAN,
        refused_per_s: f64::NAN,
        throughput_per_s: -3.0,
    };
    for i in 0..40 {
        a.on_interval(i as f64 * IV_US, std::slice::from_ref(&garbage), &p);
        a.on_interval(f64::NAN, &[], &PlannerSample::default());
    }
    assert!(a.workers() >= 1);
    // An invalid app: its edges are left out.
    let mut bad = app();
    bad.edges[0].to = "nowhere".into();
    let mut b = Autoscaler::new(&bad, config(), PAPER_COSTS, 100.0);
    assert!(b.initial().workers >= 1);
}

#[test]
fn every_policy_runs_the_same_loop() {
    for kind in PolicyKind::COMPARED {
        let cfg = AutoscaleConfig {
            saturated_throughput_per_worker_prior_per_s: Some(capacity_roots(1)),
            ..AutoscaleConfig {
                policy: kind,
                learn_costs: kind == PolicyKind::Clasp,
                ..config()
            }
        };
        let mut a = Autoscaler::new(&app(), cfg, PAPER_COSTS, 500.0);
        let d = a.initial();
        assert_eq!(parse_line(&d.explanation)["policy"], kind.name());
        let mut t = 0.0;
        let input = 4000.0;
        let ds = run(
            &mut a,
            &mut t,
            40,
            input,
            |n| capacity_roots(n).min(input),
            |n, i| {
                if capacity_roots(n) < input {
                    100 * (i + 1)
                } else {
                    1
                }
            },
        );
        assert!(!ds.is_empty(), "{}: no decision", kind.name());
        assert!(
            a.workers() > d.workers,
            "{}: {} workers",
            kind.name(),
            a.workers()
        );
    }
}

/// The selected estimator plans: busy-time learns α from a worker's CPU time at a third of its
/// capacity (parked workers pin the idle overhead) and reports its samples; saturated learns
/// nothing from the same unsaturated intervals.
#[test]
fn the_selected_estimator_gives_the_costs_and_their_samples() {
    use clasp_controlplane::estimator::EstimatorKind;
    let alpha_true = PAPER_COSTS.alpha_us / 4.0;
    let idle = WorkerSample {
        worker: 1,
        cpu_us_per_s: Some(2_000.0),
        ..WorkerSample::default()
    };
    for kind in EstimatorKind::ALL {
        let cfg = AutoscaleConfig {
            estimator_kind: kind,
            ..config()
        };
        let mut a = Autoscaler::new(&app(), cfg, PAPER_COSTS, 400.0);
        a.initial();
        assert_eq!(a.workers(), 1);
        for i in 0..80 {
            let input = 300.0 + 200.0 * (i % 5) as f64;
            let (mut s, p) = interval(1, input, input, 0);
            let cpu = s[0].exec_load_us_per_s() + 2_000.0 + alpha_true * s[0].local_per_s;
            s[0].cpu_us_per_s = Some(cpu);
            if a.on_interval_with_parked(i as f64 * IV_US, &s, std::slice::from_ref(&idle), &p)
                .is_some()
            {
                a.migrated(i as f64 * IV_US);
            }
        }
        let e = a.estimates();
        assert_eq!(e.estimator, kind.name());
        match kind {
            // Rows without the executors' CPU are used whole by the split one: the same here.
            EstimatorKind::BusyTime | EstimatorKind::BusySplit => {
                assert!((e.alpha_us / alpha_true - 1.0).abs() < 0.01, "{e:?}");
                assert!(e.alpha_samples >= 20, "{e:?}");
                assert_eq!((e.beta_us, e.beta_samples), (PAPER_COSTS.beta_us, 0));
                assert_eq!((e.gamma_us, e.gamma_samples), (PAPER_COSTS.gamma_us, 0));
            }
            EstimatorKind::Saturated => {
                assert_eq!(e.alpha_us, PAPER_COSTS.alpha_us, "{e:?}");
                assert_eq!(e.alpha_samples + e.beta_samples + e.gamma_samples, 0);
            }
        }
    }
}

/// The headrooms after 40 steady intervals at 1500 roots/s whose workers each queue `queue`
/// requests (mean wait `queue × 200 µs`).
fn headrooms_after(latency_target_ms: Option<f64>, queue: usize) -> Vec<f64> {
    let cfg = AutoscaleConfig {
        latency_target_ms,
        ..config()
    };
    let mut a = Autoscaler::new(&app(), cfg, PAPER_COSTS, 1500.0);
    a.initial();
    a.migrated(0.0);
    let mut t = 0.0;
    run(&mut a, &mut t, 40, 1500.0, |_| 1500.0, |_, _| queue);
    a.worker_headrooms()
}

#[test]
fn a_latency_target_lowers_the_headroom_of_workers_that_queue() {
    assert!(headrooms_after(None, 30).is_empty(), "off by default");
    let calm = headrooms_after(Some(20.0), 1);
    let queueing = headrooms_after(Some(20.0), 30);
    assert_eq!(calm.len(), 8);
    assert!(calm.iter().all(|h| (0.5..=0.9).contains(h)), "{calm:?}");
    assert!(
        queueing[0] < calm[0] && queueing[0] >= 0.5,
        "queueing {queueing:?} calm {calm:?}"
    );
    // A looser target allows more.
    let loose = headrooms_after(Some(200.0), 30);
    assert!(loose[0] > queueing[0], "loose {loose:?} tight {queueing:?}");
}

/// Capped workers whose measured CPU is more than the model prices (wake-ups, ingress, timers):
/// W̄ is the cap less the gap, so the same input takes more workers than when the CPU matches
/// what the model prices, where W̄ stays the cap.
#[test]
fn capped_workers_cpu_the_model_does_not_price_comes_off_w_bar() {
    let run_with = |extra_us_per_s: f64| {
        let cfg = AutoscaleConfig {
            capacity_known: true,
            ..config()
        };
        let mut a = Autoscaler::new(&app(), cfg, PAPER_COSTS, 500.0);
        a.initial();
        let mut t = 0.0;
        for i in 0..240 {
            t += IV_US;
            let input = if i < 40 { 500.0 } else { 2000.0 };
            let (mut s, p) = interval(a.workers(), input, input, 0);
            for w in &mut s {
                w.cpu_us_per_s = Some(w.exec_load_us_per_s() + extra_us_per_s);
            }
            if a.on_interval(t, &s, &p).is_some() {
                a.migrated(t);
            }
        }
        (a.workers(), a.estimates())
    };
    let (priced_workers, priced) = run_with(0.0);
    assert_eq!(priced.w_bar_us, CAPACITY_US_PER_S, "{priced:?}");
    assert_eq!(priced.unpriced_us_per_s, 0.0);
    let (unpriced_workers, unpriced) = run_with(0.5 * CAPACITY_US_PER_S);
    assert!(
        unpriced.unpriced_us_per_s > 0.3 * CAPACITY_US_PER_S
            && unpriced.unpriced_us_per_s <= 0.5 * CAPACITY_US_PER_S,
        "{unpriced:?}"
    );
    let want = CAPACITY_US_PER_S - unpriced.unpriced_us_per_s;
    assert!((unpriced.w_bar_us - want).abs() < 1e-6, "{unpriced:?}");
    assert!(
        unpriced_workers > priced_workers,
        "{unpriced_workers} workers with unpriced CPU, {priced_workers} without"
    );
}
