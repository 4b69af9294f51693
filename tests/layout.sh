#!/usr/bin/env bash
# The floors of the source tree (README.md "Layout") against the build and the tree:
#   1. README's layout lists the floors of CMakeLists.txt's ZAYA_FLOORS, top to bottom, then cli;
#   2. every folder under src/ is one of them;
#   3. no #include runs up a floor (the build's include roots catch it for compiled files;
#      this catches a header that no file of its own floor includes);
#   4. every benchmark binary a script test runs is in CMake's test_binaries target (what
#      `make test-asan` builds).
# Usage: bash tests/layout.sh [zaya] [build]   (arguments unused: ctest passes them)
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "layout: $*" >&2; exit 1; }

floors=$(sed -n 's/^set(ZAYA_FLOORS \(.*\))$/\1/p' CMakeLists.txt)
[ -n "$floors" ] || fail "CMakeLists.txt has no set(ZAYA_FLOORS ...) line"
dir_of() { [ "$1" = convert ] && echo quant/convert || echo "$1"; }
want=""
for f in $floors; do want="$(dir_of "$f") $want"; done
want="cli ${want% }"
got=$(sed -n '/^## Layout$/,/^## /p' README.md | sed -n 's#^    src/\([a-z_/]*\) .*#\1#p' | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$want" ] || fail "README.md's layout lists [$got], CMakeLists.txt's floors top to bottom are [$want]"

for d in src/*/ src/quant/*/; do
  d=${d#src/}; d=${d%/}
  case " $want " in *" $d "*) ;; *) fail "src/$d is not a floor: add it to ZAYA_FLOORS and README.md's layout" ;; esac
done

rank() { local i=0 f; for f in $floors; do [ "$f" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo 99; }
bad=0
while IFS= read -r file; do
  fl=$(echo "$file" | cut -d/ -f2); [[ $file == src/quant/convert/* ]] && fl=convert
  [ "$fl" = cli ] && continue
  r=$(rank "$fl")
  while IFS= read -r inc; do
    t=${inc%%/*}
    [ "$t" = quant ] && [[ $inc == quant/convert/* ]] && t=convert
    tr_=$(rank "$t")
    if [ "$tr_" -gt "$r" ]; then echo "layout: $file (floor $fl) includes $inc (floor $t, above it)" >&2; bad=1; fi
  done < <(sed -n 's/^#include "\([a-z_]*\/[a-z_/]*\.h\)".*/\1/p' "$file")
done < <(find src -name '*.h' -o -name '*.cpp' | sort)
[ $bad = 0 ] || exit 1

deps=$(sed -n 's/^ *add_dependencies(test_binaries \(.*\))$/\1/p' CMakeLists.txt)
[ -n "$deps" ] || fail "CMakeLists.txt has no add_dependencies(test_binaries ...) line"
for b in $(grep -ohE '\$\{?BUILD\}?/bench_[a-z0-9_]+' tests/*.sh tests/*/*.sh | sed 's#.*/##' | sort -u); do
  case " $deps " in *" $b "*) ;; *) fail "a script test runs $b, which test_binaries does not build" ;; esac
done
echo "layout: $(echo $want | wc -w) floors, README, CMakeLists.txt and the tree agree; no include runs up a floor"
