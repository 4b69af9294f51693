#!/usr/bin/env bash
# zaya launch --np 2 (mpirun, DP=2 with ZeRO-1), tiny ZAYA1, 30 steps: rank 1 runs 8x slow
# and is killed before step 12; the supervisor names rank 1 and its signal, ends the job,
# restarts it from step 10, and the final weights are bit-identical to an uninterrupted DP=2
# run. Rank 1 must be reported as a straggler and rank 0 never: the verdict is on the median
# compute time of each rank's last 8 steps, which every heartbeat carries down to the last
# one ("done"), so no poll can miss it. The compute times are counted, not measured
# (--compute-clock counted: each step's tokens x 1 us, times the injected factor), so the
# verdict follows from the injection whatever the machine's load; the same in real time, a
# sleep against measured compute, is bench/straggler_soak.sh. About 10 s on 2 cores.
#   bash tests/ft_mpi.sh <zaya-binary> <build-dir>
ZAYA=${1:?usage: ft_mpi.sh <zaya-binary> <build-dir>}
source "$(dirname "$0")/ft/lib.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ft_setup "$ZAYA" "$T"
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
timeout 300 "${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$T/run-sync.toml" --out "$T/ref" --quiet > "$T/ref.log" 2>&1 ||
  { cat "$T/ref.log"; fail "reference DP=2 run"; }
timeout 300 "$ZAYA" launch --np 2 --backoff 0.05 --poll 0.05 --max-restarts 2 -- --config "$T/run-sync.toml" \
  --out "$T/ft" --quiet --inject kill:rank=1,step=12 --inject slow:rank=1,factor=8 --compute-clock counted > "$T/ft.log" 2>&1 ||
  { cat "$T/ft.log"; fail "supervised DP=2 run did not finish"; }
grep -q 'mpirun .*-np 2 ' "$T/ft.log" || fail "not launched through mpirun"
i=$(grep '"kind":"crash"' "$T/ft/incidents.jsonl") || { cat "$T/ft.log"; fail "no crash incident"; }
# (the incident also lists every rank: the top-level rank is read as JSON)
"$PY" -c 'import json, sys; sys.exit(json.loads(sys.argv[1])["rank"] != 1)' "$i" || fail "the crash is not attributed to rank 1: $i"
echo "$i" | grep -q '"signal":9' || fail "the crash does not name SIGKILL: $i"
echo "$i" | grep -q '"step_resumed_from":10' || fail "not resumed from step 10: $i"
s=$(grep '"kind":"straggler"' "$T/ft/incidents.jsonl" | grep '"rank":1,') || { cat "$T/ft.log"; fail "rank 1 not reported as a straggler"; }
echo "$s" | grep -Eq '"window_steps":8[,}]' || fail "the straggler report is not on a full window: $s"
# The counted clock: rank 1's median is 8x rank 0's exactly (4 x 32 tokens x 1 us = 128 us).
"$PY" - "$s" <<'PYEOF' || fail "the straggler report does not carry the counted times: $s"
import json, sys
for line in sys.argv[1].splitlines():  # one per attempt
    j = json.loads(line)
    if not (abs(j["compute_s"] - 8 * 128e-6) < 1e-12 and abs(j["median_s"] - 128e-6) < 1e-12 and j["factor"] == 8):
        sys.exit(1)
PYEOF
grep '"kind":"straggler"' "$T/ft/incidents.jsonl" | grep -q '"rank":0,' && fail "rank 0 reported as a straggler"
ft_same_weights "$T/ref" "$T/ft" dp2-kill
echo "ft_mpi: DP=2 kill recovered bit-identically; straggler rank 1 reported"
