#!/usr/bin/env python3
"""Checks a zaya eval result against chance, in standard errors.

  eval_chance.py RESULTS.json TASK METRIC CHANCE (--above K | --within K) [--min-n N]

--above K:  (value - chance) / stderr >= K   (a trained model beats chance)
--within K: |value - chance| / stderr <= K   (a random model is at chance)
Prints one line with the figures; exits 1 when the check fails.
"""
import argparse
import json
import math
import sys

ap = argparse.ArgumentParser()
ap.add_argument("results")
ap.add_argument("task")
ap.add_argument("metric")
ap.add_argument("chance", type=float)
g = ap.add_mutually_exclusive_group(required=True)
g.add_argument("--above", type=float)
g.add_argument("--within", type=float)
ap.add_argument("--min-n", type=int, default=0)
a = ap.parse_args()
r = json.load(open(a.results))
res, n = r["results"][a.task], r["n_samples"][a.task]
v, se = res[a.metric], res[a.metric + "_stderr"]
# A perfect or null score has stderr 0: then z is +-inf (or 0 at chance itself). A NaN value
# or stderr fails both checks (every comparison with NaN is false).
z = (v - a.chance) / se if se else math.copysign(math.inf, v - a.chance) if v != a.chance else 0.0
ok = n >= a.min_n and math.isfinite(v) and (z >= a.above if a.above is not None else abs(z) <= a.within)
want = f">= {a.above:g}" if a.above is not None else f"within +-{a.within:g}"
print(f"{a.task} {a.metric} = {v:.4f} +- {se:.4f} over {n} items: {z:+.2f} stderr from chance {a.chance:g} "
      f"(wanted {want}{f', n >= {a.min_n}' if a.min_n else ''}): {'OK' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
