#!/usr/bin/env bash
# Routing health (docs/train.md "Routing health"): a tiny ZAYA1 (2 MoE layers of 4 experts +
# the skip class, EDA, Muon, the demo recipe's balancing: bias_sign at 5e-3 with follow_mean)
# on the KJV sample, 60 steps of 32 x 32 tokens, one OpenMP thread (deterministic):
#  - at every step after 20, every MoE layer's normalised load entropy is >= 0.8 and its skip
#    share <= 0.5 (the issue's target; this model's lowest is 0.87);
#  - the same run without follow_mean (the biases chase the drift of the router's scores at
#    the feedback rate alone) falls below 0.8 after step 20 (its lowest is 0.06): the bar
#    can fail;
#  - [anomaly] router_min_entropy = 1 (a bar no sampled load meets) with router_steps = 5: the
#    alarm after 5 steps is a warning on stderr, a `router_health` record in metrics.jsonl and
#    a router_collapse line in anomalies.jsonl, and the run finishes;
#  - the same with router_rollback = true under zaya launch: the trainer exits 17 at step 5,
#    the incident names router_collapse with the streak 1-5 as its skip window.
#   bash tests/routing_health.sh <zaya-binary> <build-dir>
ZAYA=${1:?usage: routing_health.sh <zaya-binary> <build-dir>}
source "$(dirname "$0")/ft/lib.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$T/data" --vocab-size 320 > "$T/prepare.log" 2>&1 ||
  { cat "$T/prepare.log"; fail "zaya prepare"; }
