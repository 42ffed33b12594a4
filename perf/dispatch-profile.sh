#!/usr/bin/env bash
# Local vs remote dispatch, profiled side by side: two flame graphs and their reports in one
# directory, plus an index.html showing both. See perf/README.md.
set -euo pipefail

# shellcheck source=perf/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'EOF'
Usage: perf/dispatch-profile.sh [OPTIONS]

Profile the local dispatch path (shared-memory ring between executors) and the remote one
(io_uring TCP between workers) with perf/flamegraph.sh, into DIR/local/ and DIR/remote/, and
write DIR/index.html (both flame graphs side by side) and DIR/summary.txt (both top-symbol lists).

What is profiled is decided at run time:
  - if `clasp bench dispatch` exists: `bench dispatch --local` and `bench dispatch --remote`
    (when its --help lists those flags; otherwise the whole `bench dispatch` for the remote half);
  - if not: local = `clasp local --app syn --executors 2 --spread alternate --records 500000`
    (every chained request crosses executors through a shared-memory ring: the local dispatch
    path), and the remote half is skipped with a note saying it needs `clasp bench dispatch`.

Options:
  --out DIR           output directory (default: perf/out/dispatch-<timestamp>)
  --local-args ARGS   clasp arguments for the local half (one string, split on spaces)
  --remote-args ARGS  clasp arguments for the remote half (one string, split on spaces)
  --freq HZ           passed to flamegraph.sh (default: its own, 997)
  --no-build          do not run cargo build --release
  -h, --help          this help
EOF
}

out=""; local_args=""; remote_args=""; build=1; extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="${2:?--out needs a directory}"; shift 2 ;;
        --local-args) local_args="${2:?--local-args needs arguments}"; shift 2 ;;
        --remote-args) remote_args="${2:?--remote-args needs arguments}"; shift 2 ;;
        --freq) extra+=(--freq "${2:?--freq needs a number}"); shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) say "unknown option '$1'"; usage >&2; exit 2 ;;
    esac
done
[[ -n "$out" ]] || out="$PERF_DIR/out/dispatch-$(date +%Y%m%d-%H%M%S)"

ensure_perf
check_paranoid
ensure_clasp "$build"
mkdir -p "$out"

# Does this build have `clasp bench dispatch`? Checked now, so the script picks it up as soon as
# the command lands.
remote_note=""
if dispatch_help=$("$CLASP_BIN" bench dispatch --help 2>/dev/null); then
    if [[ -z "$local_args" ]]; then
        if grep -q -- '--local' <<<"$dispatch_help"; then local_args="bench dispatch --local"
        else local_args="local --app syn --executors 2 --spread alternate --records 500000"; fi
    fi
    if [[ -z "$remote_args" ]]; then
        if grep -q -- '--remote' <<<"$dispatch_help"; then remote_args="bench dispatch --remote"
        else
            remote_args="bench dispatch"
            remote_note="note: \`clasp bench dispatch --help\` lists no --remote flag; profiled the whole \`bench dispatch\` (local and remote together) for the remote half."
        fi
    fi
else
    [[ -n "$local_args" ]] || local_args="local --app syn --executors 2 --spread alternate --records 500000"
    if [[ -z "$remote_args" ]]; then
        remote_note="The remote half needs \`clasp bench dispatch\` (issue 6, item 3), which this build of clasp does not have yet ($CLASP_BIN bench dispatch --help failed). Rerun this script once it lands; it is detected at run time."
    fi
fi

read -r -a local_argv <<<"$local_args"
say "local half: clasp $local_args"
"$PERF_DIR/flamegraph.sh" --no-build "${extra[@]}" --out "$out/local" \
    --title "local dispatch: clasp $local_args" -- "${local_argv[@]}"

remote_done=0
if [[ -n "$remote_args" ]]; then
    read -r -a remote_argv <<<"$remote_args"
    say "remote half: clasp $remote_args"
    "$PERF_DIR/flamegraph.sh" --no-build "${extra[@]}" --out "$out/remote" \
        --title "remote dispatch: clasp $remote_args" -- "${remote_argv[@]}"
    remote_done=1
    # The command may itself say that it could not measure the remote half (yet).
    if said=$(grep -hi 'remote.*not measured\|not measured.*remote' "$out/remote/clasp.out" "$out/remote/perf-record.log" 2>/dev/null); then
        remote_note="${remote_note:+$remote_note }clasp said: \"$(head -n1 <<<"$said")\" -- so this half shows no remote dispatch yet."
        say "NOTE: $remote_note"
    fi
else
    mkdir -p "$out/remote"
    echo "$remote_note" >"$out/remote/NOTE.txt"
    say "NOTE: $remote_note"
fi

# summary.txt: both reports' headers and top symbols, one after the other.
top_of() { sed -n '1,/^== Time per thread/p' "$1" | sed '$d'; }
{
    echo "clasp dispatch profile: local vs remote"
    echo
    echo "################ LOCAL: clasp $local_args"
    top_of "$out/local/report.txt"
    echo
    if [[ "$remote_done" -eq 1 ]]; then
        echo "################ REMOTE: clasp $remote_args"
        [[ -n "$remote_note" ]] && echo "$remote_note"
        top_of "$out/remote/report.txt"
    else
        echo "################ REMOTE: not profiled"
        echo "$remote_note"
    fi
} >"$out/summary.txt"

# index.html: the two interactive SVGs side by side (each stays clickable and searchable).
html_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }
if [[ "$remote_done" -eq 1 ]]; then
    remote_cell="<object data=\"remote/flamegraph.svg\" type=\"image/svg+xml\"></object>"
else
    remote_cell="<p>$(html_escape <<<"$remote_note")</p>"
fi
cat >"$out/index.html" <<EOF
<!doctype html>
<html><head><meta charset="utf-8"><title>clasp dispatch profile</title>
<style>
body { font-family: sans-serif; margin: 8px; }
.row { display: flex; gap: 8px; }
.col { flex: 1; min-width: 0; }
object { width: 100%; height: 90vh; border: 1px solid #ccc; }
</style></head><body>
<h2>clasp dispatch profile: local vs remote</h2>
<div class="row">
<div class="col"><h3>local: clasp $(html_escape <<<"$local_args")</h3>
<object data="local/flamegraph.svg" type="image/svg+xml"></object>
<p><a href="local/report.txt">report.txt</a></p></div>
<div class="col"><h3>remote: clasp $(html_escape <<<"${remote_args:-bench dispatch (not available yet)}")</h3>
$remote_cell
$([[ "$remote_done" -eq 1 ]] && echo '<p><a href="remote/report.txt">report.txt</a></p>')</div>
</div></body></html>
EOF

say "done: $out (open $out/index.html in a browser; text summary in $out/summary.txt)"
