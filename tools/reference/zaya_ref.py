#!/usr/bin/env python3
"""Independent PyTorch reference of ZAYA1, written from /work/shared/spec/zaya1-architecture.md.

It loads an HF-format directory (config.json + model.safetensors with the HF tensor names) and is
used to check the C++ model: logits, loss and every parameter gradient. The module tree mirrors
the HF names, so `named_parameters()` yields exactly `model.layers.{n}.self_attn.qkv.linear_q.weight`
etc. Fixed conventions are listed in tools/reference/README.md.

    zaya_ref.py grads --model DIR --ids FILE --out OUT.safetensors [--dtype float64|float32]
    zaya_ref.py score --model DIR --ids FILE [--dtype ...]
    zaya_ref.py selftest
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

DTYPES = {"float64": torch.float64, "float32": torch.float32}


# ----------------------------------------------------------------------------- config

class ZayaConfig:
    """The fields of spec section 6. Per-sub-layer fields may be a scalar or a list as long as
    zaya_layers; they are stored here as lists. Unknown fields are ignored."""

    def __init__(self, d):
        self.raw = dict(d)
        layers = [int(x) if isinstance(x, str) and x.isdigit() else x for x in d["zaya_layers"]]
        for x in layers:
            if not (x == "a" or (isinstance(x, int) and x > 0)):
                raise ValueError(f"zaya_layers entry {x!r}: expected 'a' or a positive expert count")
        self.layers = layers
        self.hidden_size = int(d["hidden_size"])
        self.vocab_size = int(d["vocab_size"])
        self.head_dim = int(d.get("head_dim") or self.hidden_size // int(d["num_attention_heads"]))
        # The released HF code assumes Hq = num_attention_heads / 2 when cca_num_q_heads is absent.
        self.q_heads = self._per_layer(d, "cca_num_q_heads", int(d.get("num_attention_heads", 2)) // 2)
        self.kv_heads = self._per_layer(d, "num_query_groups_list", d.get("num_key_value_heads"))
        self.ffn = self._per_layer(d, "ffn_hidden_size_list", d.get("ffn_hidden_size"))
        self.router_width = self._per_layer(d, "zaya_mlp_expansion")
        self.time0 = self._per_layer(d, "cca_time0", 2)
        self.time1 = self._per_layer(d, "cca_time1", 2)
        self.topk = int(d.get("moe_router_topk", 1))
        self.use_mod = bool(d.get("zaya_use_mod", True))
        self.use_eda = bool(d.get("zaya_use_eda", True))
        self.scale_residual_merge = bool(d.get("scale_residual_merge", True))
        self.partial_rotary_factor = float(d.get("partial_rotary_factor", 0.5))
        self.rope_theta = float(d.get("rope_theta", 10000.0))
        self.norm_eps = float(d.get("norm_epsilon", 1e-5))
        self.router_eps = float(d.get("router_norm_epsilon", 1e-6))
        self.tie_word_embeddings = bool(d.get("tie_word_embeddings", True))

    def _per_layer(self, d, key, default=None):
        v = d.get(key, default)
        if v is None:
            raise ValueError(f"config field {key} is required")
        if isinstance(v, list):
            if len(v) != len(self.layers):
                raise ValueError(f"{key} has {len(v)} entries, zaya_layers has {len(self.layers)}")
            return [None if x is None else int(x) for x in v]
        return [int(v)] * len(self.layers)


# ----------------------------------------------------------------------------- small blocks

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class ResidualScaling(nn.Module):
    """Released form (x + b) * a. `first` (sub-layer 0) has no residual_* vectors."""

    def __init__(self, dim, first, enabled):
        super().__init__()
        self.enabled = enabled
        if enabled:
            self.hidden_states_scale = nn.Parameter(torch.ones(dim))
            self.hidden_states_bias = nn.Parameter(torch.zeros(dim))
            if not first:
                self.residual_scale = nn.Parameter(torch.ones(dim))
                self.residual_bias = nn.Parameter(torch.zeros(dim))

    def forward(self, h, res):
        if self.enabled:
            h = (h + self.hidden_states_bias) * self.hidden_states_scale
            if res is not None:
                res = (res + self.residual_bias) * self.residual_scale
        return h if res is None else h + res


def rope_cos_sin(T, rot, theta, dtype):
    """NeoX RoPE tables [T, rot]: the rot/2 angles repeated twice; computed in float64."""
    inv_freq = theta ** (-torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_partial_rope(x, cos, sin):
    """x [B,T,H,hd]; rotates the first rot = cos.shape[-1] dims (rotate-half), the rest pass."""
    rot = cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    x1, x2 = xr[..., :rot // 2], xr[..., rot // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    cos, sin = cos[None, :, None, :].to(x.dtype), sin[None, :, None, :].to(x.dtype)
    return torch.cat([xr * cos + rotated * sin, xp], dim=-1)


# ----------------------------------------------------------------------------- CCA attention

class CCAQKV(nn.Module):
    """Spec section 3 steps 1-5: q, k (conv + q-k mean, L2-normalised) and shifted values."""

    def __init__(self, cfg, n):
        super().__init__()
        D, hd = cfg.hidden_size, cfg.head_dim
        self.Hq, self.Hk, self.hd = cfg.q_heads[n], cfg.kv_heads[n], hd
        if self.Hq % self.Hk or (self.Hk * hd) % 2:
            raise ValueError(f"sub-layer {n}: Hq={self.Hq} not a multiple of Hk={self.Hk}")
        C = (self.Hq + self.Hk) * hd
        self.linear_q = nn.Linear(D, self.Hq * hd, bias=False)
        self.linear_k = nn.Linear(D, self.Hk * hd, bias=False)
        self.val_proj1 = nn.Linear(D, self.Hk * hd // 2, bias=False)
        self.val_proj2 = nn.Linear(D, self.Hk * hd // 2, bias=False)
        self.conv_qk = nn.ModuleList([
            nn.Conv1d(C, C, cfg.time0[n], groups=C, bias=True),
            nn.Conv1d(C, C, cfg.time1[n], groups=self.Hq + self.Hk, bias=True)])
        self.pad = (cfg.time0[n] - 1) + (cfg.time1[n] - 1)
        self.temp = nn.Parameter(torch.ones(self.Hk))

    def forward(self, x):
        B, T, _ = x.shape
        Hq, Hk, hd = self.Hq, self.Hk, self.hd
        G = Hq // Hk
        q0, k0 = self.linear_q(x), self.linear_k(x)
        # 2. causal two-stage conv over time on the packed [B, C, T] channels
        p = torch.cat([q0, k0], dim=-1).transpose(1, 2)
        c = self.conv_qk[1](self.conv_qk[0](F.pad(p, (self.pad, 0)))).transpose(1, 2)
        cq = c[..., :Hq * hd].reshape(B, T, Hq, hd)
        ck = c[..., Hq * hd:].reshape(B, T, Hk, hd)
        # 3. q-k mean
        q0 = q0.reshape(B, T, Hq, hd)
        k0 = k0.reshape(B, T, Hk, hd)
        m = (q0 + k0.repeat_interleave(G, dim=2)) / 2
        m_k = m.reshape(B, T, Hk, G, hd).mean(dim=3)
        q, k = cq + m, ck + m_k
        # 4. values: current-token half and previous-token half (x_{-1} = 0)
        x_prev = F.pad(x, (0, 0, 1, 0))[:, :T]
        v = torch.cat([self.val_proj1(x), self.val_proj2(x_prev)], dim=-1).reshape(B, T, Hk, hd)
        # 5. L2 normalisation (F.normalize: x / max(||x||, 1e-12)), temperature used raw
        q = F.normalize(q, dim=-1) * math.sqrt(hd)
        k = F.normalize(k, dim=-1) * math.sqrt(hd) * self.temp[None, None, :, None]
        return q, k, v


class CCAAttention(nn.Module):
    def __init__(self, cfg, n):
        super().__init__()
        self.qkv = CCAQKV(cfg, n)
        self.o_proj = nn.Linear(self.qkv.Hq * cfg.head_dim, cfg.hidden_size, bias=False)
        self.rot = int(cfg.head_dim * cfg.partial_rotary_factor)
        if self.rot % 2:
            raise ValueError("head_dim * partial_rotary_factor must be even")
        self.theta = cfg.rope_theta

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x)
        cos, sin = rope_cos_sin(T, self.rot, self.theta, x.dtype)
        q, k = apply_partial_rope(q, cos, sin), apply_partial_rope(k, cos, sin)
        G = q.shape[2] // k.shape[2]
        q = q.transpose(1, 2)                                   # [B, Hq, T, hd]
        k = k.repeat_interleave(G, dim=2).transpose(1, 2)       # query head j reads KV head j // G
        v = v.repeat_interleave(G, dim=2).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        s = s.float() if s.dtype not in (torch.float32, torch.float64) else s
        a = torch.softmax(s.masked_fill(causal, float("-inf")), dim=-1).to(v.dtype)
        o = (a @ v).transpose(1, 2).reshape(B, T, -1)
        return self.o_proj(o)


# ----------------------------------------------------------------------------- MoE

class ZayaRouter(nn.Module):
    def __init__(self, cfg, n, num_experts, first_moe):
        super().__init__()
        D, R = cfg.hidden_size, cfg.router_width[n]
        self.num_experts, self.topk, self.use_mod = num_experts, cfg.topk, cfg.use_mod
        classes = num_experts + 1 if cfg.use_mod else num_experts
        self.down_proj = nn.Linear(D, R, bias=True)
        self.has_eda = cfg.use_eda and not first_moe
        if self.has_eda:
            self.router_states_scale = nn.Parameter(torch.ones(R))
        self.rmsnorm_eda = RMSNorm(R, cfg.router_eps)
        self.router_mlp = nn.Sequential(nn.Linear(R, R), nn.GELU(), nn.Linear(R, R), nn.GELU(),
                                        nn.Linear(R, classes, bias=False))
        bb = torch.zeros(classes)
        if cfg.use_mod:
            bb[-1] = -1.0
        self.register_buffer("balancing_biases", bb)
        self.last_choice = None

    def forward(self, x, r_prev):
        """x [N, D] -> (choice [N,k], gate [N,k], r for the next MoE sub-layer)."""
        r = self.down_proj(x)
        if self.has_eda:
            r = r + self.router_states_scale * r_prev
        z = self.router_mlp(self.rmsnorm_eda(r))
        z = z.float() if z.dtype not in (torch.float32, torch.float64) else z
        prob = torch.softmax(z, dim=-1)
        choice = select_experts(prob.detach() + self.balancing_biases.to(prob.dtype), self.topk,
                                self.num_experts if self.use_mod else None)
        self.last_choice = choice
        return choice, prob.gather(1, choice), r


def select_experts(scores, k, skip_class):
    """Top-k by score (ties: lower index first). With a skip class, once it appears at rank i all
    later ranks of that token become the skip class too."""
    choice = torch.sort(scores, dim=-1, descending=True, stable=True).indices[:, :k].clone()
    if skip_class is not None:
        for i in range(1, k):
            skipped = (choice[:, :i] == skip_class).any(dim=1)
            choice[:, i] = torch.where(skipped, torch.full_like(choice[:, i], skip_class),
                                       choice[:, i])
    return choice


class Expert(nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.linear_fc1 = nn.Linear(D, F_, bias=False)
        self.linear_fc2 = nn.Linear(F_ // 2, D, bias=False)

    def forward(self, x):
        u = self.linear_fc1(x)
        h = u.shape[-1] // 2
        return self.linear_fc2(F.silu(u[..., :h]) * u[..., h:])


class Experts(nn.Module):
    def __init__(self, D, F_, num_experts):
        super().__init__()
        self.local_experts = nn.ModuleList([Expert(D, F_) for _ in range(num_experts)])


def dispatch(x, choice, gate, experts):
    """Dropless: group the (token, slot) pairs by class with a stable sort, one matmul chain per
    expert, gate-weighted scatter-add back. Class len(experts) (the skip class) returns x itself."""
    N, k = choice.shape
    flat_e = choice.reshape(-1)
    flat_tok = torch.arange(N).repeat_interleave(k)
    flat_gate = gate.reshape(-1)
    order = torch.sort(flat_e, stable=True).indices
    counts = torch.bincount(flat_e, minlength=len(experts) + 1).tolist()
    out = torch.zeros_like(x)
    start = 0
    for e, cnt in enumerate(counts):
        if cnt == 0:
            continue
        idx = order[start:start + cnt]
        start += cnt
        tok = flat_tok[idx]
        xe = x.index_select(0, tok)
        ye = xe if e == len(experts) else experts[e](xe)
        out.index_add_(0, tok, (ye * flat_gate[idx, None].to(ye.dtype)).to(out.dtype))
    return out


class ZayaBlock(nn.Module):
    def __init__(self, cfg, n, num_experts, first_moe):
        super().__init__()
        self.router = ZayaRouter(cfg, n, num_experts, first_moe)
        self.experts = Experts(cfg.hidden_size, cfg.ffn[n], num_experts)

    def forward(self, x, r_prev):
        B, T, D = x.shape
        xf = x.reshape(B * T, D)
        choice, gate, r = self.router(xf, r_prev)
        return dispatch(xf, choice, gate, self.experts.local_experts).reshape(B, T, D), r


# ----------------------------------------------------------------------------- model

class ZayaLayer(nn.Module):
    def __init__(self, cfg, n, first_moe):
        super().__init__()
        self.is_attn = cfg.layers[n] == "a"
        self.res_scale = ResidualScaling(cfg.hidden_size, n == 0, cfg.scale_residual_merge)
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)
        if self.is_attn:
            self.self_attn = CCAAttention(cfg, n)
        else:
            self.zaya_block = ZayaBlock(cfg, n, cfg.layers[n], first_moe)

    def forward(self, h, res, r_prev):
        res = self.res_scale(h, res)
        x = self.input_norm(res)
        if self.is_attn:
            return self.self_attn(x), res, r_prev
        out, r = self.zaya_block(x, r_prev)
        return out, res, r


class ZayaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        moe = [n for n, x in enumerate(cfg.layers) if x != "a"]
        self.layers = nn.ModuleList([ZayaLayer(cfg, n, bool(moe) and n == moe[0])
                                     for n in range(len(cfg.layers))])
        self.res_scale = ResidualScaling(cfg.hidden_size, False, cfg.scale_residual_merge)
        self.final_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)

    def forward(self, ids):
        h, res, r = self.embed_tokens(ids), None, None
        for layer in self.layers:
            h, res, r = layer(h, res, r)
        return self.final_norm(self.res_scale(h, res))


class ZayaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = ZayaModel(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, ids):
        x = self.model(ids)
        w = self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight
        return x @ w.t().to(x.dtype)

    def routing(self):
        """The choices of the last forward, one [N, k] tensor per MoE sub-layer."""
        return [l.zaya_block.router.last_choice for l in self.model.layers if not l.is_attn]


def loss_fn(logits, targets):
    """Mean cross-entropy over the positions whose target != -100 (fp32 at least)."""
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=-100)


# ----------------------------------------------------------------------------- I/O

def load_tensors(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        return st.load(single)
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for fn in files:
        out.update(st.load(os.path.join(model_dir, fn)))
    return out


def load_model(model_dir, dtype=torch.float64):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = ZayaConfig(json.load(f))
    model = ZayaForCausalLM(cfg).to(dtype)  # before loading: no detour through float32
    tensors = load_tensors(model_dir)
    want = model.state_dict()
    missing = [k for k in want if k not in tensors]
    extra = [k for k in tensors if k not in want and not (k == "lm_head.weight"
                                                          and cfg.tie_word_embeddings)]
    if missing or extra:
        raise ValueError(f"{model_dir}: missing tensors {missing[:8]}, unexpected {extra[:8]}")
    sd = {}
    for k, v in want.items():
        if tuple(tensors[k].shape) != tuple(v.shape):
            raise ValueError(f"{k}: shape {tensors[k].shape} in file, model wants {tuple(v.shape)}")
        sd[k] = torch.from_numpy(np.asarray(tensors[k], dtype=np.float64))
    model.load_state_dict(sd, strict=True)
    return model


def save_hf(model, config_dict, out_dir, dtype=np.float32):
    """Writes config.json + model.safetensors (HF names) from a model; used by the self-test."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_dict, f, indent=1)
    st.save(os.path.join(out_dir, "model.safetensors"),
            {k: v.detach().numpy().astype(dtype) for k, v in model.state_dict().items()})


