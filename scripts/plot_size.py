#!/usr/bin/python3
"""Plot the MoE width trade-off table of `zaya size --moe-widths --json`.

Usage:
    zaya size --moe-widths --config configs/zaya1-base.toml --hw configs/hardware/mi300x.toml --json > moe.json
    scripts/plot_size.py moe.json moe-widths.png        (or "-" to read the JSON from stdin)
`zaya size --moe-widths ... --plot moe-widths.png` runs this script itself.

Three panels: (a) predicted training tokens/s per device against the expert count, one line
per top-k; (b) decode step latency against the expert count, one line per decode batch size,
at the config's top-k; (c) the trade-off: training tokens/s against decode latency at the
batch where the expert shape matters most, every (E, k), the config's own shape starred.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: plot_size.py MOE_WIDTHS.json|- OUT.png\n")
        return 2
    src, out = argv[1], argv[2]
    try:
        data = json.load(sys.stdin if src == "-" else open(src))
    except (OSError, ValueError) as e:
        sys.stderr.write(f"plot_size.py: {src}: cannot read the JSON ({e})\n")
        return 1
    rows = data.get("rows")
    if not rows:
        sys.stderr.write(f"plot_size.py: {src}: no 'rows' (expected `zaya size --moe-widths --json` output)\n")
        return 1
    batches = data["batches"]
    ref = next((r for r in rows if r["reference"]), rows[0])
    topks = sorted({r["topk"] for r in rows})

    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    ax = axes[0]
    for k in topks:
        rs = sorted((r for r in rows if r["topk"] == k), key=lambda r: r["experts"])
        ax.plot([r["experts"] for r in rs], [r["tokens_per_s_per_device"] for r in rs], "o-", label=f"top-{k}")
    ax.plot([ref["experts"]], [ref["tokens_per_s_per_device"]], "r*", ms=16, label="config")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("experts E (width = params / E)")
    ax.set_ylabel("training tokens/s per device")
    ax.set_title("(a) training throughput")
    ax.grid(alpha=0.3)
    ax.legend()

    ax = axes[1]
    rs = sorted((r for r in rows if r["topk"] == ref["topk"]), key=lambda r: r["experts"])
    for i, b in enumerate(batches):
        ax.plot([r["experts"] for r in rs], [r["decode"][i]["step_s"] * 1e3 for r in rs], "o-", label=f"batch {b}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("experts E")
    ax.set_ylabel("decode step (ms)")
    ax.set_title(f"(b) decode latency, top-{ref['topk']}, context {data['context']}")
    ax.grid(alpha=0.3, which="both")
    ax.legend()

    ax = axes[2]
    # The decode batch where the expert shape matters most (largest spread across rows).
    def spread(i):
        v = [r["decode"][i]["step_s"] for r in rows]
        return max(v) / min(v)
    last = max(range(len(batches)), key=spread)
    for r in rows:
        x, y = r["decode"][last]["step_s"] * 1e3, r["tokens_per_s_per_device"]
        ax.plot([x], [y], "r*" if r["reference"] else "o", ms=14 if r["reference"] else 6)
        ax.annotate(f"{r['experts']}x{r['expert_width']} k{r['topk']}", (x, y), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(f"decode step at batch {batches[last]} (ms)")
    ax.set_ylabel("training tokens/s per device")
    ax.set_title("(c) trade-off (up and left is better)")
    ax.grid(alpha=0.3)

    fig.suptitle(f"{data.get('model', '')} on {data.get('hardware', '')}: MoE widths at "
                 f"{data['expert_params_per_layer'] / 1e6:.0f}M expert parameters per layer")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
