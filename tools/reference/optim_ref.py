"""Reference optimizer steps for zaya's AdamW and Muon, in PyTorch.

Reads a case written by `zaya optim-case` (case.safetensors: p0.<name>, g<t>.<name>,
final.<name>; case.json: settings, per-step learning rates, per-tensor muon/decay flags),
replays the same gradients from the same starting weights, and compares the result with
zaya's final weights.

- AdamW: torch.optim.AdamW itself, with two parameter groups (weight decay on the tensors
  zaya decays, none on the rest).
- Muon: written here from the published algorithm (Keller Jordan's Muon with the Moonlight
  update-RMS matching, as the ZAYA1 report uses): buf = mu*buf + g; u = g + mu*buf (Nesterov);
  u = NewtonSchulz5(u) (quintic, coefficients 3.4445, -4.7750, 2.0315, X normalised by its
  Frobenius norm, iterated on the wide orientation); p *= 1 - lr*wd;
  p -= lr * 0.2 * sqrt(max(rows, cols)) * u. The Newton-Schulz iteration runs in fp32 here
  (the published code uses bf16 on GPUs; zaya uses fp32 too). Non-matrix tensors: AdamW.

Metric per tensor: max|zaya - ref| / max|ref - p0|, the error relative to how far the
weights moved. Exit status 1 if any tensor exceeds --tol.

Usage: /usr/bin/python3 tools/reference/optim_ref.py CASE_DIR [--tol 1e-4]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402


def newton_schulz5(G, steps, eps=1e-7):
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G.clone()
    transposed = X.size(0) > X.size(1)
    if transposed:
        X = X.T
    X = X / (X.norm() + eps)
    for _ in range(steps):
        A = X @ X.T
        B = b * A + c * A @ A
        X = a * X + B @ X
    if transposed:
        X = X.T
    return X


class Muon(torch.optim.Optimizer):
    """Muon for 2-D matrices (Moonlight's form, update RMS matched to AdamW)."""

    def __init__(self, params, lr, weight_decay, momentum, nesterov, ns_steps, rms_scale):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_steps=ns_steps, rms_scale=rms_scale))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd, mu = group["lr"], group["weight_decay"], group["momentum"]
            for p in group["params"]:
                g = p.grad
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(g)
                buf = state["momentum_buffer"]
                buf.mul_(mu).add_(g)
                u = g.add(buf, alpha=mu) if group["nesterov"] else buf
                u = newton_schulz5(u, group["ns_steps"])
                adjusted_lr = lr * group["rms_scale"] * math.sqrt(max(p.shape[0], p.shape[1]))
                p.mul_(1 - lr * wd)
                p.add_(u, alpha=-adjusted_lr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", help="directory written by `zaya optim-case`")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))

    meta = json.load(open(os.path.join(args.case, "case.json")))
    data = st.load(os.path.join(args.case, "case.safetensors"))
    ad, mu = meta["adamw"], meta["muon"]
    params = {t["name"]: torch.tensor(np.array(data["p0." + t["name"]]), dtype=torch.float32)
              for t in meta["tensors"]}
    for p in params.values():
        p.requires_grad_(False)
    use_muon = meta["optimizer"] == "muon"
    muon_names = [t["name"] for t in meta["tensors"] if use_muon and t["muon"]]
    adam_decay = [t["name"] for t in meta["tensors"] if t["name"] not in muon_names and t["decay"]]
    adam_plain = [t["name"] for t in meta["tensors"] if t["name"] not in muon_names and not t["decay"]]
    muon_decay = {t["name"]: t["decay"] for t in meta["tensors"]}

    lr0 = meta["lr"][0]
    groups = [g for g in (
        dict(params=[params[n] for n in adam_decay], weight_decay=ad["weight_decay"]),
        dict(params=[params[n] for n in adam_plain], weight_decay=0.0),
    ) if g["params"]]
    adamw = torch.optim.AdamW(groups, lr=lr0, betas=(ad["beta1"], ad["beta2"]), eps=ad["eps"])
    optims = [adamw]
    if muon_names:
        mgroups = [g for g in (
            dict(params=[params[n] for n in muon_names if muon_decay[n]], weight_decay=ad["weight_decay"]),
            dict(params=[params[n] for n in muon_names if not muon_decay[n]], weight_decay=0.0),
        ) if g["params"]]
        optims.append(Muon(mgroups, lr=lr0, weight_decay=0.0, momentum=mu["momentum"],
                           nesterov=mu["nesterov"], ns_steps=mu["ns_steps"], rms_scale=mu["rms_scale"]))

    for t in range(1, meta["steps"] + 1):
        for name, p in params.items():
            p.grad = torch.tensor(np.array(data["g%d.%s" % (t, name)]), dtype=torch.float32)
        for opt in optims:
            for g in opt.param_groups:
                g["lr"] = meta["lr"][t - 1]
            opt.step()

    rows = []
    for name, p in params.items():
        ref = p.detach().numpy().astype(np.float64)
        p0 = np.array(data["p0." + name], dtype=np.float64)
        got = np.array(data["final." + name], dtype=np.float64)
        moved = np.abs(ref - p0).max()
        err = np.abs(got - ref).max()
        rel = err / max(moved, 1e-30) if moved > 0 else (0.0 if err == 0 else float("inf"))
        rows.append((rel, err, moved, name, name in muon_names))
    rows.sort(reverse=True)
    print("%-12s %-12s %-12s %-6s %s" % ("rel_err", "abs_err", "moved", "muon", "tensor"))
    for rel, err, moved, name, m in rows[:12]:
        print("%-12.3e %-12.3e %-12.3e %-6s %s" % (rel, err, moved, "yes" if m else "no", name))
    worst = rows[0][0]
    n_muon = sum(1 for r in rows if r[4])
    verdict = "PASS" if worst <= args.tol and all(np.isfinite(r[0]) for r in rows) else "FAIL"
    print("%s: %s, %d steps, %d tensors (%d with Muon): worst relative error %.3e (tol %.1e)"
          % (verdict, meta["optimizer"], meta["steps"], len(rows), n_muon, worst, args.tol))
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
