#!/usr/bin/env bash
# zaya launch proofs (issue 8): a killed rank, a hung rank (in a step and during a checkpoint
# save) and a corrupted newest checkpoint followed by a crash. Each supervised run must finish
# on its own, log the incident, and end with weights bit-identical (every slice's XXH3 in the
# final manifest) to an uninterrupted run of the same config: a tiny ZAYA1, 30 steps, a
# checkpoint every 5. Faults fire at fixed steps and stages; hangs are judged against the faults
# fired (tests/lib/ft_incidents.py). About 35 s on 2 cores, most of it the hang timeouts.
#   bash tests/ft_recovery.sh <zaya-binary> <build-dir>
ZAYA=${1:?usage: ft_recovery.sh <zaya-binary> <build-dir>}
source "$(dirname "$0")/ft/lib.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ft_setup "$ZAYA" "$T"
"$ZAYA" train --config "$T/run.toml" --out "$T/ref" --quiet > "$T/ref.log" 2>&1 || { cat "$T/ref.log"; fail "reference run"; }

launch() {  # name launch-flags... -- train-flags...
  local name=$1; shift
  timeout 300 "$ZAYA" launch --backoff 0.05 --poll 0.05 --term-grace 2 "$@" > "$T/$name.log" 2>&1 ||
    { cat "$T/$name.log"; fail "$name: supervised run did not finish"; }
  grep -q "launch summary: finished" "$T/$name.log" || { cat "$T/$name.log"; fail "$name: no summary"; }
}
incident() {  # name kind: prints the incident line of that kind
  grep "\"kind\":\"$2\"" "$T/$1/incidents.jsonl" || { cat "$T/$1.log"; fail "$1: no $2 incident"; }
}

# Kill rank 0 before step 12: restart from step 10 (or 5 when the background write of step
# 10's checkpoint had not been committed yet).
launch kill --max-restarts 2 -- --config "$T/run.toml" --out "$T/kill" --quiet --inject kill:rank=0,step=12
i=$(incident kill crash)
echo "$i" | grep -q '"signal":9' || fail "kill: incident does not name SIGKILL: $i"
echo "$i" | grep -q '"step_at_failure":11' || fail "kill: wrong step at failure: $i"
echo "$i" | grep -Eq '"step_resumed_from":(5|10),' || fail "kill: wrong resume step: $i"
echo "$i" | grep -q '"recovered":true' || fail "kill: not recovered: $i"
ft_same_weights "$T/ref" "$T/kill" kill

# Hang in a step (step timeout) and, after the restart, during the save of step 20
# (checkpoint timeout). The verdict follows from the injection (tests/lib/ft_incidents.py):
# each fired hang has exactly one hang incident in its stage at its step, each restart backs
# off twice as long as the one before, and a slow step that a loaded machine made look like
# a hang only adds a restart (there are restarts to spare) and is printed.
# Synchronous checkpoints from here on: the step a checkpoint lands at is then exact.
launch hang --max-restarts 6 --heartbeat-timeout 8 --checkpoint-timeout 10 -- --config "$T/run-sync.toml" \
  --out "$T/hang" --quiet --inject hang:rank=0,step=8 --inject hang:rank=0,step=20,at=checkpoint
"$PY" - "$T/hang" << 'PYEOF' || { cat "$T/hang.log"; fail "hang: the incidents do not match the injected hangs"; }
import sys
sys.path.insert(0, "tests/lib")
from checks import check
from ft_incidents import injected_hangs, main
main([sys.argv[0], sys.argv[1], "--backoff", "0.05"])
by = {f["fault"]: i for f, i in injected_hangs(sys.argv[1])[0]}
check(by["hang:rank=0,step=8"]["step_resumed_from"] == 5, "hang at step 8: not resumed from step 5")
check(by["hang:rank=0,step=20,at=checkpoint"]["step_resumed_from"] == 15, "hang at checkpoint: not resumed from step 15")
PYEOF
grep -q 'stage checkpoint, checkpoint timeout 10.0 s' "$T/hang.log" || fail "hang: the checkpoint timeout did not apply"
grep -q 'stage step, step timeout 8.0 s' "$T/hang.log" || fail "hang: the step timeout did not apply"
ft_same_weights "$T/ref" "$T/hang" hang

# Corrupt the checkpoint of step 20, then crash at step 23: the newest checkpoint fails its
# checksums, the supervisor says so and falls back to step 15.
launch corrupt --max-restarts 2 -- --config "$T/run-sync.toml" --out "$T/corrupt" --quiet \
  --inject corrupt-ckpt:step=20 --inject kill:rank=0,step=23
grep -q 'checkpoint step 20 does not verify' "$T/corrupt.log" || { cat "$T/corrupt.log"; fail "corrupt: no fallback message"; }
i=$(incident corrupt crash)
echo "$i" | grep -q '"step_resumed_from":15' || fail "corrupt: did not fall back to step 15: $i"
echo "$i" | grep -q '"fallback_from":\[{"error"' || fail "corrupt: the incident does not record the fallback: $i"
ft_same_weights "$T/ref" "$T/corrupt" corrupt-ckpt

# Out of restarts: the supervisor gives up, exit 1, the incident says so.
if "$ZAYA" launch --max-restarts 0 --poll 0.05 -- --config "$T/run.toml" --out "$T/giveup" --quiet \
  --inject kill:rank=0,step=3 > "$T/giveup.log" 2>&1; then
  fail "giveup: exited 0 with no restarts left"
fi
grep -q '"gave_up":true' "$T/giveup/incidents.jsonl" || fail "giveup: no gave_up incident"
grep -q 'launch summary: NOT finished' "$T/giveup.log" || fail "giveup: no summary"
echo "ft_recovery: kill, hang (step and checkpoint) and corrupt-checkpoint runs recover bit-identically"
