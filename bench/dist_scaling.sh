#!/usr/bin/env bash
# Distributed training figures (issue 4) for zaya1-small on this machine, with zaya dist-check
# (random tokens, Muon, global batch 8 x 256, 6 steps; figures after the first step):
# tokens/s at 1 rank x 1 and 2 threads, DP=2 x 1 thread with ZeRO-1 (overlapped and not),
# DP=2 with a replicated optimizer (plain all-reduce) and EP=2; communication per step
# (exposed gradient reduction, parameter gather, EP all-to-all) and peak RSS per rank.
#   bash bench/dist_scaling.sh [path/to/zaya]
set -uo pipefail
Z=${1:-build/zaya}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
A=(--config configs/zaya1-small.toml --batch 8 --seq 256 --steps 6 --optimizer muon)
show() { grep -E "throughput|peak_rss|^step [3-6]"; }
echo "== 1 rank x 1 thread";  OMP_NUM_THREADS=1 "$Z" dist-check "${A[@]}" | show
echo "== 1 rank x 2 threads"; OMP_NUM_THREADS=2 "$Z" dist-check "${A[@]}" | show
echo "== DP=2 x 1 thread, ZeRO-1, reduction overlapped with backward"
OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np 2 "$Z" dist-check "${A[@]}" | show
echo "== DP=2 x 1 thread, ZeRO-1, reduction after backward (--no-overlap)"
OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np 2 "$Z" dist-check "${A[@]}" --no-overlap | show
echo "== DP=2 x 1 thread, replicated optimizer (--no-zero1): peak RSS without ZeRO-1"
OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np 2 "$Z" dist-check "${A[@]}" --no-zero1 | show
echo "== EP=2 x 1 thread"
OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np 2 "$Z" dist-check "${A[@]}" --ep 2 | show
