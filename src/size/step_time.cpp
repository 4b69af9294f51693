#include "size/step_time.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/params.h"
#include "size/measured.h"
#include "size/memory.h"

namespace zaya::size {
using json = nlohmann::json;

double collective_seconds(const HardwareProfile& hw, const std::string& op, double bytes, int n) {
  if (n <= 1 || bytes <= 0) return 0;
  std::vector<const MeasuredCollective*> rows;
  for (auto& r : hw.comm_table)
    if (r.op == op && r.nranks == n) rows.push_back(&r);
  if (!rows.empty()) {
    std::sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->size_bytes < b->size_bytes; });
    if (bytes <= rows.front()->size_bytes) return rows.front()->time_us * 1e-6;
    for (size_t i = 1; i < rows.size(); ++i)
      if (bytes <= rows[i]->size_bytes) {
        const auto *a = rows[i - 1], *b = rows[i];
        double f = (bytes - a->size_bytes) / (b->size_bytes - a->size_bytes);
        return (a->time_us + f * (b->time_us - a->time_us)) * 1e-6;
      }
    const auto* last = rows.back();
    double bw = std::max(last->busbw_GBps, 1e-9) * 1e9;
    return last->time_us * 1e-6 + (bytes - last->size_bytes) * collective_bus_factor(op, n) / bw;
  }
  const LinkProfile& link = n <= hw.devices_per_node ? hw.intra : hw.inter;
  return collective_steps(op, n) * link.latency_us * 1e-6 +
         collective_bus_factor(op, n) * bytes / (link.bandwidth_GBps * 1e9);
}

namespace {

// The hidden 2-D matrices Muon orthogonalises on one rank: shapes [rows, cols] and counts.
struct MatrixGroup {
  double rows, cols, count;
};

std::vector<MatrixGroup> muon_matrices(const ModelConfig& cfg, const RunLayout& run) {
  const double D = cfg.hidden_size, hd = cfg.head_dim, Hq = cfg.num_q_heads, Hk = cfg.num_kv_heads;
  const double R = cfg.router_hidden, F = cfg.ffn_hidden_size, L = cfg.num_layers;
  return {{Hq * hd, D, L},     {Hk * hd, D, L}, {Hk * hd / 2, D, 2 * L}, {D, Hq * hd, L},
          {R, D, L},           {R, R, 2 * L},   {double(cfg.num_classes()), R, L},
          {F, D, L * cfg.num_experts / run.ep}, {D, F / 2, L * cfg.num_experts / run.ep}};
}

}  // namespace

