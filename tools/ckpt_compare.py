#!/usr/bin/env python3
"""Compare the tensors of two zaya checkpoints (any layouts): max |a - b| per tensor group.

    ckpt_compare.py A B [--prefix param/] [--tol X] [--exact]

Reads each tensor through the manifest's slices (fp32), so a DP=2 checkpoint compares with a
DP=1 one. --exact: every tensor must be bit-identical. Exit 1 when a tolerance is exceeded.
Used by the distributed tests; `zaya ckpt diff` is the user-facing tool."""
import argparse, json, os, sys
import numpy as np


def resolve(path):
    if os.path.exists(os.path.join(path, "manifest.json")):
        return path
    for root in (path, os.path.join(path, "ckpt")):
        latest = os.path.join(root, "latest")
        if os.path.exists(latest):
            return os.path.join(root, open(latest).read().strip())
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
    worst, worst_name, unequal = 0.0, "", 0
    for k in sorted(A):
        d = float(np.max(np.abs(A[k] - B[k]))) if A[k].size else 0.0
        unequal += int(not np.array_equal(A[k].view(np.uint32), B[k].view(np.uint32)))
        if d > worst or not worst_name:
            worst, worst_name = d, k
    print(f"compare {o.prefix}*: {len(A)} tensors, step {ma['step']} vs {mb['step']}, layout {ma.get('layout')} vs "
          f"{mb.get('layout')}: max |diff| {worst:.3g} ({worst_name}), {unequal} not bit-identical")
    if o.exact and unequal:
        sys.exit(1)
    if worst > o.tol:
        sys.exit(1)


if __name__ == "__main__":
    main()
