#!/usr/bin/env bash
# Few-shot examples drawn as lm-evaluation-harness 0.4 draws them, checked against
# /usr/bin/python3's own random: for hellaswag, arc_easy, arc_challenge, piqa and winogrande
# (generated splits of 30-100 documents, so random.sample takes both its pool and its set
# path), the expected examples come from random.Random(seed).sample over the few-shot split's
# documents, k + 1 drawn where lm-eval's config has fewshot_split == test_split (both unset:
# hellaswag, piqa, winogrande), the document itself dropped by value, truncated to k; zaya's
# --log-samples names them (fewshot_doc_ids) and its contexts must equal the prompts built
# here from them. Also: seeds of one and two 32-bit words, --limit, MMLU at 0 shots by
# default and the first k dev questions at --num-fewshot k, acc_norm per character and
# acc_bytes per byte recomputed from the logged log-likelihoods.
#   bash tests/eval_fewshot.sh <zaya-binary> <build-dir>
set -euo pipefail
cd "$(dirname "$0")/.."
ZAYA=$(realpath "$1")
W=$(realpath -m "$2/eval_fewshot")
export OMP_NUM_THREADS=1 ZAYA_LOG=error  # a model this small spends its time in barriers with 2
rm -rf "$W" && mkdir -p "$W"
die() { echo "eval_fewshot: FAIL: $*" >&2; exit 1; }
PY=/usr/bin/python3

"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$W/data" --vocab-size 320 >"$W/prepare.log" 2>&1 ||
  { cat "$W/prepare.log"; die "prepare"; }
source tests/lib/tiny_model.sh
tiny_model_toml fewshot-tiny >"$W/model.toml"
cat >"$W/run.toml" <<TOML
[run]
name = "run"
out_dir = "$W/run"
seed = 5
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

echo "== task files of 30-100 documents"
D="$W/evals"
$PY -X utf8 - "$D" <<'PY' || die "writing the task data"
import json, os, sys
D = sys.argv[1]
W = "in the beginning god created heaven and earth light darkness water firmament day night".split()
def words(i, n):  # distinct, deterministic phrases
    return " ".join(W[(i * 7 + j * 3) % len(W)] for j in range(n)) + f" {i}"
def write(task, split, docs):
    os.makedirs(f"{D}/{task}", exist_ok=True)
    with open(f"{D}/{task}/{split}.jsonl", "w") as f:
        for d in docs: f.write(json.dumps(d, ensure_ascii=False) + "\n")
def hs(i):  # endings with accents and a euro sign: characters and bytes differ
    return {"ind": i, "activity_label": "Verse", "ctx_a": words(i, 4), "ctx_b": words(i + 1, 2),
            "endings": [words(i + k, 1 + k) + ("\u00e9\u00e9" if k == 1 else "") + ("\u20ac" * (k % 3)) for k in range(4)],
            "label": str(i % 4)}
train = [hs(i) for i in range(40)]
write("hellaswag", "train", train)
write("hellaswag", "validation", [train[3 * i] for i in range(6)])  # every document also in train
def arc(i):
    return {"id": f"q{i}", "question": words(i, 5) + "?",
            "choices": {"text": [words(i + k, 2) for k in range(4)], "label": ["A", "B", "C", "D"]},
            "answerKey": "ABCD"[i % 4]}
for t, n in [("arc_easy", 40), ("arc_challenge", 40)]:
    write(t, "train", [arc(i) for i in range(n)])
    write(t, "test", [arc(1000 + i) for i in range(6)])
def piqa(i):
    return {"goal": words(i, 4), "sol1": words(i + 1, 3), "sol2": words(i + 2, 3), "label": i % 2}
write("piqa", "train", [piqa(i) for i in range(100)])
write("piqa", "validation", [piqa(500 + i) for i in range(6)])
def wg(i):
    return {"sentence": words(i, 3) + " _ " + words(i + 1, 3) + ".", "option1": W[i % len(W)],
            "option2": W[(i + 5) % len(W)], "answer": "12"[i % 2]}
write("winogrande", "train", [wg(i) for i in range(30)])
write("winogrande", "validation", [wg(300 + i) for i in range(6)])
PY
cp -r tests/data/eval/mmlu "$D/mmlu"