StepPrediction predict_step(const Workload& w, const HardwareProfile& hw) {
  const RunLayout& run = w.run;
  const ModelConfig& cfg = w.cfg;
  const std::string& dt = run.dtype;
  StepPrediction p;
  for (const GemmOp& g : w.gemms) {
    GemmStepRow row;
    row.name = g.name;
    row.group = g.group;
    row.forward = {g.M, g.N, g.K, g.batch};
    const bool attn = g.group == "attention_core";
    // A causal attention kernel that does not skip the masked half computes all of it.
    const double exec = attn && !run.causal_skip() ? 1.0 : g.useful;
    // A fused (flash) attention kernel never writes or reads the score matrix: its traffic is
    // Q, K, V and O (and their gradients), shared by the QK^T and PV products.
    double io = 0;
    if (attn && !run.score_traffic()) {
      const double qo = 2.0 * g.batch * (double(run.seq) / run.cp) * cfg.head_dim;
      const double kv = 2.0 * run.micro_batch * cfg.num_kv_heads * run.seq * cfg.head_dim;
      io = (qo + kv) * run.act_bytes() / 2;
    }
    row.forward.bytes = io;
    row.forward_timing = gemm_time(hw, dt, row.forward, exec);
    row.forward_s = row.forward_timing.seconds * g.layers;
    GemmShape dgrad{g.M, g.K, g.N, g.batch, io}, wgrad{g.K, g.N, g.M, g.batch, io};
    row.backward_s = (gemm_time(hw, dt, dgrad, exec).seconds + gemm_time(hw, dt, wgrad, exec).seconds) * g.layers;
    // Backward recomputes the scores (QK^T again) unless the kernel stored them.
    if (attn && g.name == "attn.qk^T" && run.recomputes_scores()) row.backward_s += row.forward_s;
    row.flops = g.flops();
    p.gemm_forward_s += row.forward_s;
    p.gemm_backward_s += row.backward_s;
    p.gemms.push_back(row);
  }
  if (run.recompute) p.gemm_recompute_s = p.gemm_forward_s;
  // Elementwise work: forward bytes, backward 2x, recompute 1x more; each pass of each op
  // takes the longer of its memory traffic and its exp / erf evaluations.
  const double passes = 3.0 + (run.recompute ? 1.0 : 0.0);
  // A CPU profile's measured kernel bandwidth when present (simple loops fall short of STREAM).
  const double bw = hw.elementwise.kernels_GBps > 0 ? hw.elementwise.kernels_GBps * 1e9 : hw.achievable_bandwidth();
  double fwd_kernels = 0;
  for (const MemOp& m : w.memops) {
    const double fwd = std::max(m.bytes / bw, special_seconds(m.special_fwd, hw.elementwise));
    const double bwd = std::max(2 * m.bytes / bw, special_seconds(m.special_bwd, hw.elementwise));
    p.memops_s += m.layers * (fwd * (run.recompute ? 2 : 1) + bwd);
    fwd_kernels += m.kernels * m.layers;
  }
  p.kernel_overhead_s = passes * fwd_kernels * hw.kernel_overhead_us * 1e-6;
  // EP all-to-all (dispatch + combine per MoE sub-layer; forward, backward x2, recompute)
  // and CP all-gather of K/V (backward: reduce-scatter of their gradients).
  const double a = run.act_bytes(), L = cfg.num_layers;
  if (run.ep > 1) {
    double bytes = w.tokens * cfg.topk * (1 - run.skip_share) * cfg.hidden_size * a;
    p.ep_comm_s = 2 * L * passes * collective_seconds(hw, "all_to_all", bytes, run.ep);
  }
  if (run.cp > 1) {
    double bytes = double(run.micro_batch) * run.seq * 2 * cfg.num_kv_heads * cfg.head_dim * a;
    double ag = collective_seconds(hw, "all_gather", bytes, run.cp);
    double rs = collective_seconds(hw, "reduce_scatter", bytes, run.cp);
    p.cp_comm_s = L * (ag * (run.recompute ? 2 : 1) + rs);
  }
  p.micro_batch_s = p.gemm_forward_s + p.gemm_backward_s + p.gemm_recompute_s + p.memops_s + p.kernel_overhead_s +
                    p.ep_comm_s + p.cp_comm_s;
  // Optimizer: each rank updates its ZeRO-1 shard (master rw, two moments rw, grad read,
  // weight write), then all-gathers the weights.
  RankParams rp = rank_params(cfg, run);
  const double master = run.master_bytes > 0 ? run.master_bytes : run.weight_bytes;
  const double bytes_per_param = 2 * master + 2 * run.optim_bytes + run.grad_bytes +
                                 (run.master_bytes > 0 ? run.weight_bytes : 0);
  // Plus zeroing every held gradient for the next step.
  const double bw_kernels =
      hw.elementwise.kernels_GBps > 0 ? hw.elementwise.kernels_GBps * 1e9 : hw.achievable_bandwidth();
  double zeroing_s = 0;  // inside optimizer_s; a zone of its own in the zone model
  if (!hw.elementwise.adamw_rates.empty() && run.optimizer == "adamw") {
    // Measured AdamW rates per tensor size, over this rank's tensors (its share of each).
    ExpertRange local{0, cfg.num_experts / run.ep};
    ModelLayout layout = build_layout(cfg, local);
    for (const ParamInfo& t : layout.params.params) {
      double share = double(t.numel) / (t.expert >= 0 ? rp.expert_zero_group : rp.dense_zero_group);
      p.optimizer_s += share / hw.elementwise.adamw_rate(share);
    }
    zeroing_s = rp.held() * run.grad_bytes / bw_kernels;
    p.optimizer_s += zeroing_s;
  } else {
    zeroing_s = rp.held() * run.grad_bytes / hw.achievable_bandwidth();
    p.optimizer_s = (rp.sharded() * bytes_per_param + rp.held() * run.grad_bytes) / hw.achievable_bandwidth() +
                    4 * hw.kernel_overhead_us * 1e-6;
  }
  if (run.optimizer == "muon") {
    // 5 Newton-Schulz iterations on X [m, n] (m <= n): X X^T, A A, B X; each rank does its
    // share of the matrices (distributed over the ZeRO group).
    double ns = 0;
    for (auto& g : muon_matrices(cfg, run)) {
      double m = std::min(g.rows, g.cols), n = std::max(g.rows, g.cols);
      double one = gemm_time(hw, dt, {m, m, n, 1}).seconds + gemm_time(hw, dt, {m, m, m, 1}).seconds +
                   gemm_time(hw, dt, {m, n, m, 1}).seconds;
      ns += 5 * one * g.count;
    }
    p.optimizer_s += ns / rp.dense_zero_group;
  }
  p.zones = predict_zones(w, hw);
  double zone_compute = 0;
  for (ZoneCost& z : p.zones) {
    if (z.term == ZoneTerm::Optimizer) {
      z.seconds = p.optimizer_s - zeroing_s;
      z.source = hw.elementwise.adamw_rates.empty() ? "model" : "measured";
    } else {
      zone_compute += z.seconds;
    }
  }
  if (!hw.kernel_table.empty()) {
    // The zones replace the aggregate GEMM / elementwise terms; communication stays.
    p.by_zones = true;
    p.micro_batch_s = zone_compute / run.grad_accum + p.ep_comm_s + p.cp_comm_s;
    p.optimizer_s -= zeroing_s;  // zero_grads is a backward zone
  }
  // ZeRO-1: reduce-scatter gradients, all-gather weights, dense and expert groups.
  const int dense_n = int(rp.dense_zero_group), expert_n = int(std::lround(rp.expert_zero_group));
  p.zero_comm_s = collective_seconds(hw, "reduce_scatter", rp.dense * run.grad_bytes, dense_n) +
                  collective_seconds(hw, "all_gather", rp.dense * run.weight_bytes, dense_n) +
                  collective_seconds(hw, "reduce_scatter", rp.experts * run.grad_bytes, expert_n) +
                  collective_seconds(hw, "all_gather", rp.experts * run.weight_bytes, expert_n);
  const double compute = run.grad_accum * p.micro_batch_s;
  p.zero_comm_exposed_s = p.zero_comm_s - std::min(run.overlap * p.zero_comm_s, compute);
  p.step_s = compute + p.optimizer_s + p.zero_comm_exposed_s;
  p.tokens_per_step_per_device = w.tokens * run.grad_accum;
  p.tokens_per_s_per_device = p.tokens_per_step_per_device / p.step_s;
  FlopsPerToken f = flops_per_token(w);
  p.model_flops_per_token = f.training;
  p.hardware_flops_per_token = f.training_hardware;
  p.peak_flops = hw.peak(dt);
  p.mfu = p.model_flops_per_token * p.tokens_per_s_per_device / p.peak_flops;
  p.hfu = p.hardware_flops_per_token * p.tokens_per_s_per_device / p.peak_flops;
  return p;
}

