#!/usr/bin/env bash
# zaya launch --np 2 hangs (mpirun, DP=2, tiny ZAYA1, 30 steps, synchronous checkpoints every 5):
#   stop      rank 1 is SIGSTOPped before step 8 (it raises SIGSTOP itself): the hang is put on
#             rank 1 (its process is stopped, while rank 0 waits in the step's collective) and
#             the incident lists both ranks' last stages; the restart from step 5 ends
#             bit-identical to an uninterrupted run.
#   block     rank 1 blocks (pause) before step 8: it is idle while rank 0 polls, so rank 1 again.
#   finalize  mpirun is SIGSTOPped while the ranks train: they finish, report done and wait in
#             MPI_Finalize; past --finalize-timeout the job is ended as a hang (exit 3, no
#             restart), the final checkpoint verifies, bit-identical to the uninterrupted run's,
#             and nothing is left running.
# Nothing here depends on speed: faults fire at fixed steps, the script waits for process
# states, each hang incident is matched to the fault that caused it (tests/lib/ft_incidents.py:
# a slow step read as a hang on a loaded machine only adds a restart), and the timeouts only
# bound how long a failing run takes. About 35 s on 2 cores.
#   bash tests/ft_hang_mpi.sh <zaya-binary> <build-dir>
ZAYA=${1:?usage: ft_hang_mpi.sh <zaya-binary> <build-dir>}
source "$(dirname "$0")/ft/lib.sh"
T=$(mktemp -d)
STRAYS=()  # processes this script stopped: killed on the way out whatever happens
cleanup() {
  for p in "${STRAYS[@]}"; do kill -KILL "$p" 2> /dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
ft_setup "$ZAYA" "$T"
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
timeout 300 "${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$T/run-sync.toml" --out "$T/ref" --quiet > "$T/ref.log" 2>&1 ||
  { cat "$T/ref.log"; fail "reference DP=2 run"; }

state() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2> /dev/null || echo gone; }
in_state() { [ "$(state "$1")" = "$2" ]; }
wait_for() {  # what command...: polls until the command succeeds (at most 240 s: a broken run)
  local what=$1; shift
  for _ in $(seq 2400); do "$@" && return 0; sleep 0.1; done
  fail "timed out waiting for $what"
}
# The incident of that kind, checked with Python: rank, the cause's words, every rank's stage.
check_hang() {  # name rank cause-substring expected-stage-of-every-rank
  "$PY" - "$T/$1/incidents.jsonl" "$2" "$3" "$4" << 'PYEOF' || { cat "$T/$1.log"; fail "$1: wrong hang incident"; }
import json, os, sys
sys.path.insert(0, "tests/lib")
from checks import check  # not assert: python3 -O drops those
from ft_incidents import injected_hangs
path, rank, cause, stage = sys.argv[1:]
run = os.path.dirname(path)
if stage == "done":  # mpirun stopped by this script: the one finalisation hang
    hangs = [j for j in map(json.loads, open(path)) if j["kind"] == "hang" and j["stage"] == "finalize"]
    check(len(hangs) == 1, f"{len(hangs)} finalisation hang incidents")
    h = hangs[0]
else:  # the incident of the injected fault; others (slow steps read as hangs) are printed
    pairs, extra = injected_hangs(run)
    check(len(pairs) == 1, f"{len(pairs)} injected hangs")
    h = pairs[0][1]
    for e in extra:
        print("a hang incident beyond the injected one:", json.dumps(e))
print("incident:", json.dumps(h))
check(h["rank"] == (None if rank == "null" else int(rank)), f"rank {h['rank']}, expected {rank}")
check(cause in h["cause"], f"cause {h['cause']!r} lacks {cause!r}")
check([r["rank"] for r in h["ranks"]] == [0, 1], "not every rank listed")
for r in h["ranks"]:
    check(r["stage"] == stage or (stage == "any" and r["stage"]), f"rank {r['rank']} stage {r['stage']}")
PYEOF
}
launch() {  # name launch-flags... -- train-flags...: a supervised run that must finish
  local name=$1; shift
  timeout 300 "$ZAYA" launch --np 2 --backoff 0.05 --poll 0.05 --term-grace 5 "$@" > "$T/$name.log" 2>&1 ||
    { cat "$T/$name.log"; fail "$name: supervised run did not finish"; }
}

