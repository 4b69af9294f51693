#!/usr/bin/env python3
"""scripts/validate_size.sh's comparison: zaya size's predicted zones and step against
zaya train-bench --profile, per config and dtype. Prints the table, writes OUT/validate.json
and (RECORD=1) bench/results/size_validate-<cpu>.json, which scripts/bench_tables.py renders.

  size_compare.py RESULTS OUT_JSON HAVE_TRAIN_BENCH LOAD_START LOAD_END KERNELS_JSON STEPS REPS ROUNDS RECORD RESULTS_DIR

RESULTS: lines "config dtype batch seq predicted.json measured.json". Exit 1 when a step is
outside 1 +/- 0.10 or a zone of at least 10% of the step outside 1 +/- 0.25; 2 without
train-bench."""
import json
import os
import re
import sys

STEP_TOL, ZONE_TOL, ZONE_SHARE = 0.10, 0.25, 0.10


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return line.split(":", 1)[1].split()
    return []


def main(a):
    results, out, have = a[0], a[1], a[2] == "1"
    load_start, load_end, kernels_json = float(a[3]), float(a[4]), a[5]
    steps, reps, rounds, record, results_dir = int(a[6]), int(a[7]), int(a[8]), a[9] == "1", a[10]
    cases, ok = [], True
    for line in open(results):
        name, dtype, b, s, pred, meas = line.split()
        p, m = json.load(open(pred)), json.load(open(meas))
        c = {"config": name, "dtype": dtype, "batch": int(b), "seq": int(s),
             "predicted_step_s": p["step_time_s"], "by_zones": p["step"].get("by_zones", False)}
        measured_zones = {z["zone"]: z["ms"] * 1e-3 for z in m.get("profile", [])}
        zones = []
        for z in p["step"]["zones"]:
            row = {"zone": z["zone"], "term": z["term"], "source": z["source"], "predicted_s": z["seconds"]}
            if z["zone"] in measured_zones:
                row["measured_s"] = measured_zones[z["zone"]]
            zones.append(row)
        c["zones"] = zones
        if "step_time_s" in m:
            st = m["step_time_s"]
            c["measured_step_s"] = st
            c["ratio"] = p["step_time_s"] / st
            c["step_ok"] = abs(c["ratio"] - 1) <= STEP_TOL
            ok &= c["step_ok"]
            for z in zones:
                if "measured_s" not in z:
                    continue
                z["share"] = z["measured_s"] / st
                z["ratio"] = z["predicted_s"] / z["measured_s"] if z["measured_s"] > 0 else None
                if z["share"] >= ZONE_SHARE:
                    z["ok"] = z["ratio"] is not None and abs(z["ratio"] - 1) <= ZONE_TOL
                    ok &= z["ok"]
        cases.append(c)
    kern = json.load(open(kernels_json)) if os.path.exists(kernels_json) else {}
    rec = {"benchmark": "size_validate",
           "command": "scripts/validate_size.sh (REPS=%d STEPS=%d ROUNDS=%d)" % (reps, steps, rounds),
           "cpu_model": kern.get("cpu_model", "?"), "cpu_flags": " ".join(cpu_flags()),
           "kernel_flags": kern.get("cpu_flags", []), "runtime": kern.get("runtime", ""),
           "threads": kern.get("threads", 0), "load_average_start": load_start, "load_average_end": load_end,
           "step_tolerance": STEP_TOL, "zone_tolerance": ZONE_TOL, "zone_share": ZONE_SHARE, "cases": cases}
    json.dump(rec, open(out, "w"), indent=2)
    print(f"{'config':13s} {'dtype':5s} {'zone':40s} {'pred ms':>9s} {'meas ms':>9s} {'ratio':>6s} {'share':>6s}")
    for c in cases:
        for z in c["zones"]:
            if "measured_s" not in z:
                continue
            r = f"{z['ratio']:6.2f}" if z.get("ratio") else f"{'-':>6s}"
            flag = "" if z.get("ok", True) else "  <-- outside 1 +/- 0.25"
            print(f"{c['config']:13s} {c['dtype']:5s} {z['zone']:40s} {z['predicted_s'] * 1e3:9.3f} "
                  f"{z['measured_s'] * 1e3:9.3f} {r} {z.get('share', 0) * 100:5.1f}%{flag}")
        if "ratio" in c:
            flag = "" if c["step_ok"] else "  <-- outside 1 +/- 0.10"
            print(f"{c['config']:13s} {c['dtype']:5s} {'STEP':40s} {c['predicted_step_s'] * 1e3:9.2f} "
                  f"{c['measured_step_s'] * 1e3:9.2f} {c['ratio']:6.3f}{flag}")
        print()
    print(f"load average {load_start:.2f} at the start, {load_end:.2f} at the end; wrote {out}")
    if record and have:
        slug = re.sub(r"[^a-z0-9]+", "-", rec["cpu_model"].lower()).strip("-") or "cpu"
        path = os.path.join(results_dir, f"size_validate-{slug}.json")
        json.dump(rec, open(path, "w"), indent=2, sort_keys=True)
        print(f"wrote {path}")
    if not have:
        print("zaya train-bench is not available in this build: predictions only (no ratios)")
        sys.exit(2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
