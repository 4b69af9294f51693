#!/usr/bin/env python3
"""Plots and the markdown summary for zaya's hardware benchmarks (matplotlib, Agg backend).

  plot_bench.py comm-sweep CSV OUTDIR        busbw vs size per collective (a line per rank count),
                                             and small-message latency
  plot_bench.py comm CSV OUT.png             busbw vs size, a line per collective
  plot_bench.py gemm-heatmap CSV OUT.png     TFLOP/s over (M, N), one panel per (dtype, K)
  plot_bench.py mem-sweep CSV OUT.png [L1 L2 L3]   triad MB/s vs working set, cache sizes marked
  plot_bench.py summary REPORTDIR            REPORTDIR/summary.md from the report's files
"""
import csv
import json
import math
import os
import re
import sys
from collections import defaultdict


def die(msg):
    print(f"plot_bench.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_csv(path):
    if not os.path.exists(path):
        die(f"no such file '{path}'")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plt():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as p
        return p
    except ImportError:
        die("matplotlib is not installed (Debian: python3-matplotlib)")


def human(b):
    b = float(b)
    for u in ["B", "K", "M", "G"]:
        if b < 1024 or u == "G":
            return f"{b:.0f}{u}" if b == int(b) else f"{b:.1f}{u}"
        b /= 1024


def size_axis(ax):
    ax.set_xscale("log", base=2)
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    ax.set_xticks(ticks)
    ax.set_xticklabels([human(t) for t in ticks], rotation=45, fontsize=7)
    ax.set_xlim(lo, hi)


def comm_sweep(csv_path, outdir):
    p = plt()
    rows = read_csv(csv_path)
    os.makedirs(outdir, exist_ok=True)
    by_op = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_op[r["op"]][int(r["nranks"])].append((int(r["size_bytes"]), float(r["oop_busbw"]), float(r["oop_time_us"])))
    written = []
    for op, per_n in by_op.items():
        fig, ax = p.subplots(figsize=(7, 4.5))
        for n in sorted(per_n):
            pts = sorted(per_n[n])
            ax.plot([s for s, _, _ in pts], [b for _, b, _ in pts], marker="o", ms=3, label=f"{n} rank{'s' if n > 1 else ''}")
        size_axis(ax)
        ax.set_xlabel("message size S (bytes)")
        ax.set_ylabel("busbw (GB/s), out-of-place")
        ax.set_title(f"{op}: bus bandwidth vs size")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        out = os.path.join(outdir, f"comm_sweep_{op}.png")
        fig.savefig(out, dpi=110)
        p.close(fig)
        written.append(out)
    ops = list(by_op)
    fig, axes = p.subplots(1, max(1, len(ops)), figsize=(4 * max(1, len(ops)), 4), squeeze=False)
    for ax, op in zip(axes[0], ops):
        for n in sorted(by_op[op]):
            pts = sorted(x for x in by_op[op][n] if x[0] <= 65536)
            ax.plot([s for s, _, _ in pts], [t for _, _, t in pts], marker="o", ms=3, label=f"{n}")
        size_axis(ax)
        ax.set_yscale("log")
        ax.set_title(f"{op} latency", fontsize=9)
        ax.set_xlabel("size (bytes)", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("time (us)")
    axes[0][-1].legend(title="ranks", fontsize=7)
    fig.tight_layout()
    out = os.path.join(outdir, "comm_sweep_latency.png")
    fig.savefig(out, dpi=110)
    p.close(fig)
    written.append(out)
    print("wrote " + " ".join(written))


def comm(csv_path, out):
    p = plt()
    rows = read_csv(csv_path)
    by = defaultdict(list)
    for r in rows:
        by[(r["op"], r["type"], r["redop"])].append((int(r["size_bytes"]), float(r["oop_busbw"])))
    fig, ax = p.subplots(figsize=(7, 4.5))
    for (op, t, red), pts in by.items():
        pts.sort()
        label = op if red == "none" else f"{op} ({red})"
        ax.plot([s for s, _ in pts], [b for _, b in pts], marker="o", ms=3, label=f"{label} {t}")
    size_axis(ax)
    n = rows[0]["nranks"] if rows else "?"
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("busbw (GB/s), out-of-place")
    ax.set_title(f"collectives, {n} ranks")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def gemm_heatmap(csv_path, out):
    p = plt()
    rows = read_csv(csv_path)
    panels = defaultdict(dict)
    for r in rows:
        panels[(r["dtype"], r["engine"], int(r["K"]))][(int(r["M"]), int(r["N"]))] = float(r["tflops"])
    panels = {k: v for k, v in panels.items() if len({m for m, _ in v}) > 1 and len({n for _, n in v}) > 1}
    if not panels:
        die(f"'{csv_path}' has no (M, N) grid to draw")
    keys = sorted(panels)
    fig, axes = p.subplots(1, len(keys), figsize=(6.5 * len(keys), 5.5), squeeze=False)
    for ax, key in zip(axes[0], keys):
        grid = panels[key]
        ms = sorted({m for m, _ in grid})
        ns = sorted({n for _, n in grid})
        data = [[grid.get((m, n), math.nan) for n in ns] for m in ms]
        im = ax.imshow(data, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(ns)))
        ax.set_xticklabels(ns, rotation=45, fontsize=7)
        ax.set_yticks(range(len(ms)))
        ax.set_yticklabels(ms, fontsize=7)
        ax.set_xlabel("N")
        ax.set_ylabel("M")
        dt, eng, k = key
        ax.set_title(f"{dt} ({eng}), K={k}: TFLOP/s")
        if len(ms) * len(ns) <= 144:
            for i, row in enumerate(data):
                for j, v in enumerate(row):
                    if not math.isnan(v):
                        ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=6, color="w")
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def mem_sweep(csv_path, out, caches):
    p = plt()
    rows = read_csv(csv_path)
    pts = sorted((3 * int(r["array_bytes"]), float(r["best_MBps"])) for r in rows)
    fig, ax = p.subplots(figsize=(7, 4.5))
    ax.plot([w for w, _ in pts], [b / 1000 for _, b in pts], marker="o", ms=3, label="triad, best of 5")
    for name, size in zip(["L1d", "L2", "L3"], caches):
        if size > 0:
            ax.axvline(size, ls="--", color="grey", lw=0.8)
            ax.text(size, ax.get_ylim()[1] * 0.95, f" {name} {human(size)}", fontsize=7, va="top")
    size_axis(ax)
    threads = rows[0]["threads"] if rows else "?"
    ax.set_xlabel("working set (3 arrays, bytes)")
    ax.set_ylabel("GB/s (1e9 B/s)")
    ax.set_title(f"STREAM triad bandwidth vs working set, {threads} threads")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def read_text(path):
    return open(path).read() if os.path.exists(path) else ""


