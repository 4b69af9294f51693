#!/usr/bin/env python3
"""ZAYA1 as an idiomatic, speed-minded PyTorch user would write it: the PyTorch peer of
bench/train_step.sh (through bench_torch.py). Not a correctness reference.

zaya_ref.py is the independent reference that tests/reference_model.sh checks zaya against; its
numerics stay as they are. This module subclasses its modules (same parameter names, same init,
same maths) and changes only how things are computed:

- attention: F.scaled_dot_product_attention(is_causal=True) where torch has it (torch >= 2.0);
  otherwise (Debian 12's torch 1.13) one batched matmul per side with grouped-query heads folded
  into the query rows (no repeat_interleave copies of K and V) and an additive causal mask built
  once per sequence length;
- RoPE cos/sin tables and the causal mask: built once per (T, dtype) for the whole model, not per
  layer per step;
- RMSNorm as x * rsqrt(mean(x^2) + eps) * w (one reduction, no division);
- top-1 routing by argmax (first maximum on ties, as the reference's stable sort), the
  reference's stable sort for top-k > 1.

    zaya_fast.py check   # same loss (fp32, rtol 1e-5) and gradients (rtol 1e-4) as zaya_ref
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zaya_ref as R  # noqa: E402

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class Tables:
    """RoPE tables and the additive causal mask, shared by every layer, built once per key."""

    def __init__(self, rot, theta):
        self.rot, self.theta = rot, theta
        self._rope, self._mask = {}, {}

    def rope(self, T, dtype):
        key = (T, dtype)
        if key not in self._rope:
            cos, sin = R.rope_cos_sin(T, self.rot, self.theta, dtype)
            # [1, T, 1, rot] as apply_partial_rope broadcasts them
            self._rope[key] = (cos[None, :, None, :].contiguous(), sin[None, :, None, :].contiguous())
        return self._rope[key]

    def mask(self, T, dtype):
        key = (T, dtype)
        if key not in self._mask:
            self._mask[key] = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
        return self._mask[key]


def apply_partial_rope(x, cos, sin):
    """As zaya_ref.apply_partial_rope with the tables already shaped [1, T, 1, rot]."""
    rot = cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    x1, x2 = xr[..., :rot // 2], xr[..., rot // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    if cos.dtype != x.dtype:
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat([xr * cos + rotated * sin, xp], dim=-1)


class RMSNorm(R.RMSNorm):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CCAAttention(R.CCAAttention):
    tables = None  # set by ZayaForCausalLM

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x)                                   # [B, T, H, hd]
        cos, sin = self.tables.rope(T, torch.float32)
        q, k = apply_partial_rope(q, cos, sin), apply_partial_rope(k, cos, sin)
        Hq, Hk, hd = q.shape[2], k.shape[2], q.shape[3]
        G = Hq // Hk
        if HAS_SDPA:
            q = q.transpose(1, 2)
            k = k.repeat_interleave(G, dim=2).transpose(1, 2)
            v = v.repeat_interleave(G, dim=2).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v.to(q.dtype), is_causal=True)
            o = o.transpose(1, 2).reshape(B, T, Hq * hd)
            return self.o_proj(o)
        # query head j reads KV head j // G: fold the G query heads of a group into the rows
        qg = q.reshape(B, T, Hk, G, hd).permute(0, 2, 3, 1, 4).reshape(B, Hk, G * T, hd)
        kt = k.permute(0, 2, 3, 1)                              # [B, Hk, hd, T]
        s = torch.matmul(qg, kt).view(B, Hk, G, T, T)
        s = s.float() if s.dtype not in (torch.float32, torch.float64) else s
        s = s * (1.0 / math.sqrt(hd)) + self.tables.mask(T, s.dtype)
        a = torch.softmax(s, dim=-1).to(v.dtype).view(B, Hk, G * T, T)
        o = torch.matmul(a, v.transpose(1, 2))                 # [B, Hk, G*T, hd]
        o = o.view(B, Hk, G, T, hd).permute(0, 3, 1, 2, 4).reshape(B, T, Hq * hd)
        return self.o_proj(o)


class ZayaRouter(R.ZayaRouter):
    def forward(self, x, r_prev):
        r = self.down_proj(x)
        if self.has_eda:
            r = r + self.router_states_scale * r_prev
        z = self.router_mlp(self.rmsnorm_eda(r))
        z = z.float() if z.dtype not in (torch.float32, torch.float64) else z
        prob = torch.softmax(z, dim=-1)
        scores = prob.detach() + self.balancing_biases.to(prob.dtype)
        if self.topk == 1:
            choice = scores.argmax(dim=-1, keepdim=True)
        else:
            choice = R.select_experts(scores, self.topk, self.num_experts if self.use_mod else None)
        self.last_choice = choice
        return choice, prob.gather(1, choice), r


def _swap_class(module, cls):
    module.__class__ = cls


class ZayaForCausalLM(R.ZayaForCausalLM):
    """zaya_ref.ZayaForCausalLM with the speed-minded sub-modules swapped in (same parameters)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        rot = int(cfg.head_dim * cfg.partial_rotary_factor)
        self.tables = Tables(rot, cfg.rope_theta)
        for m in self.modules():
            if type(m) is R.RMSNorm:
                _swap_class(m, RMSNorm)
            elif type(m) is R.CCAAttention:
                _swap_class(m, CCAAttention)
                m.tables = self.tables
            elif type(m) is R.ZayaRouter:
                _swap_class(m, ZayaRouter)


