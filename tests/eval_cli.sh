#!/usr/bin/env bash
# zaya eval end to end on a tiny model trained 2 steps: every built-in task on the
# hand-written files in tests/data/eval, the task files (few-shot, generate_until,
# loglikelihood_rolling), the results JSON keys, --log-samples, and the proofs:
#  - a choice's loglikelihood in eval equals `zaya score --context N`'s sum over the same
#    tokens to the bit (checkpoint, HF bf16 in place, HF --fp32);
#  - a rolling document shorter than the context equals score over [prefix] + its tokens;
#  - --batch 4 and --batch 16 (rows of several documents in one feed, each at its own
#    position) agree with --batch 1 up to rounding, samples in the same order;
#  - bad task files and names: exit 1 and one line naming the file and the field.
set -euo pipefail
cd "$(dirname "$0")/.."
ZAYA=$(realpath "$1")
W=$(realpath -m "$2/eval_cli")
export OMP_NUM_THREADS=1 ZAYA_LOG=error  # a model this small spends its time in barriers with 2
rm -rf "$W" && mkdir -p "$W"
die() { echo "eval_cli: FAIL: $*" >&2; exit 1; }
D=tests/data/eval
T=$D/tasks

"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$W/data" --vocab-size 320 >"$W/prepare.log" 2>&1 ||
  { cat "$W/prepare.log"; die "prepare"; }
source tests/lib/tiny_model.sh
tiny_model_toml eval-tiny >"$W/model.toml"
cat >"$W/run.toml" <<TOML
[run]
name = "run"
out_dir = "$W/run"
seed = 3
[model]
config = "$W/model.toml"
[[data.sources]]
name = "kjv"
dir = "$W/data"
[[phases]]
name = "base"
tokens = 256
seq_len = 32
[batch]
global_batch = 4
micro_batch = 2
[optimizer]
kind = "adamw"
lr = 3e-3
[eval]
interval = 0
windows = 2
batch = 2
TOML
"$ZAYA" train --config "$W/run.toml" --quiet >"$W/train.log" 2>&1 || { cat "$W/train.log"; die "train"; }
"$ZAYA" ckpt export-hf "$W/run" "$W/hf16" --dtype bf16 >"$W/export.log" 2>&1 || { cat "$W/export.log"; die "export-hf"; }
TOK="$W/data/tokenizer.model"

ALL=hellaswag,arc_easy,arc_challenge,piqa,winogrande,lambada,mmlu
echo "== every built-in task, a checkpoint"
"$ZAYA" eval --ckpt "$W/run" --tasks $ALL --data-dir $D --task-file $T/kjv_fewshot.json --task-file $T/kjv_gen.json \
  --task-file $T/kjv_rolling.json --output "$W/out/ck.json" --log-samples "$W/out/ck.jsonl" >"$W/ck.md" 2>"$W/ck.err" ||
  { cat "$W/ck.err"; die "eval --ckpt"; }
cat "$W/ck.md"
grep -q '^|hellaswag|0|acc|' "$W/ck.md" || die "no markdown table row for hellaswag"
echo "== the same on the HF directory (bf16 in place, the tokenizer given), and with --fp32 and --batch 4"
"$ZAYA" eval --model "$W/hf16" --tokenizer "$TOK" --tasks hellaswag,winogrande,lambada,mmlu --data-dir $D \
  --task-file $T/kjv_rolling.json --log-samples "$W/out/hf.jsonl" --output "$W/out/hf.json" --quiet >/dev/null ||
  die "eval --model (bf16)"
"$ZAYA" eval --model "$W/hf16" --tokenizer "$TOK" --fp32 --tasks hellaswag,winogrande --data-dir $D \
  --log-samples "$W/out/hf32.jsonl" --quiet >/dev/null || die "eval --model --fp32"
"$ZAYA" eval --ckpt "$W/run" --tasks hellaswag,piqa --data-dir $D --batch 4 --log-samples "$W/out/b4.jsonl" --quiet \
  >/dev/null || die "eval --batch 4"
"$ZAYA" eval --ckpt "$W/run" --tasks hellaswag,arc_easy,piqa,winogrande,lambada --data-dir $D --batch 16 \
  --log-samples "$W/out/b16.jsonl" --quiet >/dev/null || die "eval --batch 16"