mkdir -p "$W/out"
ev() {  # name task shots [extra args]
  local name=$1 task=$2 k=$3; shift 3
  "$ZAYA" eval --ckpt "$W/run" --tasks "$task" --data-dir "$D" --num-fewshot "$k" --output "$W/out/$name.json" \
    --log-samples "$W/out/$name.jsonl" --quiet "$@" >"$W/out/$name.md" 2>"$W/$name.err" ||
    { cat "$W/$name.err"; die "eval $name"; }
}
ev hellaswag hellaswag 10          # 11 drawn of 40: the pool path (setsize 85)
ev arc_easy arc_easy 5             # 5 drawn of 40: the set path (setsize 21)
ev arc_challenge arc_challenge 25  # 25 drawn of 40: the pool path (setsize 277)
ev piqa piqa 5                     # 6 drawn of 100: the set path (setsize 85)
ev winogrande winogrande 5         # 6 drawn of 30: the pool path
ev hellaswag_s7 hellaswag 3 --seed 7
ev piqa_wide piqa 4 --seed 1099511627779 --limit 3  # 2**40 + 3: a key of two words
"$ZAYA" eval --ckpt "$W/run" --tasks mmlu --data-dir "$D" --output "$W/out/mmlu0.json" --log-samples "$W/out/mmlu0.jsonl" \
  --quiet >"$W/out/mmlu0.md" 2>"$W/mmlu0.err" || { cat "$W/mmlu0.err"; die "eval mmlu"; }
ev mmlu5 mmlu 5

echo "== against Python's random and lm-eval's sampler"
$PY -X utf8 - "$D" "$W/out" <<'PY'
import json, random, sys
D, O = sys.argv[1:3]
fails = []
def check(ok, msg):
    if not ok: fails.append(msg)
def load(task, split):
    return [json.loads(l) for l in open(f"{D}/{task}/{split}.jsonl")]
def cap(s): return s[:1].upper() + s[1:].lower()
def hs_text(d): return f"{d['activity_label']}: {d['ctx_a']} {cap(d['ctx_b'])}"
def arc_gold(d): return d["choices"]["label"].index(d["answerKey"])
# lm-eval's prompt pieces per task: (text, target) of an example, the document's own text.
def blank(d): return d["sentence"].index("_")
def wg_ex(d):
    i = blank(d); opt = d["option1"] if d["answer"] == "1" else d["option2"]
    return d["sentence"][:i] + opt, d["sentence"][i + 1:].strip()
TASKS = {
    "hellaswag": ("validation", True, lambda d: (hs_text(d), d["endings"][int(d["label"])]), hs_text),
    "arc_easy": ("test", False, lambda d: (f"Question: {d['question']}\nAnswer:", d["choices"]["text"][arc_gold(d)]),
                 lambda d: f"Question: {d['question']}\nAnswer:"),
    "arc_challenge": ("test", False, lambda d: (f"Question: {d['question']}\nAnswer:", d["choices"]["text"][arc_gold(d)]),
                      lambda d: f"Question: {d['question']}\nAnswer:"),
    "piqa": ("validation", True, lambda d: (f"Question: {d['goal']}\nAnswer:", [d["sol1"], d["sol2"]][d["label"]]),
             lambda d: f"Question: {d['goal']}\nAnswer:"),
    "winogrande": ("validation", True, wg_ex, None),
}
def run(name, task, k, seed=1234, limit=None):
    test_split, extra, example, text = TASKS[task]
    shots, docs = load(task, "train"), load(task, test_split)
    if limit: docs = docs[:limit]
    samples = [json.loads(l) for l in open(f"{O}/{name}.jsonl")]
    check(len(samples) == len(docs), f"{name}: {len(samples)} samples for {len(docs)} documents")
    rnd = random.Random(seed)  # lm-eval: one generator per task, set_fewshot_seed
    ids = {id(x): i for i, x in enumerate(shots)}
    dropped = 0
    for doc, s in zip(docs, samples):
        drawn = rnd.sample(shots, k + 1 if extra else k)  # ContextSampler.sample
        sel = [x for x in drawn if x != doc][:k]
        dropped += len(drawn) - len([x for x in drawn if x != doc])
        want = [ids[id(x)] for x in sel]
        check(s.get("fewshot_doc_ids") == want, f"{name} doc {s['doc_id']}: few-shot {s.get('fewshot_doc_ids')} != {want}")
        check(s.get("fewshot_split") == "train", f"{name}: fewshot_split {s.get('fewshot_split')}")
        prefix = "".join(t + " " + g + "\n\n" for t, g in map(example, sel))
        ctxs = [a[0] for a in s["arguments"]]
        if task == "winogrande":  # partial scoring: the prefix, then each option up to the blank
            i = blank(doc)
            want_ctx = [prefix + doc["sentence"][:i] + o for o in (doc["option1"], doc["option2"])]
        else:
            want_ctx = [prefix + text(doc)] * len(ctxs)
        # the runner moves the context's trailing spaces into the continuation
        check([c.rstrip() for c in ctxs] == [c.rstrip() for c in want_ctx], f"{name} doc {s['doc_id']}: context differs")
    return dropped
