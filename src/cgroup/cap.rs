//! `--worker-cpu F`: a fraction of one core as a CFS bandwidth limit — `quota` µs of CPU time
//! per `period` µs, across all the process's threads.
//!
//! The period is short (10 ms) so a throttled worker waits at most a few ms for its next
//! slice, not the kernel default's 100 ms: the planner's queues and latencies then see a
//! slower worker, not a stalling one. The kernel refuses a quota under 1 ms, so F < 0.1 is
//! refused here, with that reason, before anything is created.

/// CFS period of every capped group (µs).
pub const PERIOD_US: u64 = 10_000;
/// The kernel's smallest CFS quota (µs).
pub const MIN_QUOTA_US: u64 = 1_000;

/// A CPU cap: `quota_us` of CPU time per `PERIOD_US`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuCap {
    /// The fraction of one core asked for.
    pub fraction: f64,
    pub quota_us: u64,
    pub period_us: u64,
}

impl CpuCap {
    /// The cap for `fraction` of one core on a machine with `cpus` CPUs; the reason when the
    /// kernel would refuse it or it could never bind.
    pub fn new(fraction: f64, cpus: usize) -> Result<CpuCap, String> {
        if !(fraction.is_finite() && fraction > 0.0) {
            return Err(format!(
                "{fraction}: must be a positive fraction of one core, e.g. 0.3"
            ));
        }
        if fraction > cpus as f64 {
            return Err(format!(
                "{fraction}: more than the {cpus} CPU(s) this process may use; a cap above \
                 that never binds"
            ));
        }
        let quota_us = (fraction * PERIOD_US as f64).round() as u64;
        if quota_us < MIN_QUOTA_US {
            let min = MIN_QUOTA_US as f64 / PERIOD_US as f64;
            return Err(format!(
                "{fraction}: the quota would be {quota_us} µs per {PERIOD_US} µs period, under \
                 the kernel's 1 ms minimum quota; use at least {min}"
            ));
        }
        Ok(CpuCap {
            fraction,
            quota_us,
            period_us: PERIOD_US,
        })
    }

    /// `--worker-cpu`'s parser: the cap on this process's allowed CPUs.
    pub fn parse_arg(s: &str) -> Result<CpuCap, String> {
        let f: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: a fraction of one core, e.g. 0.3"))?;
        CpuCap::new(f, clasp_dataplane::affinity::allowed_cpus().len().max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_is_the_fraction_of_a_10_ms_period() {
        let c = CpuCap::new(0.3, 2).unwrap();
        assert_eq!((c.quota_us, c.period_us), (3_000, 10_000));
        assert_eq!(CpuCap::new(0.1, 2).unwrap().quota_us, 1_000);
        assert_eq!(CpuCap::new(2.0, 2).unwrap().quota_us, 20_000);
        assert_eq!(CpuCap::new(0.123_45, 1).unwrap().quota_us, 1_235);
    }

    #[test]
    fn quotas_the_kernel_refuses_or_that_never_bind_are_refused() {
        let e = CpuCap::new(0.01, 2).unwrap_err();
        assert!(e.contains("1 ms minimum") && e.contains("0.1"), "{e}");
        assert!(CpuCap::new(0.094, 2).is_err());
        assert!(CpuCap::new(2.5, 2).unwrap_err().contains("2 CPU"));
        for f in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(CpuCap::new(f, 2).is_err(), "{f}");
        }
        assert!(CpuCap::parse_arg("abc").is_err());
    }
}
