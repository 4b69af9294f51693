#!/usr/bin/env bash
# What quantized weights cost a trained model: perplexity on the KJV validation split and
# |delta log-prob| per token, q8_0 and q4_k against the same model's bf16 export.
#
#   bash tests/quant_quality.sh <zaya-binary> <build-dir>            (ctest: a model trained here)
#   bash tests/quant_quality.sh <zaya-binary> <build-dir> CKPT DATA WINDOW [TOKENS]
#
# CKPT: a training checkpoint (run dir); DATA: its `zaya prepare` directory (val_000.bin);
# WINDOW: tokens per scored window (the training sequence length); TOKENS: how many
# validation tokens to score (default all). Each window is scored from a fresh context with
# `zaya score --ids`, for the bf16 export, q8_0 and q4_k (quantized from the checkpoint).
# As a test (two arguments) it trains its own model first: a ZAYA1 of hidden size 256 (so
# q4_k's 256-wide super-blocks cover every hidden-input matrix) on tests/data/kjv_sample.txt,
# about a minute on 2 cores, and checks the contract's bounds: perplexity +0.5% at most for
# q8_0, +4% for q4_k, every log-prob finite, both formats moving some log-prob (a quantizer
# that wrote bf16 would pass the bounds), and the model trained (perplexity < 1/4 of the vocab).
set -euo pipefail
ZAYA=$(realpath "${1:?usage: quant_quality.sh <zaya-binary> <build-dir> [CKPT DATA WINDOW [TOKENS]]}")
fail() { echo "quant_quality: FAIL: $*" >&2; exit 1; }
if [ $# -le 2 ]; then
  CHECK=1 WINDOW=64 TOKENS=1024  # 16 windows of the 2 held-out documents
  W=$(realpath -m "${2:?usage: quant_quality.sh <zaya-binary> <build-dir>}/quant_quality")
  rm -rf "$W" && mkdir -p "$W"
  export OMP_NUM_THREADS=1 ZAYA_LOG=error  # one thread: on a loaded machine a team of 2 waits in barriers
  "$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$W/data" --vocab-size 320 --val-fraction 0.15 >"$W/prepare.log" 2>&1 ||
    { cat "$W/prepare.log"; fail "prepare"; }
  cat >"$W/run.toml" <<TOML
[run]
name = "quant-quality"
out_dir = "$W/run"
seed = 1
[model]
name = "quant-quality"
model_type = "zaya"
hidden_size = 256
vocab_size = 320
num_attention_heads = 8
cca_num_q_heads = 4
num_query_groups_list = 2
zaya_layers = ["a", 4, "a", 4]
ffn_hidden_size_list = 512
zaya_mlp_expansion = 32
moe_router_topk = 1
zaya_use_mod = true
zaya_use_eda = true
partial_rotary_factor = 0.5
max_position_embeddings = 256
[[data.sources]]
name = "kjv"
dir = "$W/data"
[[phases]]
name = "base"
tokens = 65_536
seq_len = 64
[batch]
global_batch = 16
micro_batch = 16
[optimizer]
kind = "muon"
lr = 1e-2
grad_clip = 1.0
[schedule]
kind = "cosine"
warmup_steps = 10
min_lr_ratio = 0.1
[balancing]
method = "bias_adamw"
lr = 1e-2
[eval]
interval = 0
windows = 4
batch = 4
[checkpoint]
interval = 1000
TOML
  "$ZAYA" train --config "$W/run.toml" --quiet >"$W/train.log" 2>&1 || { cat "$W/train.log"; fail "train"; }
  CKPT=$W/run DATA=$W/data
else
  CHECK=0
  CKPT=${3:?CKPT} DATA=${4:?DATA} WINDOW=${5:?WINDOW} TOKENS=${6:-0}
fi
[ -e "$CKPT" ] || fail "no checkpoint $CKPT"
[ -s "$DATA/val_000.bin" ] || fail "no validation shard $DATA/val_000.bin"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$ZAYA" ckpt export-hf "$CKPT" "$T/bf16" --dtype bf16 > /dev/null
for q in q8_0 q4_k; do "$ZAYA" quantize "$CKPT" "$T/$q" --type $q > "$T/$q.log"; echo "$q fallbacks: $(grep -c fallback "$T/$q.log" || true)"; done
python3 - "$DATA/val_000.bin" "$WINDOW" "$TOKENS" "$T" <<'EOF'
import struct, sys
sys.path.insert(0, "tests/lib")
from checks import check
path, window, limit, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = open(path, "rb").read()
check(d[:8] == b"ZAYATOK1", f"{path}: not a token shard")
n = struct.unpack_from("<Q", d, 16)[0]
toks = struct.unpack_from(f"<{n}I", d, 64)
if limit: toks = toks[:limit]
k = 0
for i in range(0, len(toks) - 1, window):
    w = toks[i:i + window + 1]  # window + 1 ids: `window` predictions
    if len(w) < 2: break
    open(f"{out}/w{k:05d}.ids", "w").write(" ".join(map(str, w)))
    k += 1
print(f"{len(toks)} validation tokens in {k} windows of {window}")
EOF
for m in bf16 q8_0 q4_k; do
  for f in "$T"/w*.ids; do "$ZAYA" score --model "$T/$m" --ids "$f" --json; done > "$T/$m.jsonl"
done
python3 - "$T" "$CHECK" <<'EOF'
import json, math, sys
sys.path.insert(0, "tests/lib")
from checks import finite_max, within
t, check = sys.argv[1], sys.argv[2] == "1"
lp = {m: [v for line in open(f"{t}/{m}.jsonl") for v in json.loads(line)["logprobs"]] for m in ("bf16", "q8_0", "q4_k")}
bad = [f"{m}: {len(v)} log-probs, {len(lp['bf16'])} for bf16" for m, v in lp.items() if len(v) != len(lp["bf16"])]
bad += [f"{m}: a log-prob is NaN, infinite or missing" for m, v in lp.items() if not v or finite_max(v) == math.inf]
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
ppl = {m: math.exp(-sum(v) / len(v)) for m, v in lp.items()}
print(f"positions {len(lp['bf16'])}; perplexity bf16 {ppl['bf16']:.4f}")
if check and not ppl["bf16"] < 320 / 4:
    bad.append(f"bf16 perplexity {ppl['bf16']:.2f}: the model did not train (uniform is 320)")
for m, bound in (("q8_0", 0.5), ("q4_k", 4.0)):
    d = [abs(a - b) for a, b in zip(lp[m], lp["bf16"])]  # all finite: checked above
    inc = 100 * (ppl[m] / ppl["bf16"] - 1)
    print(f"{m}: perplexity {ppl[m]:.4f} ({inc:+.3f}%), |delta logprob| mean {sum(d)/len(d):.5f} max {max(d):.5f} nats")
    if check and not within(inc, bound):  # `inc > bound` is False for NaN
        bad.append(f"{m} perplexity {inc:+.3f}% exceeds +{bound}%")
    if check and not max(d) > 0:
        bad.append(f"{m}: no log-prob moved; the weights were not quantized")
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
EOF
