//! What each figure's rows compute, in words, for the README below the table: the table holds
//! numbers, this says where they come from and why a tolerance is what it is.

/// (figure, explanation), in the table's order.
pub const EXPLAINED: [(&str, &str); 10] = [
    (
        "fig2",
        "Throughput of every app, unthrottled, on 1..3 capped workers with an even spread \
         (`clasp experiment scaling`); ours is the most-workers point ÷ one worker's and its \
         share of linear. The original ran 1, 5 and 10 machines of 8 cores; this machine holds \
         3 workers of 0.3 of a core, so only the trend (sub-linear or not) is judged. Points \
         where the host rather than the cluster was the bound are counted.",
    ),
    (
        "fig3",
        "p95 latency at 0.9× one worker's maximum rate on 1..3 workers (`clasp experiment \
         latency`); ours is the p95 on the most workers ÷ the p95 on one.",
    ),
    (
        "fig4",
        "The original compares executors reading state from their own worker with reading it \
         from a state server on the planner. This data plane has no remote-state path to switch \
         on: a stateful operator's state is split into key groups held in the memory of the \
         worker that runs them, and every placement change moves the key groups with the \
         operators (fig8's migrations are those moves; the row counts them). A counterpart \
         would need a state server this data plane does not have, so the row gives the reason \
         and the measured moves instead of a verdict.",
    ),
    (
        "fig8",
        "Scripted moves of each app after its state filled (`clasp experiment migrations`; \
         with --quick 1→2→1 a second apart, else 1→2→3→2→1→3→1 3 s apart). Planner duration: \
         plan sent → every slot done; worker pause: the longest any slot stopped. Medians over \
         all moves of all apps.",
    ),
    (
        "fig9",
        "Simulated: the estimator's α, β, γ at the end of the worker-count experiment's \
         calibration (seed 1), averaged over the apps (it calibrates on 1..10 workers at every \
         cluster size, so one row covers them all); the simulated cluster's true costs are \
         the original's, so the row judges whether the estimator recovers them. Live: the \
         estimates at the end of the main job started from the built-in priors (`clasp \
         experiment estimates`); absolute costs depend on the hardware, so only whether a \
         remote chained request is learnt dearer than a local one is judged.",
    ),
    (
        "fig10",
        "Unthrottled throughput of every app under CLASP's, FaaSFlow's and Zhang24's \
         placements on N simulated workers (`clasp sim --experiment placement`).",
    ),
    (
        "fig11",
        "`clasp sim --experiment worker-count`: every pair of the ten input levels (10 %..100 % \
         of CLASP's maximum on N workers) as source → target; the predicted worker count \
         against the observed optimum, the fewest simulated workers that sustain the target. \
         h = 1 judges the model; h = 0.9 (the planner's default headroom) is judged against \
         the observed optimum at that headroom, and its error against h = 1's optimum is shown \
         too. At 100 workers the original's 10-worker bounds are scaled by 10.",
    ),
    (
        "fig12",
        "The worker-count run at h = 1: per target rate, the mean predicted count against the \
         mean observed optimum.",
    ),
    (
        "fig13",
        "The worker-count run for the baselines: Zhang24's mean count at 60 %, FaaSFlow's \
         against CLASP's at 10 % and 100 %, and FaaSFlow's mean signed error scaling up and \
         down.",
    ),
    (
        "fig14",
        "`clasp sim --experiment e2e` on burst and gradual input (with --quick, above 10 \
         workers burst only, on WC and SYN: an e2e run of all apps on 100 workers takes ~5 \
         minutes): CLASP, FaaSFlow, Zhang24 and the two -SP ablations (their own worker \
         counts with CLASP's placement) autoscale N simulated workers; throughput, p50 latency \
         and worker-seconds per app. Live: `clasp experiment policies` on WC with ≤ 3 capped \
         workers (with --quick CLASP and FaaSFlow, one seed each).",
    ),
];
