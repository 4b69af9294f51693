#!/usr/bin/env bash
# The Parquet reader against an independent writer: parquet-wasm (arrow-rs's writer, pinned in
# tools/npm_packages.sh set parquet; tests/parquet_oracle.mjs) writes the same strings --
# nulls, an empty string, non-ASCII, multi-line, control characters, a row over 1 MB -- in
# every combination zaya supports (UNCOMPRESSED / SNAPPY / GZIP / ZSTD x data page v1 / v2 x
# PLAIN / dictionary, several row groups of many pages, a column between two others, optional
# and required), and `zaya dev parquet-dump` must print exactly those strings. Then what zaya
# refuses: other encodings, codecs, a nested column, a non-string column, a missing column, a
# file cut short and a corrupt page are each a one-line error naming the file (and the column
# and feature) with a non-zero exit. No node, or no package and no way to fetch it, is a
# FAILURE, not a skip.
#   bash tests/parquet_oracle.sh <zaya-binary> <build-dir>     (from the repo root)
set -euo pipefail
ZAYA=${1:?usage: parquet_oracle.sh <zaya-binary> <build-dir>}
BUILD=${2:?usage: parquet_oracle.sh <zaya-binary> <build-dir>}
ROOT=$(bash tools/npm_packages.sh parquet)
W="$BUILD/parquet_oracle"
rm -rf "$W"
mkdir -p "$W"
node tests/parquet_oracle.mjs "$ROOT" write "$W"
status=0
while read -r file set; do
  "$ZAYA" dev parquet-dump "$W/$file" --column text >"$W/$file.jsonl" 2>"$W/$file.err" ||
    { echo "FAIL: $file: $(cat "$W/$file.err")"; status=1; }
done <"$W/cases.txt"
node tests/parquet_oracle.mjs "$ROOT" check "$W" || status=1

# expect_error FILE COLUMN TEXT...: zaya exits non-zero with one line holding every TEXT.
expect_error() {
  local file=$1 column=$2 out rc=0
  shift 2
  out=$("$ZAYA" dev parquet-dump "$file" --column "$column" 2>&1 >/dev/null) || rc=$?
  if [ $rc -eq 0 ]; then echo "FAIL: $file --column $column: exit 0, expected an error"; status=1; return; fi
  if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then echo "FAIL: $file: not one line: $out"; status=1; return; fi
  for want in "$@"; do
    case "$out" in *"$want"*) ;; *) echo "FAIL: $file: '$out' lacks '$want'"; status=1; return ;; esac
  done
  echo "ok: $out"
}
expect_error "$W/delta-length.parquet" text "delta-length.parquet" 'column "text"' "encoding DELTA_LENGTH_BYTE_ARRAY is not supported"
expect_error "$W/delta-byte-array.parquet" text "delta-byte-array.parquet" 'column "text"' "encoding DELTA_BYTE_ARRAY is not supported"
expect_error "$W/lz4.parquet" text "lz4.parquet" 'column "text"' "compression LZ4_RAW is not supported"
expect_error "$W/brotli.parquet" text "brotli.parquet" 'column "text"' "compression BROTLI is not supported"
expect_error "$W/list.parquet" text "list.parquet" 'column "text"' "nested columns"
expect_error "$W/nullable-snappy-v1-dict.parquet" id 'column "id"' "type INT32 is not supported"
expect_error "$W/nullable-snappy-v1-dict.parquet" body 'no column "body"' "the file has: id, text, url"
# Cut short: half the file, and all but its last byte.
f="$W/nullable-zstd-v2-dict.parquet"
head -c $(($(stat -c %s "$f") / 2)) "$f" >"$W/cut-half.parquet"
head -c $(($(stat -c %s "$f") - 1)) "$f" >"$W/cut-end.parquet"
expect_error "$W/cut-half.parquet" text "cut-half.parquet" "not a Parquet file"
expect_error "$W/cut-end.parquet" text "cut-end.parquet" "not a Parquet file"
# A corrupt page: 8 bytes overwritten in the middle of a file that is one gzip column.
f="$W/corrupt-me.parquet"
cp "$f" "$W/corrupt.parquet"
printf '\x55\xaa\x55\xaa\x55\xaa\x55\xaa' | dd of="$W/corrupt.parquet" bs=1 seek=$(($(stat -c %s "$f") / 2)) conv=notrunc status=none
"$ZAYA" dev parquet-dump "$f" >/dev/null || { echo "FAIL: $f unchanged does not read"; status=1; }
expect_error "$W/corrupt.parquet" text "corrupt.parquet" 'column "text"' "page at offset"
[ $status -eq 0 ] && echo "PASS: zaya's Parquet reader reads what parquet-wasm writes and refuses what it does not support"
exit $status
