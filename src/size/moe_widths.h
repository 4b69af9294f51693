// The MoE width trade-off: at fixed expert parameters per MoE sub-layer (E * F * D * 3/2),
// vary the expert count E, the expert width (F, with F/2 the SwiGLU intermediate) and top-k;
// for each, the training throughput (the expert GEMMs at the tokens each expert receives,
// inside the whole model's step) and the decode latency at several batch sizes (the expert
// bytes a decode step reads, bandwidth-bound).
#pragma once
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "size/hardware.h"
#include "size/step_time.h"
#include "size/workload.h"

namespace zaya::size {

struct MoeWidthRow {
  int experts = 0, topk = 0, ffn = 0;    // E, k, F (fc1 out; expert width F/2)
  bool reference = false;                // the config's own shape
  double active_params = 0;              // without embedding
  double tokens_per_expert = 0;          // per micro-batch
  double expert_gemm_s = 0;              // expert GEMMs, forward + backward, per micro-batch
  double expert_efficiency = 0;          // achieved fraction of peak in the fc1 forward GEMM
  double step_s = 0, tokens_per_s = 0, mfu = 0;
  std::vector<DecodePrediction> decode;  // one per batch size
};

struct MoeWidthTable {
  double expert_params_per_layer = 0;
  std::vector<int> batches;
  int context = 0;
  std::vector<MoeWidthRow> rows;
};

// experts: the E values to try (F = E0 * F0 / E must be an even integer; others are skipped);
// topks: the k values (k <= E).
MoeWidthTable moe_width_table(const ModelConfig& cfg, const RunLayout& run, const HardwareProfile& hw,
                              const std::vector<int>& experts, const std::vector<int>& topks,
                              const std::vector<int>& batches, int context);

nlohmann::json moe_widths_to_json(const MoeWidthTable& t);

}  // namespace zaya::size
