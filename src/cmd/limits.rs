//! The bounds of the numeric options that size an allocation, a sleep or a deadline, in one
//! place, so every command that takes the same option refuses the same values — with an error
//! that names the option and its range (exit 2) instead of a failed allocation, an overflowing
//! `Instant` or a `Duration` out of range deep inside a run. The size of a JSON input file is
//! bounded here too, for the same reason.

use super::usage_error;
use clap::builder::RangedU64ValueParser;
use std::io::Read as _;
use std::path::Path;

/// Slowest input rate accepted (records per second): the pacing sleeps `i / rate` seconds for
/// record i, which must stay a representable `Duration` for any record count.
pub const MIN_RATE_PER_S: f64 = 1e-3;
/// Fastest input rate accepted (records per second): far beyond what one ingress produces.
pub const MAX_RATE_PER_S: f64 = clasp_controlplane::pattern::MAX_RATE_PER_S;
/// Smallest request ring (bytes).
pub const MIN_RING_BYTES: usize = 4096;
/// Largest request ring (bytes): a worker's segment holds E² + 3E rings of this size.
pub const MAX_RING_BYTES: usize = 1 << 30;
/// Most executor threads per worker.
pub const MAX_EXECUTORS: u16 = 64;
/// Most `clasp worker` processes a run starts on this machine.
pub const MAX_LOCAL_WORKERS: u64 = 64;
/// Longest timeout accepted (seconds, one week): a deadline is `now + timeout`, which must not
/// overflow the clock.
pub const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;
/// Most random migrations of `--chaos-migrations` (their moments are drawn up front).
pub const MAX_CHAOS_MIGRATIONS: u64 = 10_000;
/// Longest `--copy-ahead-ms`: a move waits this long after its decision at most (10 s).
pub const MAX_COPY_AHEAD_MS: u64 = 10_000;
/// Most timed repetitions of a benchmark (their samples are kept for the median).
pub const MAX_REPETITIONS: u64 = 10_000;

/// clap's parser of a rate option (records per second): a number within
/// [`MIN_RATE_PER_S`]..=[`MAX_RATE_PER_S`], refused as it is parsed — so `--print-config`, which
/// parses but does not run, refuses it as a run would.
pub fn rate_arg(s: &str) -> Result<f64, String> {
    let rate: f64 = s.trim().parse().map_err(|e| format!("{e}"))?;
    rate_refusal(rate).map_or(Ok(rate), Err)
}

/// Why `rate` (records per second) is not one a run takes; `None` when it is.
fn rate_refusal(rate: f64) -> Option<String> {
    let ok = rate.is_finite() && (MIN_RATE_PER_S..=MAX_RATE_PER_S).contains(&rate);
    (!ok).then(|| {
        format!("must be a number of records per second in {MIN_RATE_PER_S}..={MAX_RATE_PER_S:e}")
    })
}

/// `option` (a rate in records per second) within [`MIN_RATE_PER_S`]..=[`MAX_RATE_PER_S`].
pub fn check_rate(option: &str, rate: Option<f64>) -> anyhow::Result<()> {
    match rate.and_then(|r| rate_refusal(r).map(|why| (r, why))) {
        Some((r, why)) => Err(usage_error(format!("{option} {}: {why}", show(r)))),
        None => Ok(()),
    }
}

/// `v` as a user would write it: plain when moderate, in scientific notation when tiny or
/// huge (`1e-300`, not three hundred zeros).
pub fn show(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-3..1e9).contains(&v.abs()) {
        v.to_string()
    } else {
        format!("{v:e}")
    }
}

/// `--ring-bytes`: a power of two in [`MIN_RING_BYTES`]..=[`MAX_RING_BYTES`].
pub fn check_ring_bytes(ring_bytes: usize) -> anyhow::Result<()> {
    if ring_bytes.is_power_of_two() && (MIN_RING_BYTES..=MAX_RING_BYTES).contains(&ring_bytes) {
        Ok(())
    } else {
        Err(usage_error(format!(
            "--ring-bytes {ring_bytes}: must be a power of two in {MIN_RING_BYTES}..={MAX_RING_BYTES}"
        )))
    }
}

/// A worker's request rings at `--executors` (`E² + 3E`: ingress, executor to executor,
/// network) and the bytes they take at `--ring-bytes`.
fn worker_rings(ring_bytes: usize, executors: usize) -> (usize, u128) {
    let rings = clasp_dataplane::runtime::layout::RingIndex { executors }.request_rings();
    (rings, (ring_bytes as u128) * (rings as u128))
}

/// `bytes` in GiB, for messages.
fn gib(bytes: u128) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

