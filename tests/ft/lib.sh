# Shared by tests/ft_*.sh and bench/fault_soak.sh (sourced, not a test): a tiny ZAYA1 on
# the KJV sample, 4 x 32 tokens per step, a checkpoint every 5 steps.
#   ft_setup <zaya> <dir> [steps] [interval]   prepares data, writes <dir>/run.toml (async
#                                   checkpoints) and <dir>/run-sync.toml (synchronous ones)
#   ft_same_weights A B             every tensor slice checksum of the two final checkpoints equal,
#                                   and every value finite (two runs that blew up to the same NaNs
#                                   have equal checksums: `zaya ckpt diff --tol 0` fails on any NaN)
set -euo pipefail
# One thread per process whatever the caller set (FT_OMP_NUM_THREADS overrides): on a loaded
# 2-core machine an oversubscribed OpenMP team turns a 3 ms step into seconds now and then,
# which the hang timeouts would read as hangs; these runs prove supervision, not kernels.
export OMP_NUM_THREADS=${FT_OMP_NUM_THREADS:-1} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=${ZAYA_PYTHON:-/usr/bin/python3}

fail() { echo "FAIL: $*" >&2; exit 1; }

ft_setup() {
  local zaya=$1 dir=$2 steps=${3:-30} interval=${4:-5}
  FT_ZAYA=$zaya  # ft_same_weights' finiteness check runs it
  mkdir -p "$dir"
  [ -f "$dir/data/meta.json" ] ||
    "$zaya" prepare --input tests/data/kjv_sample.txt --out "$dir/data" --vocab-size 320 > "$dir/prepare.log" 2>&1 ||
    { cat "$dir/prepare.log"; fail "zaya prepare"; }
  cat > "$dir/run.toml" <<TOML
[run]
name = "ft"
out_dir = "$dir/default-out"
seed = 3

[model]
name = "ft-tiny"
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
dir = "$dir/data"

[[phases]]
name = "base"
tokens = $((steps * 4 * 32))
seq_len = 32
rope_theta = 10000.0

[batch]
global_batch = 4
micro_batch = 2

[optimizer]
kind = "adamw"
lr = 3e-3
grad_clip = 1.0

[schedule]
kind = "cosine"
warmup_steps = 3

[balancing]
method = "bias_adamw"
lr = 1e-2

[eval]
interval = 0
windows = 4
batch = 2

[checkpoint]
interval = $interval
keep_last = 3

[log]
interval = 10
TOML
  sed 's/^keep_last = 3$/keep_last = 3\nasync = false/' "$dir/run.toml" > "$dir/run-sync.toml"
}

# Slice checksums (name, start, xxh3) of the checkpoint `latest` names under a run's out dir.
ft_checksums() {
  "$PY" - "$1" <<'PYEOF'
import json, os, sys
root = os.path.join(sys.argv[1], "ckpt")
step = open(os.path.join(root, "latest")).read().strip()
m = json.load(open(os.path.join(root, step, "manifest.json")))
print("step", m["step"])
for t in m["tensors"]:
    for s in t["slices"]:
        print(t["name"], s["start"], s["xxh3"])
PYEOF
}

ft_same_weights() {  # out_a out_b what
  local a b
  a=$(ft_checksums "$1") || fail "$3: no final checkpoint under $1"
  b=$(ft_checksums "$2") || fail "$3: no final checkpoint under $2"
  [ "$(echo "$a" | wc -l)" -gt 10 ] || fail "$3: too few tensors"
  if [ "$a" != "$b" ]; then
    diff <(echo "$a") <(echo "$b") | head -5 >&2
    fail "$3: final weights differ from the reference run"
  fi
  "${FT_ZAYA:?ft_setup first}" ckpt diff "$1" "$2" --tol 0 > "$2/ckpt-diff.txt" 2>&1 ||
    { tail -3 "$2/ckpt-diff.txt" >&2; fail "$3: final weights are not finite (or differ)"; }
  echo "$3: final checkpoint bit-identical to the reference ($(echo "$a" | head -1), $(($(echo "$a" | wc -l) - 1)) slices)"
}
