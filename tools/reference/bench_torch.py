#!/usr/bin/env python3
"""PyTorch training-step throughput peer for zaya's own bench.

Builds the ZAYA1 model of zaya_ref.py from one of our TOML configs (the keys are the HF config
names), random init (std 0.02), random tokens, and times full training steps: forward, cross-entropy,
backward, AdamW step. The MoE dispatch is zaya_ref.dispatch: (token, slot) pairs grouped by expert
with a stable sort + index_select, one fc1/fc2 matmul chain per expert, index_add_ back: the way a
reasonable PyTorch user writes a dropless MoE on CPU. Balancing-bias updates are not included.

    bench_torch.py --config configs/zaya1-small.toml [--batch 8 --seq 256 --threads 2
                   --warmup 1 --steps 3 --modes fp32,bf16]

Prints JSON {"fp32_tokens_per_s": x, "bf16_tokens_per_s": y, ...}. bf16 = torch.autocast("cpu",
dtype=torch.bfloat16) over forward+loss with fp32 master weights (PyTorch's standard CPU recipe).
"""
import argparse
import json
import os
import sys
import time
import tomllib

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zaya_ref  # noqa: E402


def init_for_training(model, std, seed):
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


def train_step(model, opt, inputs, targets, bf16):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(inputs)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    opt.step()
    return loss.item()


def bench_mode(cfg, args, bf16):
    torch.manual_seed(args.seed)
    model = zaya_ref.ZayaForCausalLM(cfg)
    init_for_training(model, 0.02, args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            foreach=True)
    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(cfg.vocab_size, (args.batch, args.seq + 1), generator=g)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    for _ in range(args.warmup):
        train_step(model, opt, inputs, targets, bf16)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = train_step(model, opt, inputs, targets, bf16)
    dt = time.perf_counter() - t0
    return args.batch * args.seq * args.steps / dt, dt / args.steps, loss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--config", required=True, help="one of our TOML model configs")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="fp32,bf16", help="comma list of fp32, bf16")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    with open(args.config, "rb") as f:
        cfg = zaya_ref.ZayaConfig(tomllib.load(f))
    result = {}
    for mode in args.modes.split(","):
        if mode not in ("fp32", "bf16"):
            raise SystemExit(f"unknown mode {mode}")
        tps, step_s, loss = bench_mode(cfg, args, mode == "bf16")
        result[f"{mode}_tokens_per_s"] = round(tps, 2)
        result[f"{mode}_step_s"] = round(step_s, 4)
        result[f"{mode}_last_loss"] = round(loss, 4)
    n_params = sum(p.numel() for p in zaya_ref.ZayaForCausalLM(cfg).parameters())
    result.update({"config": args.config, "batch": args.batch, "seq": args.seq,
                   "threads": args.threads, "steps": args.steps, "warmup": args.warmup,
                   "params": n_params, "torch": torch.__version__})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