/// `--ring-bytes` × `--executors`: a worker's segment's request rings must fit the largest
/// segment; said in the flags' terms before anything starts, not as a segment's byte count
/// after.
pub fn check_ring_memory(ring_bytes: usize, executors: usize) -> anyhow::Result<()> {
    let (rings, bytes) = worker_rings(ring_bytes, executors);
    let max_bytes = u128::from(clasp_shmring::MAX_SEGMENT_BYTES);
    if bytes <= max_bytes {
        return Ok(());
    }
    Err(usage_error(format!(
        "--ring-bytes {ring_bytes} with --executors {executors}: {rings} request rings need \
         {:.1} GiB of shared memory a worker, more than a segment's {:.0} GiB; give fewer \
         executors or smaller rings",
        gib(bytes),
        gib(max_bytes)
    )))
}

/// `--ring-bytes` × `--executors` × the `workers` this run starts on this host: their
/// segments' request rings take the machine's memory, all of it reserved when each worker
/// starts its job; more than it has available would have the kernel's out-of-memory killer end
/// the workers (or other processes) instead of an error. Said in the flags' terms.
pub fn check_workers_memory(
    ring_bytes: usize,
    executors: usize,
    workers: usize,
    workers_flag: &str,
) -> anyhow::Result<()> {
    let Some(available_bytes) = clasp_shmring::available_memory_bytes() else {
        return Ok(());
    };
    let (rings, worker_bytes) = worker_rings(ring_bytes, executors);
    let bytes = worker_bytes * (workers as u128);
    if bytes <= u128::from(available_bytes) {
        return Ok(());
    }
    Err(usage_error(format!(
        "{workers_flag} {workers} with --executors {executors} and --ring-bytes {ring_bytes}: \
         {workers} workers of {rings} request rings need {:.1} GiB of shared memory, more than \
         the {:.1} GiB this machine has available; give fewer workers or executors, or smaller \
         rings",
        gib(bytes),
        gib(u128::from(available_bytes))
    )))
}

/// Options that must be above 0, as `(flag, value)`: the first that is not is named.
pub fn check_positive(options: &[(&str, u64)]) -> anyhow::Result<()> {
    match options.iter().find(|(_, v)| *v == 0) {
        Some((flag, _)) => Err(usage_error(format!("{flag} 0: must be positive"))),
        None => Ok(()),
    }
}

/// `--executors`: 1..=[`MAX_EXECUTORS`].
pub fn check_executors(executors: usize) -> anyhow::Result<()> {
    if (1..=usize::from(MAX_EXECUTORS)).contains(&executors) {
        Ok(())
    } else {
        Err(usage_error(format!(
            "--executors {executors}: must be 1..={MAX_EXECUTORS}"
        )))
    }
}

/// `--workers` and `--max-workers`: 1..=[`MAX_LOCAL_WORKERS`] processes on this machine.
pub fn local_workers() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..=MAX_LOCAL_WORKERS)
}

/// A timeout in seconds: 1..=[`MAX_TIMEOUT_S`].
pub fn timeout_s() -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(1..=MAX_TIMEOUT_S)
}

/// Largest JSON input file read (bytes): a problem or model at every count's bound is far
/// smaller, and a mistaken `--problem /dev/zero` must not fill the memory.
pub const MAX_INPUT_FILE_BYTES: u64 = 16 << 20;

/// The bytes of a file of at most `max_bytes`: an error naming the limit when it holds more
/// (a mistaken `/dev/zero` or a multi-gigabyte file must not fill the memory). Callers name
/// the file and what it was for.
pub fn read_at_most(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {max_bytes} bytes"),
        ));
    }
    Ok(bytes)
}

/// [`read_at_most`] [`MAX_INPUT_FILE_BYTES`] as UTF-8 text.
pub fn read_text_file(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_at_most(path, MAX_INPUT_FILE_BYTES)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The text of an input file, refused (exit 2) when unreadable or larger than
/// [`MAX_INPUT_FILE_BYTES`].
pub fn read_input_file(path: &Path) -> anyhow::Result<String> {
    let cannot = |e: std::io::Error| usage_error(format!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut text = String::new();
    file.take(MAX_INPUT_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(cannot)?;
    if text.len() as u64 > MAX_INPUT_FILE_BYTES {
        return Err(usage_error(format!(
            "{}: larger than {MAX_INPUT_FILE_BYTES} bytes; not an input file",
            path.display()
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_refuse_absurd_values_and_name_the_option() {
        for r in [0.0, -1.0, 1e-300, 1e300, f64::NAN, f64::INFINITY] {
            let e = check_rate("--rate", Some(r)).unwrap_err().to_string();
            assert!(e.starts_with("--rate") && e.len() < 120, "{e}");
        }
        assert!(check_rate("--rate", Some(1.0)).is_ok() && check_rate("--rate", None).is_ok());
        for b in [0, 1000, 4097, 1 << 40, usize::MAX] {
            assert!(check_ring_bytes(b).is_err(), "{b}");
        }
        assert!(
            check_ring_bytes(MIN_RING_BYTES).is_ok() && check_ring_bytes(MAX_RING_BYTES).is_ok()
        );
        assert!(check_executors(0).is_err() && check_executors(65).is_err());
        assert!(check_executors(64).is_ok());
    }
}
