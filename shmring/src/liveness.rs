//! Is a process alive? A pid alone cannot say: pids are reused. A process is identified by its
//! pid plus its start time (field 22 of `/proc/PID/stat`, clock ticks since boot), which a
//! reused pid does not share.
//!
//! The holder of a ring's end is the pair packed into one 64-bit word ([`pack`]), so that a
//! claim is one compare-and-swap: a second claimer never sees a new pid beside an old start
//! time (two words written one after the other would let it take a live endpoint).

/// Bits of a packed holder word that hold the pid (Linux's pid_max is at most 2^22).
const PID_BITS: u32 = 22;
/// The pids a holder word can hold.
const PID_MASK: u64 = (1 << PID_BITS) - 1;

/// `(pid, start ticks)` as one word: the pid in the low 22 bits, the start ticks in the high 42
/// (2^42 ticks at 100 Hz is over a thousand years of uptime). `None` for a pid beyond 22 bits,
/// which Linux never hands out.
pub fn pack(pid: u32, start_ticks: u64) -> Option<u64> {
    if pid as u64 > PID_MASK {
        return None;
    }
    Some(start_ticks << PID_BITS | pid as u64)
}

/// The `(pid, start ticks)` of a packed holder word (the ticks as far as the word holds them).
pub fn unpack(word: u64) -> (u32, u64) {
    ((word & PID_MASK) as u32, word >> PID_BITS)
}

/// Whether the holder of a packed word still runs (0: no holder, not alive).
pub fn holder_alive(word: u64) -> bool {
    let (pid, start) = unpack(word);
    if pid == 0 {
        return false;
    }
    match start_ticks(pid) {
        None => false,
        Some(t) => start == 0 || t & (u64::MAX >> PID_BITS) == start,
    }
}

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

    #[test]
    fn a_packed_holder_round_trips_and_is_alive_only_while_it_runs() {
        let (pid, start) = current_process();
        let word = pack(pid, start).expect("a Linux pid fits");
        assert_eq!(unpack(word), (pid, start));
        assert!(holder_alive(word));
        assert!(!holder_alive(pack(pid, start + 1).unwrap()));
        assert!(!holder_alive(0));
        assert_eq!(pack(1 << 22, 1), None);
    }
}
