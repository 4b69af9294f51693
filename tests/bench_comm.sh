#!/usr/bin/env bash
# zaya bench comm under mpirun -np 2: the nccl-tests table, #wrong all 0 on correct runs and
# > 0 with a deliberately broken reduction, busbw = algbw x factor (hand values for n = 2),
# the CSV/JSON files, comm-sweep, and the raw-MPI reference program.
#   bash tests/bench_comm.sh <zaya-binary> <build-dir>
set -euo pipefail
ZAYA=${1:?usage: bench_comm.sh <zaya-binary> <build-dir>}
BUILD=${2:?usage: bench_comm.sh <zaya-binary> <build-dir>}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPIRUN=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. All six collectives, two dtypes and two reductions, with the check on.
"${MPIRUN[@]}" "$ZAYA" bench comm -b 8 -e 1M -f 8 -c 1 -n 3 -w 1 --all -d float,bfloat16 -o sum,max \
  --csv "$T/comm.csv" --json "$T/comm.json" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "bench comm exited non-zero"; }
grep -q '#wrong' "$T/out.txt" || fail "no table header"
grep -q '^# Avg bus bandwidth' "$T/out.txt" || fail "no '# Avg bus bandwidth' footer"
grep -q 'Rank  1' "$T/out.txt" || fail "rank 1 not listed: not run with 2 ranks?"
head -1 "$T/comm.csv" | grep -qx 'op,nranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong' \
  || fail "comm.csv header"
python3 - "$T/comm.csv" "$T/comm.json" <<'PY' || fail "CSV/JSON content"
import csv, json, sys
sys.path.insert(0, "tests/lib")
from checks import check  # not assert: python3 -O drops those
rows = list(csv.DictReader(open(sys.argv[1])))
factor = {"all_reduce": 1.0, "reduce_scatter": 0.5, "all_gather": 0.5, "all_to_all": 0.5, "broadcast": 1.0, "sendrecv": 1.0}
ops = {r["op"] for r in rows}
check(ops == set(factor), ops)
# (2 dtypes x 2 redops) x 2 reducing ops + 2 dtypes x 4 other ops = 16 tables of 6 sizes (8 B .. 256 KiB)
check(len(rows) == 96, len(rows))
for r in rows:
    check(r["nranks"] == "2", r)
    check(r["oop_wrong"] == "0" and r["ip_wrong"] == "0", r)
    for v in ("oop", "ip"):
        t, alg, bus = float(r[v + "_time_us"]), float(r[v + "_algbw"]), float(r[v + "_busbw"])
        check(t > 0)
        check(abs(alg - int(r["size_bytes"]) / 1e9 / (t * 1e-6)) <= 1e-2 * alg + 2e-6, r)
        check(abs(bus - alg * factor[r["op"]]) <= 1e-4 * alg + 2e-6, r)
    check(r["root"] == ("0" if r["op"] == "broadcast" else "-1"), r)
j = json.load(open(sys.argv[2]))
check(j["nranks"] == 2 and j["total_wrong"] == 0 and len(j["tables"]) == 16, (j["nranks"], len(j["tables"])))
PY

# 2. The broken reduction must show up in #wrong (and fail the run).
if "${MPIRUN[@]}" "$ZAYA" bench comm -b 1K -e 64K -f 4 -c 1 -n 1 -w 0 --op all_reduce,reduce_scatter \
    -d float,bfloat16 --debug-break-reduction --csv "$T/broken.csv" > "$T/broken.txt" 2>&1; then
  fail "a broken reduction passed the check"
fi
grep -q 'wrong elements in the results' "$T/broken.txt" || { cat "$T/broken.txt"; fail "no #wrong error"; }
python3 - "$T/broken.csv" <<'PY' || fail "broken reduction: #wrong not > 0 in every row"
import csv, sys
sys.path.insert(0, "tests/lib")
from checks import check
rows = list(csv.DictReader(open(sys.argv[1])))
check(len(rows) == 16, len(rows))  # 2 ops x 2 dtypes x 4 sizes
for r in rows:
    check(int(r["oop_wrong"]) > 0 and int(r["ip_wrong"]) > 0, r)
PY

# 3. Bad flags: one-line errors.
if "$ZAYA" bench comm -d float99 > "$T/bad.txt" 2>&1; then fail "bad dtype accepted"; fi
grep -q "zaya: error: unknown dtype 'float99'" "$T/bad.txt" || { cat "$T/bad.txt"; fail "bad dtype message"; }
# An output file rank 0 cannot open must fail every rank, not leave the others waiting in a collective.
if timeout 120 "${MPIRUN[@]}" "$ZAYA" bench comm -b 1K -e 1K -n 1 -w 0 --csv /proc/nonexistent/x.csv > "$T/nocsv.txt" 2>&1; then
  fail "unwritable --csv accepted"
fi
grep -q "could not open --csv" "$T/nocsv.txt" || { cat "$T/nocsv.txt"; fail "unwritable --csv: no error on the other ranks (hang?)"; }

# 4. comm-sweep at 1 and 2 ranks, merged CSV (plots only when matplotlib is there).
PLOTS=none
for py in "${ZAYA_PYTHON:-}" /usr/bin/python3 python3; do
  [ -n "$py" ] && "$py" -c 'import matplotlib' 2>/dev/null && { PLOTS="$T/plots"; break; }
done
"$ZAYA" bench comm-sweep --max-ranks 2 -b 1K -e 16K -f 4 -n 2 -w 1 --csv "$T/sweep.csv" --plot-dir "$PLOTS" \
  > "$T/sweep.txt" 2>&1 || { cat "$T/sweep.txt"; fail "comm-sweep"; }
python3 - "$T/sweep.csv" <<'PY' || fail "comm-sweep CSV"
import csv, sys
sys.path.insert(0, "tests/lib")
from checks import check
rows = list(csv.DictReader(open(sys.argv[1])))
check({r["nranks"] for r in rows} == {"1", "2"}, rows)
check({r["op"] for r in rows} == {"all_reduce", "reduce_scatter", "all_gather", "broadcast"})
check(all(r["oop_wrong"] == "0" and r["ip_wrong"] == "0" for r in rows))
PY
if [ "$PLOTS" != none ]; then
  for op in all_reduce reduce_scatter all_gather broadcast; do
    [ -s "$PLOTS/comm_sweep_$op.png" ] || fail "no plot for $op"
  done
  [ -s "$PLOTS/comm_sweep_latency.png" ] || fail "no latency plot"
fi

# 5. The raw-MPI reference program used for the cross-check (built with the tests' binaries).
[ -x "$BUILD/bench_comm_ref" ] || fail "$BUILD/bench_comm_ref missing (cmake target test_binaries builds it)"
"${MPIRUN[@]}" "$BUILD/bench_comm_ref" allreduce 4096 65536 --iters 3 --warmup 1 > "$T/ref.csv"
grep -q '^all_reduce,2,65536,' "$T/ref.csv" || { cat "$T/ref.csv"; fail "bench_comm_ref output"; }
echo "bench_comm: OK"
