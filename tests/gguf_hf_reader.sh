#!/usr/bin/env bash
# The GGUF files `zaya quantize` writes, read by Hugging Face's GGUF reader (the npm package
# @huggingface/gguf 0.4.6, what the Hub parses GGUF models with; tools/npm_packages.sh): it
# must find the same version, metadata (every key and value, the tokenizer's arrays element by
# element), tensor infos (names, dims, ggml types, offsets) and data offset as our
# spec-written reader tools/reference/gguf_reader.py (tests/gguf_hf_reader_check.py), for a
# q4_k file of zaya1-small (q4_k, q6_k head, bf16 and f32 tensors) and a q8_0 file of
# zaya1-tiny (its rows of 24 fall back to bf16, and the metadata lists each fallback); the
# first with a SentencePiece tokenizer trained on the KJV sample (320 pieces: the tiny model's
# 96 embedding rows take no tokenizer). No node, or no package and no way to fetch it, is a
# FAILURE, not a skip.
#
#   bash tests/gguf_hf_reader.sh <path-to-zaya-binary> <build-dir>     (from the repo root)
set -euo pipefail
ZAYA=${1:?usage: gguf_hf_reader.sh <zaya-binary> <build-dir>}
BUILD=${2:?usage: gguf_hf_reader.sh <zaya-binary> <build-dir>}
ROOT=$(bash tools/npm_packages.sh gguf)
W="$BUILD/gguf_hf_reader"
rm -rf "$W"
mkdir -p "$W"
"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$W/data" --vocab-size 320 >"$W/prepare.log" 2>&1 ||
  { cat "$W/prepare.log"; echo "FAIL: zaya prepare"; exit 1; }
status=0
for case in "zaya1-small q4_k 320" "zaya1-tiny q8_0 0"; do
  set -- $case
  tok=()
  [ "$3" -gt 0 ] && tok=(--tokenizer "$W/data/tokenizer.model")
  "$ZAYA" dev reference-case --config "configs/$1.toml" --out "$W/$1" --batch 1 --seq 8 >/dev/null
  "$ZAYA" quantize "$W/$1" "$W/$1-$2" --type "$2" "${tok[@]}" >"$W/$1-$2.log" 2>&1 ||
    { cat "$W/$1-$2.log"; echo "FAIL: zaya quantize $1 $2"; exit 1; }
  node tests/gguf_hf_reader.mjs "$ROOT" "$W/$1-$2/model.gguf" >"$W/$1-$2.json"
  python3 tests/gguf_hf_reader_check.py "$W/$1-$2/model.gguf" "$W/$1-$2.json" "$2" "$3" || status=1
done
[ $status -eq 0 ] && echo "PASS: Hugging Face's GGUF reader reads zaya's files as our spec reader does"
exit $status
