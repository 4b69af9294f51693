#!/usr/bin/env bash
# make bench-report: characterise this machine into bench/report/ (CSVs, JSON, PNG plots,
# summary.md), with cross-checks against independent programs (bench/*_ref.cpp).
#   bash scripts/bench_report.sh [build/zaya]
# Environment: REPORT (output dir, default bench/report), NP (ranks for comm, default 2),
# MAX_RANKS (comm-sweep, default 4), COMM_MAX (default 64M), ROUNDS (cross-check rounds, default 5),
# QUICK=1 (small sizes, minutes less).
set -euo pipefail
ZAYA=${1:-build/zaya}
[ -x "$ZAYA" ] || { echo "bench_report: no zaya binary at '$ZAYA' (run make build)" >&2; exit 1; }
ZAYA=$(realpath "$ZAYA")
BUILD=$(dirname "$ZAYA")
cd "$(dirname "$0")/.."
OUT=${REPORT:-bench/report}
NP=${NP:-2}
MAX_RANKS=${MAX_RANKS:-4}
COMM_MAX=${COMM_MAX:-64M}
QUICK=${QUICK:-0}
ROUNDS=${ROUNDS:-5}
X="$OUT/crosscheck"
RAW="$OUT/raw"  # printed tables: kept out of $OUT, where `zaya size --profile-from` reads every *.txt as one nccl-tests run
mkdir -p "$OUT"
rm -rf "$X" "$RAW"
rm -f "$OUT"/*.csv "$OUT"/*.json "$OUT"/*.png "$OUT"/*.txt "$OUT"/summary.md  # a fresh report, peak.json included
mkdir -p "$X" "$RAW"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPIRUN+=(--allow-run-as-root)
for ref in bench_comm_ref bench_stream_ref bench_sgemm_ref; do
  [ -x "$BUILD/$ref" ] || { echo "bench_report: missing $BUILD/$ref (built from bench/${ref#bench_}.cpp)" >&2; exit 1; }
done
log() { echo "[bench-report] $*"; }
# Debian's python3-matplotlib is not seen by a pyenv/venv python3 on the PATH.
PY=python3
for cand in "${ZAYA_PYTHON:-}" /usr/bin/python3 python3; do
  if [ -n "$cand" ] && "$cand" -c 'import matplotlib' 2>/dev/null; then PY=$cand; break; fi
done
THREADS=$(nproc)
if [ "$QUICK" = 1 ]; then
  COMM_MAX=4M; MEM_ARGS=(--array-bytes 64M --sweep-max 256M); GEMM_SWEEP=(-m 256:1024:256 -n 256:1024:256 -k 512)
  PRESET_TOKENS=128; MAX_RANKS=2; SWEEP_MAX=1M
else
  MEM_ARGS=(); GEMM_SWEEP=(-m 256:2048:256 -n 256:2048:256 -k 1024); PRESET_TOKENS=512; SWEEP_MAX=16M
fi

log "machine"
{
  grep -m1 'model name' /proc/cpuinfo | sed 's/^model name\s*: /cpu: /'
  echo "cpus: $(nproc), memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
  getconf -a | grep -E '^LEVEL[123]_(D)?CACHE_SIZE' | tr -s ' '
  echo "mpirun: $(mpirun --version | head -1)"
  "$ZAYA" bench gemm -m 64 -n 64 -k 64 --dtype fp32 --min-time 0 --min-iters 1 | grep -E '^# (zaya bench gemm|cpu)' | sed 's/^# //'
} > "$OUT/machine.txt"
cat "$OUT/machine.txt"

log "comm: ${NP} ranks, all six collectives, 8 B .. $COMM_MAX"
"${MPIRUN[@]}" -np "$NP" "$ZAYA" bench comm -b 8 -e "$COMM_MAX" -f 2 -c 1 --all \
  --csv "$OUT/comm.csv" --json "$OUT/comm.json" | tee "$RAW/comm.txt"
log "comm cross-check: zaya vs a raw MPI loop (OSU style), interleaved, $ROUNDS rounds each"
REF_SIZES=(1048576 4194304)
[ "$QUICK" = 1 ] || REF_SIZES+=(16777216 67108864)
for r in $(seq "$ROUNDS"); do
  "${MPIRUN[@]}" -np "$NP" "$ZAYA" bench comm --op all_reduce,all_gather -b "${REF_SIZES[0]}" -e "${REF_SIZES[-1]}" -f 4 \
    -n 20 -w 5 -c 0 --csv "$X/comm_zaya.$r.csv" > /dev/null
  for op in allreduce allgather; do
    "${MPIRUN[@]}" -np "$NP" "$BUILD/bench_comm_ref" "$op" "${REF_SIZES[@]}" --iters 20 --warmup 5 > "$X/comm_ref_$op.$r.csv"
  done
done
cat "$X"/comm_ref_*.csv

log "comm-sweep: 1 .. $MAX_RANKS ranks"
"$ZAYA" bench comm-sweep --max-ranks "$MAX_RANKS" -b 8 -e "$SWEEP_MAX" -f 4 -n 10 -w 2 \
  --csv "$OUT/comm_sweep.csv" --plot-dir "$OUT"
"$PY" scripts/plot_bench.py comm "$OUT/comm.csv" "$OUT/comm_busbw.png"

log "gemm: (M, N) grid for the heatmap"
"$ZAYA" bench gemm "${GEMM_SWEEP[@]}" --dtype fp32,bf16 --csv "$OUT/gemm_sweep.csv" --heatmap "$OUT/gemm_heatmap.png"
log "gemm: transformer shapes of ZAYA1-base (tokens $PRESET_TOKENS)"
"$ZAYA" bench gemm --preset configs/zaya1-base.toml --tokens "$PRESET_TOKENS" --seq 1024 --dtype fp32,bf16 \
  --csv "$OUT/gemm_presets.csv" --json "$OUT/gemm_presets.json"
log "gemm: peak search"
"$ZAYA" bench gemm --peak --dtype fp32,bf16 --csv "$OUT/gemm_peak.csv" --json "$OUT/gemm_peak.json" \
  --peak-json "$OUT/peak.json"
{ head -1 "$OUT/gemm_sweep.csv"; for f in gemm_sweep gemm_presets gemm_peak; do tail -n +2 "$OUT/$f.csv"; done; } > "$OUT/gemm.csv"
read -r BM BN BK < <("$PY" -c "import json; b=json.load(open('$OUT/gemm_peak.json'))['best']['fp32']; print(b['M'], b['N'], b['K'])")
# The reference runs the OpenBLAS kernel zaya ran with (zaya may re-exec itself with OPENBLAS_CORETYPE).
CORE=$("$PY" -c "import json, re; print(re.search(r'core=(\S+)', json.load(open('$OUT/gemm_peak.json'))['runtime']).group(1))")
log "gemm cross-check: zaya vs cblas_sgemm direct (OpenBLAS core $CORE) at ${BM}x${BN}x${BK}, interleaved, $ROUNDS rounds each"
for r in $(seq "$ROUNDS"); do
  "$ZAYA" bench gemm -m "$BM" -n "$BN" -k "$BK" --dtype fp32 --min-time 0.5 --csv "$X/gemm_zaya.$r.csv" > /dev/null
  OPENBLAS_CORETYPE=$CORE "$BUILD/bench_sgemm_ref" "$BM" "$BN" "$BK" nt 2 0.5 | tee "$X/sgemm_ref.$r.txt"
done
log "OPENBLAS_CORETYPE: environment default vs Haswell (AVX2) vs SkylakeX/Cooperlake (AVX-512) vs autodetect"
{
  echo "OPENBLAS_CORETYPE in this environment: '${OPENBLAS_CORETYPE-<unset>}'; cblas_sgemm direct, $THREADS threads"
  for shape in "$BM $BN $BK" "1024 1024 1024" "512 512 512"; do
    read -r m n k <<< "$shape"
    echo "sgemm ${m}x${n}x${k} (nt):"
    echo "  environment:  $("$BUILD/bench_sgemm_ref" "$m" "$n" "$k" nt 3 0.3)"
    for c in Haswell SkylakeX Cooperlake; do
      echo "  $c: $(OPENBLAS_CORETYPE=$c "$BUILD/bench_sgemm_ref" "$m" "$n" "$k" nt 3 0.3)"
    done
    echo "  autodetect:   $(env -u OPENBLAS_CORETYPE "$BUILD/bench_sgemm_ref" "$m" "$n" "$k" nt 3 0.3)"
  done
} | tee "$OUT/coretype.txt"

log "mem: STREAM (arrays 4 x last-level cache unless QUICK) and the working-set sweep"
"$ZAYA" bench mem --threads "$THREADS" "${MEM_ARGS[@]}" --csv "$OUT/mem.csv" --json "$OUT/mem.json" \
  --peak-json "$OUT/peak.json" --sweep --sweep-csv "$OUT/mem_sweep.csv" --sweep-plot "$OUT/mem_sweep.png" \
  | tee "$RAW/mem.txt"
N=$("$PY" -c "import json; print(json.load(open('$OUT/mem.json'))['array_bytes'] // 8)")
log "mem cross-check: zaya vs the classic STREAM loops, $N elements per array, $THREADS threads, interleaved, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  "$ZAYA" bench mem --threads "$THREADS" --array-bytes $((N * 8)) --csv "$X/mem_zaya.$r.csv" > /dev/null
  OMP_NUM_THREADS=$THREADS "$BUILD/bench_stream_ref" "$N" > "$X/stream_ref.$r.txt"
  grep -i triad "$X/mem_zaya.$r.csv" "$X/stream_ref.$r.txt" || true
done

"$PY" scripts/plot_bench.py summary "$OUT"
log "done: $OUT/summary.md"
cat "$OUT/peak.json"
