#!/usr/bin/env bash
# Trainer-side anomaly handling (issue 8), tiny ZAYA1, 30 steps, a checkpoint every 5:
#  - NaN in the gradients at step 4: the update is skipped, logged and counted; the run
#    finishes and equals (bit for bit) a run told to skip step 4's data (--skip-steps 4:4).
#  - A gradient-norm spike (gradients x 1000 at step 15) with the z-score detector on (window 10): the
#    step is skipped; equals --skip-steps 15:15. The same run with the detector off differs.
#    With a kill at step 17 under launch, the restarted run still catches a spike at step 19
#    (the window is refilled from metrics.jsonl) and equals --skip-steps 19:19.
#  - K = 3 consecutive NaN steps (16, 17, 18) under zaya launch: the trainer exits 17, the
#    supervisor rolls back to step 15, skips the window 16-18 and records it; the result equals
#    --skip-steps 16:18.
#   bash tests/ft_anomaly.sh <zaya-binary> <build-dir>
ZAYA=${1:?usage: ft_anomaly.sh <zaya-binary> <build-dir>}
source "$(dirname "$0")/ft/lib.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ft_setup "$ZAYA" "$T"
train() {  # name flags...
  local name=$1; shift
  "$ZAYA" train --config "$T/run.toml" --out "$T/$name" --quiet "$@" > "$T/$name.log" 2>&1 ||
    { cat "$T/$name.log"; fail "$name: run failed"; }
}

# Anomalies of the loss and gradients, one line each: ft_setup's tiny model routes every token
# to one expert (bias_adamw at lr 1e-2), so the router-health detector adds router_collapse
# warnings to the same file, which these counts leave out (tests/routing_health.sh checks them).
loss_anomalies() { grep -v '"kind":"router_collapse"' "$1" | grep -c . || true; }

train skip4 --skip-steps 4:4
ZAYA_INJECT="nan:step=4" train nan  # the environment variable, same syntax as --inject
grep -q '"step":4,"time"' "$T/nan/faults-injected.jsonl" || fail "nan: not injected"
grep -q 'anomaly: step 4: nonfinite' "$T/nan.log" || { cat "$T/nan.log"; fail "nan: not logged"; }
[ "$(loss_anomalies "$T/nan/anomalies.jsonl")" -eq 1 ] || fail "nan: anomalies.jsonl should count 1 anomaly"
grep -q '"skipped":true' <(grep '"step":4,' "$T/nan/metrics.jsonl") || fail "nan: step 4 not marked skipped in metrics"
ft_same_weights "$T/skip4" "$T/nan" nan

train skip15 --skip-steps 15:15
train spike --anomaly-zscore 20 --anomaly-window 10 --inject spike:step=15,factor=1000
grep -q '"kind":"grad_norm_spike"' "$T/spike/anomalies.jsonl" || { cat "$T/spike.log"; fail "spike: not detected"; }
[ "$(loss_anomalies "$T/spike/anomalies.jsonl")" -eq 1 ] || { cat "$T/spike/anomalies.jsonl"; fail "spike: false positives"; }
ft_same_weights "$T/skip15" "$T/spike" spike
train spike_off --inject spike:step=15,factor=1000
[ "$(ft_checksums "$T/spike_off")" != "$(ft_checksums "$T/skip15")" ] || fail "spike_off: a spike without the detector changed nothing (the test cannot fail)"

# Detector on across a restart: killed before step 17, resumed from 15, the window refilled
# from metrics.jsonl catches the spike at step 19 as the uninterrupted run would.
train skip19 --skip-steps 19:19
timeout 300 "$ZAYA" launch --backoff 0.05 --poll 0.05 -- --config "$T/run-sync.toml" --out "$T/spike_restart" --quiet \
  --anomaly-zscore 20 --anomaly-window 10 --inject kill:rank=0,step=17 --inject spike:step=19,factor=1000 \
  > "$T/spike_restart.log" 2>&1 || { cat "$T/spike_restart.log"; fail "spike_restart: supervised run did not finish"; }
grep -q '"step_resumed_from":15' "$T/spike_restart/incidents.jsonl" || fail "spike_restart: no restart from step 15"
grep -q '"kind":"grad_norm_spike","loss":[0-9.e+-]*,"step":19' "$T/spike_restart/anomalies.jsonl" ||
  { cat "$T/spike_restart/anomalies.jsonl"; fail "spike_restart: the spike after the restart was not caught"; }
ft_same_weights "$T/skip19" "$T/spike_restart" spike-after-restart

train skip16_18 --skip-steps 16:18
# Synchronous checkpoints: step 15's is then committed before the anomalies start.
timeout 300 "$ZAYA" launch --backoff 0.05 --poll 0.05 -- --config "$T/run-sync.toml" --out "$T/kseq" --quiet \
  --anomaly-max-consecutive 3 --inject nan:step=16 --inject nan:step=17 --inject nan:step=18 > "$T/kseq.log" 2>&1 ||
  { cat "$T/kseq.log"; fail "kseq: supervised run did not finish"; }
grep -q 'exits\|aborting the run' "$T/kseq.log" || { cat "$T/kseq.log"; fail "kseq: no abort"; }
i=$(grep '"kind":"anomalies"' "$T/kseq/incidents.jsonl") || { cat "$T/kseq.log"; fail "kseq: no anomalies incident"; }
echo "$i" | grep -q '"exit_code":17' || fail "kseq: exit code is not 17: $i"
echo "$i" | grep -q '"skip_window":\[16,18\]' || fail "kseq: skip window not recorded: $i"
echo "$i" | grep -q '"step_resumed_from":15' || fail "kseq: not rolled back to step 15: $i"
grep -q -- '--skip-steps 16:18' "$T/kseq.log" || fail "kseq: the restart did not pass --skip-steps 16:18"
ft_same_weights "$T/skip16_18" "$T/kseq" k-consecutive
echo "ft_anomaly: NaN, spike and K-consecutive rollback runs match the runs that skip the same steps"
