#!/usr/bin/env bash
# The suite under load (a check of the rule that no test depends on timing or the scheduler,
# not a test itself): runs the whole ctest suite of BUILD (as `make test` does) RUNS times in a
# row with BUSY busy loops beside it, samples the load average every minute, and writes
# bench/results/test_under_load-<cpu>.json (tests, failures and wall time per run), rendered
# by scripts/bench_tables.py into docs/reliability.md. Exit status 1 when any run failed.
#   bash bench/test_under_load.sh BUILD [RUNS=5] [BUSY=2]
set -uo pipefail
BUILD=$(realpath "${1:?usage: test_under_load.sh BUILD [runs] [busy loops]}")
RUNS=${2:-5}
BUSY=${3:-2}
cd "$(dirname "$0")/.."
T=$(mktemp -d)
loops=()
cleanup() { for p in "${loops[@]}"; do kill "$p" 2> /dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
for _ in $(seq 1 "$BUSY"); do (while :; do :; done) & loops+=($!); done
for i in $(seq 1 "$RUNS"); do
  (while :; do cut -d' ' -f1 /proc/loadavg >> "$T/load-$i"; sleep 60; done) & sampler=$!
  start=$(date +%s)
  (cd "$BUILD" && OMP_NUM_THREADS=2 ctest --output-on-failure -j 1) > "$T/ctest-$i.log" 2>&1
  wall=$(( $(date +%s) - start ))
  kill "$sampler" 2> /dev/null
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\)/\2/p' "$T/ctest-$i.log")
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\)/\1/p' "$T/ctest-$i.log")
  echo "run $i: ${failed:-?} of ${total:-?} failed, ${wall} s, load $(tr '\n' ' ' < "$T/load-$i")"
  [ "${failed:-1}" = 0 ] || grep -A1 'The following tests FAILED' "$T/ctest-$i.log" | tail -n +2
  printf '%s\t%s\t%s\t%s\n' "${total:-0}" "${failed:--1}" "$wall" "$(tr '\n' ',' < "$T/load-$i")" >> "$T/runs.tsv"
done
python3 - "$T/runs.tsv" "$BUSY" "$RUNS" <<'PYEOF'
import sys
sys.path.insert(0, "bench/peer")
import record
path, busy, runs = sys.argv[1:]
rows = []
for line in open(path):
    total, failed, wall, loads = line.rstrip("\n").split("\t")
    rows.append({"tests": int(total), "failed": int(failed), "wall_s": float(wall),
                 "load_average_per_minute": [float(x) for x in loads.split(",") if x]})
print("record:", record.write("test_under_load", f"bash bench/test_under_load.sh BUILD {runs} {busy}", 2,
                              {"busy_loops": int(busy), "runs": rows}))
sys.exit(0 if all(r["failed"] == 0 for r in rows) else 1)
PYEOF
