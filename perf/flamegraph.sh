#!/usr/bin/env bash
# Profile one clasp command with CPU-clock sampling and call graphs; leave a flame graph and a
# readable report. See perf/README.md.
set -euo pipefail

# shellcheck source=perf/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'EOF'
Usage: perf/flamegraph.sh [OPTIONS] -- <clasp args...>

Build target/release/clasp if needed, run `clasp <args>` under
`perf record -e cpu-clock --call-graph dwarf`, and write to DIR:
  flamegraph.svg   the flame graph (inferno); open it in a browser, click to zoom, Ctrl-F to search
  perf.data        the raw samples (perf report -i DIR/perf.data)
  stacks.folded    one line per distinct stack with its sample count (inferno/FlameGraph format)
  report.txt       the run, top symbols by self time, time per thread, and the hottest call chains
  clasp.out        what clasp printed

Options:
  --out DIR          output directory (default: perf/out/flame-<command>-<timestamp>)
  --freq HZ          samples per second per CPU (default: 997). perf.data grows by ~8 KB per
                     sample with DWARF call graphs: lower it for runs longer than ~30 s
  --call-graph MODE  dwarf (default; works on this binary) or fp (needs a build with
                     RUSTFLAGS="-C force-frame-pointers=yes"; see perf/README.md)
  --stack-size BYTES user stack copied per sample with dwarf (default: 8192)
  --no-inline        do not resolve inlined frames (much faster perf script on big profiles,
                     but route/pop_batch/reserve disappear into their callers)
  --no-build         do not run cargo build --release
  --title TEXT       flame graph title (default: the clasp command)
  -h, --help         this help

Examples:
  perf/flamegraph.sh -- bench ring --impls shmring --sizes 64
  perf/flamegraph.sh -- local --app wc --records 200000 --executors 2
EOF
}

out=""; freq=997; call_graph=dwarf; stack_size=8192; inline=1; build=1; title=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="${2:?--out needs a directory}"; shift 2 ;;
        --freq) freq="${2:?--freq needs a number}"; shift 2 ;;
        --call-graph) call_graph="${2:?--call-graph needs dwarf or fp}"; shift 2 ;;
        --stack-size) stack_size="${2:?--stack-size needs a number}"; shift 2 ;;
        --no-inline) inline=0; shift ;;
        --no-build) build=0; shift ;;
        --title) title="${2:?--title needs text}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) say "unknown option '$1' (clasp's arguments go after --)"; usage >&2; exit 2 ;;
    esac
done
[[ $# -gt 0 ]] || { say "no clasp command given"; usage >&2; exit 2; }
[[ "$freq" =~ ^[0-9]+$ ]] || die "--freq must be a number"
case "$call_graph" in
    dwarf) cg_arg="dwarf,$stack_size" ;;
    fp) cg_arg="fp" ;;
    *) die "--call-graph must be dwarf or fp" ;;
esac
[[ -n "$out" ]] || out="$(default_out flame "$@")"
[[ -n "$title" ]] || title="clasp $*"

ensure_perf
check_paranoid
ensure_clasp "$build"
ensure_inferno

mkdir -p "$out"
event="cpu-clock"
[[ "$PERF_USER_ONLY" -eq 1 ]] && event="cpu-clock:u"

say "recording: perf record -e $event -F $freq --call-graph $cg_arg -- clasp $*"
start=$(date +%s.%N)
set +e
"$PERF" record -e "$event" -F "$freq" --call-graph "$cg_arg" -o "$out/perf.data" \
    -- "$CLASP_BIN" "$@" >"$out/clasp.out" 2>"$out/perf-record.log"
status=$?
set -e
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
grep -v '^\[ perf record' "$out/perf-record.log" | tail -n 20 >&2 || true
[[ -s "$out/perf.data" ]] || die "perf record wrote no data (see $out/perf-record.log)"
[[ "$status" -eq 0 ]] || say "WARNING: clasp exited with status $status; profiling what was recorded"