def read_ids(path):
    with open(path) as f:
        rows = [[int(t) for t in line.split()] for line in f if line.strip()]
    if not rows or len({len(r) for r in rows}) != 1 or len(rows[0]) < 2:
        raise ValueError(f"{path}: need >= 1 line, all the same length >= 2")
    return torch.tensor(rows, dtype=torch.long)


def split_ids(ids, vocab):
    inputs, targets = ids[:, :-1], ids[:, 1:]
    if inputs.min() < 0 or inputs.max() >= vocab:
        raise ValueError("input ids out of range (only targets may be -100)")
    return inputs, targets


def compute_grads(model, ids):
    inputs, targets = split_ids(ids, model.cfg.vocab_size)
    model.zero_grad(set_to_none=True)
    logits = model(inputs)
    loss = loss_fn(logits, targets)
    loss.backward()
    return logits.detach(), loss.detach()


# ----------------------------------------------------------------------------- CLI

def cmd_grads(args):
    dtype = DTYPES[args.dtype]
    model = load_model(args.model, dtype)
    logits, loss = compute_grads(model, read_ids(args.ids))
    np_dt = np.float64 if dtype == torch.float64 else np.float32
    out = {"logits": logits.numpy().astype(np_dt), "loss": np.array([loss.item()], dtype=np_dt)}
    for name, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        out["grad." + name] = g.detach().numpy().astype(np_dt)
    st.save(args.out, out)
    print(f"wrote {args.out}: loss {loss.item():.10g}, {len(out) - 2} gradients")


