//! `clasp bench ...`: microbenchmarks that print a table, or one JSON object with `--json`.
//! The harnesses live in the `clasp-benches` crate so the criterion benches share them.

use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// One-way latency and throughput of an SPSC frame ring between two threads on two cores:
    /// the hardware floor (a cache-line ping-pong), shmring, rtrb, crossbeam's ArrayQueue and
    /// std's mpsc, side by side in one run.
    Ring(RingArgs),
}

#[derive(Args)]
pub struct RingArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Interleaved repetitions of every (implementation, size) cell; the median is reported.
    #[arg(long, default_value_t = 5)]
    repetitions: u32,
    /// Round trips per latency measurement.
    #[arg(long, default_value_t = 200_000)]
    round_trips: u64,
    /// Messages per throughput measurement.
    #[arg(long, default_value_t = 2_000_000)]
    messages: u64,
    /// Do not pin the two threads to separate cores (for machines where pinning misbehaves).
    #[arg(long)]
    no_pin: bool,
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Ring(args) => ring(args),
    }
}

fn ring(args: RingArgs) -> anyhow::Result<()> {
    let _ = (args.json, args.repetitions, args.round_trips, args.messages, args.no_pin);
    anyhow::bail!("not built yet")
}
