#!/usr/bin/env bash
# ctest case script.fuzz: builds the libFuzzer targets (tests/fuzz/, clang + ASan + UBSan,
# only the parser sources) into BUILD/fuzz, replays every seed corpus -- including the
# inputs of every crash found and fixed -- and fuzzes each target FUZZ_TEST_SECONDS (default
# 3) more, each time from the seed corpus alone (FUZZ_FRESH). Any crash, sanitizer report, leak or input slower than 30 s fails it; the time
# budget only bounds how long we fuzz. `make fuzz` is the long run.
#   usage: tests/fuzz.sh ZAYA_BIN BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_FRESH=1 FUZZ_TIMEOUT="${FUZZ_TIMEOUT:-30}" exec bash tests/fuzz/run.sh "$2/fuzz" "${FUZZ_TEST_SECONDS:-3}"
