#!/usr/bin/env bash
# Count events for one clasp command (or a running clasp process) with perf stat, using the
# hardware counters only where this machine has them. See perf/README.md.
set -euo pipefail

# shellcheck source=perf/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'EOF'
Usage: perf/stat.sh [OPTIONS] -- <clasp args...>
       perf/stat.sh [OPTIONS] --pid PID [--seconds N]

Run `clasp <args>` under `perf stat` and write DIR/stat.txt:
  - software counters that always work: task-clock, context-switches, cpu-migrations,
    page-faults (plus major/minor faults);
  - hardware counters (cycles, instructions, cache-misses, branch-misses) only if this machine
    exposes them: each is probed first, and the report says "not supported here" otherwise;
  - per thread: a second run recording the scheduler tracepoints gives each clasp thread's CPU
    time, context switches and scheduling delay (`perf sched latency`; perf stat itself cannot
    split a command's threads).
With --pid, attach to a running clasp process instead (a worker of `clasp run --static`, a
long `clasp local`) and count per thread with `perf stat --per-thread -p PID` for N seconds.

Options:
  --out DIR        output directory (default: perf/out/stat-<command>-<timestamp>)
  --repeat N       run the command N times; perf stat prints mean and spread (default: 1)
  --no-per-thread  skip the second (per-thread) run
  --pid PID        attach to this process instead of running a command
  --seconds N      how long to count with --pid (default: 10)
  --no-build       do not run cargo build --release
  -h, --help       this help

Examples:
  perf/stat.sh -- bench ring --impls shmring --sizes 64
  perf/stat.sh --repeat 3 -- local --app syn --executors 2 --spread alternate --records 500000
EOF
}

out=""; repeat=1; per_thread=1; pid=""; seconds=10; build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="${2:?--out needs a directory}"; shift 2 ;;
        --repeat) repeat="${2:?--repeat needs a number}"; shift 2 ;;
        --no-per-thread) per_thread=0; shift ;;
        --pid) pid="${2:?--pid needs a process id}"; shift 2 ;;
        --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) say "unknown option '$1' (clasp's arguments go after --)"; usage >&2; exit 2 ;;
    esac
done
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive number"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "--seconds must be a positive number"
if [[ -n "$pid" ]]; then
    [[ $# -eq 0 ]] || die "give either --pid or a clasp command, not both"
    [[ -d "/proc/$pid" ]] || die "no process $pid"
    [[ -n "$out" ]] || out="$PERF_DIR/out/stat-pid$pid-$(date +%Y%m%d-%H%M%S)"
else
    [[ $# -gt 0 ]] || { say "no clasp command given"; usage >&2; exit 2; }
    [[ -n "$out" ]] || out="$(default_out stat "$@")"
fi

ensure_perf
check_paranoid
[[ -z "$pid" ]] && ensure_clasp "$build"
mkdir -p "$out"

suffix=""
[[ "$PERF_USER_ONLY" -eq 1 ]] && suffix=":u"
events=("task-clock$suffix" "context-switches$suffix" "cpu-migrations$suffix" "page-faults$suffix"
        "minor-faults$suffix" "major-faults$suffix")

# Probe each hardware counter on a trivial command: perf prints "<not supported>" (a VM without
# a virtual PMU, as on this project's machine) or fails to open it (paranoid, no PMU driver).
hw_supported=(); hw_missing=()
for ev in cycles instructions cache-misses branch-misses; do
    if probe=$("$PERF" stat -x, -e "$ev$suffix" true 2>&1 >/dev/null) \
        && ! grep -q '<not supported>\|<not counted>' <<<"$probe"; then
        hw_supported+=("$ev$suffix")
    else
        hw_missing+=("$ev")
    fi
done
events+=("${hw_supported[@]}")
event_list=$(IFS=,; echo "${events[*]}")

{
    echo "clasp perf stat report"
    if [[ -n "$pid" ]]; then
        echo "target:    pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)), ${seconds} s, per thread"
    else
        echo "command:   clasp $*  (x$repeat)"
    fi
    machine_header
    if [[ ${#hw_missing[@]} -gt 0 ]]; then
        echo "hardware:  ${hw_missing[*]}: not supported here (no PMU exposed to this machine);"
        echo "           cycles/instructions/IPC and miss counts need bare metal or a VM with a vPMU"
    else
        echo "hardware:  all of cycles, instructions, cache-misses, branch-misses available"
    fi
    echo
} >"$out/stat.txt"

status=0
if [[ -n "$pid" ]]; then
    say "perf stat --per-thread -p $pid for $seconds s"
    "$PERF" stat --per-thread -e "$event_list" -p "$pid" -o "$out/perf-stat.txt" -- sleep "$seconds" || status=$?
    echo "== perf stat --per-thread -e $event_list -p $pid -- sleep $seconds ==" >>"$out/stat.txt"
    # perf prints one row per thread and event (thread name-tid); rows that stayed 0 are left out.
    grep -v '^#' "$out/perf-stat.txt" | grep -Ev '^ +[^ ]+ +0 ' | sed '/^$/d' >>"$out/stat.txt" || true
else
    say "perf stat -e $event_list -r $repeat -- clasp $*"
    "$PERF" stat -e "$event_list" -r "$repeat" -o "$out/perf-stat.txt" \
        -- "$CLASP_BIN" "$@" >"$out/clasp.out" 2>"$out/clasp.err" || status=$?
    [[ "$status" -eq 0 ]] || say "WARNING: clasp exited with status $status (see $out/clasp.err)"
    {
        echo "== perf stat -e $event_list -r $repeat -- clasp $* =="
        grep -v '^#' "$out/perf-stat.txt" | sed '/^$/N;/^\n$/D'
        echo "(task-clock / elapsed = the CPUs utilized; context switches and migrations are per"
        echo " command, every thread and child process included; \"<not counted>\" means the event"
        echo " was never scheduled on the PMU)"
    } >>"$out/stat.txt"

    if [[ "$per_thread" -eq 1 ]]; then
        sched_events=sched:sched_switch,sched:sched_stat_runtime,sched:sched_wakeup,sched:sched_wakeup_new,sched:sched_migrate_task
        if "$PERF" record -e "$sched_events" -c 1 -o "$out/sched-probe.data" -- true >/dev/null 2>&1; then
            rm -f "$out/sched-probe.data"
            say "per thread: perf record -e sched:* -- clasp $* (a second run)"
            "$PERF" record -e "$sched_events" -c 1 -o "$out/sched.data" -- "$CLASP_BIN" "$@" \
                >/dev/null 2>"$out/sched-record.log" || true
            {
                echo
                echo "== Per thread (a second run under perf record -e sched:*, then perf sched latency -p) =="
                echo "   Runtime = CPU time on a core; Switches = times switched out; delay = runnable but"
                echo "   waiting for a core. Busiest first; only this command's threads (name:pid)."
                echo "  Task                  |   Runtime ms  | Switches | Avg delay ms    | Max delay ms    | Max delay start           | Max delay end          |"
                "$PERF" sched latency -p -i "$out/sched.data" 2>/dev/null \
                    | grep -E '^ +[^ :|][^|]*:[0-9]+ +\|' | sed 's/ *$//' | sort -t'|' -k2,2 -rn || true
            } >>"$out/stat.txt"
        else
            echo "(per thread: skipped, perf cannot record sched tracepoints here: needs root, or perf_event_paranoid=-1 and a readable tracefs)" >>"$out/stat.txt"
        fi
    fi
fi

say "done: $out/stat.txt"
cat "$out/stat.txt"
exit "$status"
