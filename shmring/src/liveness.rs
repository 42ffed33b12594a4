//! Is a process alive? A pid alone cannot say: pids are reused. A process is identified by its
//! pid plus its start time (field 22 of `/proc/PID/stat`, clock ticks since boot), which a
//! reused pid does not share.

/// The calling process's (pid, start ticks).
pub fn current_process() -> (u32, u64) {
    let pid = std::process::id();
    (pid, start_ticks(pid).unwrap_or(0))
}

/// Start time of `pid` in clock ticks since boot, or `None` if there is no such process.
pub fn start_ticks(pid: u32) -> Option<u64> {
    if cfg!(any(miri, loom)) {
        return Some(0);
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces or ')': the fields
    // after the last ')' are unambiguous. Field 3 is the first of them, so 22 is the 20th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None; // a zombie has exited; only its exit status remains
    }
    fields.nth(18)?.parse().ok()
}

/// Whether the process (pid, start ticks) still runs. A start time of 0 matches any process
/// with that pid (for callers that could not read it).
pub fn is_alive(pid: u32, start: u64) -> bool {
    match start_ticks(pid) {
        None => false,
        Some(t) => start == 0 || t == start,
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn self_is_alive_and_a_wrong_start_time_is_not() {
        let (pid, start) = current_process();
        assert!(start > 0);
        assert!(is_alive(pid, start));
        assert!(!is_alive(pid, start + 1));
    }

    #[test]
    fn a_killed_and_reaped_child_is_dead() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = start_ticks(pid).expect("the child runs");
        assert!(is_alive(pid, start));
        child.kill().unwrap();
        child.wait().unwrap();
        // Even if the pid were reused at once, the start time would differ.
        assert!(!is_alive(pid, start));
    }
}
