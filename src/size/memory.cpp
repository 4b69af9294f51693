#include "size/memory.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "model/params.h"

namespace zaya::size {
using json = nlohmann::json;

RankParams rank_params(const ModelConfig& cfg, const RunLayout& run) {
  ParamCounts pc = count_params(cfg);
  RankParams p;
  const double all_experts = double(cfg.num_layers) * cfg.num_experts * double(pc.expert);
  p.dense = double(pc.total_with_embedding()) - all_experts;
  p.experts = all_experts / run.ep;
  p.dense_zero_group = run.dp * run.cp;
  p.expert_zero_group = double(run.dp * run.cp) / run.ep;
  return p;
}

ActivationBytes activation_bytes(const ModelConfig& cfg, const RunLayout& run) {
  const double D = cfg.hidden_size, hd = cfg.head_dim, Hq = cfg.num_q_heads, Hk = cfg.num_kv_heads;
  const double R = cfg.router_hidden, F = cfg.ffn_hidden_size, NC = cfg.num_classes(), C = cfg.conv_channels();
  const double V = cfg.vocab_size;
  const double a = run.act_bytes(), r = cfg.residual_in_fp32 ? 4.0 : a;
  const double routed = cfg.topk * (1.0 - run.skip_share);  // expert slots per token
  ActivationBytes x;
  // Residual merge: the incoming residual and the merged one (residual dtype), the incoming h.
  const double wrapper = 2 * D * r + D * a + D * a;  // + the norm output x
  // CCA: packed q0,k0; conv0 out; conv1 out; q,k after norm+RoPE; v; attention output;
  // fp32 log-sum-exp per query head.
  x.attention = wrapper + (4 * C + Hk * hd + Hq * hd) * a + Hq * 4.0;
  // Router: r, normed z, two GELU MLP layers (pre and post), fp32 logits and probs; experts:
  // permuted input, fc1 out, SwiGLU out, fc2 out per routed slot; fp32 gates.
  x.moe = wrapper + 6 * R * a + 2 * NC * 4.0 + routed * (2 * D + F + F / 2) * a + cfg.topk * 4.0;
  x.head = 2 * D * r + 2 * D * a + V * 4.0;
  if (run.stores_scores())
    x.attention_scores = double(run.micro_batch) * Hq * (double(run.seq) / run.cp) * run.seq * 4.0;
  x.checkpoint = D * a + D * r;
  return x;
}

MemoryPerRank memory_per_rank(const Workload& w) {
  const RunLayout& run = w.run;
  const ModelConfig& cfg = w.cfg;
  MemoryPerRank m;
  m.params = rank_params(cfg, run);
  m.per_token = activation_bytes(cfg, run);
  const double held = m.params.held(), shard = m.params.sharded();
  m.weights = held * run.weight_bytes;
  m.gradients = held * run.grad_bytes;
  m.master_weights = shard * run.master_bytes;
  m.optimizer = shard * run.optim_bytes;
  const double N = w.tokens, L = cfg.num_layers;
  const ActivationBytes& x = m.per_token;
  if (run.recompute) {
    // Sub-layer inputs for all sub-layers, plus one sub-layer's full set while it is recomputed.
    m.activations = N * (2 * L * x.checkpoint + std::max(x.attention, x.moe) + x.head) + x.attention_scores;
  } else {
    m.activations = N * (L * (x.attention + x.moe) + x.head) + L * x.attention_scores;
  }
  // ZeRO-1 buckets (reduce-scatter of gradients, all-gather of weights), EP all-to-all
  // send/receive buffers, CP K/V all-gather buffer.
  m.comm_buffers = std::min(run.bucket_params, held) * (run.grad_bytes + run.weight_bytes);
  const double a = run.act_bytes();
  if (run.ep > 1) m.comm_buffers += 2 * N * cfg.topk * (1 - run.skip_share) * cfg.hidden_size * a;
  if (run.cp > 1)
    m.comm_buffers += double(run.micro_batch) * run.seq * 2 * cfg.num_kv_heads * cfg.head_dim * a;
  return m;
}

KvCache kv_cache(const ModelConfig& cfg, int bytes_per_value) {
  KvCache kv;
  const double hd = cfg.head_dim;
  kv.cca = 2.0 * cfg.num_kv_heads * hd;
  kv.mha = 2.0 * cfg.num_attention_heads * hd;
  kv.gqa = 2.0 * cfg.num_kv_heads * hd;
  kv.mqa = 2.0 * hd;
  kv.bytes_per_value = bytes_per_value;
  kv.layers = cfg.num_layers;
  kv.conv_state_values = double(cfg.conv_pad()) * cfg.conv_channels() + cfg.hidden_size;
  return kv;
}

json memory_to_json(const MemoryPerRank& m, double capacity_GB) {
  json j = {{"weights", m.weights},
            {"master_weights", m.master_weights},
            {"gradients", m.gradients},
            {"optimizer", m.optimizer},
            {"activations", m.activations},
            {"comm_buffers", m.comm_buffers},
            {"total", m.total()},
            {"params_held", m.params.held()},
            {"params_dense", m.params.dense},
            {"params_experts_local", m.params.experts},
            {"zero_group_dense", m.params.dense_zero_group},
            {"zero_group_experts", m.params.expert_zero_group},
            {"activation_bytes_per_token",
             {{"attention_sublayer", m.per_token.attention},
              {"moe_sublayer", m.per_token.moe},
              {"head", m.per_token.head},
              {"attention_scores_per_micro_batch", m.per_token.attention_scores},
              {"checkpoint_per_sublayer", m.per_token.checkpoint}}}};
  if (capacity_GB > 0) {
    j["capacity_bytes"] = capacity_GB * 1e9;
    j["fits"] = m.total() <= capacity_GB * 1e9;
  }
  return j;
}

json kv_to_json(const KvCache& kv, int context) {
  return {{"values_per_token_per_layer", {{"cca", kv.cca}, {"mha", kv.mha}, {"gqa", kv.gqa}, {"mqa", kv.mqa}}},
          {"bytes_per_value", kv.bytes_per_value},
          {"layers", kv.layers},
          {"cca_bytes_per_token", kv.cca_bytes_per_token()},
          {"mha_bytes_per_token", kv.mha_bytes_per_token()},
          {"mha_over_cca", kv.ratio_mha_over_cca()},
          {"context", context},
          {"cca_bytes_per_sequence", kv.cca_bytes_per_token() * context},
          {"mha_bytes_per_sequence", kv.mha_bytes_per_token() * context},
          {"cca_conv_state_values_per_layer", kv.conv_state_values}};
}

}  // namespace zaya::size
