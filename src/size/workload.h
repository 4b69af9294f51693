// What one training step of a ZAYA1 model asks of a device: the run layout (parallelism,
// micro-batch, sequence, precision), the list of GEMMs per micro-batch with their shapes,
// the memory-bound (elementwise) work, and the FLOPs per token derived from them.
//
// GEMM conventions: C[M,N] = A[M,K] B[K,N], FLOPs = 2*M*N*K*batch*useful, where `batch` is
// the number of independent same-shape products (heads, experts, conv groups) and `useful`
// the fraction of the product that is not masked (1/2 for causal attention).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "size/elementwise.h"

namespace zaya::size {

struct RunLayout {
  int dp = 1, ep = 1, cp = 1;       // data, expert, context parallel (ep divides dp*cp)
  int micro_batch = 1;              // b: sequences per micro-batch per data-parallel rank
  int seq = 4096;                   // s
  int grad_accum = 1;               // micro-batches per optimizer step
  std::string dtype = "bf16";       // compute/activation dtype (bf16 or fp32)
  bool recompute = false;           // full activation recompute (forward again in backward)
  double skip_share = 0.0;          // fraction of routing choices taking the skip (MoD) class
  std::string optimizer = "adamw";  // adamw | muon (Newton-Schulz GEMMs on hidden matrices)
  // Attention kernel: "flash" (fused, skips the masked half, backward recomputes scores),
  // "full" (zaya.cpp's CPU kernel: per-head scores in scratch over the whole square,
  // backward recomputes them), "naive" (scores stored for backward, whole square).
  std::string attention = "flash";
  bool causal_skip() const { return attention == "flash"; }
  bool stores_scores() const { return attention == "naive"; }
  bool score_traffic() const { return attention != "flash"; }     // scores go through memory
  bool recomputes_scores() const { return attention != "naive"; }  // backward redoes QK^T
  double overlap = 0.0;             // fraction of ZeRO-1 communication hidden behind compute
  // Bytes per parameter (Megatron distributed-optimizer convention: bf16 weights, fp32 main
  // grads, fp32 master weights and two fp32 Adam moments sharded over the ZeRO group).
  int weight_bytes = 2, grad_bytes = 4, master_bytes = 4, optim_bytes = 8;
  double bucket_params = 40e6;      // ZeRO-1 communication bucket (parameters)

  int world() const { return dp * cp; }
  int act_bytes() const;            // activation element size from dtype
  double tokens_per_rank() const { return double(micro_batch) * seq / cp; }  // per micro-batch
  void validate(const ModelConfig& cfg) const;  // fails naming the flag
  // fp32 training keeps no separate master copy; bf16 uses the byte sizes above.
  static RunLayout for_dtype(const std::string& dtype);
};

struct GemmOp {
  std::string name;   // e.g. "attn.linear_q"
  std::string group;  // attention_proj | attention_core | conv | router | experts | lm_head
  double M = 0, N = 0, K = 0;
  double batch = 1;
  double useful = 1.0;
  double layers = 1;  // sub-layers that carry it
  double flops() const { return 2.0 * M * N * K * batch * useful * layers; }  // per micro-batch
};

// Elementwise / normalisation / routing work: bytes moved per micro-batch in the forward
// pass (backward moves about twice as much), and the exp / erf evaluations of the forward
// and backward passes (what bounds these loops on a CPU; see elementwise.h).
struct MemOp {
  std::string name;
  double bytes = 0;     // per sub-layer instance
  double layers = 1;
  double kernels = 1;   // kernel launches per instance (forward)
  SpecialCounts special_fwd, special_bwd;  // per sub-layer instance
  double total() const { return bytes * layers; }
};

struct Workload {
  ModelConfig cfg;
  RunLayout run;
  double tokens = 0;            // per rank per micro-batch
  double tokens_per_expert = 0; // average tokens each local expert receives per micro-batch
  std::vector<GemmOp> gemms;    // forward GEMMs per micro-batch on one rank
  std::vector<MemOp> memops;    // forward memory-bound ops per micro-batch on one rank
  double forward_flops() const; // per micro-batch on one rank
};

Workload build_workload(const ModelConfig& cfg, const RunLayout& run);

// FLOPs per token (model FLOPs: matmuls only; the depthwise conv, norms and softmax are not
// counted). Training = forward + backward (2x forward); hardware FLOPs add the recompute.
struct FlopsPerToken {
  double forward = 0;
  double training = 0;          // 3x forward
  double training_hardware = 0; // + forward again when recompute is on
  double attention_quadratic = 0;  // QK^T and PV (forward)
  double router = 0;               // router GEMMs (forward)
  double experts = 0;              // expert GEMMs (forward)
  double lm_head = 0;
  double six_n_active = 0;         // the 6 * active-with-embedding rule of thumb, for comparison
  std::vector<std::pair<std::string, double>> per_gemm;  // forward FLOPs per token per GEMM name
};
FlopsPerToken flops_per_token(const Workload& w);

nlohmann::json workload_to_json(const Workload& w);
nlohmann::json flops_to_json(const FlopsPerToken& f);

}  // namespace zaya::size