DecodePrediction predict_decode(const ModelConfig& cfg, const HardwareProfile& hw, int batch, int context,
                                double skip_share, int weight_bytes, int kv_bytes) {
  ParamCounts pc = count_params(cfg);
  DecodePrediction d;
  d.batch = batch;
  d.context = context;
  const double B = batch, L = cfg.num_layers;
  const double bw = hw.achievable_bandwidth();
  const double flops_rate = hw.peak(hw.peak_tflops.count("bf16") ? "bf16" : "fp32") * hw.gemm_efficiency;
  const double overhead = hw.kernel_overhead_us * 1e-6;
  auto roof = [&](double bytes, double flops) { return std::max(bytes / bw, flops / flops_rate); };
  // Attention sub-layer: its weights, the KV cache of every sequence, QK^T and PV.
  const double attn_params = double(pc.attention_total) / L;
  const double kv = B * context * 2.0 * cfg.num_kv_heads * cfg.head_dim * kv_bytes;
  const double attn_flops = 2 * B * attn_params + 4 * B * context * cfg.num_q_heads * cfg.head_dim;
  const double attn_bytes = attn_params * weight_bytes + kv;
  // MoE sub-layer: router and norms for all, the experts the batch touches.
  const double k_eff = cfg.topk * (1 - skip_share), E = cfg.num_experts;
  d.experts_touched = E * (1 - std::pow(std::max(0.0, 1 - k_eff / E), B));
  const double moe_dense = double(pc.moe_total) / L - E * double(pc.expert);
  const double expert_bytes = d.experts_touched * double(pc.expert) * weight_bytes;
  const double moe_flops = 2 * B * (moe_dense + k_eff * double(pc.expert));
  const double moe_bytes = moe_dense * weight_bytes + expert_bytes;
  // LM head over the tied embedding.
  const double head_bytes = double(pc.embedding) * weight_bytes, head_flops = 2 * B * double(pc.embedding);
  const double kernels_per_sublayer = 8;
  d.seconds = L * (roof(attn_bytes, attn_flops) + roof(moe_bytes, moe_flops)) + roof(head_bytes, head_flops) +
              (2 * L * kernels_per_sublayer + 4) * overhead;
  d.bytes = L * (attn_bytes + moe_bytes) + head_bytes;
  d.flops = L * (attn_flops + moe_flops) + head_flops;
  d.kv_bytes = L * kv;
  d.expert_weight_bytes = L * expert_bytes;
  d.dense_weight_bytes = d.bytes - d.kv_bytes - d.expert_weight_bytes;
  return d;
}