def cmd_score(args):
    model = load_model(args.model, DTYPES[args.dtype])
    with open(args.ids) as f:
        rows = [[int(t) for t in line.split()] for line in f if line.strip()]
    if len(rows) != 1 or len(rows[0]) < 2:
        raise SystemExit("score: --ids must hold exactly one sequence of >= 2 ids")
    inputs, targets = split_ids(torch.tensor(rows, dtype=torch.long), model.cfg.vocab_size)
    with torch.no_grad():
        logp = torch.log_softmax(model(inputs).to(torch.float64), dim=-1)[0]
    lp = logp.gather(1, targets[0].clamp(min=0)[:, None])[:, 0]
    keep = targets[0] != -100
    lps = [float(x) if m else None for x, m in zip(lp.tolist(), keep.tolist())]
    n = int(keep.sum())
    print(json.dumps({"logprobs": lps, "loss": float(-lp[keep].sum() / max(n, 1)), "tokens": n}))


# ----------------------------------------------------------------------------- self-test

SELFTEST_CONFIG = {
    "model_type": "zaya", "architectures": ["ZayaForCausalLM"], "hidden_size": 16,
    "vocab_size": 24, "num_attention_heads": 2, "head_dim": 8, "cca_num_q_heads": 4,
    "num_query_groups_list": 2, "zaya_layers": ["a", 3, "a", 3, "a", 3],
    "ffn_hidden_size_list": 12, "zaya_mlp_expansion": 8, "moe_router_topk": 2,
    "zaya_use_mod": True, "zaya_use_eda": True, "scale_residual_merge": True,
    "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "norm_epsilon": 1e-5,
    "tie_word_embeddings": True, "some_unknown_field": 1,
}