check(run("hellaswag", "hellaswag", 10) >= 1, "hellaswag: no document met itself among its draws (the test lost its case)")
for name, task, k in [("arc_easy", "arc_easy", 5), ("arc_challenge", "arc_challenge", 25), ("piqa", "piqa", 5),
                      ("winogrande", "winogrande", 5)]:
    run(name, task, k)
run("hellaswag_s7", "hellaswag", 3, seed=7)
run("piqa_wide", "piqa", 4, seed=2**40 + 3, limit=3)
for name in ["hellaswag", "arc_easy", "piqa"]:
    r = json.load(open(f"{O}/{name}.json"))
    check(r["n-shot"][name] == {"hellaswag": 10, "arc_easy": 5, "piqa": 5}[name], f"{name}: n-shot {r['n-shot']}")

# acc_norm per character, acc_bytes per byte, from the logged log-likelihoods
samples = [json.loads(l) for l in open(f"{O}/hellaswag.jsonl")]
res = json.load(open(f"{O}/hellaswag.json"))["results"]["hellaswag"]
differ = 0
for s in samples:
    lls = [x[0] for x in s["resps"]]
    ends = [a[1][1:] for a in s["arguments"]]  # the continuation without the target delimiter
    by_char = [l / len(e) for l, e in zip(lls, ends)]
    by_byte = [l / len(e.encode()) for l, e in zip(lls, ends)]
    differ += sum(len(e) != len(e.encode()) for e in ends)
    check(float(by_char.index(max(by_char)) == s["target"]) == s["acc_norm"], f"hellaswag doc {s['doc_id']}: acc_norm")
    check(float(by_byte.index(max(by_byte)) == s["target"]) == s["acc_bytes"], f"hellaswag doc {s['doc_id']}: acc_bytes")
check(differ > 0, "no ending whose characters and bytes differ")
for m in ["acc_norm", "acc_bytes"]:
    v = sum(s[m] for s in samples) / len(samples)
    check(abs(res[m] - v) <= 1e-12, f"results {m} {res[m]} != mean of samples {v}")
    check(f"{m}_stderr" in res, f"no {m}_stderr")
md = open(f"{O}/hellaswag.md").read()
check("||acc_bytes|" in md and "||acc_norm|" in md, "markdown table: no acc_norm / acc_bytes rows")

# MMLU: lm-eval's default of 0 shots; --num-fewshot 5 takes the first 5 dev questions, in order
r0, r5 = json.load(open(f"{O}/mmlu0.json")), json.load(open(f"{O}/mmlu5.json"))
check(r0["n-shot"]["mmlu"] == 0 and r0["n-shot"]["mmlu_astronomy"] == 0, f"mmlu default n-shot {r0['n-shot']}")
check(r5["n-shot"]["mmlu"] == 5 and r5["n-shot"]["mmlu_astronomy"] == 5, f"mmlu --num-fewshot 5: n-shot {r5['n-shot']}")
for s in map(json.loads, open(f"{O}/mmlu0.jsonl")):
    check("fewshot_doc_ids" not in s and "\nAnswer: " not in s["arguments"][0][0], f"mmlu 0-shot doc {s['doc_id']} has examples")
for s in map(json.loads, open(f"{O}/mmlu5.jsonl")):
    check(s["fewshot_doc_ids"] == [0, 1, 2, 3, 4] and s["fewshot_split"] == "dev", f"mmlu 5-shot doc {s['doc_id']}: {s['fewshot_doc_ids']}")
if fails:
    print("\n".join(fails[:20]), file=sys.stderr)
    sys.exit(1)
print("few-shot draws, contexts, acc_norm / acc_bytes and MMLU's shots agree with Python and lm-eval")
PY
echo "eval_fewshot: OK"
