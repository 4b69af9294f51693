#!/usr/bin/env bash
# zaya prepare on corpora as they ship, through the CLI: the same documents as JSON lines
# (plain, \u-escaped with a BOM and CRLF, gzip, zstd, a directory of shards) and as a Parquet
# column written by an independent writer (parquet-wasm) give byte-identical token shards;
# --threads 1 and 2 give the same bytes; bad input is a one-line error naming the file (and
# line) with a non-zero exit and nothing a loader would read; a prepare killed midway (an
# injected SIGKILL after a known number of documents) leaves no output, and the next run
# removes what it staged.
#
#   bash tests/prepare_formats.sh <zaya-binary> <build-dir>     (run from the repo root)
set -euo pipefail
ZAYA=$(realpath "${1:?usage: prepare_formats.sh <zaya-binary> <build-dir>}")
BUILD=${2:?usage: prepare_formats.sh <zaya-binary> <build-dir>}
W="$BUILD/prepare_formats"
rm -rf "$W"
mkdir -p "$W/dir"
fail() { echo "FAIL: $*" >&2; exit 1; }

# The documents: the KJV sample's chapters and hard texts (blank lines inside, CRLF, escapes,
# astral characters, a line over 1 MB), plus one exact duplicate.
python3 - "$W" tests/data/kjv_sample.txt <<'PY'
import json, sys
w, sample = sys.argv[1], sys.argv[2]
chapters = [c.strip("\n") for c in open(sample, encoding="utf-8").read().split("\n\n") if c.strip()]
big = "".join(("word%d " % i) if i % 50 else "\n" for i in range(160000))
docs = chapters + ["First paragraph.\n\nSecond, after a blank line.", "caf\u00e9 \u2014 \U0001F600 \u65e5\u672c\u8a9e",
                   "line one\r\nline two", 'tab\t"quotes" back\\slash', big, chapters[0]]
if len(big.encode()) <= 1 << 20:
    sys.exit("FAIL: the long document must pass 1 MB")
with open(f"{w}/c.jsonl", "w", encoding="utf-8", newline="") as f:
    for i, d in enumerate(docs):
        f.write(json.dumps({"id": i, "text": d}, ensure_ascii=False) + "\n")
with open(f"{w}/c.json", "w", encoding="utf-8", newline="") as f:
    f.write("\ufeff")
    for i, d in enumerate(docs):
        f.write(json.dumps({"meta": {"id": i}, "text": d}) + "\r\n")
half = len(docs) // 2
for k, part in enumerate([docs[:half], docs[half:]]):
    with open(f"{w}/dir/part-{k:05d}.jsonl", "w", encoding="utf-8") as f:
        for d in part:
            f.write(json.dumps({"text": d}) + "\n")
PY
gzip -k -9 "$W/c.jsonl"
zstd -q -k "$W/c.jsonl" -o "$W/c.jsonl.zst"
zstd -q --rm "$W/dir/part-00001.jsonl"
NPM=$(bash tools/npm_packages.sh parquet)
node tests/prepare_formats.mjs "$NPM" "$W/c.jsonl" "$W/c.parquet"

"$ZAYA" prepare --input "$W/c.jsonl" --out "$W/ref" --vocab-size 400 --val-fraction 0.2 --quiet
TOK="$W/ref/tokenizer.model"
python3 - "$W/ref/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
f = m["filtered"]
if f["duplicates_dropped"] != 1 or f["records"] != 20 or m["train"]["documents"] + m["val"]["documents"] != 19:
    sys.exit(f"FAIL: counts in meta.json: {f}, train {m['train']}, val {m['val']}")
PY
same_as_ref() {  # out-dir label
  for f in "$W"/ref/train_*.bin "$W"/ref/val_*.bin; do
    cmp -s "$f" "$1/$(basename "$f")" || fail "$2: $(basename "$f") differs from the plain JSON lines' one"
  done
  [ "$(ls "$1"/*.bin | wc -l)" = "$(ls "$W"/ref/*.bin | wc -l)" ] || fail "$2: other shard count"
}
for input in c.json c.jsonl.gz c.jsonl.zst c.parquet dir; do
  "$ZAYA" prepare --input "$W/$input" --out "$W/out-$input" --tokenizer "$TOK" --val-fraction 0.2 --quiet
  same_as_ref "$W/out-$input" "$input"
