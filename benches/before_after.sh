#!/usr/bin/env bash
# Used for "Before and after the architecture change" in benches/README.md.
# Alternated before/after benchmark runs: $1 = old binary, $2 = new binary, $3 = out dir, $4 = runs
set -u
OLD=$1; NEW=$2; OUT=$3; N=${4:-5}
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
  for side in old new; do
    B=$OLD; [ "$side" = new ] && B=$NEW
    "$B" bench ring --json --impls shmring,rtrb --sizes 64,1024 --repetitions 1 >> "$OUT/ring_$side.jsonl" 2>>"$OUT/err.log"
    "$B" bench dispatch --local --json --repetitions 1 >> "$OUT/local_$side.jsonl" 2>>"$OUT/err.log"
    "$B" bench dispatch --remote --json --repetitions 1 --remote-requests 500000 >> "$OUT/remote_$side.jsonl" 2>>"$OUT/err.log"
  done
  echo "round $i done $(date +%T)"
done
