#!/usr/bin/env bash
# Straggler detection in real time (a benchmark, not a test): zaya launch --np 2, tiny ZAYA1,
# RUNS supervised runs in which rank 1 sleeps (F-1)x its measured compute time before each
# step. Each run must report rank 1 as a straggler and rank 0 never; prints the measured
# factors and the machine's load. Whether it holds depends on the machine (run-queue waits are
# left out of the compute times, but a busy machine still blurs them): that is why this is
# here, and tests/ft_mpi.sh judges counted compute times instead.
#   bash bench/straggler_soak.sh <zaya-binary> [RUNS=3] [F=8]
set -euo pipefail
ZAYA=$(realpath "${1:?usage: straggler_soak.sh <zaya-binary> [runs] [factor]}")
RUNS=${2:-3}
F=${3:-8}
cd "$(dirname "$0")/.."
source tests/ft/lib.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ft_setup "$ZAYA" "$T"
ok=0
for i in $(seq 1 "$RUNS"); do
  rm -rf "$T/run"
  timeout 600 "$ZAYA" launch --np 2 --poll 0.05 --max-restarts 0 -- --config "$T/run-sync.toml" --out "$T/run" \
    --quiet --inject "slow:rank=1,factor=$F" > "$T/run.log" 2>&1 || { cat "$T/run.log"; fail "run $i did not finish"; }
  r1=$(grep '"kind":"straggler"' "$T/run/incidents.jsonl" | grep '"rank":1,' | head -1 || true)
  r0=$(grep '"kind":"straggler"' "$T/run/incidents.jsonl" | grep -c '"rank":0,' || true)
  factor=$(echo "$r1" | "$PY" -c 'import json, sys; t = sys.stdin.read().strip(); print(json.loads(t)["factor"] if t else "-")')
  verdict=wrong
  [ -n "$r1" ] && [ "$r0" -eq 0 ] && verdict=right && ok=$((ok + 1))
  echo "run $i: rank 1 measured at ${factor}x the median (injected ${F}x), rank 0 reported $r0 times: $verdict (load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "straggler_soak: $ok of $RUNS verdicts right"
[ "$ok" -eq "$RUNS" ]
