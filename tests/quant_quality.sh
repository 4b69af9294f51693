#!/usr/bin/env bash
# What quantized weights cost a trained model: perplexity on the KJV validation split and
# |delta log-prob| per token, q8_0 and q4_k against the same model's bf16 export.
#
#   bash tests/quant_quality.sh <zaya-binary> <build-dir>            (ctest: the demo model)
#   bash tests/quant_quality.sh <zaya-binary> <build-dir> CKPT DATA WINDOW [TOKENS]
#
# CKPT: a training checkpoint (run dir); DATA: its `zaya prepare` directory (val_000.bin);
# WINDOW: tokens per scored window (the training sequence length); TOKENS: how many
# validation tokens to score (default all). Each window is scored from a fresh context with
# `zaya score --ids`, for the bf16 export, q8_0 and q4_k (quantized from the checkpoint).
# As a test (the demo run, runs/demo, made by `make demo`) it checks the contract's bounds:
# perplexity +0.5% at most for q8_0, +4% for q4_k; without runs/demo it says SKIP.
set -euo pipefail
ZAYA=$(realpath "${1:?usage: quant_quality.sh <zaya-binary> <build-dir> [CKPT DATA WINDOW [TOKENS]]}")
CKPT=${3:-runs/demo}
DATA=${4:-runs/demo/data}
WINDOW=${5:-256}
TOKENS=${6:-0}
CHECK=0
[ $# -le 2 ] && CHECK=1
if [ ! -e "$CKPT" ] || [ ! -s "$DATA/val_000.bin" ]; then
  echo "SKIP: no $CKPT or $DATA/val_000.bin (make demo trains the demo model)"
  exit 0
fi
# A demo stopped before its first checkpoint leaves runs/demo with its data only.
if [ $CHECK = 1 ] && [ ! -e "$CKPT/manifest.json" ] && [ ! -e "$CKPT/latest" ] && [ ! -e "$CKPT/ckpt/latest" ]; then
  echo "SKIP: $CKPT holds no checkpoint yet (make demo trains the demo model)"
  exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$ZAYA" ckpt export-hf "$CKPT" "$T/bf16" --dtype bf16 > /dev/null
for q in q8_0 q4_k; do "$ZAYA" quantize "$CKPT" "$T/$q" --type $q > "$T/$q.log"; echo "$q fallbacks: $(grep -c fallback "$T/$q.log" || true)"; done
python3 - "$DATA/val_000.bin" "$WINDOW" "$TOKENS" "$T" <<'EOF'
import struct, sys
path, window, limit, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = open(path, "rb").read()
assert d[:8] == b"ZAYATOK1", "not a token shard"
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
t, check = sys.argv[1], sys.argv[2] == "1"
lp = {m: [v for line in open(f"{t}/{m}.jsonl") for v in json.loads(line)["logprobs"]] for m in ("bf16", "q8_0", "q4_k")}
ppl = {m: math.exp(-sum(v) / len(v)) for m, v in lp.items()}
print(f"positions {len(lp['bf16'])}; perplexity bf16 {ppl['bf16']:.4f}")
bad = []
for m, bound in (("q8_0", 0.5), ("q4_k", 4.0)):
    d = [abs(a - b) for a, b in zip(lp[m], lp["bf16"])]
    inc = 100 * (ppl[m] / ppl["bf16"] - 1)
    print(f"{m}: perplexity {ppl[m]:.4f} ({inc:+.3f}%), |delta logprob| mean {sum(d)/len(d):.5f} max {max(d):.5f} nats")
    if check and inc > bound:
        bad.append(f"{m} perplexity +{inc:.3f}% exceeds +{bound}%")
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
EOF
