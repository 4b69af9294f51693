#!/usr/bin/env bash
# zaya dashboard in a real browser (Debian's chromium, headless), during a short training run:
#  - the training run is paused (SIGSTOP) at two points; at each, the page's loss chart plots
#    exactly the step records written so far (data-points), and the second count is larger;
#  - a second run (a copy of the first's opening records plus a malformed line) appears with
#    its own rows and lines, the malformed line skipped and counted;
#  - a missing run directory is a warning at start-up and an error row on the page; an empty
#    one waits for its first log line;
#  - no script error, console error or failed load on the page (its #page-errors log and
#    chromium's own console log); bad arguments and a missing Chart.js are one-line errors.
# A screenshot of the finished run is left in BUILD/dashboard/dashboard.png.
set -euo pipefail
cd "$(dirname "$0")/.."
ZAYA=$(realpath "$1")
W=$(realpath -m "$2/dashboard")
export OMP_NUM_THREADS=1 ZAYA_LOG=warn
rm -rf "$W" && mkdir -p "$W"
die() { echo "dashboard: FAIL: $*" >&2; exit 1; }
CHROMIUM=$(command -v chromium || true)
[ -n "$CHROMIUM" ] || die "chromium is not installed (tools/install_deps.sh installs it)"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# Step records in a run's metrics.jsonl, complete lines only (a line being written is not one).
steps_in() { [ -f "$1" ] || { echo 0; return; }; head -n "$(wc -l <"$1")" "$1" | grep -c '"type":"step"' || true; }
stopped() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }
# Polls `cond` (a shell expression) every 0.1 s, for at most $2 seconds.
wait_for() {
  local i
  for ((i = 0; i < $2 * 10; ++i)); do eval "$1" && return 0; sleep 0.1; done
  die "timed out after $2 s waiting for: $1"
}

"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$W/data" --vocab-size 320 --val-fraction 0.3 >"$W/prepare.log" 2>&1 ||
  { cat "$W/prepare.log"; die "prepare"; }
source tests/lib/tiny_model.sh
tiny_model_toml dash-tiny >"$W/model.toml"
cat >"$W/run.toml" <<TOML
[run]
name = "live"
out_dir = "$W/live"
seed = 5
[model]
config = "$W/model.toml"
[[data.sources]]
name = "kjv"
dir = "$W/data"
[[phases]]
name = "base"
tokens = 5120
seq_len = 32
[batch]
global_batch = 4
micro_batch = 4
[optimizer]
kind = "adamw"
lr = 3e-3
[eval]
interval = 10
windows = 2
batch = 2
tasks = ["tests/data/eval/tasks/kjv_fewshot.json"]
tasks_interval = 20
tasks_limit = 4
TOML
M="$W/live/metrics.jsonl"

# Bad input: one line each, exit 1.
if "$ZAYA" dashboard "$W" --chart-js "$W/none.js" --port 0 >"$W/bad.out" 2>"$W/bad.err"; then die "a missing Chart.js was accepted"; fi
grep -q "^zaya: error: Chart.js not found at $W/none.js" "$W/bad.err" || die "missing Chart.js: $(cat "$W/bad.err")"
[ "$(wc -l <"$W/bad.err")" = 1 ] || die "missing Chart.js: more than one line: $(cat "$W/bad.err")"
if "$ZAYA" dashboard "$W" --port 70000 >"$W/bad.out" 2>"$W/bad.err"; then die "--port 70000 was accepted"; fi
grep -q "^zaya: error: dashboard: --port 70000 is not a TCP port" "$W/bad.err" || die "bad port: $(cat "$W/bad.err")"

# The run stops itself (SIGSTOP, fault injection) before steps 6 and 16: two fixed points to
# load the page at, whatever the machine's speed.
"$ZAYA" train --config "$W/run.toml" --inject stop:step=6 --inject stop:step=16 >"$W/train.log" 2>&1 &
train=$!
pids+=("$train")
mkdir -p "$W/empty" "$W/second"
"$ZAYA" dashboard "$W/live" "$W/second" "$W/missing" "$W/empty" --port 0 --refresh 1 >"$W/dash.out" 2>"$W/dash.err" &
pids+=("$!")
wait_for 'grep -q "^dashboard: http://127.0.0.1:[0-9]*/" "$W/dash.out"' 30
URL=$(sed -n 's#^dashboard: \(http://127.0.0.1:[0-9]*/\).*#\1#p' "$W/dash.out")
grep -q "run directory $W/missing does not exist" "$W/dash.err" || die "no start-up warning for the missing run: $(cat "$W/dash.err")"

# One page load in a fresh headless browser: the DOM after some virtual seconds of refreshes
# (loaded again, at most 5 times, until it holds a completed refresh).
load=0
load_page() {  # load_page URL OUT.html
  local i
  for ((i = 0; i < 5; ++i)); do
    load=$((load + 1))
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --no-default-browser-check \
      --disable-extensions --disable-dev-shm-usage --user-data-dir="$W/profile$load" \
      --enable-logging=stderr --v=0 --virtual-time-budget=4000 --dump-dom "$1" >"$2" 2>"$W/chromium$load.log" ||
      die "chromium failed: $(tail -5 "$W/chromium$load.log")"
    [ "$(python3 tests/dashboard_dom.py "$2" refreshes)" -ge 1 ] 2>/dev/null && return 0
  done
  die "the page never completed a refresh: $2"
}
# A load that must show no script error, console error or failed load.
browse() {  # browse OUT.html
  load_page "$URL" "$1"
  [ "$(python3 tests/dashboard_dom.py "$1" errors)" = 0 ] ||
    die "errors on the page: $(python3 tests/dashboard_dom.py "$1" error_text)"
  if grep -E 'CONSOLE|Uncaught|Failed to load resource' "$W/chromium$load.log" >"$W/console$load.txt"; then
    die "console messages from the page: $(head -5 "$W/console$load.txt")"
  fi
}
fact() { python3 tests/dashboard_dom.py "$1" "$2"; }

