// Predicted training step time and decode latency on a hardware profile.
//
// Training step (one optimizer step of grad_accum micro-batches on one rank):
//   per micro-batch: forward GEMMs + backward GEMMs (dgrad and wgrad: the two transposed
//   shapes of each forward GEMM, 2x its FLOPs) + forward GEMMs again under recompute, each
//   timed by gemm_model; memory-bound ops as bytes / achievable bandwidth (backward moves 2x
//   the forward bytes) plus kernel overheads; EP all-to-alls and CP K/V all-gathers;
//   per step: the optimizer update (bandwidth-bound; Muon adds its Newton-Schulz GEMMs), the
//   zeroing of the gradients, and
//   the ZeRO-1 reduce-scatter of gradients + all-gather of weights from an alpha-beta model
//   of the profile's network (or the measured collective table), minus the overlapped part.
// Decode step (one new token for each of `batch` sequences): roofline per sub-layer,
//   max(bytes read / bandwidth, FLOPs / achievable FLOP/s) plus kernel overheads; expert
//   bytes are those of the experts the batch touches (uniform routing).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "size/gemm_model.h"
#include "size/hardware.h"
#include "size/workload.h"
#include "size/zones.h"

namespace zaya::size {

// Time of one collective of `bytes` (nccl-tests convention: the whole n-rank array) over n
// ranks: the measured table when it has this op at this rank count, else alpha-beta:
// steps * latency + bus_factor * bytes / bus bandwidth, intra-node when n fits in a node.
double collective_seconds(const HardwareProfile& hw, const std::string& op, double bytes, int n);

struct GemmStepRow {
  std::string name, group;
  GemmShape forward;
  GemmTiming forward_timing;
  double forward_s = 0, backward_s = 0;  // per micro-batch, all sub-layers
  double flops = 0;                       // forward useful FLOPs per micro-batch, all sub-layers
};

struct StepPrediction {
  std::vector<GemmStepRow> gemms;
  // Per micro-batch.
  double gemm_forward_s = 0, gemm_backward_s = 0, gemm_recompute_s = 0;
  double memops_s = 0;           // forward + backward (+ recompute) elementwise work
  double kernel_overhead_s = 0;  // memory-bound kernels' launch cost (GEMM overheads are in GEMM times)
  double ep_comm_s = 0, cp_comm_s = 0;
  double micro_batch_s = 0;
  // Per step.
  double optimizer_s = 0;
  double zero_comm_s = 0;        // reduce-scatter + all-gather
  double zero_comm_exposed_s = 0;
  double step_s = 0;
  // The step by the profiler's zones (size/zones.h). With a measured kernel table (zaya bench
  // kernels) the zones are the prediction: micro_batch_s and step_s are their sum.
  std::vector<ZoneCost> zones;
  bool by_zones = false;
  double tokens_per_step_per_device = 0;
  double tokens_per_s_per_device = 0;
  double model_flops_per_token = 0;     // training (3x forward)
  double hardware_flops_per_token = 0;  // with recompute
  double peak_flops = 0;                // the dtype's peak, FLOP/s
  double mfu = 0, hfu = 0;
  double days(double token_budget, double devices) const {
    return token_budget / (tokens_per_s_per_device * devices) / 86400.0;
  }
};

StepPrediction predict_step(const Workload& w, const HardwareProfile& hw);

struct DecodePrediction {
  int batch = 1, context = 0;
  double seconds = 0;           // one decode step (one token per sequence)
  double bytes = 0, flops = 0;
  double dense_weight_bytes = 0, expert_weight_bytes = 0, kv_bytes = 0;
  double experts_touched = 0;   // per MoE sub-layer
  double tokens_per_s() const { return batch / seconds; }
};

// Decode with bf16 weights and KV cache (weight_bytes, kv_bytes per value).
DecodePrediction predict_decode(const ModelConfig& cfg, const HardwareProfile& hw, int batch, int context,
                                double skip_share = 0.0, int weight_bytes = 2, int kv_bytes = 2);

// The distinct GEMM shapes (one product each, rounded up to whole rows) a training step
// runs: every forward GEMM and its two backward shapes. `zaya bench gemm` can measure
// exactly these for a measured profile (scripts/validate_size.sh does).
std::vector<GemmShape> step_gemm_shapes(const Workload& w);

nlohmann::json step_to_json(const StepPrediction& p);
nlohmann::json decode_to_json(const DecodePrediction& d);

}  // namespace zaya::size
