#!/usr/bin/env python3
"""Training curves from a run's metrics.jsonl (matplotlib, Agg backend).

  plot_metrics.py METRICS.jsonl OUTDIR [--unigram NATS] [--title TEXT]

Writes into OUTDIR:
  loss.png         training loss per step, validation loss points, the unigram entropy line
  lr.png           learning rate per step
  throughput.png   tokens/s per step (and its running median)
  expert_load.png  per MoE layer: largest expert share x E (1 = uniform), load entropy, skip rate
  tasks.png        [eval] tasks (zaya eval's) against step: acc_norm (else acc, exact_match)
                   with +-1 stderr bars; only when metrics.jsonl has eval_tasks records
Phase boundaries are drawn as dotted vertical lines on every plot.
Use Debian's interpreter (/usr/bin/python3, python3-matplotlib).
"""
import argparse
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def die(msg):
    print(f"plot_metrics.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_metrics(path):
    if not os.path.exists(path):
        die(f"no such file '{path}'")
    steps, evals, tasks = [], [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                die(f"{path}:{n}: not JSON")
            if rec.get("type") == "step":
                steps.append(rec)
            elif rec.get("type") == "eval":
                evals.append(rec)
            elif rec.get("type") == "eval_tasks":
                tasks.append(rec)
    if not steps:
        die(f"{path}: no step records")
    return steps, evals, tasks


def plot_tasks(tasks, title, path):
    """Accuracy against step for each task of the run's [eval] tasks."""
    series = {}
    for rec in tasks:
        for name, m in rec.get("tasks", {}).items():
            key = next((k for k in ("acc_norm", "acc", "exact_match") if k in m), None)
            if key is None:
                continue
            series.setdefault((name, key), []).append((rec["step"], m[key], m.get(key + "_stderr") or 0.0))
    if not series:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (name, key), pts in sorted(series.items()):
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", markersize=4,
                    capsize=3, label=f"{name} {key}")
    ax.set_xlabel("step")
    ax.set_ylabel("accuracy")
    ax.set_title(title + "downstream tasks (+-1 stderr)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)


def phase_starts(steps):
    out, last = [], None
    for r in steps:
        if last is not None and r["phase"] != last:
            out.append(r["step"] - 1)
        last = r["phase"]
    return out


def mark_phases(ax, starts):
    for s in starts:
        ax.axvline(s, color="grey", linestyle=":", linewidth=1)


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description="plot a zaya run's metrics.jsonl")
    ap.add_argument("metrics")
    ap.add_argument("outdir")
    ap.add_argument("--unigram", type=float, help="unigram entropy of the corpus (nats/token), drawn as a line")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    steps, evals, tasks = read_metrics(a.metrics)
    os.makedirs(a.outdir, exist_ok=True)
    x = [r["step"] for r in steps]
    starts = phase_starts(steps)
    title = (a.title + ": ") if a.title else ""

    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(x, [r["loss"] for r in steps], linewidth=0.8, alpha=0.7, label="train loss")
    if evals:
        ax.plot([e["step"] for e in evals], [e["val_loss"] for e in evals], "o-", markersize=4, label="validation loss")
    if a.unigram:
        ax.axhline(a.unigram, color="red", linestyle="--", linewidth=1, label=f"unigram entropy {a.unigram:.3f}")
    mark_phases(ax, starts)
    ax.set_xlabel("step")
    ax.set_ylabel("nats / token")
    ax.set_title(title + "loss")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, os.path.join(a.outdir, "loss.png"))

    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(x, [r["lr"] for r in steps])
    mark_phases(ax, starts)
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title(title + "learning rate")
    ax.grid(alpha=0.3)
    save(fig, os.path.join(a.outdir, "lr.png"))

    fig, ax = plt.subplots(figsize=(8, 3.5))
    tps = [r["tokens_per_s"] for r in steps]
    ax.plot(x, tps, linewidth=0.6, alpha=0.5, label="per step")
    w = 25
    med = [statistics.median(tps[max(0, i - w):i + 1]) for i in range(len(tps))]
    ax.plot(x, med, label=f"running median ({w})")
    mark_phases(ax, starts)
    ax.set_xlabel("step")
    ax.set_ylabel("tokens / s")
    ax.set_title(title + "throughput")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, os.path.join(a.outdir, "throughput.png"))

    layers = len(steps[0].get("layers", []))
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for li in range(layers):
        lab = f"MoE layer {li}"
        axes[0].plot(x, [r["layers"][li]["max_frac"] for r in steps], linewidth=0.8, label=lab)
        axes[1].plot(x, [r["layers"][li]["entropy"] for r in steps], linewidth=0.8, label=lab)
        axes[2].plot(x, [r["layers"][li]["skip"] for r in steps], linewidth=0.8, label=lab)
    axes[0].set_ylabel("largest expert share")
    axes[1].set_ylabel("load entropy / log E")
    axes[2].set_ylabel("skip rate")
    axes[2].set_xlabel("step")
    axes[0].set_title(title + "expert load per MoE layer")
    for ax in axes:
        mark_phases(ax, starts)
        ax.grid(alpha=0.3)
    if layers:
        axes[0].legend(fontsize=7, ncol=4)
    save(fig, os.path.join(a.outdir, "expert_load.png"))

    plot_tasks(tasks, title, os.path.join(a.outdir, "tasks.png"))


if __name__ == "__main__":
    main()