inline_arg=()
[[ "$inline" -eq 0 ]] && inline_arg=(--no-inline)

say "folding stacks (perf script | inferno-collapse-perf)"
"$PERF" script -i "$out/perf.data" "${inline_arg[@]}" 2>/dev/null \
    | inferno-collapse-perf --quiet >"$out/stacks.folded"
[[ -s "$out/stacks.folded" ]] || die "no stacks folded from $out/perf.data"

say "rendering flamegraph.svg (inferno-flamegraph)"
cpu_s=$(awk '{ n += $NF } END { printf "%.3f", n / 1e9 }' "$out/stacks.folded")
inferno-flamegraph --colors rust --title "$title" --countname "ns of CPU" \
    --subtitle "cpu-clock samples at $freq Hz ($cpu_s s of CPU), call graph: $call_graph; $(nproc) CPUs, $(uname -r)" \
    <"$out/stacks.folded" >"$out/flamegraph.svg"

say "writing report.txt (perf report)"
report_args=(-i "$out/perf.data" --stdio "${inline_arg[@]}")
# Drop perf's comments and blank lines, shorten the very long generic names. Never fails (a
# report section that is empty must not stop the script under set -e/pipefail).
clean() { { grep -v '^#' | grep -v '^$' | cut -c1-"${1:-200}" | sed 's/ *$//'; } || true; }
nsamples=$("$PERF" report -i "$out/perf.data" --stats 2>/dev/null \
    | awk '/SAMPLE events:/ { print $3; exit }' || true)
# Frames every thread has (thread start-up, closures, panic guards): left out of the inclusive list.
boilerplate='clone3|start_thread|thread_start|call_once|catch_unwind|do_call|__rust_begin_short_backtrace|lang_start|__libc_start|_start$|^ *[0-9.]+% +[0-9.]+% +\[.\] main$|0xffffffffffffffff|\{closure#1\}<clasp_dataplane::worker::run_worker'
# The report is best effort: a section perf cannot produce (or a `head` closing a pipe early)
# must not lose the profile, so errexit and pipefail are off while it is written.
set +e +o pipefail
{
    echo "clasp flame graph report"
    echo "command:   clasp $*"
    echo "exit:      $status, wall ${elapsed} s (under perf)"
    echo "recording: perf record -e $event -F $freq --call-graph $cg_arg"
    echo "samples:   ${nsamples:-?} ($(awk '{ n += $NF } END { printf "%.3f", n / 1e9 }' "$out/stacks.folded") s of CPU); perf.data $(du -h "$out/perf.data" | cut -f1); $(wc -l <"$out/stacks.folded") distinct stacks"
    machine_header
    echo
    echo "== Top symbols by self time (perf report --no-children --sort symbol) =="
    "$PERF" report "${report_args[@]}" --no-children -F overhead,sym -g none --percent-limit 0.5 2>/dev/null \
        | clean | head -n 30
    echo
    echo "== Time per thread and object (perf report --no-children --sort comm,dso) =="
    "$PERF" report "${report_args[@]}" --no-children -F overhead,comm,dso -g none --percent-limit 1 2>/dev/null \
        | clean | head -n 20
    echo
    echo "== Inclusive time, top-down (perf report --children; thread start-up frames left out) =="
    echo "   children   self"
    "$PERF" report "${report_args[@]}" --children --sort sym -g none --percent-limit 2 2>/dev/null \
        | clean 180 | { grep -Ev "$boilerplate" || true; } | head -n 40
    echo
    echo "== Hottest source lines, self time (perf report --sort sym,srcline; innermost inlined line) =="
    "$PERF" report "${report_args[@]}" --no-children -F overhead,sym,srcline -g none --percent-limit 1 2>/dev/null \
        | clean 220 | head -n 25
} >"$out/report.txt"
set -e -o pipefail

say "done: $out"
for f in flamegraph.svg perf.data stacks.folded report.txt; do
    printf '  %-15s %s\n' "$f" "$(du -h "$out/$f" | cut -f1)" >&2
done
exit "$status"