config() {  # out_dir follow_mean [anomaly lines...]
  local out=$1 follow=$2; shift 2
  cat <<TOML
[run]
name = "routing"
out_dir = "$out"
seed = 5

[model]
name = "routing-tiny"
model_type = "zaya"
hidden_size = 32
vocab_size = 320
num_attention_heads = 4
cca_num_q_heads = 4
num_query_groups_list = 2
zaya_layers = ["a", 4, "a", 4]
ffn_hidden_size_list = 48
zaya_mlp_expansion = 16
moe_router_topk = 1
zaya_use_mod = true
zaya_use_eda = true
partial_rotary_factor = 0.5
rope_theta = 10000.0
max_position_embeddings = 512

[[data.sources]]
name = "kjv"
dir = "$T/data"

[[phases]]
name = "base"
tokens = $((60 * 32 * 32))
seq_len = 32
rope_theta = 10000.0

[batch]
global_batch = 32
micro_batch = 8

[optimizer]
kind = "muon"
lr = 4e-3
weight_decay = 0.1
grad_clip = 1.0
router_lr_scale = 0.1

[schedule]
kind = "cosine"
warmup_steps = 10
min_lr_ratio = 0.1

[balancing]
method = "bias_sign"
sign_rate = 5e-3
follow_mean = $follow

[eval]
interval = 0
windows = 4
batch = 4

[checkpoint]
interval = 0
keep_last = 2
async = false

[log]
interval = 10
TOML
  [ $# -eq 0 ] || { echo "[anomaly]"; printf '%s\n' "$@"; }
}

# 1. A healthy run: the bounds at every step after 20; without follow_mean they fail.
health() {  # name: 0 when every layer keeps the bounds at every step after 20
  "$PY" - "$T/$1/metrics.jsonl" "$1" <<'PYEOF'
import json, math, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step"]
assert len(steps) == 60, f"{len(steps)} step records, expected 60"
bad, worst_e, worst_s = [], 1.0, 0.0
for r in steps:
    assert len(r["layers"]) == 2, r["layers"]
    for l, ld in enumerate(r["layers"]):
        e, s = ld["entropy"], ld["skip"]
        if r["step"] <= 20:
            continue
        worst_e, worst_s = min(worst_e, e), max(worst_s, s)
        # `not (e >= 0.8)` also catches NaN
        if not (e >= 0.8) or not (s <= 0.5) or not math.isfinite(e) or not math.isfinite(s):
            bad.append((r["step"], l, round(e, 3), round(s, 3)))
print(f"{sys.argv[2]}: steps 21-60: min entropy {worst_e:.3f}, max skip {worst_s:.3f}; step 2 entropies "
      + ", ".join(f"{l['entropy']:.3f}" for l in steps[1]["layers"]))
if bad:
    print(f"{sys.argv[2]}: below the bounds (step, layer, entropy, skip):", bad[:6])
    sys.exit(1)
PYEOF
}
config "$T/healthy" true > "$T/healthy.toml"
"$ZAYA" train --config "$T/healthy.toml" --quiet > "$T/healthy.log" 2>&1 || { cat "$T/healthy.log"; fail "healthy: run failed"; }
health healthy || fail "healthy: routing collapsed"
if grep -q '"type":"router_health"' "$T/healthy/metrics.jsonl"; then fail "healthy: a router_health alarm in a healthy run"; fi
config "$T/chase" false > "$T/chase.toml"
"$ZAYA" train --config "$T/chase.toml" --quiet > "$T/chase.log" 2>&1 || { cat "$T/chase.log"; fail "chase: run failed"; }
if health chase; then fail "chase: without follow_mean the bounds hold (the check cannot tell)"; fi

# 2. The alarm: a warning, a metrics record, an anomalies line; the run goes on.
config "$T/alarm" true "router_min_entropy = 1.0" "router_steps = 5" > "$T/alarm.toml"
"$ZAYA" train --config "$T/alarm.toml" --steps 12 --quiet > "$T/alarm.log" 2>&1 || { cat "$T/alarm.log"; fail "alarm: run failed"; }
grep -q 'step 5: MoE layer 0 routing unhealthy for 5 steps (since step 1)' "$T/alarm.log" ||
  { cat "$T/alarm.log"; fail "alarm: no warning at step 5"; }
grep -q '"layer":0,.*"state":"collapsed"\|"state":"collapsed".*"layer":0' <(grep '"type":"router_health"' "$T/alarm/metrics.jsonl") ||
  { cat "$T/alarm/metrics.jsonl" | head -8; fail "alarm: no router_health record"; }
"$PY" - "$T/alarm/metrics.jsonl" "$T/alarm/anomalies.jsonl" <<'PYEOF' || fail "alarm: records"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
health = [r for r in recs if r.get("type") == "router_health"]
assert [(r["step"], r["layer"], r["since"], r["steps"]) for r in health] == [(5, 0, 1, 5), (5, 1, 1, 5)], health
assert max(r["step"] for r in recs if r.get("type") == "step") == 12
an = [json.loads(l) for l in open(sys.argv[2])]
assert [(a["step"], a["kind"], a["verdict"]) for a in an] == [(5, "router_collapse", "warn")], an
print("alarm: router_health records at step 5 for both layers, anomalies.jsonl:", an[0]["router"])
PYEOF

# 3. Rollback under the supervisor: exit 17 at step 5, window 1-5, no checkpoint before it.
config "$T/rollback" true "router_min_entropy = 1.0" "router_steps = 5" "router_rollback = true" > "$T/rollback.toml"
set +e
timeout 300 "$ZAYA" launch --max-restarts 1 --backoff 0.05 --poll 0.05 -- --config "$T/rollback.toml" --steps 12 --quiet \
  > "$T/rollback.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { cat "$T/rollback.log"; fail "rollback: an unreachable bar cannot finish under rollback"; }
i=$(grep -m1 '"kind":"anomalies"' "$T/rollback/incidents.jsonl") || { cat "$T/rollback.log"; fail "rollback: no anomalies incident"; }
echo "$i" | grep -q '"exit_code":17' || fail "rollback: exit code is not 17: $i"
echo "$i" | grep -q '"anomaly":"router_collapse"' || fail "rollback: incident does not name router_collapse: $i"
echo "$i" | grep -q '"skip_window":\[1,5\]' || fail "rollback: skip window is not the streak 1-5: $i"
grep -q 'routing collapsed' "$T/rollback.log" || { cat "$T/rollback.log"; fail "rollback: no abort message"; }
echo "rollback: $i"
echo "routing_health: OK"