"$ZAYA" eval --model "$W/hf16" --tokenizer "$TOK" --tasks hellaswag,winogrande,lambada,mmlu --data-dir $D \
  --task-file $T/kjv_rolling.json --batch 16 --log-samples "$W/out/hf_b16.jsonl" --quiet >/dev/null ||
  die "eval --model (bf16) --batch 16"

echo "== results JSON, samples and score --context"
python3 - "$ZAYA" "$W" "$TOK" <<'PY'
import json, math, re, subprocess, sys
sys.path.insert(0, "tests/lib")
from checks import finite_max  # max() drops a NaN unless it comes first
zaya, W, tok = sys.argv[1:4]
fails = []
def check(ok, msg):
    if not ok: fails.append(msg)
r = json.load(open(f"{W}/out/ck.json"))
res = r["results"]
for t in ["hellaswag", "arc_easy", "arc_challenge", "piqa", "kjv_fewshot"]:
    for k in ["acc", "acc_stderr", "acc_norm", "acc_norm_stderr"]:
        check(k in res[t], f"{t}: no '{k}'")
check(set(res["winogrande"]) == {"alias", "acc", "acc_stderr"}, f"winogrande keys {sorted(res['winogrande'])}")
check({"perplexity", "perplexity_stderr", "acc", "acc_stderr"} <= set(res["lambada"]), "lambada keys")
check(res["kjv_rolling"]["word_perplexity_stderr"] == "N/A", "rolling stderr is N/A as in lm-eval")
check("exact_match" in res["kjv_gen"], "kjv_gen: no exact_match")
for t in ["hellaswag", "arc_easy", "arc_challenge", "piqa", "winogrande", "lambada"]:
    check(r["n_samples"][t] == 12, f"n_samples[{t}] = {r['n_samples'][t]}")
check(r["n_samples"]["mmlu"] == 12 and r["n-shot"]["mmlu_astronomy"] == 0 and r["n-shot"]["mmlu"] == 0, "mmlu group / 0-shot")
check("config" in r and r["config"]["batch_size"] == 1, "config")
samples = [json.loads(l) for l in open(f"{W}/out/ck.jsonl")]
by = {}
for s in samples: by.setdefault(s["task"], []).append(s)
# stderr as lm-eval: sample stddev / sqrt(n), from the per-document values
for t in ["hellaswag", "piqa", "winogrande"]:
    a = [s["acc"] for s in by[t]]; n = len(a); m = sum(a) / n
    se = math.sqrt(sum((x - m) ** 2 for x in a) / (n - 1)) / math.sqrt(n)
    check(abs(res[t]["acc"] - m) < 1e-12 and abs(res[t]["acc_stderr"] - se) < 1e-12, f"{t}: acc/stderr from samples")
# acc_norm from the logged log-likelihoods and the choices' lengths in characters, acc_bytes in bytes
for s in by["hellaswag"]:
    lls = [x[0] for x in s["resps"]]
    check(finite_max(lls) < math.inf, f"hellaswag doc {s['doc_id']}: log-likelihoods {lls}")
    ends = [a[1][1:] for a in s["arguments"]]  # continuation minus the target delimiter
    norm = [l / len(e) for l, e in zip(lls, ends)]
    check(float(norm.index(max(norm)) == s["target"]) == s["acc_norm"], f"hellaswag doc {s['doc_id']}: acc_norm")
    per_byte = [l / len(e.encode()) for l, e in zip(lls, ends)]
    check(float(per_byte.index(max(per_byte)) == s["target"]) == s["acc_bytes"], f"hellaswag doc {s['doc_id']}: acc_bytes")
# rolling: word perplexity from the samples
ll = [s["word_perplexity"][0] for s in by["kjv_rolling"]]; wd = [s["word_perplexity"][1] for s in by["kjv_rolling"]]
check(abs(res["kjv_rolling"]["word_perplexity"] - math.exp(-sum(ll) / sum(wd))) < 1e-9 * res["kjv_rolling"]["word_perplexity"], "word_perplexity")
for s in by["kjv_gen"]:
    f = re.sub(r"[^\w\s]", "", s["filtered_resps"][0]).lower(); t = re.sub(r"[^\w\s]", "", s["target"]).lower()
    check(float(f == t) == s["exact_match"], f"kjv_gen doc {s['doc_id']}: exact_match")

