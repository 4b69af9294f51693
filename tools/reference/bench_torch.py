#!/usr/bin/env python3
"""PyTorch training-step throughput peer for zaya's own bench (bench/train_step.sh).

The model is zaya_fast.ZayaForCausalLM: zaya_ref.py's ZAYA1 (same parameters, same maths; its loss
is checked against zaya_ref by `zaya_fast.py check`) written as a speed-minded PyTorch user would:
fused SDPA where torch has it (else batched matmuls with GQA folded into the rows), RoPE tables and
the causal mask built once. Built from one of our TOML configs (HF key names), random init
(std 0.02). A step is what `zaya train-bench` times: forward, cross-entropy, backward, AdamW step
(foreach). The MoE dispatch is zaya_ref.dispatch: (token, slot) pairs grouped by expert with a
stable sort + index_select, one fc1/fc2 matmul chain per expert, index_add_ back. Balancing-bias
updates are not included (zaya's train-bench does not update them either).

Fairness (bench/README.md):
- BLAS: torch's process uses the same OpenBLAS as zaya, and the same core: like zaya
  (maybe_reexec_for_blas_core in src/kernels/gemm.cpp), when the CPU has AVX-512 and the OpenBLAS
  that torch loaded picked a core without AVX-512 kernels (Haswell, Zen, a generic fallback such as
  Prescott), the script re-executes itself with OPENBLAS_CORETYPE=SkylakeX (ZAYA_BLAS_CORE=keep
  turns this off, ZAYA_BLAS_REEXEC=1 marks the re-executed process). In the same re-exec ATen's
  own vectorised kernels get ATEN_CPU_CAPABILITY=avx512 where the CPU has AVX-512 F/VL/BW/DQ and
  torch chose less (ZAYA_ATEN_CAPABILITY=keep turns this off).
- memory: zaya reuses its buffers from step to step; torch allocates each step's tensors afresh,
  and glibc's malloc hands large blocks back to the kernel on free, so every step faults its
  pages in again (on our VMs 2.2-2.4x of torch's step). The same re-exec keeps freed memory in
  the heap (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_=64 GiB), the role jemalloc or tcmalloc
  play in PyTorch's CPU performance tuning guide (ZAYA_TORCH_MALLOC=keep, or any MALLOC_* tunable
  already set, leaves glibc's defaults).
- threads: torch.set_num_threads(n) and OMP_NUM_THREADS=n (set here when the process starts).
- data: every step draws fresh random tokens (outside the timed region), after --warmup >= 2
  untimed steps; the statistic is the median step time (tokens/s = B*T / median).
- bf16 = torch.autocast("cpu", dtype=torch.bfloat16) over forward + loss, fp32 master weights.

    bench_torch.py --config configs/zaya1-small.toml [--batch 8 --seq 256 --threads 2
                   --warmup 2 --steps 10 --modes fp32,bf16]

Prints one JSON line: {"fp32_tokens_per_s": x, "fp32_step_s": median, "fp32_steps_s": [...],
"bf16_...": ..., "torch": version, "blas_library": ..., "blas_core": ..., ...}.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
import tomllib

AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")
LIBBLAS_NAME = "/usr/lib/x86_64-linux-gnu/libblas.so.3"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def mapped_libs(*needles):
    """Shared objects this process has mapped whose base name contains one of the needles."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                path = parts[5]
                if any(n in os.path.basename(path) for n in needles) and path not in out:
                    out.append(path)
    return out


def symlink_chain(path):
    chain = [path]
    while os.path.islink(chain[-1]) and len(chain) < 16:
        nxt = os.readlink(chain[-1])
        chain.append(nxt if os.path.isabs(nxt) else os.path.join(os.path.dirname(chain[-1]), nxt))
    return chain


def openblas_handle():
    """ctypes handle of the OpenBLAS this process loaded (None if it loaded none)."""
    for path in mapped_libs("openblas") + mapped_libs("libblas"):
        try:
            lib = ctypes.CDLL(path)
            f = lib.openblas_get_corename
        except (OSError, AttributeError):
            continue
        f.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        return lib, path
    return None, None


