#!/usr/bin/env bash
# `make demo`: a real pretraining run in a few minutes on a laptop-class CPU.
#
#   bash scripts/demo.sh [path/to/zaya]        (from the repository root)
#
# 1. extracts the King James Bible (Debian's bible-kjv) as plain text (scripts/corpus.sh)
# 2. `zaya prepare`: trains a 2048-piece SentencePiece BPE tokenizer, writes token shards
# 3. `zaya train --config configs/recipes/demo.toml`: a small ZAYA1 (CCA attention, MoE with
#    the ZAYA1 router and bias balancing, Muon) in two phases (context 128 at RoPE base 10K,
#    then 256 at 100K)
# 4. `zaya generate`: a sample from the final checkpoint
# 5. scripts/plot_metrics.py: runs/demo/loss.png (+ lr, throughput, expert load)
# 6. the final validation loss next to the unigram entropy of the corpus (same tokenizer)
# 7. zaya eval of the model on the KJV tasks (verse completion, last word) and the table; the
#    trained model must beat chance on verse completion by >= 5 stderr, the untrained one not
set -euo pipefail
ZAYA=${1:-build/zaya}
OUT=runs/demo
CONFIG=configs/recipes/demo.toml
[ -x "$ZAYA" ] || { echo "demo: $ZAYA is not an executable (build first: make build)" >&2; exit 1; }
PY=python3
if /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; then PY=/usr/bin/python3; fi
mkdir -p "$OUT"

echo "== 1. corpus"
[ -s "$OUT/kjv.txt" ] || bash scripts/corpus.sh "$OUT/kjv.txt"

echo "== 2. tokenizer and token shards"
if [ ! -s "$OUT/data/meta.json" ] || [ ! -s "$OUT/data/tokenizer.model" ]; then
  "$ZAYA" prepare --input "$OUT/kjv.txt" --out "$OUT/data" --vocab-size 2048
else
  echo "(reusing $OUT/data)"
fi

echo "== 3. train ($CONFIG)"
rm -rf "$OUT/ckpt" "$OUT/metrics.jsonl"
start=$(date +%s)
"$ZAYA" train --config "$CONFIG"
train_s=$(( $(date +%s) - start ))

echo "== 4. sample"
"$ZAYA" generate --ckpt "$OUT" --prompt "And God said" --max-tokens 80 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1

echo "== 5. plots"
if ! "$PY" scripts/plot_metrics.py "$OUT/metrics.jsonl" "$OUT" --title "demo" \
     --unigram "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["train_unigram_entropy_nats"])' "$OUT/data/meta.json")"; then
  echo "demo: plotting failed (python3-matplotlib missing?)" >&2
fi

echo "== 6. summary"
"$PY" - "$OUT/metrics.jsonl" "$OUT/data/meta.json" "$train_s" <<'PYEOF'
import json, statistics, sys
steps, evals = [], []
for line in open(sys.argv[1]):
    r = json.loads(line)
    (steps if r.get("type") == "step" else evals if r.get("type") == "eval" else []).append(r)
meta = json.load(open(sys.argv[2]))
uni, uni_val = meta["train_unigram_entropy_nats"], meta["val_unigram_cross_entropy_nats"]
first, last = steps[0], steps[-1]
final_val = evals[-1]["val_loss"]
tps = statistics.median(r["tokens_per_s"] for r in steps)
print(f"steps {last['step']}, {last['tokens']:,} tokens in {sys.argv[3]} s (median {tps:,.0f} tokens/s)")
print(f"train loss           {first['loss']:.3f} (step 1) -> {last['loss']:.3f} (step {last['step']}) nats/token")
print(f"validation loss      {evals[0]['val_loss']:.3f} (step {evals[0]['step']}) -> {final_val:.3f} (step {evals[-1]['step']}) nats/token, perplexity {evals[-1]['val_ppl']:.1f}")
print(f"unigram entropy      {uni:.3f} nats/token (train split, same tokenizer); val under the train unigram {uni_val:.3f}")
print(f"final val loss is {uni - final_val:.3f} nats/token below the unigram entropy"
      if final_val < uni else f"final val loss is NOT below the unigram entropy ({final_val:.3f} >= {uni:.3f})")
print("loss curve: runs/demo/loss.png")
PYEOF

echo "== 7. downstream eval: zaya eval on the KJV tasks (scripts/kjv_tasks.py, tests/data/eval/kjv)"
# One thread: this model's products are too small to share (docs/eval.md).
KJV_TASKS="--task-file tests/data/eval/kjv/kjv_verse.json --task-file tests/data/eval/kjv/kjv_word.json"
OMP_NUM_THREADS=1 "$ZAYA" eval --ckpt "$OUT" $KJV_TASKS --output "$OUT/eval.json" --log-samples "$OUT/eval_samples.jsonl"
# The same tasks on the untrained model (the recipe's initialisation, 0 steps).
rm -rf "$OUT/init"
OMP_NUM_THREADS=1 "$ZAYA" train --config "$CONFIG" --steps 0 --out "$OUT/init" --quiet >/dev/null
OMP_NUM_THREADS=1 "$ZAYA" eval --ckpt "$OUT/init" $KJV_TASKS --output "$OUT/eval_init.json" --quiet | tail -n +2
"$PY" scripts/eval_chance.py "$OUT/eval.json" kjv_verse acc_norm 0.25 --above 5 --min-n 200
"$PY" scripts/eval_chance.py "$OUT/eval_init.json" kjv_verse acc_norm 0.25 --within 3 --min-n 200
