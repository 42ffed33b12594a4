//! Software prefetching of published lines by a consumer that is behind, and which CPUs get
//! it.
//!
//! On the Intel Xeon this ring was first tuned on, a consumer that was behind still took each
//! frame's first line as a demand miss to the producer's core; prefetching the published lines
//! ahead of it overlapped those misses and took 64-byte payloads from 33–37 to about 100 M
//! messages/s. On an AMD EPYC (Zen 3) the same prefetches cost throughput instead: the two-core
//! stream ran at 85–92 M messages/s with them and 131–152 M without, and 16-byte payloads were
//! no slower without them (`benches/results/rings.md`). So the consumer asks [`lines_per_frame`]
//! once, when it is made, and an AMD CPU gets none. `CLASP_RING_PREFETCH_LINES=N` (0–16) in
//! the environment overrides the choice for the process, to measure both on other hardware.

/// How far past its position the consumer prefetches published lines.
pub(super) const AHEAD_BYTES: u64 = 2048;
/// Most lines the consumer prefetches per frame it reads, so large frames (which the
/// hardware's own stream prefetcher follows) do not flood the line-fill buffers.
const LINES_PER_FRAME: u64 = 4;

/// The environment variable that overrides [`lines_per_frame`].
pub const PREFETCH_LINES_ENV: &str = "CLASP_RING_PREFETCH_LINES";
/// The largest override accepted.
const MAX_LINES_PER_FRAME: u64 = 16;

/// Lines per frame read that a consumer on this CPU prefetches: [`LINES_PER_FRAME`], or 0 on
/// CPUs where prefetching was measured to slow the stream (AMD); [`PREFETCH_LINES_ENV`] if
/// set to a number in `0..=16` (anything else is ignored with a warning on stderr).
pub(super) fn lines_per_frame() -> u64 {
    static LINES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LINES.get_or_init(|| {
        let default = if cpu_vendor_is_amd() {
            0
        } else {
            LINES_PER_FRAME
        };
        let value = std::env::var(PREFETCH_LINES_ENV).ok();
        let (lines, warning) = with_override(value.as_deref(), default);
        if let Some(w) = warning {
            eprintln!("warning: {w}");
        }
        lines
    })
}

/// The lines per frame given the environment's `value` and this CPU's `default`, and a warning
/// when the value is not a number of lines in `0..=MAX_LINES_PER_FRAME`.
fn with_override(value: Option<&str>, default: u64) -> (u64, Option<String>) {
    let Some(v) = value else {
        return (default, None);
    };
    match v.trim().parse::<u64>() {
        Ok(n) if n <= MAX_LINES_PER_FRAME => (n, None),
        _ => (
            default,
            Some(format!(
                "{PREFETCH_LINES_ENV}={v:?} is not a number of lines in \
                 0..={MAX_LINES_PER_FRAME}; using {default}"
            )),
        ),
    }
}

/// Whether CPUID names the vendor "AuthenticAMD".
fn cpu_vendor_is_amd() -> bool {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        // Leaf 0 returns the vendor string in EBX, EDX, ECX, four bytes each.
        let id = std::arch::x86_64::__cpuid(0);
        let word = |s: &[u8; 4]| u32::from_le_bytes(*s);
        (id.ebx, id.edx, id.ecx) == (word(b"Auth"), word(b"enti"), word(b"cAMD"))
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    {
        false
    }
}

/// Asks for the line at `p` to be brought into this core's cache for reading. A hint: any
/// address will do (none is read), so callers outside the ring use it too (an executor's
/// prefetch of the state a request will look up).
#[inline(always)]
pub fn read(_p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    // SAFETY: a prefetch is a hint; it never faults and does not access memory architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(_p.cast())
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_takes_a_number_of_lines_and_names_anything_else() {
        assert_eq!(with_override(None, 4), (4, None));
        assert_eq!(with_override(Some("0"), 4), (0, None));
        assert_eq!(with_override(Some(" 16 "), 0), (16, None));
        for bad in ["17", "-1", "four", ""] {
            let (lines, warning) = with_override(Some(bad), 4);
            assert_eq!(lines, 4, "{bad:?}");
            let warning = warning.expect("a warning");
            assert!(
                warning.contains(PREFETCH_LINES_ENV) && warning.contains("0..=16"),
                "{warning}"
            );
        }
    }
}