# First pause: steps 1-5 logged.
wait_for 'stopped "$train"' 120
s1=$(steps_in "$M")
[ "$s1" = 5 ] || die "the run stopped before step 6 with $s1 step records"
# The second run: the first 3 step records, one malformed line, a half-written last line.
grep '"type":"step"' "$M" | head -n 3 >"$W/second/metrics.jsonl"
printf '{"type":"step","step":\n{"type":"step","step":99,"lo' >>"$W/second/metrics.jsonl"
browse "$W/load1.html"
p1=$(fact "$W/load1.html" charts.loss.points)
[ "$p1" = $((s1 + 3)) ] || die "load 1: the loss chart plots $p1 points, the runs logged $s1 + 3 steps"
[ "$(fact "$W/load1.html" charts.loss.series)" = 2 ] || die "load 1: the loss chart has not one line per run"
[ "$(fact "$W/load1.html" runs.live.state)" = live ] || die "load 1: run 'live' is not shown live"
[ "$(fact "$W/load1.html" runs.second.state)" = live ] || die "load 1: the second run is not shown"
[ "$(fact "$W/load1.html" runs.second.records)" = 3 ] || die "load 1: the second run's records"
[ "$(fact "$W/load1.html" runs.second.malformed)" = 1 ] || die "load 1: the malformed line is not counted"
[ "$(fact "$W/load1.html" runs.missing.state)" = missing ] || die "load 1: the missing run is not shown as missing"
[ "$(fact "$W/load1.html" runs.empty.state)" = no_log ] || die "load 1: the empty run is not waiting"
grep -q "waiting for first log line" "$W/load1.html" || die "load 1: no 'waiting for first log line'"
grep -q "error: run directory $W/missing does not exist" "$W/load1.html" || die "load 1: no error for the missing run"
[ "$(fact "$W/load1.html" charts.entropy.series)" = 4 ] || die "load 1: expert load lines (2 runs x 2 MoE layers)"

# Second pause: steps 1-15 logged.
kill -CONT "$train"
wait_for '[ "$(steps_in "$M")" -ge 15 ] && stopped "$train"' 120
s2=$(steps_in "$M")
[ "$s2" = 15 ] || die "the run stopped before step 16 with $s2 step records"
browse "$W/load2.html"
p2=$(fact "$W/load2.html" charts.loss.points)
[ "$p2" = $((s2 + 3)) ] || die "load 2: the loss chart plots $p2 points, the runs logged $s2 + 3 steps"
[ "$p2" -gt "$p1" ] || die "the plotted points did not grow: $p1 then $p2"
kill -CONT "$train"

# The run's end: every chart has points, the page still has no error; a screenshot.
wait "$train" || { tail -20 "$W/train.log"; die "training failed"; }
n=$(steps_in "$M")
echo '{"type":"step","step":' >>"$M"  # a malformed line in the live run too
browse "$W/load3.html"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --no-default-browser-check --disable-extensions \
  --disable-dev-shm-usage --user-data-dir="$W/profile-shot" --hide-scrollbars --window-size=1500,1300 \
  --virtual-time-budget=4000 --screenshot="$W/dashboard.png" "$URL" >"$W/chromium-shot.log" 2>&1 ||
  die "chromium --screenshot failed: $(tail -5 "$W/chromium-shot.log")"
[ "$(fact "$W/load3.html" charts.loss.points)" = $((n + 3)) ] || die "load 3: loss points"
[ "$(fact "$W/load3.html" runs.live.malformed)" = 1 ] || die "load 3: the live run's malformed line is not counted"
for c in val_loss lr grad_norm tokens_per_s entropy skip tasks; do
  [ "$(fact "$W/load3.html" charts.$c.points)" -gt 0 ] || die "load 3: chart $c has no points"
done
[ -s "$W/dashboard.png" ] || die "no screenshot"

# The error checks can fail: a page whose Chart.js throws reports it in #page-errors.
echo 'throw new Error("chart.js is broken");' >"$W/broken.js"
"$ZAYA" dashboard "$W/live" --port 0 --chart-js "$W/broken.js" >"$W/broken.out" 2>&1 &
pids+=("$!")
wait_for 'grep -q "^dashboard: http://127.0.0.1:[0-9]*/" "$W/broken.out"' 30
load_page "$(sed -n 's#^dashboard: \(http://127.0.0.1:[0-9]*/\).*#\1#p' "$W/broken.out")" "$W/broken.html"
[ "$(fact "$W/broken.html" errors)" -ge 2 ] || die "a broken Chart.js: the page did not record its errors"
grep -q "chart.js is broken" "$W/broken.html" || die "a broken Chart.js: the script error is not shown"
grep -q "Chart.js did not load" "$W/broken.html" || die "a broken Chart.js: the page does not say so"
grep -q 'CONSOLE' "$W/chromium$load.log" || die "a broken Chart.js: chromium's log has no console message"
echo "dashboard: OK (loss points $p1 -> $p2 -> $((n + 3)) over 2 runs; screenshot $W/dashboard.png)"
