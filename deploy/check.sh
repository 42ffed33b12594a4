#!/usr/bin/env bash
# Checks the deployment files as far as this machine allows, printing each check and each skip
# with its reason (.ci/run calls it). Nothing here starts a container, a service or a pod:
# what it cannot run is listed as untested in deploy/README.md.
#
#   deploy/check.sh [CLASP_BINARY]     (default: target/debug/clasp, else target/release/clasp)
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-}
for candidate in target/debug/clasp target/release/clasp; do
    [[ -z $bin && -x $candidate ]] && bin=$candidate
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "-- manifests and seccomp profile"
status=0
python3 deploy/check_manifests.py || status=$?
case $status in
    0) ;;
    2) echo "skip: the YAML checks (see above); the JSON alone:"
       python3 -c 'import json,sys; json.load(open(sys.argv[1])); print("ok: JSON parses")' \
           deploy/seccomp-io-uring.json ;;
    *) exit 1 ;;
esac

echo "-- the driver's run file (k8s/config.yaml) with clasp planner --print-config"
if [[ -z $bin ]]; then
    echo "skip: no built clasp binary (cargo build --bin clasp)"
elif ! python3 -c 'import yaml' 2>/dev/null; then
    echo "skip: PyYAML is not installed"
else
    python3 - "$scratch" <<'PY'
import pathlib, sys, yaml
doc = yaml.safe_load(open("deploy/k8s/config.yaml"))
for name in ("run.toml", "cluster.toml"):
    (pathlib.Path(sys.argv[1]) / name).write_text(doc["data"][name])
PY
    "$bin" planner --config "$scratch/run.toml" --cluster "$scratch/cluster.toml" \
        --print-config >/dev/null
    echo "ok: every key of run.toml is a flag of clasp planner with a valid value"
fi

echo "-- systemd unit"
if ! command -v systemd-analyze >/dev/null; then
    echo "skip: systemd-analyze is not installed"
else
    unit=$scratch/clasp-worker.service
    if [[ -x /usr/local/bin/clasp ]]; then
        cp deploy/clasp-worker.service "$unit"
    elif [[ -n $bin ]]; then
        # verify insists that ExecStart's program exists: point it at the built binary.
        sed "s#/usr/local/bin/clasp#$(realpath "$bin")#" deploy/clasp-worker.service >"$unit"
        echo "(ExecStart's /usr/local/bin/clasp is absent here: verified with $bin in its place)"
    else
        echo "skip: no clasp binary for ExecStart to name (cargo build --bin clasp)"
        unit=
    fi
    if [[ -n $unit ]]; then
        out=$(systemd-analyze verify "$unit" 2>&1) || { echo "$out"; exit 1; }
        [[ -n $out ]] && { echo "$out"; echo "FAIL: systemd-analyze verify printed warnings"; exit 1; }
        echo "ok: systemd-analyze verify clasp-worker.service"
    fi
fi

echo "-- container image"
if ! command -v docker >/dev/null; then
    echo "skip: docker is not installed"
elif ! docker info >/dev/null 2>&1; then
    echo "skip: docker is installed but its daemon is not reachable (docker info fails)"
else
    timeout 3600 docker build -f deploy/Dockerfile -t clasp:check .
    docker run --rm clasp:check --version
    # The profile lets io_uring through: a static run over two workers in the container.
    docker run --rm --shm-size=256m --security-opt seccomp=deploy/seccomp-io-uring.json \
        clasp:check run --static --workers 2 --app wc --records 2000 --json >/dev/null
    echo "ok: docker build; clasp --version and a 2-worker run in the image with the profile"
fi
echo "deploy checks done"
