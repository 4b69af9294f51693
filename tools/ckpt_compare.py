#!/usr/bin/env python3
"""Compare the tensors of two zaya checkpoints (any layouts): max |a - b| per tensor group.

    ckpt_compare.py A B [--prefix param/] [--tol X] [--exact]

A and B: a step directory (or its manifest.json), a checkpoint root, its `latest` file, or a
run directory. Reads each tensor through the manifest's slices (fp32), so a DP=2 checkpoint
compares with a DP=1 one. --exact: every tensor must be bit-identical. Exit 1 when a tolerance
is exceeded or any compared value is NaN or infinite (in either checkpoint: identical NaNs
are a diverged run, not agreement). Used by the distributed tests; `zaya ckpt diff` is the
user-facing tool."""
import argparse, json, os, sys
import numpy as np


def follow(latest):
    name = open(latest).read().strip()
    d = os.path.join(os.path.dirname(latest), name)
    if not name or "/" in name or not os.path.exists(os.path.join(d, "manifest.json")):
        sys.exit(f"ckpt_compare: {latest}: does not name a step directory beside it")
    return d


def resolve(path):
    if os.path.isfile(path):  # manifest.json or a `latest` pointer
        if os.path.basename(path) == "manifest.json":
            return os.path.dirname(path) or "."
        return follow(path)
    if os.path.exists(os.path.join(path, "manifest.json")):
        return path
    for root in (path, os.path.join(path, "ckpt")):
        latest = os.path.join(root, "latest")
        if os.path.exists(latest):
            return follow(latest)
    sys.exit(f"ckpt_compare: {path}: not a checkpoint")


def tensors(path, prefix):
    d = resolve(path)
    m = json.load(open(os.path.join(d, "manifest.json")))
    out = {}
    for t in m["tensors"]:
        if not t["name"].startswith(prefix):
            continue
        a = np.empty(t["numel"], dtype=np.float32)
        for s in t["slices"]:
            with open(os.path.join(d, s["file"]), "rb") as f:
                f.seek(s["byte_begin"])
                a[s["start"]:s["start"] + s["numel"]] = np.frombuffer(f.read(s["byte_end"] - s["byte_begin"]), np.float32)
        out[t["name"]] = a
    return out, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--prefix", default="param/")
    ap.add_argument("--tol", type=float, default=0.0)
    ap.add_argument("--exact", action="store_true")
    o = ap.parse_args()
    A, ma = tensors(o.a, o.prefix)
    B, mb = tensors(o.b, o.prefix)
    if set(A) != set(B):
        sys.exit(f"ckpt_compare: tensor sets differ: {sorted(set(A) ^ set(B))[:5]}")
    if not A:
        sys.exit(f"ckpt_compare: no tensors with prefix {o.prefix}")
    worst, worst_name, unequal, nonfinite = 0.0, "", 0, []
    for k in sorted(A):
        # max() and `>` both let NaN through (NaN > tol is False): count them apart.
        bad = int(np.count_nonzero(~np.isfinite(A[k])) + np.count_nonzero(~np.isfinite(B[k])))
        if bad:
            nonfinite.append(f"{k} ({bad})")
        with np.errstate(invalid="ignore"):
            d = float(np.max(np.abs(A[k] - B[k]))) if A[k].size else 0.0
        unequal += int(not np.array_equal(A[k].view(np.uint32), B[k].view(np.uint32)))
        if d > worst or not worst_name:
            worst, worst_name = d, k
    print(f"compare {o.prefix}*: {len(A)} tensors, step {ma['step']} vs {mb['step']}, layout {ma.get('layout')} vs "
          f"{mb.get('layout')}: max |diff| {worst:.3g} ({worst_name}), {unequal} not bit-identical")
    if nonfinite:
        sys.exit(f"ckpt_compare: NaN or infinite values in {len(nonfinite)} tensors: {', '.join(nonfinite[:5])}")
    if o.exact and unequal:
        sys.exit(1)
    if not worst <= o.tol:
        sys.exit(1)


if __name__ == "__main__":
    main()