def blas_info():
    lib, path = openblas_handle()
    info = {"blas_mapped": mapped_libs("blas", "lapack", "mkl", "dnnl", "gomp", "iomp")}
    if os.path.exists(LIBBLAS_NAME):
        info["libblas_so_3_alternatives"] = symlink_chain(LIBBLAS_NAME)
    if lib is None:
        info.update({"blas_library": "not OpenBLAS: " + (", ".join(info["blas_mapped"]) or "none"),
                     "blas_core": None})
        return info
    par = lib.openblas_get_parallel()
    info.update({"blas_library": os.path.realpath(path),
                 "blas_config": lib.openblas_get_config().decode(),
                 "blas_core": lib.openblas_get_corename().decode(),
                 "blas_threading": {0: "sequential", 1: "pthreads", 2: "openmp"}.get(par, str(par)),
                 "blas_threads": lib.openblas_get_num_threads()})
    return info


def aten_capability(torch):
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if get is not None:
        return get()
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


# glibc malloc tunables (read at process start): no mmap'd blocks, nothing trimmed back to the OS.
KEEP_HEAP = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(64 << 30)}


def malloc_setting():
    kept = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    return " ".join(f"{k}={v}" for k, v in sorted(kept.items())) or "glibc defaults"


def maybe_reexec(torch, flags):
    """zaya's rule (src/kernels/gemm.cpp maybe_reexec_for_blas_core), for torch's process."""
    if os.environ.get("ZAYA_BLAS_REEXEC"):
        return
    env = {}
    if os.environ.get("ZAYA_BLAS_CORE") != "keep" and "avx512f" in flags:
        lib, _ = openblas_handle()
        core = lib.openblas_get_corename().decode() if lib is not None else None
        if core is not None and core.lower() not in AVX512_CORES:
            env.update({"OPENBLAS_CORETYPE": "SkylakeX", "ZAYA_BLAS_CORE_BEFORE": core})
    if (os.environ.get("ZAYA_ATEN_CAPABILITY") != "keep" and "ATEN_CPU_CAPABILITY" not in os.environ
            and {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= flags
            and aten_capability(torch).upper() != "AVX512"):
        env.update({"ATEN_CPU_CAPABILITY": "avx512", "ZAYA_ATEN_CAPABILITY_BEFORE": aten_capability(torch)})
    if (os.environ.get("ZAYA_TORCH_MALLOC") != "keep"
            and not any(k.startswith("MALLOC_") for k in os.environ)):
        env.update(KEEP_HEAP)
    if env:
        env["ZAYA_BLAS_REEXEC"] = "1"  # never loop
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **env})
        except OSError as e:  # carry on with what we have, and say so
            print(f"bench_torch: re-exec failed ({e}); keeping the BLAS core as loaded", file=sys.stderr)


def bf16_gemm_impl(torch):
    """The oneDNN implementation torch's bf16 matmul runs (from oneDNN's verbose line)."""
    verbose = getattr(torch.backends.mkldnn, "verbose", None)
    if verbose is None or not torch.backends.mkldnn.is_available():
        return "unknown"
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            a = torch.randn(64, 64)
            with verbose(1), torch.autocast("cpu", dtype=torch.bfloat16):
                torch.nn.functional.linear(a, a)
        finally:
            sys.stdout.flush()
            ctypes.CDLL(None).fflush(None)  # oneDNN prints through C stdio
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    for line in text.splitlines():
        f = line.split(",")
        if len(f) > 4 and f[1] == "exec" and f[3] in ("matmul", "inner_product"):
            return f"oneDNN {f[3]} {f[4]}"
    return "not oneDNN (no oneDNN matmul ran)"


# ----------------------------------------------------------------------------- the bench

