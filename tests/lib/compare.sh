# Loss comparators of the distributed script tests (sourced by tests/lib/dist_env.sh and
# tests/dist_check.sh; their negative controls are in tests/compare_nan.sh):
#   compare_losses NAME TOL N   stdin: "a b" per line, one step's loss in two runs
#   step_losses DIR             "STEP LOSS" per step record of DIR/metrics.jsonl
#   same_losses A B TOL [N]     the N (20) steps run B recorded, each against run A's same step
#                               (runs live in $T/A, $T/B; calls `fail` on a mismatch)
# Every value must be a finite number: a NaN loss (printed "nan" or "-nan", written to JSON as
# null) would otherwise pass, as awk reads such text as 0 and NaN > TOL is false.

compare_losses() {
  awk -v n="$1" -v tol="$2" -v want="$3" '
    BEGIN { m = 0; c = 0; bad = 0 }
    function finite(x) { return x ~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ }
    {
      if (NF != 2 || !finite($1) || !finite($2)) { if (!bad++) first = NR ": " $0; next }
      d = $1 - $2; if (d < 0) d = -d
      if (!(d <= m)) m = d
      c++
    }
    END {
      printf "%s: %d steps, max |loss diff| %.3g", n, c, m
      if (bad) printf ", %d not finite numbers (line %s)", bad, first
      printf "\n"
      if (bad || c != want || !(m <= tol + 0)) exit 1
    }'
}

step_losses() {
  grep '"type":"step"' "$1/metrics.jsonl" |
    sed -e 's/.*"step":\([0-9]*\)[,}].*"loss":\([^,}]*\).*/\1 \2/' -e 's/.*"loss":\([^,}]*\).*"step":\([0-9]*\)[,}].*/\2 \1/'
}

same_losses() {
  LC_ALL=C join -o 1.2,2.2 <(step_losses "$T/$1" | LC_ALL=C sort -k1,1) <(step_losses "$T/$2" | LC_ALL=C sort -k1,1) |
    compare_losses "$1 vs $2" "$3" "${4:-20}" || fail "$1 vs $2: losses differ by more than $3 (or not ${4:-20} steps)"
  [ "$(step_losses "$T/$2" | wc -l)" -eq "${4:-20}" ] || fail "$2: expected ${4:-20} step records"
}
