//! The remote half of `clasp bench dispatch`, standalone (until the CLI wires it in):
//! `cargo run --release -p clasp-benches --example dispatch_remote [-- --quick]`.
fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let opts = if quick {
        clasp_benches::dispatch::DispatchOpts::quick()
    } else {
        clasp_benches::dispatch::DispatchOpts::default()
    };
    let r = clasp_benches::dispatch::run(&opts);
    println!("{}", serde_json::to_string_pretty(&r).expect("json"));
}
