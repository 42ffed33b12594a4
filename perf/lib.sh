# shellcheck shell=bash
# Shared helpers for the perf/ scripts. Sourced, not run.

PERF_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$PERF_DIR/.." && pwd)"
TOOLS_DIR="$PERF_DIR/.tools"
CLASP_BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/clasp"
# `perf` itself: PERF=/path/to/perf overrides the one on PATH.
PERF="${PERF:-perf}"

say() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# A default output directory under perf/out/ (git-ignored), named after the clasp command.
default_out() {
    local kind="$1"; shift
    local words=() w
    for w in "$@"; do
        [[ "$w" == -* ]] && break
        words+=("$w")
    done
    local name="${kind}"
    [[ ${#words[@]} -gt 0 ]] && name="${kind}-$(IFS=-; echo "${words[*]}")"
    echo "$PERF_DIR/out/${name}-$(date +%Y%m%d-%H%M%S)"
}

# Make sure a working `perf` exists: install it with apt-get when root, else explain.
ensure_perf() {
    if ! command -v "$PERF" >/dev/null 2>&1 || ! "$PERF" --version >/dev/null 2>&1; then
        if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
            say "perf is missing (or does not match this kernel); installing linux-perf with apt-get"
            apt-get update -qq >&2 || die "apt-get update failed"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >&2 \
                || die "apt-get install linux-perf failed; install perf for kernel $(uname -r) by hand"
            hash -r
        fi
        if ! command -v "$PERF" >/dev/null 2>&1 || ! "$PERF" --version >/dev/null 2>&1; then die \
            "perf is not installed. On Debian: sudo apt-get install linux-perf (Ubuntu: linux-tools-\$(uname -r)), or set PERF=/path/to/perf"
        fi
    fi
}

# Make sure perf may open software events for our own processes; explain the sysctl if not.
# Sets PERF_USER_ONLY=1 when only user-space can be profiled (kernel frames are then absent).
PERF_USER_ONLY=0
check_paranoid() {
    local paranoid
    paranoid="$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo unknown)"
    if [[ "$(id -u)" -ne 0 && "$paranoid" =~ ^[0-9]+$ && "$paranoid" -ge 2 ]]; then
        PERF_USER_ONLY=1
    fi
    if ! "$PERF" stat -e cpu-clock -x, -o /dev/null true >/dev/null 2>&1; then
        die "perf cannot open the cpu-clock event (kernel.perf_event_paranoid = $paranoid).
  Allow it for this boot:   sudo sysctl kernel.perf_event_paranoid=1
  (-1 also allows kernel and system-wide profiling; make it permanent in /etc/sysctl.d/), or run as root."
    fi
    if [[ "$PERF_USER_ONLY" -eq 1 ]]; then
        say "note: perf_event_paranoid=$paranoid and not root: profiling user space only (no kernel frames)."
        say "      For kernel frames: sudo sysctl kernel.perf_event_paranoid=1 kernel.kptr_restrict=0"
    fi
}

# Build target/release/clasp (a no-op when it is up to date). If the build fails but an
# older binary exists, warn and use it; with --no-build only check that it exists.
ensure_clasp() {
    local build="${1:-1}"
    if [[ "$build" -eq 1 ]]; then
        command -v cargo >/dev/null 2>&1 || die "cargo is not on PATH (install the Rust toolchain: https://rustup.rs)"
        say "cargo build --release (no-op when up to date)"
        if ! (cd "$REPO_ROOT" && cargo build --release --bin clasp >&2); then
            [[ -x "$CLASP_BIN" ]] || die "cargo build --release failed and there is no $CLASP_BIN"
            say "WARNING: cargo build --release failed; profiling the existing, possibly stale, $CLASP_BIN"
        fi
    fi
    [[ -x "$CLASP_BIN" ]] || die "$CLASP_BIN does not exist (run cargo build --release)"
}

# Put inferno's tools on PATH, installing the crate into perf/.tools on first use.
ensure_inferno() {
    if [[ -x "$TOOLS_DIR/bin/inferno-flamegraph" ]]; then
        PATH="$TOOLS_DIR/bin:$PATH"
    fi
    if ! command -v inferno-flamegraph >/dev/null 2>&1 || ! command -v inferno-collapse-perf >/dev/null 2>&1; then
        command -v cargo >/dev/null 2>&1 || die "inferno is not installed and cargo is not on PATH"
        say "installing inferno into $TOOLS_DIR (first use only, ~1-2 minutes)"
        cargo install --locked --root "$TOOLS_DIR" inferno >&2 || die "cargo install inferno failed"
        PATH="$TOOLS_DIR/bin:$PATH"
    fi
    export PATH
}

# One header block describing the machine and the run, for the top of every report.
machine_header() {
    echo "machine:   $(nproc) CPUs, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
    local virt="no" detected
    grep -q '^flags.* hypervisor' /proc/cpuinfo 2>/dev/null && virt="yes (CPU hypervisor flag)"
    detected="$(systemd-detect-virt 2>/dev/null)" && virt="$virt; systemd-detect-virt: $detected"
    echo "virtual:   $virt"
    echo "perf:      $("$PERF" --version 2>/dev/null), perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo '?'), kptr_restrict=$(cat /proc/sys/kernel/kptr_restrict 2>/dev/null || echo '?')"
    echo "binary:    $CLASP_BIN ($(cd "$REPO_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo 'no git')$(cd "$REPO_ROOT" && git diff --quiet HEAD 2>/dev/null || echo ', dirty tree'))"
    echo "date:      $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
}
