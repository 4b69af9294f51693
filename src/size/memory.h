// Memory per rank for training (weights, master weights, gradients, optimizer state with
// ZeRO-1 sharding over the data-parallel group, activations per micro-batch, communication
// buffers) and the KV cache for inference (CCA versus MHA / GQA / MQA of the same heads).
#pragma once
#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "size/workload.h"

namespace zaya::size {

// Parameters held by one rank (experts sharded over EP), and the ZeRO-1 group sizes.
struct RankParams {
  double dense = 0;        // non-expert parameters incl. embedding (every rank holds all)
  double experts = 0;      // this rank's expert parameters (E / ep experts)
  double held() const { return dense + experts; }
  double dense_zero_group = 1;   // ranks sharing the dense optimizer state: dp * cp
  double expert_zero_group = 1;  // ranks sharing an expert's optimizer state: dp * cp / ep
  double sharded() const { return dense / dense_zero_group + experts / expert_zero_group; }
};
RankParams rank_params(const ModelConfig& cfg, const RunLayout& run);

// Activation values saved for backward, per token, per sub-layer kind (in bytes).
struct ActivationBytes {
  double attention = 0;       // one attention sub-layer, per token
  double moe = 0;             // one MoE sub-layer, per token
  double head = 0;            // final merge + norm + fp32 logits, per token
  double attention_scores = 0;  // per micro-batch, per attention sub-layer, only if not fused
  double checkpoint = 0;      // per token per sub-layer kept under full recompute (h and res)
};
ActivationBytes activation_bytes(const ModelConfig& cfg, const RunLayout& run);

struct MemoryPerRank {
  double weights = 0, master_weights = 0, gradients = 0, optimizer = 0;
  double activations = 0;     // one micro-batch (peak, at the start of backward)
  double comm_buffers = 0;
  double total() const { return weights + master_weights + gradients + optimizer + activations + comm_buffers; }
  RankParams params;
  ActivationBytes per_token;
};
MemoryPerRank memory_per_rank(const Workload& w);

// KV cache per token per attention layer, in values (elements), and the ratios.
struct KvCache {
  double cca = 0;        // 2 * Hk * hd: ZAYA1's CCA cache
  double mha = 0;        // 2 * nominal heads * hd: full MHA with the config's nominal head count
  double gqa = 0;        // 2 * Hk * hd with nominal heads as queries: GQA with the same KV heads
  double mqa = 0;        // 2 * hd
  double bytes_per_value = 2;
  int layers = 0;
  double cca_bytes_per_token() const { return cca * bytes_per_value * layers; }  // all layers
  double mha_bytes_per_token() const { return mha * bytes_per_value * layers; }
  double conv_state_values = 0;  // per sequence per layer: last (k0+k1-2) packed vectors + previous x
  double ratio_mha_over_cca() const { return mha / cca; }
};
KvCache kv_cache(const ModelConfig& cfg, int bytes_per_value = 2);

nlohmann::json memory_to_json(const MemoryPerRank& m, double capacity_GB);
nlohmann::json kv_to_json(const KvCache& kv, int context);

}  // namespace zaya::size
