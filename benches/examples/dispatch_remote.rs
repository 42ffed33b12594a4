//! The remote half of `clasp bench dispatch`, standalone (until the CLI wires it in):
//! `cargo run --release -p clasp-benches --example dispatch_remote [-- --quick]`.
//! `-- --compare [BATCH] [REPS]` runs only the transport against the baseline at one batch
//! size (default 32, 7 repetitions), interleaved, and prints every run and the medians.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--compare") {
        let batch = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(32);
        let reps = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(7);
        let requests = clasp_benches::dispatch::DispatchOpts::default().requests;
        let (t, b) = clasp_benches::dispatch::compare(batch, requests, reps);
        let med = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        println!(
            "transport ns/request at batch {batch}: {t:.0?} median {:.0}",
            med(&t)
        );
        println!(
            "baseline  ns/request at batch {batch}: {b:.0?} median {:.0}",
            med(&b)
        );
        println!("baseline / transport: {:.2}", med(&b) / med(&t));
        return;
    }
    if args.first().map(String::as_str) == Some("--latency") {
        let (t, b) = clasp_benches::dispatch::latency(5_000);
        println!("one-way latency µs: transport {t:.1}, baseline {b:.1}");
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let opts = if quick {
        clasp_benches::dispatch::DispatchOpts::quick()
    } else {
        clasp_benches::dispatch::DispatchOpts::default()
    };
    let r = clasp_benches::dispatch::run(&opts);
    println!("{}", serde_json::to_string_pretty(&r).expect("json"));
}
