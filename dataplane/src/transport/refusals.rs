//! Connections refused before they authenticated: counted, and logged at most once per second
//! per source address.
//!
//! Why: a port scanner, an HTTP probe or a garbage flood reaches a worker's port in any real
//! network. Such a connection is refused and the cluster runs on, so it is an event, not a
//! fault; but logging every one would let a flood fill the log (and cost the event loop a
//! write per connection). The first refusal from an address is logged; the next ones within a
//! second are only counted, and the count is named in the next line logged for that address.
//! The table of addresses is bounded: when full, addresses quiet for a second are forgotten,
//! and if that frees nothing, further new addresses share one entry. A second process under
//! a connected peer's id dials again for its whole connect timeout before it gives up; its
//! refusals are logged in a log of their own, once per that timeout.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tracing::warn;

/// At most one log line per source address in this time.
pub(super) const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);
/// Most source addresses remembered at once.
const MAX_SOURCES: usize = 1024;

/// One source address's log state.
#[derive(Clone, Copy, Debug)]
struct Source {
    last_logged: Instant,
    /// Refusals counted but not logged since `last_logged`.
    suppressed: u64,
}

/// The rate limiter of refusal logs.
#[derive(Debug)]
pub(super) struct RefusalLog {
    /// Per source IP (ports change with every connection); `None`: unknown, or the shared
    /// entry once the table is full.
    sources: HashMap<Option<IpAddr>, Source>,
    /// At most one line per address in this time.
    interval: Duration,
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog::every(REFUSAL_LOG_INTERVAL)
    }
}

impl RefusalLog {
    /// A log of at most one line per address per `interval`.
    pub(super) fn every(interval: Duration) -> Self {
        RefusalLog {
            sources: HashMap::new(),
            interval,
        }
    }

    /// Notes a refusal at `now`; logs it unless this address was logged less than the
    /// interval ago. Returns whether it was logged.
    pub(super) fn note(&mut self, now: Instant, addr: Option<SocketAddr>, reason: &str) -> bool {
        let key = self.key(now, addr.map(|a| a.ip()));
        let suppressed = match self.sources.entry(key) {
            Entry::Vacant(v) => {
                v.insert(Source {
                    last_logged: now,
                    suppressed: 0,
                });
                0
            }
            Entry::Occupied(o) => {
                let source = o.into_mut();
                if now.saturating_duration_since(source.last_logged) < self.interval {
                    source.suppressed += 1;
                    return false;
                }
                source.last_logged = now;
                std::mem::take(&mut source.suppressed)
            }
        };
        warn!(
            ?addr,
            %reason,
            suppressed_since_last_log = suppressed,
            "refusing connection"
        );
        true
    }

    /// The table key for `ip`: itself, or the shared entry when the table is full of
    /// addresses heard from within the last interval.
    fn key(&mut self, now: Instant, ip: Option<IpAddr>) -> Option<IpAddr> {
        if self.sources.contains_key(&ip) || self.sources.len() < MAX_SOURCES {
            return ip;
        }
        let interval = self.interval;
        self.sources
            .retain(|_, s| now.saturating_duration_since(s.last_logged) < interval);
        if self.sources.len() < MAX_SOURCES {
            ip
        } else {
            None
        }
    }

    /// Addresses remembered (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.sources.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ip: u8, port: u16) -> Option<SocketAddr> {
        Some(SocketAddr::from(([10, 0, 0, ip], port)))
    }

    #[test]
    fn one_line_per_second_per_address() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        assert!(log.note(t0, addr(1, 1000), "garbage"));
        // Another port of the same address within the second: counted only.
        assert!(!log.note(t0 + Duration::from_millis(10), addr(1, 1001), "garbage"));
        assert!(!log.note(t0 + Duration::from_millis(900), addr(1, 1002), "garbage"));
        // Another address is logged at once.
        assert!(log.note(t0 + Duration::from_millis(10), addr(2, 1000), "garbage"));
        // A second later, the first address again.
        assert!(log.note(t0 + Duration::from_millis(1000), addr(1, 1003), "garbage"));
        assert!(log.note(t0, None, "unknown"));
    }

    #[test]
    fn the_table_stays_bounded() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        for i in 0..(MAX_SOURCES as u32 * 2) {
            let ip = std::net::Ipv4Addr::from(0x0A00_0000 + i);
            log.note(t0, Some(SocketAddr::from((ip, 1))), "scan");
        }
        assert!(log.len() <= MAX_SOURCES + 1, "{}", log.len());
        // Once the others are quiet for a second, new addresses get their own entries again.
        let later = t0 + REFUSAL_LOG_INTERVAL;
        let fresh = Some(SocketAddr::from(([192, 168, 0, 1], 1)));
        assert!(log.note(later, fresh, "scan"));
        assert!(log.len() <= 2, "{}", log.len());
    }
}
