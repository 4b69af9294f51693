#!/usr/bin/env bash
# Checkpoint writes under faults (issue 8), tiny ZAYA1:
#  - ENOSPC while saving step 10 (then a crash at step 12): the run reports the failed write,
#    `latest` still names step 5, which verifies, and no step_00000010 or temporary directory is
#    left where a reader could find it. The same under zaya launch: the supervisor restarts
#    from step 5 and the run finishes bit-identical to an uninterrupted one.
#  - SIGKILL at every point of a save (its start, before each file it writes), synchronous and
#    async: after each kill `latest` verifies and names the step before, and the resumed run
#    ends bit-identical to an uninterrupted one.
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

# Kills inside saves, at every point a save passes: its start (K=0), then before each file it
# writes (K=1..W: the tensor files, the tokenizer copy, the manifest, and `latest` after the
# new directory is in place), each through the injector at a known step of a run that saves
# every step. After each kill `latest` verifies and still names the step before; the run then
# resumes, and after the last kill finishes bit-identical to an uninterrupted run. Synchronous
# and background (async) saves. Kills at random moments in real time: bench/ckpt_kill_soak.sh.
ft_setup "$ZAYA" "$T/k" 20 1
"$ZAYA" train --config "$T/k/run.toml" --out "$T/k/ref" --quiet > "$T/k/ref.log" 2>&1 || { cat "$T/k/ref.log"; fail "kill: reference run"; }
ref_ckpt="$T/k/ref/ckpt/$(cat "$T/k/ref/ckpt/latest")"
W=$(( $(ls "$ref_ckpt" | wc -l) + 1 ))  # the files of a step directory, then `latest`
[ "$W" -ge 4 ] || fail "kill: a save writes only $W files"
for mode in sync async; do
  toml="$T/k/run.toml"
  [ "$mode" = sync ] && toml="$T/k/run-sync.toml"
  out="$T/k/$mode"
  for K in $(seq 0 "$W"); do
    S=$((3 + K))
    spec="kill:rank=0,step=$S,at=checkpoint"
    [ "$K" -gt 0 ] && spec="$spec,nth=$K"
    rc=0
    "$ZAYA" train --config "$toml" --out "$out" --quiet --resume --inject "$spec" > "$T/k/run.log" 2>&1 || rc=$?
    [ "$rc" -eq 137 ] || { cat "$T/k/run.log"; fail "kill $mode K=$K: exit code $rc, expected 137 (SIGKILL)"; }
    grep -q "\"fault\":\"$spec\"" "$out/faults-injected.jsonl" || fail "kill $mode K=$K: $spec did not fire"
    "$ZAYA" ckpt verify "$out/ckpt" > "$T/k/verify.log" 2>&1 ||
      { cat "$T/k/verify.log"; fail "kill $mode K=$K: latest ($(cat "$out/ckpt/latest")) does not verify"; }
    [ "$(cat "$out/ckpt/latest")" = "$(printf 'step_%08d' $((S - 1)))" ] ||
      fail "kill $mode K=$K at step $S: latest is $(cat "$out/ckpt/latest"), expected step $((S - 1))"
  done
  "$ZAYA" train --config "$toml" --out "$out" --quiet --resume > "$T/k/run.log" 2>&1 || { cat "$T/k/run.log"; fail "kill $mode: final resume"; }
  ft_same_weights "$T/k/ref" "$out" "kill-in-save-$mode"
  echo "kill $mode: $((W + 1)) kills, one at each point of a save (start, then before each of $W writes), latest verified after each"
done
echo "ft_ckpt_faults: ENOSPC and kills at every point of a save never leave latest unverifiable"