def score(args, req):
    ids = req["context_ids"] + req["continuation_ids"]
    open(f"{W}/ids.txt", "w").write(" ".join(map(str, ids)))
    out = subprocess.run([zaya, "score", *args, "--ids", f"{W}/ids.txt", "--context", str(len(req["context_ids"])), "--json"],
                         capture_output=True, text=True)
    if out.returncode: fails.append("score: " + out.stderr.strip()); return None
    return json.loads(out.stdout)
def bits(name, args, path, tasks):
    n = bad = 0
    for s in (json.loads(l) for l in open(path)):
        if s["task"] not in tasks or s["doc_id"] > 2: continue
        for req in s["requests"]:
            o = score(args, req); n += 1
            if o is None or o["sum"] != req["logprob"] or o["logprobs"] != req["token_logprobs"] or o["is_greedy"] != req["is_greedy"]:
                bad += 1
    print(f"{name}: {n} requests, {bad} differ from zaya score --context in any bit")
    check(n > 0 and bad == 0, f"{name}: {bad} of {n} requests differ from zaya score")
bits("checkpoint", ["--ckpt", f"{W}/run"], f"{W}/out/ck.jsonl", {"hellaswag", "winogrande", "lambada", "mmlu_astronomy", "kjv_rolling"})
bits("HF bf16 in place", ["--model", f"{W}/hf16"], f"{W}/out/hf.jsonl", {"hellaswag", "winogrande", "lambada", "kjv_rolling"})
bits("HF --fp32", ["--model", f"{W}/hf16", "--fp32"], f"{W}/out/hf32.jsonl", {"hellaswag", "winogrande"})
# bf16 in place against fp32: the same model, rounding apart
hf = {(s["task"], s["doc_id"]): s for s in map(json.loads, open(f"{W}/out/hf.jsonl"))}
d = finite_max(abs(a[0] - b[0]) / max(1, abs(b[0])) for s in map(json.loads, open(f"{W}/out/hf32.jsonl"))
               for a, b in zip(hf[(s["task"], s["doc_id"])]["resps"], s["resps"]))
print(f"bf16 in place vs --fp32: max relative difference of a log-likelihood {d:.2e}")
check(d < 0.05, f"bf16 vs fp32 log-likelihoods differ by {d}")
# --batch 4 against --batch 1: rounding only
b1 = {(s["task"], s["doc_id"]): s for s in samples}
d = finite_max(abs(a[0] - b[0]) / max(1, abs(b[0])) for s in map(json.loads, open(f"{W}/out/b4.jsonl"))
               for a, b in zip(s["resps"], b1[(s["task"], s["doc_id"])]["resps"]))
print(f"--batch 4 vs --batch 1: max relative difference {d:.2e}")
check(d < 1e-5, f"--batch 4 differs from --batch 1 by {d}")
# --batch 16 against --batch 1: the same documents in the same order, the same requests,
# log-likelihoods up to rounding (fp32: summation order; bf16 weights: 16 rows or more go
# through oneDNN's AMX product, activations rounded to bf16, fewer through the own kernel)
def against(name, path, ref, bound):
    got = [json.loads(l) for l in open(path)]
    want = [s for s in map(json.loads, open(ref)) if s["task"] in {g["task"] for g in got}]
    check([(s["task"], s["doc_id"]) for s in got] == [(s["task"], s["doc_id"]) for s in want], f"{name}: sample order")
    d, n = 0.0, 0
    for s, w in zip(got, want):
        for a, b in zip(s["requests"], w["requests"]):
            check(a["context_ids"] == b["context_ids"] and a["continuation_ids"] == b["continuation_ids"],
                  f"{name}: {s['task']} doc {s['doc_id']}: other requests")
            d = finite_max([d, abs(a["logprob"] - b["logprob"]) / max(1, abs(b["logprob"]))]); n += 1
    print(f"{name}: {n} requests, max relative difference {d:.2e}")
    check(n > 0 and d < bound, f"{name}: differs from --batch 1 by {d}")
against("--batch 16 vs --batch 1 (checkpoint, fp32)", f"{W}/out/b16.jsonl", f"{W}/out/ck.jsonl", 1e-6)
against("--batch 16 vs --batch 1 (HF bf16 in place)", f"{W}/out/hf_b16.jsonl", f"{W}/out/hf.jsonl", 1e-4)
if fails:
    print("\n".join(fails)); sys.exit(1)
PY

