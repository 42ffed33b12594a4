//! SIGINT, SIGTERM and SIGHUP for the commands that run something (`run`, `planner`, `local`,
//! `ingress`).
//!
//! The first signal sets a stop flag that the admission loops poll: the run stops admitting
//! input, drains what it admitted and returns the ordinary way, so the summary is printed and
//! every `Drop` guard cleans up; `main` then exits with 128 + the signal (130 for SIGINT, 143
//! for SIGTERM). A second signal, or a drain that outlasts its timeout, exits at once after
//! running the [`cleanup`](crate::cleanup) registry.
//!
//! SIGHUP means one of two things ([`Hangup`]). For a child process (the ingress), "the process
//! that started me is gone" (the death signal `lifeline` arranges, which the kernel may send
//! more than once: once per exiting thread of the parent that the child was handed to): it sets
//! the stop flag too, but is never counted as a second signal and sets no exit status. For a
//! command a user started (`run`, `planner`, `local`), the terminal or the ssh session that ran
//! it hung up: a stop like SIGTERM — drained, summarised, cleaned up, exit 129 — not the
//! default action, which killed the driver without a drain and left its workers' cgroups and
//! its checkpoints' hint behind. A lost session may send its hangup twice (the shell, then the
//! kernel): a repeated SIGHUP is not a second signal. A command started under `nohup` (SIGHUP
//! ignored) keeps ignoring it.
//!
//! Why a thread: a signal handler may only do async-signal-safe work (no locks, no allocation,
//! no printing). signal-hook's iterator turns each signal into a wake-up of an ordinary thread,
//! which may do all of those.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The stop flag the admission loops poll; set by the first signal.
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// The first signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// A SIGHUP was received (for a process that asked to catch it).
static HUNG_UP: AtomicBool = AtomicBool::new(false);

/// The stop flag (never set unless [`install`] ran and a signal came).
pub fn stop_flag() -> Arc<AtomicBool> {
    Arc::clone(STOP.get_or_init(|| Arc::new(AtomicBool::new(false))))
}

/// The signal that interrupted this process, if one did.
pub fn interrupted() -> Option<i32> {
    match RECEIVED.load(Ordering::Acquire) {
        0 => None,
        s => Some(s),
    }
}

/// Whether a SIGHUP came (the process that started this one is gone).
pub fn hung_up() -> bool {
    HUNG_UP.load(Ordering::Acquire)
}

/// The exit status for a process interrupted by `signal`: 128 + its number, the shell's
/// convention.
pub fn exit_status(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

/// A signal's name.
pub fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// What SIGHUP means to a process (module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Hangup {
    /// The process that started this one is gone: stop, with no exit status of its own.
    ParentGone,
    /// The user's terminal hung up: a stop signal like SIGTERM.
    Stop,
}

/// Catches SIGINT, SIGTERM and SIGHUP from now on: the first sets the stop flag (and, with
/// `drain_timeout`, exits at once if the process is still running that long after); a second
/// exits at once. SIGHUP as `hangup` says. `what` names the process in the messages.
pub fn install(
    what: &'static str,
    drain_timeout: Option<Duration>,
    hangup: Hangup,
) -> anyhow::Result<()> {
    let stop = stop_flag();
    let parent_gone = hangup == Hangup::ParentGone;
    // `nohup` (or `trap '' HUP`) asked for hangups to be ignored: that stays so.
    let caught: &[i32] = if parent_gone || !hangup_ignored() {
        &[SIGINT, SIGTERM, SIGHUP]
    } else {
        &[SIGINT, SIGTERM]
    };
    let mut signals =
        Signals::new(caught).map_err(|e| anyhow::anyhow!("installing the signal handler: {e}"))?;
    std::thread::Builder::new()
        .name("clasp-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                // A lost session sends its hangup more than once (the shell, then the kernel):
                // only SIGINT or SIGTERM after the first signal means "now".
                if signal == SIGHUP && !parent_gone && RECEIVED.load(Ordering::Acquire) != 0 {
                    continue;
                }
                if signal == SIGHUP && parent_gone {
                    HUNG_UP.store(true, Ordering::Release);
                    if !stop.swap(true, Ordering::AcqRel) {
                        say(&format!(
                            "{what}: SIGHUP: the process that started it is gone"
                        ));
                    }
                    continue;
                }
                if RECEIVED
                    .compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    exit_now(what, "a second signal");
                }
                stop.store(true, Ordering::Release);
                first_signal(what, signal, drain_timeout);
            }
        })
        .map_err(|e| anyhow::anyhow!("starting the signal thread: {e}"))?;
    Ok(())
}

/// Catches SIGINT, SIGTERM and SIGHUP (unless ignored, as under `nohup`) for a command whose
/// partial result is worth nothing, a benchmark: the first runs the [`cleanup`](crate::cleanup)
/// registry and exits with 128 + the signal at once.
pub fn install_exit_at_once(what: &'static str) -> anyhow::Result<()> {
    let caught: &[i32] = if hangup_ignored() {
        &[SIGINT, SIGTERM]
    } else {
        &[SIGINT, SIGTERM, SIGHUP]
    };
    let mut signals =
        Signals::new(caught).map_err(|e| anyhow::anyhow!("installing the signal handler: {e}"))?;
    std::thread::Builder::new()
        .name("clasp-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let _ = RECEIVED.compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire);
                exit_now(what, name(signal));
            }
        })
        .map_err(|e| anyhow::anyhow!("starting the signal thread: {e}"))?;
    Ok(())
}

/// Whether this process was started with SIGHUP ignored (`nohup`): the `SigIgn` mask of
/// `/proc/self/status`, whose lowest bit is signal 1.
fn hangup_ignored() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok());
    mask.is_some_and(|m| m & (1 << (SIGHUP - 1)) != 0)
}

/// Says what the first signal does and arms the drain timeout.
fn first_signal(what: &'static str, signal: i32, drain_timeout: Option<Duration>) {
    let Some(timeout) = drain_timeout else {
        say(&format!("{what}: {}: stopping", name(signal)));
        return;
    };
    say(&format!(
        "{what}: {}: no more input; draining what was admitted (at most {} s; a second \
         signal stops at once)",
        name(signal),
        timeout.as_secs()
    ));
    let watchdog = std::thread::Builder::new()
        .name("clasp-drain-timeout".into())
        .spawn(move || {
            std::thread::sleep(timeout);
            exit_now(
                what,
                &format!("the drain did not finish within {} s", timeout.as_secs()),
            );
        });
    if watchdog.is_err() {
        exit_now(what, "no thread for the drain timeout");
    }
}

/// Runs the cleanup registry and exits with the status of the first signal.
fn exit_now(what: &str, why: &str) -> ! {
    say(&format!("{what}: {why}: stopping now"));
    crate::cleanup::run_all();
    let signal = interrupted().unwrap_or(SIGTERM);
    std::process::exit(i32::from(exit_status(signal)))
}

/// One line on stderr (never a panic if stderr is gone).
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "clasp {line}");
}
