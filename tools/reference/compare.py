#!/usr/bin/env python3
"""Compare two safetensors files: A (checked, e.g. zaya's fp32 output) against B (the reference).

For every tensor in B: rel = max|a - b| / max(max|b|, 1e-30), the error relative to the tensor's
largest reference magnitude. Prints a table sorted worst-first; exits 1 if any tensor of B is
missing from A, has another shape, is not finite, or has rel > rtol; 0 otherwise. Tensors only in A
are listed but do not fail the comparison.

    compare.py A.safetensors B.safetensors [--rtol 1e-4] [--top N] [--quiet]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402


def compare(a, b, rtol):
    """Returns rows (name, shape, max_abs, rel, status), worst first."""
    rows = []
    for name in sorted(b):
        ref = np.asarray(b[name], dtype=np.float64)
        if name not in a:
            rows.append((name, ref.shape, float("inf"), float("inf"), "MISSING"))
            continue
        got = np.asarray(a[name], dtype=np.float64)
        if got.shape != ref.shape:
            rows.append((name, ref.shape, float("inf"), float("inf"), f"SHAPE {got.shape}"))
            continue
        if ref.size == 0:
            rows.append((name, ref.shape, 0.0, 0.0, "ok"))
            continue
        if not (np.isfinite(got).all() and np.isfinite(ref).all()):
            rows.append((name, ref.shape, float("inf"), float("inf"), "NONFINITE"))
            continue
        max_abs = float(np.abs(got - ref).max())
        rel = max_abs / max(float(np.abs(ref).max()), 1e-30)
        rows.append((name, ref.shape, max_abs, rel, "ok" if rel <= rtol else "FAIL"))
    rows.sort(key=lambda r: (r[4] == "ok", -r[3]))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--top", type=int, default=0, help="print only the N worst rows (0: all)")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    args = ap.parse_args(argv)
    a, b = st.load(args.a), st.load(args.b)
    rows = compare(a, b, args.rtol)
    bad = [r for r in rows if r[4] != "ok"]
    if not args.quiet:
        shown = rows[:args.top] if args.top > 0 else rows
        w = max([len(r[0]) for r in shown] + [4])
        print(f"{'name':<{w}}  {'shape':<18} {'max abs':>11} {'rel err':>11}  status")
        for name, shape, max_abs, rel, status in shown:
            print(f"{name:<{w}}  {str(list(shape)):<18} {max_abs:11.3e} {rel:11.3e}  {status}")
        extra = sorted(set(a) - set(b))
        if extra:
            print(f"({len(extra)} tensors only in {args.a}: {', '.join(extra[:5])}"
                  f"{' ...' if len(extra) > 5 else ''})")
    worst = rows[0][3] if rows else 0.0
    print(f"compare: {len(rows)} tensors, {len(bad)} over rtol {args.rtol:g}, "
          f"worst rel err {worst:.3e}" + (f" ({rows[0][0]})" if rows else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
