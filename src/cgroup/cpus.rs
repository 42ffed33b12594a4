//! `--cpus LIST`: the CPUs a worker process may run on (its affinity mask), written as the
//! kernel writes CPU lists (`0,1`, `0-3`, `0-1,4`). Every thread of the worker inherits the
//! mask; `--pin` then pins each executor to one CPU inside it.

use rustix::thread::CpuSet;

/// A parsed `--cpus` list: sorted, without duplicates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// Parses `0,1`, `0-3`, `0-1,4`; refuses empty items, reversed ranges and CPUs past the
    /// kernel's mask size.
    pub fn parse(s: &str) -> Result<CpuList, String> {
        let bad = |why: &str| format!("{s:?}: {why} (a CPU list like 0,1 or 0-3)");
        let cpu = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| bad("not a CPU number"))
        };
        let mut cpus = Vec::new();
        for item in s.split(',') {
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (cpu(a)?, cpu(b)?),
                None => (cpu(item)?, cpu(item)?),
            };
            if lo > hi {
                return Err(bad("a range must run upwards"));
            }
            if hi >= CpuSet::MAX_CPU {
                return Err(bad(&format!("CPUs are numbered below {}", CpuSet::MAX_CPU)));
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }

    /// `--cpus`'s parser: [`CpuList::parse`], and every CPU one this process may use (the
    /// kernel would refuse a mask of CPUs that are not there only once a worker starts).
    pub fn parse_arg(s: &str) -> Result<CpuList, String> {
        let list = CpuList::parse(s)?;
        list.within(&clasp_dataplane::affinity::allowed_cpus())?;
        Ok(list)
    }

    /// Refuses a CPU outside `allowed`.
    pub fn within(&self, allowed: &[usize]) -> Result<(), String> {
        match self.0.iter().find(|c| !allowed.contains(c)) {
            Some(c) => Err(format!(
                "CPU {c} is not one this process may use (it may use {allowed:?})"
            )),
            None => Ok(()),
        }
    }

    /// The list as the kernel's CPU set.
    pub fn to_set(&self) -> CpuSet {
        let mut set = CpuSet::new();
        for &c in &self.0 {
            set.set(c);
        }
        set
    }

    /// Restricts the calling thread (and every thread it starts afterwards) to these CPUs.
    pub fn apply_to_current_thread(&self) -> Result<(), String> {
        rustix::thread::sched_setaffinity(None, &self.to_set())
            .map_err(|e| format!("setting the affinity to CPUs {:?}: {e}", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(CpuList::parse("0,1").unwrap().0, vec![0, 1]);
        assert_eq!(CpuList::parse("0-3").unwrap().0, vec![0, 1, 2, 3]);
        assert_eq!(CpuList::parse("4, 0-1,1").unwrap().0, vec![0, 1, 4]);
        let s = CpuList::parse("1").unwrap().to_set();
        assert!(s.is_set(1) && !s.is_set(0));
    }

    #[test]
    fn bad_lists_are_refused() {
        for s in ["", "a", "1,", "3-1", "-1", "0-", "99999"] {
            assert!(CpuList::parse(s).is_err(), "{s}");
        }
        let l = CpuList::parse("0-2").unwrap();
        assert!(l.within(&[0, 1]).unwrap_err().contains("CPU 2"));
        assert!(l.within(&[0, 1, 2, 3]).is_ok());
    }
}