std::vector<GemmShape> step_gemm_shapes(const Workload& w) {
  std::vector<GemmShape> out;
  auto add = [&](double M, double N, double K) {
    GemmShape g{std::ceil(M), std::ceil(N), std::ceil(K), 1};
    if (g.M < 1 || g.N < 1 || g.K < 1) return;
    for (auto& x : out)
      if (x.M == g.M && x.N == g.N && x.K == g.K) return;
    out.push_back(g);
  };
  for (const GemmOp& g : w.gemms) {
    add(g.M, g.N, g.K);
    add(g.M, g.K, g.N);
    add(g.K, g.N, g.M);
  }
  return out;
}

json step_to_json(const StepPrediction& p) {
  json g = json::array();
  for (auto& r : p.gemms) {
    json t = gemm_timing_to_json(r.forward_timing);
    g.push_back({{"name", r.name},
                 {"group", r.group},
                 {"M", r.forward.M},
                 {"N", r.forward.N},
                 {"K", r.forward.K},
                 {"batch", r.forward.batch},
                 {"flops_forward", r.flops},
                 {"forward_s", r.forward_s},
                 {"backward_s", r.backward_s},
                 {"forward_call", t}});
  }
  return {{"gemms", g},
          {"zones", zones_to_json(p.zones)},
          {"by_zones", p.by_zones},
          {"per_micro_batch",
           {{"gemm_forward_s", p.gemm_forward_s},
            {"gemm_backward_s", p.gemm_backward_s},
            {"gemm_recompute_s", p.gemm_recompute_s},
            {"elementwise_s", p.memops_s},
            {"kernel_overhead_s", p.kernel_overhead_s},
            {"ep_all_to_all_s", p.ep_comm_s},
            {"cp_kv_comm_s", p.cp_comm_s},
            {"total_s", p.micro_batch_s}}},
          {"optimizer_s", p.optimizer_s},
          {"zero1_comm_s", p.zero_comm_s},
          {"zero1_comm_exposed_s", p.zero_comm_exposed_s},
          {"step_time_s", p.step_s},
          {"tokens_per_step_per_device", p.tokens_per_step_per_device},
          {"tokens_per_s_per_device", p.tokens_per_s_per_device},
          {"model_flops_per_token", p.model_flops_per_token},
          {"hardware_flops_per_token", p.hardware_flops_per_token},
          {"peak_flops", p.peak_flops},
          {"mfu", p.mfu},
          {"hfu", p.hfu}};
}

json decode_to_json(const DecodePrediction& d) {
  return {{"batch", d.batch},
          {"context", d.context},
          {"step_s", d.seconds},
          {"tokens_per_s", d.tokens_per_s()},
          {"bytes", d.bytes},
          {"flops", d.flops},
          {"dense_weight_bytes", d.dense_weight_bytes},
          {"expert_weight_bytes", d.expert_weight_bytes},
          {"kv_bytes", d.kv_bytes},
          {"experts_touched_per_layer", d.experts_touched}};
}

}  // namespace zaya::size