# stop: SIGSTOP of rank 1.
launch stop --max-restarts 4 --heartbeat-timeout 10 -- --config "$T/run-sync.toml" --out "$T/stop" --quiet \
  --inject stop:rank=1,step=8
check_hang stop 1 "stopped" step
grep -q '"step_resumed_from":5' "$T/stop/incidents.jsonl" || fail "stop: not resumed from step 5"
ft_same_weights "$T/ref" "$T/stop" stop

# block: rank 1 blocked outside any collective.
launch block --max-restarts 4 --heartbeat-timeout 10 -- --config "$T/run-sync.toml" --out "$T/block" --quiet \
  --inject hang:rank=1,step=8
check_hang block 1 "idle while rank(s) 0 poll" step
ft_same_weights "$T/ref" "$T/block" block

# finalize: mpirun stopped mid-run. Rank 1 stops itself at step 20 so that the ranks are
# surely still training when mpirun is stopped; it goes on once mpirun is.
timeout 300 "$ZAYA" launch --np 2 --poll 0.05 --term-grace 5 --heartbeat-timeout 120 --finalize-timeout 3 -- \
  --config "$T/run-sync.toml" --out "$T/fin" --quiet --inject stop:rank=1,step=20 > "$T/fin.log" 2>&1 &
LAUNCH=$!
hb1="$T/fin/heartbeat/rank-1.json"
rank1_pid() { [ -s "$hb1" ] && "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["pid"])' "$hb1" 2> /dev/null; }
have_rank1() { rank1_pid > /dev/null; }
wait_for "rank 1's heartbeat" have_rank1
R1=$(rank1_pid)
STRAYS+=("$R1")
wait_for "rank 1 to stop itself" in_state "$R1" T
# $LAUNCH is timeout; zaya launch is its child, mpirun the child of that.
MPI=$(pgrep -P "$(pgrep -P "$LAUNCH")") || fail "finalize: no mpirun under zaya launch"
[ "$(echo "$MPI" | wc -l)" -eq 1 ] || fail "finalize: more than one child of zaya launch: $MPI"
grep -q mpirun "/proc/$MPI/cmdline" || fail "finalize: $MPI is not mpirun: $(tr '\0' ' ' < "/proc/$MPI/cmdline")"
STRAYS+=("$MPI")
kill -STOP "$MPI"
wait_for "mpirun to stop" in_state "$MPI" T
kill -CONT "$R1"
rc=0
wait "$LAUNCH" || rc=$?
[ "$rc" -eq 3 ] || { cat "$T/fin.log"; fail "finalize: zaya launch exited $rc, expected 3 (hung in finalisation)"; }
check_hang fin null "is stopped" done
grep -q '"stage":"finalize"' "$T/fin/incidents.jsonl" || fail "finalize: the incident's stage is not finalize"
grep -q '"final_checkpoint":30' "$T/fin/incidents.jsonl" || fail "finalize: no verified final checkpoint recorded"
grep -q 'launch summary: finished, but the job hung in finalisation; 1 attempt' "$T/fin.log" ||
  { cat "$T/fin.log"; fail "finalize: restarted, or no summary"; }
"$ZAYA" ckpt verify "$T/fin/ckpt/step_00000030" > "$T/verify.log" 2>&1 || { cat "$T/verify.log"; fail "finalize: final checkpoint"; }
ft_same_weights "$T/ref" "$T/fin" finalize
for p in "$MPI" "$R1"; do
  [ "$(state "$p")" = gone ] || [ "$(state "$p")" = Z ] || fail "finalize: process $p left running ($(state "$p"))"
done
echo "ft_hang_mpi: a stopped and a blocked rank 1 are blamed, every rank's stage recorded; a stopped mpirun ends as a finalisation hang"
