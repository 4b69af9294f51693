"""Writes a benchmark record: bench/results/NAME-<cpu-model-slug>.json, one file per benchmark per
machine class, holding the command, the CPU model and flags, the threads, the machine's load
(uptime's load averages, the figures being taken on a shared machine) and the figures."""
import json
import os
import re


def cpu_info():
    model, flags = "unknown", []
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k.strip() == "model name" and model == "unknown":
                model = v.strip()
            elif k.strip() == "flags" and not flags:
                flags = v.split()
    return model, flags


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def write(name, command, threads, figures, results_dir="bench/results"):
    model, flags = cpu_info()
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "unknown"
    rec = {"benchmark": name, "command": command, "cpu_model": model, "cpu_flags": flags,
           "cpus": os.cpu_count(), "threads": threads, "load_average_at_end": load_average(), **figures}
    os.makedirs(results_dir, exist_ok=True)
    path = os.path.join(results_dir, f"{name}-{slug}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return path
