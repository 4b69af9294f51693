#!/usr/bin/env python3
"""The figures of bench/prepare_stream.sh.

  prepare_stream_report.py DIR COMMAND THREADS SMALL_MB BIG_MB

DIR holds, for rounds r: prepare-r.time (/usr/bin/time -v of zaya prepare), tokenize-r.json (bench_tokenizer --json); and mem-small.time,
mem-big.time. The rates divide the documents' text bytes (what both sides encode) by seconds:
zaya prepare's wall-clock seconds (the whole process, tokenizer load included), and the same
minus the tokenizer's load time that bench_tokenizer measured in the same round (the
streaming rate); tokenizer-only is bench_tokenizer's one pass over the same documents on the
same threads, no I/O. Figures are medians over rounds."""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402


def time_v(path):
    with open(path) as f:
        t = f.read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1))
    sys_ = float(re.search(r"System time \(seconds\): ([\d.]+)", t).group(1))
    wall = 0.0
    for part in re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", t).group(1).split(":"):
        wall = wall * 60 + float(part)
    return rss, user + sys_, wall


def main(d, command, threads, small_mb, big_mb):
    rounds = []
    for tj in sorted(glob.glob(os.path.join(d, "tokenize-*.json"))):
        r = tj.rsplit("-", 1)[1][:-5]
        with open(tj) as f:
            tok = json.loads(f.read().strip().splitlines()[-1])
        rss, cpu, secs = time_v(os.path.join(d, f"prepare-{r}.time"))
        mb = tok["bytes"] / 1e6
        rounds.append({"text_mb": mb, "documents": tok["documents"], "tokens": tok["tokens"],
                       "prepare_s": secs, "prepare_cpu_s": cpu, "tokenizer_load_s": tok["load_s"],
                       "tokenize_s": tok["passes"][0]["wall_s"], "tokenize_cpu_s": tok["passes"][0]["cpu_s"]})
    med = lambda f: statistics.median(f(r) for r in rounds)  # noqa: E731
    mb = rounds[0]["text_mb"]
    e2e = med(lambda r: r["text_mb"] / r["prepare_s"])
    stream = med(lambda r: r["text_mb"] / (r["prepare_s"] - r["tokenizer_load_s"]))
    tok = med(lambda r: r["text_mb"] / r["tokenize_s"])
    ratio_stream = med(lambda r: r["tokenize_s"] / (r["prepare_s"] - r["tokenizer_load_s"]))
    ratio_e2e = med(lambda r: r["tokenize_s"] / r["prepare_s"])
    ratio_cpu = med(lambda r: r["tokenize_cpu_s"] / r["prepare_cpu_s"])
    rss_small = time_v(os.path.join(d, "mem-small.time"))[0]
    rss_big = time_v(os.path.join(d, "mem-big.time"))[0]
    print(f"corpus: {small_mb} MB of JSON lines (.jsonl.zst), {mb:.1f} MB of text, {rounds[0]['documents']} documents, "
          f"{rounds[0]['tokens']} tokens, {threads} threads, {len(rounds)} rounds")
    print(f"  zaya prepare       {e2e:7.2f} MB/s end to end, {stream:7.2f} MB/s without the tokenizer's load "
          f"({med(lambda r: r['tokenizer_load_s']):.2f} s)")
    print(f"  tokenizer only     {tok:7.2f} MB/s")
    print(f"  prepare / tokenizer-only: {ratio_stream:.2f} streaming, {ratio_e2e:.2f} with the load, "
          f"{ratio_cpu:.2f} in CPU time (target >= 0.8)")
    print(f"  peak RSS: {rss_small / 1024:.0f} MB on {small_mb} MB, {rss_big / 1024:.0f} MB on {big_mb} MB: "
          f"{(rss_big - rss_small) / 1024:+.0f} MB (target within 100 MB)")
    figures = {"input_mb": small_mb, "text_mb": mb, "documents": rounds[0]["documents"], "tokens": rounds[0]["tokens"],
               "prepare_mb_s": e2e, "prepare_stream_mb_s": stream, "tokenizer_only_mb_s": tok,
               "ratio_stream": ratio_stream, "ratio_end_to_end": ratio_e2e, "ratio_cpu": ratio_cpu,
               "peak_rss_mb_small": rss_small / 1024, "peak_rss_mb_big": rss_big / 1024, "big_input_mb": big_mb,
               "rss_growth_mb": (rss_big - rss_small) / 1024,
               "load_average_per_round": [float(l.split()[0]) for l in open(os.path.join(d, "load.txt"))],
               "rounds": rounds}
    print("record:", record.write("prepare_stream", command, threads, figures))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) != 5:
        sys.exit(__doc__)
    main(a[0], a[1], int(a[2]), float(a[3]), float(a[4]))