# ----------------------------------------------------------------------------- check

CHECK_CONFIGS = {
    "selftest": (R.SELFTEST_CONFIG, 2, 13),
    # zaya1-small's shape scaled down: 4 sub-layers, top-1 with the skip class
    "small-ish": ({**R.SELFTEST_CONFIG, "hidden_size": 64, "vocab_size": 96, "head_dim": 16,
                   "num_attention_heads": 4, "cca_num_q_heads": 4, "num_query_groups_list": 2,
                   "zaya_layers": ["a", 4, "a", 4], "ffn_hidden_size_list": 48,
                   "zaya_mlp_expansion": 16, "moe_router_topk": 1}, 3, 33),
}


def check(verbose=True):
    """fp32: the same weights in zaya_ref and here give the same loss (rtol 1e-5) and gradients
    (rtol 1e-4 of each tensor's largest entry). Returns True when every config passes."""
    ok = True
    for name, (cfg_dict, B, T1) in CHECK_CONFIGS.items():
        cfg = R.ZayaConfig(cfg_dict)
        ref = R.ZayaForCausalLM(cfg).float()
        R.randomize(ref, 0)
        fast = ZayaForCausalLM(cfg).float()
        fast.load_state_dict(ref.state_dict())
        ids = torch.randint(cfg.vocab_size, (B, T1), generator=torch.Generator().manual_seed(5))
        inputs, targets = ids[:, :-1], ids[:, 1:]
        losses, grads = [], []
        for m in (ref, fast):
            m.zero_grad(set_to_none=True)
            loss = R.loss_fn(m(inputs), targets)
            loss.backward()
            losses.append(loss.item())
            grads.append({n: p.grad for n, p in m.named_parameters() if p.grad is not None})
        rel_loss = abs(losses[1] - losses[0]) / abs(losses[0])
        routes_equal = all(torch.equal(a, b) for a, b in zip(ref.routing(), fast.routing()))
        worst = 0.0
        for n, g in grads[0].items():
            h = grads[1].get(n)
            if h is None:
                worst = float("inf")
                continue
            worst = max(worst, ((h - g).abs().max() / g.abs().max().clamp(min=1e-30)).item())
        if set(grads[1]) != set(grads[0]):
            worst = float("inf")
        passed = rel_loss <= 1e-5 and worst <= 1e-4 and routes_equal
        ok &= passed
        if verbose:
            print(f"  {'ok  ' if passed else 'FAIL'}  {name}: loss ref {losses[0]:.8f} fast "
                  f"{losses[1]:.8f} (rel {rel_loss:.1e} <= 1e-5), gradients worst rel "
                  f"{worst:.1e} (<= 1e-4), routing {'same' if routes_equal else 'DIFFERENT'}")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cmd", choices=["check"])
    ap.parse_args(argv)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    ok = check()
    print(f"zaya_fast check vs zaya_ref (fp32, torch {torch.__version__}, "
          f"{'SDPA' if HAS_SDPA else 'batched-matmul attention, no SDPA in this torch'}): "
          + ("PASSED" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
