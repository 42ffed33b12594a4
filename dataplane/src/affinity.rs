//! Pinning threads to cores, verified.
//!
//! `core_affinity::set_for_current` was seen on this project's 2-core VM to report success for
//! a new thread that then kept running on its parent's CPU. So we call
//! `sched_setaffinity` directly and check with `sched_getcpu` that the thread really moved.

/// Pins the calling thread to `cpu` and checks where it runs. Returns the CPU it runs on.
pub fn pin_current_thread(cpu: usize) -> Result<usize, String> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| format!("sched_setaffinity to CPU {cpu}: {e}"))?;
    // The kernel migrates the thread before returning from sched_setaffinity; yield once in
    // case the migration is lazy on this kernel.
    std::thread::yield_now();
    let now = rustix::thread::sched_getcpu();
    if now != cpu {
        return Err(format!("asked for CPU {cpu}, the thread runs on CPU {now}"));
    }
    Ok(now)
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// Whether `executors` are pinned on `cpus` CPUs: one each, the first CPU left to the worker's
/// other threads — unless they spin, when they own their cores and take all of them (the
/// other threads, which mostly sleep, then share them).
pub fn executors_pinnable(executors: usize, cpus: usize, spin: bool) -> bool {
    executors < cpus || (spin && executors == cpus)
}

/// The CPU executor `e` is pinned to: the (e+1)-th of the `allowed` CPUs, wrapping (the first
/// is left to the worker's other threads). Inside the process's allowed set, so workers
/// restricted to different CPUs (`clasp worker --cpus`) never pin onto the same one.
pub fn executor_cpu(allowed: &[usize], e: usize) -> usize {
    match allowed.len() {
        0 => e + 1,
        n => allowed[(e + 1) % n],
    }
}

#[cfg(test)]
mod tests {
    use super::executor_cpu;

    #[test]
    fn executors_take_the_allowed_cpus_after_the_first_wrapping() {
        assert_eq!(executor_cpu(&[0, 1, 2, 3], 0), 1);
        assert_eq!(executor_cpu(&[0, 1, 2, 3], 2), 3);
        assert_eq!(executor_cpu(&[2, 3], 0), 3);
        assert_eq!(executor_cpu(&[2, 3], 1), 2);
        assert_eq!(executor_cpu(&[5], 3), 5);
    }
}
