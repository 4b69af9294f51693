#!/usr/bin/env bash
# Checkpoint writes under faults (issue 8), tiny ZAYA1:
#  - ENOSPC while saving step 10 (then a crash at step 12): the run reports the failed write,
#    `latest` still names step 5, which verifies, and no step_00000010 or temporary directory is
#    left where a reader could find it. The same under zaya launch: the supervisor restarts
#    from step 5 and the run finishes bit-identical to an uninterrupted one.
#  - kill -9 of the trainer at random moments while it checkpoints every step (20 times):
#    after each kill `latest` verifies, and the next --resume picks up from it.
#   bash tests/ft_ckpt_faults.sh <zaya-binary> <build-dir>
ZAYA=${1:?usage: ft_ckpt_faults.sh <zaya-binary> <build-dir>}
source "$(dirname "$0")/ft/lib.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ft_setup "$ZAYA" "$T"

# ENOSPC on its own: the write fails, training goes on, the crash leaves the disk as it was.
if "$ZAYA" train --config "$T/run-sync.toml" --out "$T/nospace" --quiet --inject enospc:step=10 \
  --inject kill:rank=0,step=12 > "$T/nospace.log" 2>&1; then
  fail "nospace: the run should have been killed at step 12"
fi
grep -q 'No space left on device' "$T/nospace.log" || { cat "$T/nospace.log"; fail "nospace: the failed write is not reported"; }
grep -q 'checkpoint at step 10 failed' "$T/nospace.log" || fail "nospace: the failed save is not reported"
[ "$(cat "$T/nospace/ckpt/latest")" = step_00000005 ] || fail "nospace: latest is $(cat "$T/nospace/ckpt/latest")"
"$ZAYA" ckpt verify "$T/nospace/ckpt" > /dev/null || fail "nospace: latest does not verify"
[ ! -e "$T/nospace/ckpt/step_00000010" ] || fail "nospace: a step_00000010 directory is left"
[ -z "$(ls -A "$T/nospace/ckpt" | grep -v -x -e latest -e 'step_0000000[05]')" ] ||
  fail "nospace: stray entries in the checkpoint root: $(ls -A "$T/nospace/ckpt")"
echo "enospc: reported; latest = step_00000005 verifies; nothing partial left"

"$ZAYA" train --config "$T/run.toml" --out "$T/ref" --quiet > "$T/ref.log" 2>&1 || { cat "$T/ref.log"; fail "reference run"; }
timeout 300 "$ZAYA" launch --backoff 0.05 --poll 0.05 --max-restarts 2 -- --config "$T/run-sync.toml" \
  --out "$T/enospc" --quiet --inject enospc:step=10 --inject kill:rank=0,step=12 > "$T/enospc.log" 2>&1 ||
  { cat "$T/enospc.log"; fail "enospc: supervised run did not finish"; }
grep -q 'No space left on device' "$T/enospc.log" || fail "enospc: the failed write is not reported under launch"
i=$(grep '"kind":"crash"' "$T/enospc/incidents.jsonl") || { cat "$T/enospc.log"; fail "enospc: no crash incident"; }
echo "$i" | grep -q '"step_resumed_from":5,' || fail "enospc: not resumed from step 5: $i"
ft_same_weights "$T/ref" "$T/enospc" enospc

# kill -9 at random moments of a run that checkpoints every step.
ft_setup "$ZAYA" "$T/k9" 100000 1
KILLS=${FT_KILLS:-20}
mid_save=0
for i in $(seq 1 "$KILLS"); do
  rm -f "$T/k9/hb/rank-0.json"
  "$ZAYA" train --config "$T/k9/run.toml" --out "$T/k9/out" --quiet --resume --heartbeat-dir "$T/k9/hb" \
    > "$T/k9/run.log" 2>&1 &
  pid=$!
  # Past start-up (however loaded the machine), then a random moment of training and saving.
  for _ in $(seq 1 600); do grep -q '"stage":"step"' "$T/k9/hb/rank-0.json" 2>/dev/null && break; sleep 0.1; done
  sleep "$(awk -v s="$RANDOM" 'BEGIN {printf "%.3f", (s % 800) / 1000}')"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  ls -A "$T/k9/out/ckpt" 2>/dev/null | grep -q '^\.tmp-' && mid_save=$((mid_save + 1))
  [ -e "$T/k9/out/ckpt/latest" ] || continue
  "$ZAYA" ckpt verify "$T/k9/out/ckpt" > "$T/k9/verify.log" 2>&1 ||
    { cat "$T/k9/verify.log"; fail "kill -9 #$i: latest ($(cat "$T/k9/out/ckpt/latest")) does not verify"; }
done
last=$(cat "$T/k9/out/ckpt/latest" 2>/dev/null) || fail "kill -9: no checkpoint after $KILLS runs"
[ "$mid_save" -ge 1 ] || fail "kill -9: no kill landed during a save (the loop tested nothing)"
echo "kill -9: $KILLS kills ($mid_save during a save), latest verified after each; last $last"
echo "ft_ckpt_faults: ENOSPC and kill -9 during saves never leave latest unverifiable"