done
"$ZAYA" prepare --input "$W/c.jsonl.zst" --out "$W/t1" --tokenizer "$TOK" --val-fraction 0.2 --shard-tokens 3000 --threads 1 --quiet
"$ZAYA" prepare --input "$W/c.jsonl.zst" --out "$W/t2" --tokenizer "$TOK" --val-fraction 0.2 --shard-tokens 3000 --threads 2 --quiet
for f in "$W"/t1/*.bin; do cmp -s "$f" "$W/t2/$(basename "$f")" || fail "$(basename "$f") differs between 1 and 2 threads"; done
[ "$(ls "$W"/t1/*.bin | wc -l)" -gt 4 ] || fail "expected several shards at --shard-tokens 3000"

# Bad input: a one-line error naming the file, exit 1, and nothing a loader would read.
head -c 20000 "$W/c.jsonl.gz" >"$W/cut.jsonl.gz"
cp "$W/c.jsonl" "$W/plain.jsonl.zst"
{ head -n 3 "$W/c.jsonl"; echo '{"text": "unclosed'; } >"$W/syntax.jsonl"
{ head -n 2 "$W/c.jsonl"; echo '{"body": "x"}'; } >"$W/nokey.jsonl"
{ echo '{"text": 12}'; } >"$W/number.jsonl"
head -c 3000 "$W/c.parquet" >"$W/cut.parquet"
check_bad() {  # input expected-text
  local out="$W/bad-$(basename "$1")"
  set +e
  "$ZAYA" prepare --input "$1" --out "$out" --tokenizer "$TOK" --quiet 2>"$W/err.txt"
  local rc=$?
  set -e
  [ $rc -ne 0 ] || fail "$1: exit 0 on bad input"
  [ "$(grep -c . "$W/err.txt")" = 1 ] || fail "$1: not a one-line error: $(cat "$W/err.txt")"
  grep -qF "$1" "$W/err.txt" || fail "$1: the error does not name the file: $(cat "$W/err.txt")"
  grep -qF "$2" "$W/err.txt" || fail "$1: expected '$2' in: $(cat "$W/err.txt")"
  [ -z "$(ls -A "$out" 2>/dev/null)" ] || fail "$1: left files behind: $(ls -A "$out")"
}
check_bad "$W/cut.jsonl.gz" "truncated gzip stream"
check_bad "$W/plain.jsonl.zst" "named .zst but not zstd data"
check_bad "$W/syntax.jsonl" "syntax.jsonl:4: malformed JSON"
check_bad "$W/nokey.jsonl" "nokey.jsonl:3: no key \"text\""
check_bad "$W/number.jsonl" "number.jsonl:1: \"text\" is a number, not a string"
check_bad "$W/cut.parquet" "cut.parquet"
"$ZAYA" prepare --input "$W/nokey.jsonl" --out "$W/skip" --tokenizer "$TOK" --skip-bad-lines --quiet
python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["filtered"]; sys.exit(0 if f["bad_lines_skipped"] == 1 else "FAIL: " + str(f))' "$W/skip/meta.json"

# A prepare killed midway: no meta.json, no shard in OUT; the next run cleans up and succeeds.
set +e
ZAYA_PREPARE_KILL_AFTER_DOCS=5 "$ZAYA" prepare --input "$W/c.jsonl" --out "$W/killed" --tokenizer "$TOK" --shard-tokens 2000 --quiet
rc=$?
set -e
[ $rc -eq 137 ] || fail "the injected kill did not happen (exit $rc)"
[ ! -e "$W/killed/meta.json" ] || fail "a killed prepare left meta.json"
! ls "$W"/killed/*.bin >/dev/null 2>&1 || fail "a killed prepare left shards in OUT: $(ls "$W/killed")"
ls -d "$W"/killed/.prepare-* >/dev/null 2>&1 || fail "expected the killed run's staging directory"
"$ZAYA" prepare --input "$W/c.jsonl" --out "$W/killed" --tokenizer "$TOK" --val-fraction 0.2 --quiet
! ls -d "$W"/killed/.prepare-* >/dev/null 2>&1 || fail "the staging of the killed run is still there"
same_as_ref "$W/killed" "after a killed run"
echo "PASS: prepare formats (jsonl, json, gz, zst, parquet, directory), threads, bad inputs, killed run"
