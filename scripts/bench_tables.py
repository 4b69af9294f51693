#!/usr/bin/env python3
"""Markdown tables of benchmark records (bench/results/NAME-<cpu>.json, one per benchmark per
machine class, as the bench scripts write them).

  python3 scripts/bench_tables.py NAME            print table NAME
  python3 scripts/bench_tables.py --update FILE   regenerate every table in FILE: the lines
                                                  between <!-- table:NAME --> and <!-- /table -->

A table is a function taking the list of NAME's records and returning markdown lines; TABLES
maps names to them, so a benchmark adds its table by adding a function."""
import glob
import json
import os
import re
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "results")


def records(name):
    out = []
    for path in sorted(glob.glob(os.path.join(RESULTS, f"{name}-*.json"))):
        with open(path) as f:
            out.append(json.load(f))
    return out


def load_note(loads):
    return f"{min(loads):.0f}-{max(loads):.0f}" if loads else "?"


def tokenizer_peer(recs):
    rows = ["| CPU | text | MB | peer's setup | zaya MB/s | peer MB/s | ratio | wall-clock ratio | ids identical | load |",
            "|---|---|---:|---|---:|---:|---:|---:|---|---:|"]
    for r in recs:
        for t in r["texts"]:
            rows.append(f"| {r['cpu_model']} | {t['name']} | {t['bytes'] / 1e6:.1f} | encodeBatch of {t['peer_batch']} "
                        f"{t['unit']} | {t['zaya_mb_s_cpu']:.2f} | {t['peer_mb_s_cpu']:.2f} | {t['ratio_cpu']:.2f}x | "
                        f"{t['ratio_wall']:.2f}x | {'yes' if t['ids_identical'] else 'no'} ({t['units']} {t['unit']}) | "
                        f"{load_note(t['load_average_per_round'])} |")
    return rows


def prepare_stream(recs):
    rows = ["| CPU | threads | input | prepare MB/s | tokenizer-only MB/s | ratio | peak RSS | load |",
            "|---|---:|---|---:|---:|---:|---|---:|"]
    for r in recs:
        rows.append(f"| {r['cpu_model']} | {r['threads']} | {r['input_mb']:.0f} MB .jsonl.zst ({r['text_mb']:.0f} MB of text) | "
                    f"{r['prepare_stream_mb_s']:.2f} ({r['prepare_mb_s']:.2f} with the tokenizer's load) | "
                    f"{r['tokenizer_only_mb_s']:.2f} | {r['ratio_stream']:.2f} ({r['ratio_end_to_end']:.2f}) | "
                    f"{r['peak_rss_mb_small']:.0f} MB at {r['input_mb']:.0f} MB, {r['peak_rss_mb_big']:.0f} MB at "
                    f"{r['big_input_mb']:.0f} MB | {load_note(r['load_average_per_round'])} |")
    return rows


def fuzz(recs):
    rows = ["| CPU | target | executions | asked | exec/s | slowest input | peak RSS | crashes, leaks, timeouts | load |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in recs:
        for t in r["targets"]:
            rows.append(f"| {r['cpu_model']} | {t['target']} | {t['executions']:,} | {r['runs_asked']:,} | {t['exec_per_s']:,} | "
                        f"{'< 1 s' if t['slowest_s'] < 1 else str(t['slowest_s']) + ' s'} | {t['peak_rss_mb']} MB | "
                        f"{t['crashes']} | {r['load_average_at_end'][0]:.0f} |")
    return rows


def test_under_load(recs):
    rows = ["| CPU | run | busy loops beside it | tests | failed | ctest wall time | load (min-max) |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for r in recs:
        for i, run in enumerate(r["runs"], 1):
            rows.append(f"| {r['cpu_model']} | {i} | {r['busy_loops']} | {run['tests']} | {run['failed']} | "
                        f"{run['wall_s']:.0f} s | {load_note(run['load_average_per_minute'])} |")
    return rows


def size_validate(recs):
    """zaya size's predicted step against zaya train-bench (scripts/validate_size.sh): the step,
    then every zone that took at least the record's zone_share of the measured step."""
    rows = ["| CPU | threads | config | B x T | dtype | predicted ms | measured ms | ratio | zones >= 10% of the step: "
            "predicted / measured | load |",
            "|---|---:|---|---|---|---:|---:|---:|---|---:|"]
    for r in recs:
        load = f"{r['load_average_start']:.2f}-{r['load_average_end']:.2f}"
        for c in r["cases"]:
            if "ratio" not in c:
                continue
            big = [f"{z['zone']} {z['ratio']:.2f}" for z in c["zones"]
                   if z.get("share", 0) >= r["zone_share"] and z.get("ratio")]
            rows.append(f"| {r['cpu_model']} | {r['threads']} | {c['config']} | {c['batch']} x {c['seq']} | {c['dtype']} | "
                        f"{c['predicted_step_s'] * 1e3:.2f} | {c['measured_step_s'] * 1e3:.2f} | {c['ratio']:.3f} | "
                        f"{'; '.join(big)} | {load} |")
    return rows


TABLES = {"tokenizer_peer": tokenizer_peer, "prepare_stream": prepare_stream, "fuzz": fuzz,
          "test_under_load": test_under_load, "size_validate": size_validate}


def table(name):
    if name not in TABLES:
        sys.exit(f"bench_tables.py: no table '{name}' (tables: {', '.join(TABLES)})")
    recs = records(name)
    if not recs:
        sys.exit(f"bench_tables.py: no records bench/results/{name}-*.json (run its bench script)")
    return "\n".join(TABLES[name](recs))


def update(path):
    with open(path) as f:
        text = f.read()
    pat = re.compile(r"(<!-- table:([a-z_]+) -->\n)(.*?)(<!-- /table -->)", re.S)
    found = pat.findall(text)
    if not found:
        sys.exit(f"bench_tables.py: {path}: no <!-- table:NAME --> ... <!-- /table --> markers")
    text = pat.sub(lambda m: m.group(1) + table(m.group(2)) + "\n" + m.group(4), text)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    print(f"{path}: {len(found)} table(s) regenerated: {', '.join(n for _, n, _, _ in found)}")


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "--update":
        update(a[1])
    elif len(a) == 1 and not a[0].startswith("-"):
        print(table(a[0]))
    else:
        sys.exit(__doc__)
