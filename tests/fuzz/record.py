"""Writes bench/results/fuzz-<cpu>.json from the per-target lines tests/fuzz/run.sh writes
(BUILD/summary.tsv: target, executions, exec/s, slowest s, peak RSS MB, exit code, result).
Several runs' lines may be joined into one record; COMMAND says how they were run.
    python3 tests/fuzz/record.py SUMMARY.tsv COMMAND RUNS SEED TIMEOUT   (from the repository root)"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peer"))
import record  # noqa: E402

path, command, runs, seed, timeout = sys.argv[1:]
targets = []
for line in open(path):
    t, execs, persec, slow, rss, rc, res = line.rstrip("\n").split("\t")
    targets.append({"target": t, "executions": int(execs or 0), "exec_per_s": int(persec or 0),
                    "slowest_s": int(slow or 0), "peak_rss_mb": int(rss or 0), "exit_code": int(rc),
                    "crashes": 0 if rc == "0" else 1, "result": res})
print("fuzz: record", record.write("fuzz", command, 1, {"runs_asked": int(runs), "seed": int(seed),
                                                        "input_timeout_s": int(timeout), "targets": targets}))