def median(v):
    v = sorted(v)
    if not v:
        return 0.0
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def verdict(ratio, tol):
    if ratio is None:
        return "n/a"
    return "ok" if abs(ratio - 1) <= tol else f"OUTSIDE {tol:.0%}"


def summary(d):
    out = []
    w = out.append
    machine = read_text(os.path.join(d, "machine.txt")).strip()
    w("# Hardware characterisation of this machine\n")
    w("Written by `make bench-report` (scripts/bench_report.sh); raw data in this directory.\n")
    if machine:
        w("## Machine\n")
        w("```\n" + machine + "\n```\n")

    peak = load_json(os.path.join(d, "peak.json")) or {}
    gpeak = load_json(os.path.join(d, "gemm_peak.json")) or {}
    mem = load_json(os.path.join(d, "mem.json")) or {}
    w("## Headline figures\n")
    w("| figure | value |")
    w("|---|---|")
    for dt in ("fp32", "bf16"):
        b = (gpeak.get("best") or {}).get(dt)
        if b:
            nominal = f"{b['peak_tflops']:.3f} TFLOP/s ({b['peak_source']})"
            w(f"| max achievable {dt} GEMM | {b['tflops']:.3f} TFLOP/s at {b['M']}x{b['N']}x{b['K']} ({b['engine']}); "
              f"{100 * b['tflops'] / b['peak_tflops']:.0f}% of {nominal} |")
    if "triad_MBps" in peak:
        k = (mem.get("kernels") or {})
        arr = mem.get("array_bytes", 0)
        w(f"| STREAM triad (best) | {peak['triad_MBps']:.0f} MB/s, {mem.get('threads', '?')} threads, "
          f"{human(arr)} per array |")
        for name in ("copy", "scale", "add"):
            if name in k:
                w(f"| STREAM {name} (best) | {k[name]['best_MBps']:.0f} MB/s |")
    comm_rows = read_csv(os.path.join(d, "comm.csv")) if os.path.exists(os.path.join(d, "comm.csv")) else []
    by_op = defaultdict(list)
    for r in comm_rows:
        by_op[r["op"]].append(r)
    for op, rows in by_op.items():
        big = max(rows, key=lambda r: int(r["size_bytes"]))
        small = min(rows, key=lambda r: int(r["size_bytes"]))
        bw = [float(r[k]) for r in rows for k in ("oop_busbw", "ip_busbw")]
        wrong = sum(int(r[k]) for r in rows for k in ("oop_wrong", "ip_wrong") if r[k] != "NA")
        w(f"| {op}, {big['nranks']} ranks | busbw {float(big['oop_busbw']):.2f} GB/s at {human(big['size_bytes'])}, "
          f"latency {float(small['oop_time_us']):.1f} us at {human(small['size_bytes'])}, avg busbw "
          f"{sum(bw) / len(bw):.2f} GB/s, #wrong {wrong} |")
    w("")

    w("## Cross-checks against independent programs\n")
    w("Each pair ran interleaved, several rounds (bench_report.sh ROUNDS); the median over the rounds of each "
      "side's figure is compared (medians resist a neighbour's load burst, best-of does not).\n")
    w("| check | zaya (median) | reference (median) | ratio zaya/ref | acceptance |")
    w("|---|---|---|---|---|")
    x = os.path.join(d, "crosscheck")
    files = sorted(os.listdir(x)) if os.path.isdir(x) else []

    def best_rows(prefix, key_op=None):
        runs = defaultdict(list)
        for f in files:
            if f.startswith(prefix) and f.endswith(".csv"):
                for r in read_csv(os.path.join(x, f)):
                    op = r["op"]
                    if key_op and op != key_op:
                        continue
                    k = (op, int(r["size_bytes"]), r["nranks"])
                    runs[k].append(float(r.get("oop_algbw", r.get("algbw"))))
        return {k: median(v) for k, v in runs.items()}

    zc = best_rows("comm_zaya.")
    for op, refname in (("all_reduce", "comm_ref_allreduce."), ("all_gather", "comm_ref_allgather.")):
        rc = best_rows(refname, op)
        for (o, size, n), ref_bw in sorted(rc.items()):
            z = zc.get((o, size, n))
            if z is None or size < (1 << 20):
                continue
            ratio = z / ref_bw if ref_bw > 0 else None
            w(f"| {op} algbw, {n} ranks, {human(size)} | {z:.3f} GB/s | {ref_bw:.3f} GB/s (bench_comm_ref, OSU-style "
              f"loop) | {ratio:.3f} | {verdict(ratio, 0.15)} (15%) |")
    zt, rt, nel = [], [], None
    for f in files:
        if f.startswith("mem_zaya."):
            for r in read_csv(os.path.join(x, f)):
                if r["kernel"] == "triad":
                    zt.append(float(r["best_MBps"]))
                    nel = int(r["array_bytes"])
        if f.startswith("stream_ref."):
            m = re.search(r"Triad:\s+([0-9.]+)", read_text(os.path.join(x, f)))
            if m:
                rt.append(float(m.group(1)))
    ztri, rtri = median(zt), median(rt)
    if ztri > 0 and rtri > 0:
        w(f"| STREAM triad, {mem.get('threads')} threads, {human(nel)}/array | {ztri:.0f} MB/s | {rtri:.0f} MB/s "
          f"(bench_stream_ref, classic STREAM loops) | {ztri / rtri:.3f} | {verdict(ztri / rtri, 0.15)} (15%) |")
    zgs, rgs, shape, core = [], [], None, "?"
    for f in files:
        if f.startswith("gemm_zaya."):
            for r in read_csv(os.path.join(x, f)):
                zgs.append(float(r["tflops"]))
                shape = f"{r['M']}x{r['N']}x{r['K']}"
        if f.startswith("sgemm_ref."):
            m = re.search(r"tflops=([0-9.]+) core=(\S+)", read_text(os.path.join(x, f)))
            if m:
                rgs.append(float(m.group(1)))
                core = m.group(2)
    zg, rg = median(zgs), median(rgs)
    b = (gpeak.get("best") or {}).get("fp32")
    if zg > 0 and rg > 0:
        w(f"| fp32 GEMM at the peak shape {shape} | {zg:.4f} TFLOP/s | {rg:.4f} TFLOP/s (bench_sgemm_ref, cblas_sgemm "
          f"direct, OpenBLAS core {core}) | {zg / rg:.3f} | {verdict(zg / rg, 0.10)} (10%) |")
        if b:
            w(f"| max achievable fp32 of the peak search (one run, the best of its shapes) | {b['tflops']:.4f} TFLOP/s | "
              f"{rg:.4f} TFLOP/s | {b['tflops'] / rg:.3f} | {verdict(b['tflops'] / rg, 0.10)} (10%) |")
    w("")
    core = read_text(os.path.join(d, "coretype.txt")).strip()
    if core:
        w("## OpenBLAS kernel choice (OPENBLAS_CORETYPE)\n")
        w("```\n" + core + "\n```\n")

    w("## Files\n")
    names = sorted(f for f in os.listdir(d) if f != "summary.md" and os.path.isfile(os.path.join(d, f)))
    w("Data: " + ", ".join(f"`{f}`" for f in names if not f.endswith(".png")) + "; printed tables in `raw/`, cross-check runs in `crosscheck/`.\n")
    w("## Plots\n")
    for f in names:
        if f.endswith(".png"):
            w(f"![{f}]({f})\n")
    w("")
    path = os.path.join(d, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {path}")


def main(argv):
    if len(argv) < 2:
        die(__doc__.strip())
    kind, args = argv[1], argv[2:]
    if kind == "comm-sweep" and len(args) == 2:
        comm_sweep(*args)
    elif kind == "comm" and len(args) == 2:
        comm(*args)
    elif kind == "gemm-heatmap" and len(args) == 2:
        gemm_heatmap(*args)
    elif kind == "mem-sweep" and len(args) in (2, 5):
        mem_sweep(args[0], args[1], [int(x) for x in args[2:]] or [0, 0, 0])
    elif kind == "summary" and len(args) == 1:
        summary(args[0])
    else:
        die(f"bad arguments: {' '.join(argv[1:])}\n{__doc__.strip()}")


if __name__ == "__main__":
    main(sys.argv)