def init_for_training(model, std, seed, torch):
    """Matrices (linear, conv, embedding) ~ N(0, std); norm weights, residual scales, temp and
    router_states_scale 1; biases 0; balancing biases keep their defaults (skip class -1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith(("weight", "_scale", "temp")):
                p.fill_(1.0)
            else:
                p.zero_()


def train_step(torch, F, model, opt, inputs, targets, bf16):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(inputs)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    opt.step()
    return loss.item()


def bench_mode(torch, F, model_mod, cfg, args, bf16):
    torch.manual_seed(args.seed)
    model = model_mod.ZayaForCausalLM(cfg)
    init_for_training(model, 0.02, args.seed, torch)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            foreach=True)
    g = torch.Generator().manual_seed(args.seed + 1)
    times, loss = [], float("nan")
    for s in range(args.warmup + args.steps):
        ids = torch.randint(cfg.vocab_size, (args.batch, args.seq + 1), generator=g)  # fresh data
        inputs, targets = ids[:, :-1], ids[:, 1:]
        t0 = time.perf_counter()
        loss = train_step(torch, F, model, opt, inputs, targets, bf16)
        dt = time.perf_counter() - t0
        if s >= args.warmup:
            times.append(dt)
    n_params = sum(p.numel() for p in model.parameters())
    return statistics.median(times), times, loss, n_params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--config", required=True, help="one of our TOML model configs")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2") or 2))
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps (at least 2; less is raised to 2)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="fp32,bf16", help="comma list of fp32, bf16")
    ap.add_argument("--model", choices=["fast", "ref"], default="fast",
                    help="fast: zaya_fast (the peer); ref: zaya_ref as written (for comparison)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    if args.warmup < 2:
        print(f"bench_torch: --warmup {args.warmup} raised to 2 (the first steps allocate and "
              "pick kernels)", file=sys.stderr)
        args.warmup = 2
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in ("fp32", "bf16"):
            ap.error(f"unknown mode {mode}")
    # OpenMP reads OMP_NUM_THREADS once, when the runtime starts: set it before torch loads
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import torch
    import torch.nn.functional as F

    flags = cpu_flags()
    maybe_reexec(torch, flags)  # returns only when nothing needs changing (or exec failed)
    torch.set_num_threads(args.threads)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import zaya_fast
    import zaya_ref
    model_mod = zaya_fast if args.model == "fast" else zaya_ref
    with open(args.config, "rb") as f:
        cfg = zaya_ref.ZayaConfig(tomllib.load(f))

    result = {}
    n_params = 0
    for mode in modes:
        step_s, times, loss, n_params = bench_mode(torch, F, model_mod, cfg, args, mode == "bf16")
        result[f"{mode}_tokens_per_s"] = round(args.batch * args.seq / step_s, 2)
        result[f"{mode}_step_s"] = round(step_s, 4)
        result[f"{mode}_steps_s"] = [round(t, 4) for t in times]
        result[f"{mode}_last_loss"] = round(loss, 4)
    info = blas_info()
    result.update({
        "config": args.config, "batch": args.batch, "seq": args.seq, "threads": args.threads,
        "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "steps": args.steps, "warmup": args.warmup, "statistic": "median", "data": "fresh random tokens per step",
        "model": f"zaya_fast ({'SDPA' if zaya_fast.HAS_SDPA else 'batched matmul attention; no SDPA in this torch'})"
                 if args.model == "fast" else "zaya_ref",
        "params": n_params, "torch": torch.__version__,
        **info,
        "blas_core_before": os.environ.get("ZAYA_BLAS_CORE_BEFORE", info.get("blas_core")),
        "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
        "aten_cpu_capability": aten_capability(torch),
        "aten_cpu_capability_before": os.environ.get("ZAYA_ATEN_CAPABILITY_BEFORE", aten_capability(torch)),
        "bf16_gemm": bf16_gemm_impl(torch) if "bf16" in modes else None,
        "malloc": malloc_setting(),
    })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