def randomize(model, seed):
    """Non-trivial random values for every tensor (norm weights, scales, biases, temp included)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            r = torch.randn(t.shape, generator=g, dtype=torch.float64)
            if name.endswith("balancing_biases"):
                t.copy_(0.05 * r)
            elif name.endswith("embed_tokens.weight"):
                t.copy_(0.5 * r)
            elif t.dim() >= 2:
                t.copy_(r / math.sqrt(t[0].numel()))
            else:
                one = name.endswith(("norm.weight", "_scale", "temp", "rmsnorm_eda.weight"))
                t.copy_((1.0 if one else 0.0) + 0.2 * r)


def _check(ok, what, failures):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failures.append(what)


def _selftest_routing(failures):
    sc = torch.tensor([[0.1, 0.5, 0.2, 0.9], [0.3, 0.1, 0.8, 0.2], [0.4, 0.4, 0.1, 0.0],
                       [0.5, 0.1, 0.2, 0.3]], dtype=torch.float64)
    got = select_experts(sc, 3, 3).tolist()
    _check(got == [[3, 3, 3], [2, 0, 3], [0, 1, 2], [0, 3, 3]],
           f"select_experts: skip propagation and tie order {got}", failures)
    _check(select_experts(sc, 2, None).tolist() == [[3, 1], [2, 0], [0, 1], [0, 3]],
           "select_experts without skip class", failures)


def _fd_check(model, inputs, targets, failures, eps=1e-6):
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    route0 = [c.clone() for c in model.routing()]
    worst, n_checked, n_skipped = 0.0, 0, 0
    g = torch.Generator().manual_seed(1)
    for name, p in model.named_parameters():
        grad = p.grad.reshape(-1)
        picks = {int(grad.abs().argmax()), int(torch.randint(p.numel(), (1,), generator=g))}
        for i in picks:
            vals = []
            with torch.no_grad():
                orig = p.view(-1)[i].item()
                for d in (eps, -eps):
                    p.view(-1)[i] = orig + d
                    vals.append(loss_fn(model(inputs), targets).item())
                    stable = all(torch.equal(a, b) for a, b in zip(route0, model.routing()))
                p.view(-1)[i] = orig
            if not stable:
                n_skipped += 1
                continue
            fd, ag = (vals[0] - vals[1]) / (2 * eps), grad[i].item()
            err = abs(fd - ag) / max(1.0, abs(ag))
            worst = max(worst, err)
            n_checked += 1
            if err > 1e-7:
                print(f"    {name}[{i}]: autograd {ag:.12g} finite-diff {fd:.12g}")
    _check(worst <= 1e-7 and n_checked > 100, f"finite differences: {n_checked} entries, worst "
           f"error {worst:.2e} (<= 1e-7), {n_skipped} skipped for a routing flip", failures)


def selftest():
    import tempfile
    import compare
    failures = []
    _check(st._selftest(), "safetensors_np round trip (F64/F32/F16/I64/I32/BF16 rounding)", failures)
    _selftest_routing(failures)
    cfg = ZayaConfig(SELFTEST_CONFIG)
    model = ZayaForCausalLM(cfg).to(torch.float64)
    randomize(model, 0)
    names = [n for n, _ in model.named_parameters()]
    _check(not any("balancing_biases" in n for n in names) and
           "model.layers.1.zaya_block.router.router_states_scale" not in names and
           "model.layers.3.zaya_block.router.router_states_scale" in names and
           "model.layers.0.res_scale.residual_scale" not in names,
           f"parameter names follow the HF layout ({len(names)} tensors)", failures)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(cfg.vocab_size, (2, 13), generator=g)
    inputs, targets = ids[:, :-1], ids[:, 1:].clone()
    targets[0, -1] = -100
    with torch.no_grad():
        logits = model(inputs)
    first = [c[:, 0] for c in model.routing()]
    skip_first = sum(int((c == 3).sum()) for c in first)
    skip_second = sum(int(((c[:, 0] != 3) & (c[:, 1] == 3)).sum()) for c in model.routing())
    _check(skip_first > 0 and skip_second > 0, f"routing covers skip at rank 0 ({skip_first}) "
           f"and rank 1 only ({skip_second})", failures)
    lp = torch.log_softmax(logits, -1)
    keep = targets != -100
    manual = -lp.gather(2, targets.clamp(min=0)[..., None])[..., 0][keep].mean()
    _check(abs(manual.item() - loss_fn(logits, targets).item()) < 1e-12,
           "loss = mean CE over targets != -100", failures)
    ids2 = inputs.clone()
    ids2[0, 7] = (ids2[0, 7] + 1) % cfg.vocab_size
    with torch.no_grad():
        d = (model(ids2) - logits).abs()
    _check(d[0, :7].max().item() < 1e-12 and d[0, 7:].max().item() > 1e-6 and
           d[1].max().item() < 1e-12, "causal: changing token 7 changes only logits >= 7", failures)
    _fd_check(model, inputs, targets, failures)
    with tempfile.TemporaryDirectory() as tmp:
        save_hf(model, SELFTEST_CONFIG, tmp, dtype=np.float64)
        back = load_model(tmp, torch.float64)
        with torch.no_grad():
            _check(torch.equal(back(inputs), logits), "save_hf/load_model round trip (F64)", failures)
        with open(os.path.join(tmp, "ids.txt"), "w") as f:
            f.write("\n".join(" ".join(map(str, r)) for r in ids.tolist()) + "\n")
        ns = argparse.Namespace(model=tmp, ids=os.path.join(tmp, "ids.txt"))
        for dt in DTYPES:
            cmd_grads(argparse.Namespace(**vars(ns), out=os.path.join(tmp, dt + ".st"), dtype=dt))
        rc = compare.main([os.path.join(tmp, "float32.st"), os.path.join(tmp, "float64.st"),
                           "--rtol", "1e-4", "--quiet"])
        _check(rc == 0, "grads CLI: float32 run matches float64 run at rtol 1e-4", failures)
    print("selftest: " + ("PASSED" if not failures else f"FAILED ({len(failures)})"))
    return not failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grads", help="logits, loss and all parameter gradients to safetensors")
    g.add_argument("--model", required=True)
    g.add_argument("--ids", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--dtype", choices=DTYPES, default="float64")
    s = sub.add_parser("score", help="per-token logprobs of one sequence, as JSON")
    s.add_argument("--model", required=True)
    s.add_argument("--ids", required=True)
    s.add_argument("--dtype", choices=DTYPES, default="float64")
    sub.add_parser("selftest", help="finite-difference gradient check and invariants (float64)")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    if args.cmd == "grads":
        cmd_grads(args)
    elif args.cmd == "score":
        cmd_score(args)
    else:
        sys.exit(0 if selftest() else 1)


if __name__ == "__main__":
    main()
