//! What an idle thread of a worker does — an executor with empty rings, the network thread
//! with nothing to send or receive — chosen per deployment (`--idle`).
//!
//! Parking at once costs a wake-up per request at low load: a futex wake for a local hop, an
//! `io_uring_enter` wake for a remote one, tens of µs on a virtual machine. Spinning first
//! catches the next request on the core, but only pays where every busy thread has a core of
//! its own: where threads outnumber cores a spinner takes the core from the thread it waits
//! for. So the choice belongs to whoever deploys the workers (who knows whether the cores are
//! theirs), with a default that is never worse than parking: spin only when the worker's
//! threads fit on the machine's cores. A spin is bounded in wall time, after which the thread
//! parks anyway: an idle stream costs at most the bound of CPU per gap, not a core.

use clasp_shmring::{DEFAULT_SPIN, WaitPolicy};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Longest spin `--idle spin:US` accepts: a second of spinning is a core, not a wait.
pub const IDLE_SPIN_US_MAX: u32 = 1_000_000;

/// How idle threads wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdlePolicy {
    /// Spin [`DEFAULT_SPIN`] when every busy thread has a core, else park at once.
    #[default]
    Auto,
    /// Park at once.
    Park,
    /// Spin up to this many µs of wall time, then park.
    Spin {
        /// The bound, in µs (1..=[`IDLE_SPIN_US_MAX`]).
        us: u32,
    },
}

impl IdlePolicy {
    /// The wait of a worker's threads, for a deployment of `runnable_threads` busy threads on
    /// this machine (what `Auto` decides by).
    pub fn wait_policy(self, runnable_threads: usize) -> WaitPolicy {
        match self {
            IdlePolicy::Auto => WaitPolicy::for_runnable_threads(runnable_threads),
            IdlePolicy::Park => WaitPolicy::PARK,
            IdlePolicy::Spin { us } => {
                WaitPolicy::spin_then_park(Duration::from_micros(u64::from(us)))
            }
        }
    }

    /// How long a network thread spins on its completion queue before it waits in the kernel.
    /// Only an explicit `spin` spins there: `Auto` counts the executors' threads, and a network
    /// thread that spun too would be one more than it counted.
    pub fn network_spin(self) -> Duration {
        match self {
            IdlePolicy::Spin { us } => Duration::from_micros(u64::from(us)),
            IdlePolicy::Auto | IdlePolicy::Park => Duration::ZERO,
        }
    }
}

impl FromStr for IdlePolicy {
    type Err = String;

    /// `park`, `auto`, `spin` (for [`DEFAULT_SPIN`]) or `spin:US`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            format!("idle policy {s:?}: {why}; expected park, auto, spin or spin:US (e.g. spin:50)")
        };
        match s.split_once(':') {
            None => match s {
                "park" => Ok(IdlePolicy::Park),
                "auto" => Ok(IdlePolicy::Auto),
                "spin" => Ok(IdlePolicy::Spin {
                    us: DEFAULT_SPIN.as_micros() as u32,
                }),
                _ => Err(bad("unknown policy")),
            },
            Some(("spin", us)) => {
                let us: u32 = us
                    .parse()
                    .map_err(|_| bad("the spin bound is not a whole number of µs"))?;
                if us == 0 || us > IDLE_SPIN_US_MAX {
                    return Err(bad(&format!(
                        "the spin bound must be 1..={IDLE_SPIN_US_MAX} µs (park spins 0)"
                    )));
                }
                Ok(IdlePolicy::Spin { us })
            }
            Some(_) => Err(bad("only spin takes a bound")),
        }
    }
}

impl fmt::Display for IdlePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdlePolicy::Auto => f.write_str("auto"),
            IdlePolicy::Park => f.write_str("park"),
            IdlePolicy::Spin { us } => write!(f, "spin:{us}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_parses_and_prints_back() {
        for (text, want) in [
            ("park", IdlePolicy::Park),
            ("auto", IdlePolicy::Auto),
            ("spin:1", IdlePolicy::Spin { us: 1 }),
            ("spin:1000000", IdlePolicy::Spin { us: 1_000_000 }),
        ] {
            let got: IdlePolicy = text.parse().unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(got.to_string(), text);
        }
        let spin: IdlePolicy = "spin".parse().unwrap();
        assert_eq!(spin.wait_policy(1).spin, DEFAULT_SPIN);
    }

    #[test]
    fn bad_policies_are_refused_naming_what_is_wrong() {
        for (text, why) in [
            ("", "unknown policy"),
            ("Park", "unknown policy"),
            ("spin:", "not a whole number"),
            ("spin:-3", "not a whole number"),
            ("spin:1.5", "not a whole number"),
            ("spin:0", "must be 1..="),
            ("spin:1000001", "must be 1..="),
            ("park:5", "only spin takes a bound"),
        ] {
            let e = text.parse::<IdlePolicy>().unwrap_err();
            assert!(
                e.contains(why) && e.contains(&format!("{text:?}")),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn each_policy_gives_its_wait() {
        assert_eq!(IdlePolicy::Park.wait_policy(1), WaitPolicy::PARK);
        assert_eq!(
            IdlePolicy::Spin { us: 7 }.wait_policy(usize::MAX).spin,
            Duration::from_micros(7)
        );
        // Auto never spins where threads outnumber cores.
        assert_eq!(IdlePolicy::Auto.wait_policy(usize::MAX), WaitPolicy::PARK);
        assert_eq!(IdlePolicy::Auto.network_spin(), Duration::ZERO);
        assert_eq!(
            IdlePolicy::Spin { us: 9 }.network_spin(),
            Duration::from_micros(9)
        );
    }
}
