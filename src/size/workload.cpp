#include "size/workload.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/params.h"
#include "size/hardware.h"
#include "train/optim.h"

namespace zaya::size {
using json = nlohmann::json;

int RunLayout::act_bytes() const { return dtype_bytes(dtype); }

RunLayout RunLayout::for_dtype(const std::string& dtype) {
  RunLayout r;
  r.dtype = dtype;
  if (dtype == "fp32") {
    r.weight_bytes = 4;
    r.grad_bytes = 4;
    r.master_bytes = 0;  // the weights are the master copy
  }
  return r;
}

void RunLayout::validate(const ModelConfig& cfg) const {
  auto pos = [](const char* flag, double v) {
    if (!(v > 0)) fail("--", flag, " must be positive, got ", v);
  };
  pos("dp", dp);
  pos("ep", ep);
  pos("cp", cp);
  pos("micro-batch", micro_batch);
  pos("seq", seq);
  pos("grad-accum", grad_accum);
  dtype_bytes(dtype);
  if (cfg.num_experts % ep) fail("--ep ", ep, " does not divide the ", cfg.num_experts, " experts");
  if (world() % ep) fail("--ep ", ep, " does not divide dp*cp = ", world(), " (experts are sharded inside the data-parallel group)");
  if (seq % cp) fail("--cp ", cp, " does not divide --seq ", seq);
  if (skip_share < 0 || skip_share >= 1) fail("--skip-share must be in [0, 1), got ", skip_share);
  if (overlap < 0 || overlap > 1) fail("--overlap must be in [0, 1], got ", overlap);
  if (attention != "flash" && attention != "full" && attention != "naive")
    fail("--attention must be flash, full or naive, got '", attention, "'");
  parse_optimizer_kind(optimizer, "--optimizer");  // fails on a name that is no optimizer
}

double Workload::forward_flops() const {
  double f = 0;
  for (auto& g : gemms) f += g.flops();
  return f;
}

Workload build_workload(const ModelConfig& cfg, const RunLayout& run) {
  cfg.validate();
  run.validate(cfg);
  Workload w;
  w.cfg = cfg;
  w.run = run;
  const double D = cfg.hidden_size, hd = cfg.head_dim, Hq = cfg.num_q_heads, Hk = cfg.num_kv_heads;
  const double R = cfg.router_hidden, F = cfg.ffn_hidden_size, E = cfg.num_experts, V = cfg.vocab_size;
  const double NC = cfg.num_classes(), L = cfg.num_layers, C = cfg.conv_channels();
  const double b = run.micro_batch, s = run.seq, sq = s / run.cp;  // queries per rank
  const double N = w.tokens = run.tokens_per_rank();
  const double routed = N * cfg.topk * (1.0 - run.skip_share);  // token-expert pairs on this rank
  const double local_experts = E / run.ep;
  w.tokens_per_expert = routed * run.ep / E;  // tokens from the whole EP group, per local expert

  auto add = [&](const char* name, const char* group, double M, double Nn, double K, double batch = 1,
                 double useful = 1.0) {
    w.gemms.push_back({name, group, M, Nn, K, batch, useful, L});
  };
  // Attention (CCA) sub-layer.
  add("attn.linear_q", "attention_proj", N, Hq * hd, D);
  add("attn.linear_k", "attention_proj", N, Hk * hd, D);
  add("attn.val_proj1", "attention_proj", N, Hk * hd / 2, D);
  add("attn.val_proj2", "attention_proj", N, Hk * hd / 2, D);
  add("attn.conv_qk.1", "conv", N, hd, hd, (Hq + Hk) * cfg.conv_kernel1);
  add("attn.qk^T", "attention_core", sq, s, hd, b * Hq, 0.5);  // causal: half the square is useful
  add("attn.pv", "attention_core", sq, hd, s, b * Hq, 0.5);
  add("attn.o_proj", "attention_proj", N, D, Hq * hd);
  // MoE sub-layer.
  add("router.down_proj", "router", N, R, D);
  add("router.mlp.0", "router", N, R, R);
  add("router.mlp.2", "router", N, R, R);
  add("router.mlp.4", "router", N, NC, R);
  add("experts.fc1", "experts", w.tokens_per_expert, F, D, local_experts);
  add("experts.fc2", "experts", w.tokens_per_expert, D, F / 2, local_experts);
  // LM head (tied embedding), once.
  w.gemms.push_back({"lm_head", "lm_head", N, V, D, 1, 1.0, 1});
  // FLOPs count the useful causal half; a kernel that does not skip the masked half
  // computes the whole square, which step_time charges (RunLayout::causal_skip()).

  // Memory-bound forward work (bytes read + written), activation dtype `a`, residual `r`.
  const double a = run.act_bytes(), r = cfg.residual_in_fp32 ? 4.0 : a;
  auto mem = [&](const char* name, double bytes, double layers, double kernels, SpecialCounts fwd = {},
                 SpecialCounts bwd = {}) { w.memops.push_back({name, bytes, layers, kernels, fwd, bwd}); };
  const double merge = N * (D * a + 2 * D * r + D * r);  // read h, res; write res
  const double norm = N * (D * r + D * a);
  mem("residual_merge+norm", merge + norm, 2 * L, 2);
  mem("attn.conv_qk.0 (depthwise)", N * 2 * C * a, L, 1);
  mem("attn.qk_mean+l2norm+rope", N * (3 * C + Hk * hd) * a, L, 3);
  mem("attn.value_shift", N * 2 * Hk * hd * a, L, 1);
  // Softmax: one exp per visible score (the causal half), again in backward (recomputed
  // probabilities) unless the kernel stored them.
  const SpecialCounts exps{b * Hq * sq * s * 0.5, 0};
  const SpecialCounts exps_bwd = run.recomputes_scores() ? exps : SpecialCounts{};
  if (!run.score_traffic()) {
    mem("attn.softmax (fused)", N * Hq * 4.0 * 2, L, 0, exps, exps_bwd);
  } else {
    // Softmax reads the scores and writes the probabilities (fp32; the GEMMs' own reads
    // and writes of them are in their rooflines).
    double scores = b * Hq * sq * s * (run.causal_skip() ? 0.5 : 1.0) * 4.0;
    mem("attn.softmax (scores in memory)", 2 * scores, L, 1, exps, exps_bwd);
  }
  // Router: two exact GELUs (erf; backward erf + exp) and the class softmax (exp).
  mem("router.norm+gelu+softmax+topk", N * (6 * R * a + 3 * NC * 4.0), L, 5, {N * NC, 2 * N * R},
      {2 * N * R, 2 * N * R});
  mem("moe.dispatch+combine", routed * 4 * D * a + N * 2 * D * a, L, 3);
  // SwiGLU: a sigmoid (exp) per gate element, again in backward.
  mem("experts.swiglu", routed * (F + F / 2) * a, L, 1, {routed * F / 2, 0}, {routed * F / 2, 0});
  mem("embedding+final_merge+norm", N * D * a + merge + norm, 1, 3);
  // Cross-entropy: log-sum-exp per logit and the softmax gradient, an exp each.
  mem("loss (softmax over vocab)", N * V * 4.0 * 3, 1, 2, {N * V, 0}, {N * V, 0});
  return w;
}

FlopsPerToken flops_per_token(const Workload& w) {
  FlopsPerToken f;
  const double N = w.tokens;
  for (auto& g : w.gemms) {
    double per = g.flops() / N;
    f.forward += per;
    f.per_gemm.push_back({g.name, per});
    if (g.group == "attention_core") f.attention_quadratic += per;
    if (g.group == "router") f.router += per;
    if (g.group == "experts") f.experts += per;
    if (g.group == "lm_head") f.lm_head += per;
  }
  f.training = 3 * f.forward;
  f.training_hardware = f.training + (w.run.recompute ? f.forward : 0);
  ParamCounts pc = count_params(w.cfg);
  f.six_n_active = 6.0 * double(pc.active_with_embedding());
  return f;
}

json workload_to_json(const Workload& w) {
  json g = json::array();
  for (auto& x : w.gemms)
    g.push_back({{"name", x.name}, {"group", x.group}, {"M", x.M}, {"N", x.N}, {"K", x.K}, {"batch", x.batch},
                 {"useful", x.useful}, {"layers", x.layers}, {"flops", x.flops()}});
  json m = json::array();
  for (auto& x : w.memops)
    m.push_back({{"name", x.name},
                 {"bytes", x.bytes},
                 {"layers", x.layers},
                 {"kernels", x.kernels},
                 {"exp_f32_forward", x.special_fwd.exp_f32},
                 {"erf_f32_forward", x.special_fwd.erf_f32},
                 {"exp_f32_backward", x.special_bwd.exp_f32},
                 {"erf_f32_backward", x.special_bwd.erf_f32}});
  const RunLayout& r = w.run;
  return {{"layout",
           {{"dp", r.dp}, {"ep", r.ep}, {"cp", r.cp}, {"micro_batch", r.micro_batch}, {"seq", r.seq},
            {"grad_accum", r.grad_accum}, {"dtype", r.dtype}, {"recompute", r.recompute},
            {"skip_share", r.skip_share}, {"optimizer", r.optimizer}, {"attention", r.attention},
            {"overlap", r.overlap}}},
          {"tokens_per_rank_per_micro_batch", w.tokens},
          {"tokens_per_expert", w.tokens_per_expert},
          {"gemms", g},
          {"memops", m}};
}

json flops_to_json(const FlopsPerToken& f) {
  json per = json::object();
  for (auto& [k, v] : f.per_gemm) per[k] = v;
  return {{"forward", f.forward},
          {"training", f.training},
          {"training_hardware", f.training_hardware},
          {"attention_quadratic_forward", f.attention_quadratic},
          {"router_forward", f.router},
          {"experts_forward", f.experts},
          {"lm_head_forward", f.lm_head},
          {"six_n_active_with_embedding", f.six_n_active},
          {"per_gemm_forward", per}};
}

}  // namespace zaya::size
