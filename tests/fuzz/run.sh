#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/CMakeLists.txt, clang, ASan + UBSan) and runs them.
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]
# Each target first runs its regress-* seeds (every crash found and fixed) one by one and
# checks each still reaches the check that fixed it (tests/fuzz/regress.tsv), then replays
# its seed corpus (tests/fuzz/corpus/<target>/), then fuzzes for SECONDS (0: replay only; runs:
# exactly FUZZ_RUNS inputs, no time limit). New inputs go
# to BUILD_DIR/work/<target>/, never into the repository; a crash, leak, sanitizer report
# or an input slower than FUZZ_TIMEOUT seconds leaves its input in BUILD_DIR/artifacts/ and
# fails the run. Prints one line per target: executions, corpus size, result.
# Environment: FUZZ_RUNS (fuzz each target until it has run this many inputs, SECONDS
# then being a cap that fails the target if reached first; `make fuzz` asks 1,000,000),
# FUZZ_SEED (libFuzzer's -seed, default 1, printed), FUZZ_TIMEOUT (per input, default 10;
# `make fuzz` uses 1), FUZZ_RSS_MB
# (default 2560), FUZZ_JOBS (build parallelism, default 2), CXX_FUZZ (default clang++-14),
# FUZZ_NO_BUILD=1 (skip the build step).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mkdir -p "$1"; build="$(cd "$1" && pwd)"; secs="$2"; shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(safetensors hf_index hf_config model_toml run_toml ckpt_manifest tokenizer shard ids nccl bench_profile
  gguf spm_model eval_task hardware)
[ $# -eq 0 ] && targets+=(parquet)
[ $# -eq 0 ] && targets+=(megatron_idx)
[ $# -eq 0 ] && targets+=(jsonl)
cxx="${CXX_FUZZ:-clang++-14}"
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (make deps installs clang-14)"; exit 1; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
  rm -f "$build.configure.log"
fi
t0=$(date +%s)
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then  # FUZZ_NO_BUILD=1: fuzz the binaries as they are
  cmake --build "$build" -j "${FUZZ_JOBS:-2}" >"$build/build.log" 2>&1 || { tail -50 "$build/build.log"; exit 1; }
  echo "fuzz: built $build in $(( $(date +%s) - t0 )) s"
fi

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$here/ubsan.supp:${UBSAN_OPTIONS:-}"
mkdir -p "$build/artifacts"
status=0
summary="$build/summary.tsv"; : > "$summary"
seed_value=${FUZZ_SEED:-1}  # libFuzzer's -seed: a run is repeatable (FUZZ_SEED=0: libFuzzer picks one)
echo "fuzz: seed $seed_value"
printf '%-16s %12s %8s %8s %8s %8s  %s\n' target executions exec/s corpus slowest rss_mb result
for t in "${targets[@]}"; do
  bin="$build/fuzz_$t"
  work="$build/work/$t"
  [ "${FUZZ_FRESH:-0}" = 1 ] && rm -rf "$work"  # FUZZ_FRESH=1: start from the seed corpus only
  mkdir -p "$work"
  log="$build/work/$t.log"
  args=(-timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_MB:-2560}" -print_final_stats=1
        -artifact_prefix="$build/artifacts/$t-" -dict="$here/fuzz.dict" -seed="$seed_value")
  if [ "$secs" = runs ]; then  # exactly FUZZ_RUNS inputs, however long they take
    args+=(-runs="${FUZZ_RUNS:?SECONDS=runs needs FUZZ_RUNS}")
  elif [ "$secs" -gt 0 ]; then
    args+=(-max_total_time="$secs")
    [ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
  else
    args+=(-runs=0)
  fi
  t1=$(date +%s)
  # Each regress-* seed must still reach the check that fixed its crash: the error it
  # throws (recorded through ZAYA_FUZZ_TRACE) contains the text regress.tsv names for it.
  for seed in "$here/corpus/$t"/regress-*; do
    [ -e "$seed" ] || continue
    want=$(awk -F'\t' -v k="$t/${seed##*/}" '$1 == k {print $2}' "$here/regress.tsv")
    if [ -z "$want" ]; then
      echo "regress $t/${seed##*/}: no line in tests/fuzz/regress.tsv names the check it must reach"; status=1; continue
    fi
    trace="$build/work/$t.regress-trace"; rm -f "$trace"
    (cd "$build/work" && ZAYA_FUZZ_TRACE="$trace" "$bin" "$seed") >"$log" 2>&1
    if ! grep -qF -- "$want" "$trace" 2>/dev/null; then
      echo "regress $t/${seed##*/}: does not reach '$want'; its errors:"; sed 's/^/    /' "$trace" 2>/dev/null | head -3
      status=1
    fi
  done
  (cd "$build/work" && "$bin" "${args[@]}" "$work" "$here/corpus/$t") >"$log" 2>&1
  rc=$?
  fz_stat() { awk -v k="stat::$1:" '$1 == k {v = $2} END {print v}' "$log"; }
  execs=$(fz_stat number_of_executed_units) persec=$(fz_stat average_exec_per_sec)
  slow=$(fz_stat slowest_unit_time_sec) rss=$(fz_stat peak_rss_mb)
  ncorp=$(ls "$work" "$here/corpus/$t" 2>/dev/null | grep -vc ':$')
  if [ $rc -eq 0 ] && [ "$secs" != runs ] && [ "$secs" -gt 0 ] && [ -n "${FUZZ_RUNS:-}" ] && [ "${execs:-0}" -lt "$FUZZ_RUNS" ]; then
    res="FAILED: ${execs:-0} executions in the ${secs} s cap, fewer than FUZZ_RUNS=$FUZZ_RUNS"
    status=1
  elif [ $rc -eq 0 ]; then
    res="ok ($(( $(date +%s) - t1 )) s)"
  else
    res="FAILED rc=$rc, log $log"
    status=1
  fi
  printf '%-16s %12s %8s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${persec:-?}" "$ncorp" "${slow:-?}s" "${rss:-?}" "$res"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${execs:-0}" "${persec:-0}" "${slow:-0}" "${rss:-0}" "$rc" "$res" >> "$summary"
  if [ $rc -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|Test unit written|runtime error|==[0-9]+==' "$log" | head -8 | sed 's/^/    /'
  fi
done
# FUZZ_RECORD=1 (make fuzz): bench/results/fuzz-<cpu>.json, rendered by scripts/bench_tables.py.
if [ -n "${FUZZ_RECORD:-}" ]; then
  (cd "$root" && python3 tests/fuzz/record.py "$summary" \
    "FUZZ_RUNS=${FUZZ_RUNS:-0} FUZZ_SEED=$seed_value FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10} bash tests/fuzz/run.sh BUILD $secs ${targets[*]}" \
    "${FUZZ_RUNS:-0}" "$seed_value" "${FUZZ_TIMEOUT:-10}")
fi
exit $status