echo "== bad task files and names"
bad() {  # $1 expected text, rest: the eval arguments
  local want=$1; shift
  if "$ZAYA" eval --ckpt "$W/run" "$@" >"$W/bad.out" 2>"$W/bad.err"; then die "accepted: $*"; fi
  [ "$(wc -l <"$W/bad.err")" -eq 1 ] || { cat "$W/bad.err"; die "not one line: $*"; }
  grep -qF -- "$want" "$W/bad.err" || { cat "$W/bad.err"; die "'$want' not in the error"; }
  echo "ok: $(cat "$W/bad.err")"
}
mkdir -p "$W/bad"
printf '{"q": "a", "c": ["x", "y"], "g": 1}\n' >"$W/bad/d.jsonl"
printf '{"q": "a", "c": ["x"], "g": 0}\n' >"$W/bad/one.jsonl"
printf '{"q": "a", "c": ["x", "y"], "g": 5}\n' >"$W/bad/far.jsonl"
: >"$W/bad/empty.jsonl"
tf() { printf '{"task": "t", "data_files": {"test": "%s"}, %s}\n' "$2" "$3" >"$W/bad/$1"; }
OK='"doc_to_text": "{{q}}", "doc_to_choice": "c", "doc_to_target": "g"'
tf missing.json d.jsonl '"doc_to_text": "{{q}}", "doc_to_choice": "c"'
tf metric.json d.jsonl "$OK, \"metric_list\": [\"bleu\"]"
tf empty.json empty.jsonl "$OK"
tf one.json one.jsonl "$OK"
tf far.json far.jsonl "$OK"
bad "missing.json: field 'doc_to_target' is missing" --task-file "$W/bad/missing.json"
bad "metric.json: field 'metric_list': unknown metric 'bleu'" --task-file "$W/bad/metric.json"
bad "empty.jsonl: field 'test_split': split 'test' is empty" --task-file "$W/bad/empty.json"
bad "one.jsonl:1: field 'doc_to_choice': 1 choice(s)" --task-file "$W/bad/one.json"
bad "far.jsonl:1: field 'doc_to_target': gold index 5 is out of range" --task-file "$W/bad/far.json"
bad "unknown task 'hellaswagg'" --tasks hellaswagg --data-dir $D
bad "piqa/validation.jsonl: no such file" --tasks piqa --data-dir "$W/bad"
[ ! -e "$W/bad/out.json" ] || die "a results file after an error"
echo "== [eval] tasks during training: metrics.jsonl records, the plot"
sed -e "s|^interval = 0|interval = 2\ntasks = [\"hellaswag\", \"$T/kjv_fewshot.json\"]\ndata_dir = \"$D\"\ntasks_limit = 6|" \
    -e "s|^tokens = 256|tokens = 512|" -e "s|out_dir = \"$W/run\"|out_dir = \"$W/run_tasks\"|" "$W/run.toml" >"$W/run_tasks.toml"
"$ZAYA" train --config "$W/run_tasks.toml" >"$W/train_tasks.log" 2>&1 || { cat "$W/train_tasks.log"; die "train with [eval] tasks"; }
grep -q '^|hellaswag|0|acc|' "$W/train_tasks.log" || { cat "$W/train_tasks.log"; die "no task table in the training log"; }
python3 - "$W/run_tasks/metrics.jsonl" <<'PY'
import json, sys
sys.path.insert(0, "tests/lib")
from checks import check
recs = [json.loads(l) for l in open(sys.argv[1])]
t = [r for r in recs if r.get("type") == "eval_tasks"]
steps = [r["step"] for r in t]
check(steps == [0, 2, 4], f"eval_tasks at steps {steps}")
for r in t:
    check(set(r["tasks"]) == {"hellaswag", "kjv_fewshot"}, r["tasks"].keys())
    h = r["tasks"]["hellaswag"]
    check(h["n"] == 6 and 0 <= h["acc_norm"] <= 1 and h["acc_norm_stderr"] >= 0, h)
print("metrics.jsonl: eval_tasks at steps", steps)
PY
PY3=python3; /usr/bin/python3 -c 'import matplotlib' 2>/dev/null && PY3=/usr/bin/python3
if $PY3 -c 'import matplotlib' 2>/dev/null; then
  $PY3 scripts/plot_metrics.py "$W/run_tasks/metrics.jsonl" "$W/plots" >/dev/null || die "plot_metrics.py"
  [ -s "$W/plots/tasks.png" ] || die "no tasks.png"
  echo "plot: $W/plots/tasks.png"
fi
echo "eval_cli: OK"
