#!/usr/bin/env python3
"""llama.cpp's log-probabilities against the block formats' definitions (tests/llama_cpp_blocks.sh).

    python3 tests/llama_cpp_blocks_check.py MODEL.gguf LLAMA.jsonl TOL SOURCE.f32 REL

MODEL is a llama GGUF whose layers add nothing (bench_llama_gguf --zero-layers), so its
logits are E rmsnorm(E[token]) * w with E the tied embedding and w the output norm.
Both are decoded here by tools/reference/gguf_reader.py (written from the format
definitions, not from zaya's code), the log-softmax computed in double, and compared with
llama.cpp's (LLAMA.jsonl from tests/llama_cpp_blocks.mjs: the input token and every token's
probability, per step). Passes when
- the decoded embedding is the one the writer was given (SOURCE.f32, the fp32 values before
  quantizing) up to the format's rounding: rms error / rms value at most REL, so a writer
  that puts values in the wrong places fails here;
- the largest |delta log p| over all steps and tokens is at most TOL, so a decoder in
  llama.cpp that reads the blocks otherwise fails here;
- and a control shows that comparison would see a layout error: the same embedding with
  each block's elements in reverse order must miss by more than 10 TOL.
One line per model; exit status 1 on failure.
"""
import array
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools", "reference"))
import gguf_reader  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from checks import finite_max  # noqa: E402

BLOCK = {"Q8_0": 32, "Q4_0": 32, "Q4_K": 256, "Q6_K": 256, "BF16": 32, "F32": 32}


def log_softmax(E, w, tok, eps):
    h = E[tok]
    inv = 1.0 / math.sqrt(sum(x * x for x in h) / len(h) + eps)
    n = [x * inv * wi for x, wi in zip(h, w)]
    z = [sum(a * b for a, b in zip(row, n)) for row in E]
    m = max(z)
    lse = m + math.log(sum(math.exp(v - m) for v in z))
    return [v - lse for v in z]


def main():
    path, jsonl, tol, source, rel = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    g, data = gguf_reader.read(path)
    t = {x["name"]: x for x in g["tensors"]}
    emb, norm = t["token_embd.weight"], t["output_norm.weight"]
    hidden, vocab = emb["dims"]
    flat = gguf_reader.dequant(emb, data, g["data_start"], hidden * vocab)
    E = [flat[v * hidden:(v + 1) * hidden] for v in range(vocab)]
    src = array.array("f")
    with open(source, "rb") as f:
        src.frombytes(f.read())
    if len(src) != len(flat):
        print(f"FAIL {path}: {source} holds {len(src)} values, the embedding {len(flat)}")
        return 1
    err = math.sqrt(sum((a - b) ** 2 for a, b in zip(flat, src)) / sum(b * b for b in src))
    w = gguf_reader.dequant(norm, data, g["data_start"], hidden)
    eps = g["metadata"]["llama.attention.layer_norm_rms_epsilon"]
    b = BLOCK[emb["type"]]
    E_bad = [sum((row[i:i + b][::-1] for i in range(0, hidden, b)), []) for row in E]
    worst = worst_bad = 0.0
    steps = 0
    for line in open(jsonl):
        j = json.loads(line)
        p = dict(j["probs"])
        if len(p) != vocab:
            print(f"FAIL {path}: llama.cpp gave {len(p)} probabilities, the vocabulary has {vocab}")
            return 1
        ref = log_softmax(E, w, j["input"], eps)
        bad = log_softmax(E_bad, w, j["input"], eps)
        for v in range(vocab):
            lp = math.log(p[v]) if p[v] > 0 else -1e30
            worst = finite_max([worst, abs(lp - ref[v])])  # max() drops a NaN unless it comes first
            worst_bad = max(worst_bad, abs(lp - bad[v]))  # a NaN here fails `worst_bad > 10 * tol`
        steps += 1
    ok = steps > 0 and err <= rel and worst <= tol and worst_bad > 10 * tol
    print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(path)}: embedding {emb['type']}, decoded vs written "
          f"rms {err:.2e} (at most {rel:g}); {steps} steps x {vocab} tokens: max |delta log p| {worst:.2e} "
          f"(tolerance {tol:g}); blocks reversed: {worst_bad:.2e} (must exceed {10 * tol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
