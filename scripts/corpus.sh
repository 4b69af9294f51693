#!/usr/bin/env bash
# Extracts the King James Bible (Debian package bible-kjv) as plain text for `zaya prepare`.
#
#   scripts/corpus.sh OUT.txt [RANGE...]
#
# RANGE is any verse range the `bible` program accepts (default: the whole text,
# Gen1:1-Rev22:21). The output has one verse per line, without verse references, and one
# document per chapter: chapters are separated by a blank line, which is how `zaya prepare`
# splits documents. The file is written to a temporary name and renamed when complete.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT.txt [RANGE...]" >&2
  exit 2
fi
out=$1
shift
ranges=("$@")
[ ${#ranges[@]} -eq 0 ] && ranges=("Gen1:1-Rev22:21")
if ! command -v bible >/dev/null 2>&1; then
  echo "$0: the 'bible' program is missing: install the Debian package bible-kjv (tools/install_deps.sh)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# `bible -f` prints one verse per line as "<Book><chapter>:<verse> <text>" (e.g. "1Sm3:4 ...").
bible -f "${ranges[@]}" </dev/null | awk '
  match($0, /^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ /) {
    ref = substr($0, 1, RLENGTH - 1)
    chapter = ref; sub(/:[0-9]+$/, "", chapter)
    if (NR > 1 && chapter != last) print ""
    last = chapter
    print substr($0, RLENGTH + 1)
    n++
    next
  }
  { bad++ }
  END {
    if (n == 0) { print "corpus.sh: no verses in the output of bible" > "/dev/stderr"; exit 1 }
    if (bad > 0) { print "corpus.sh: " bad " unexpected lines from bible" > "/dev/stderr"; exit 1 }
  }' >"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "corpus: $(wc -c <"$out") bytes, $(grep -c . "$out") verses, $(( $(grep -c '^$' "$out") + 1 )) chapters -> $out" >&2
