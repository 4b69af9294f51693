// The cases behind the PyTorch reference checks (tools/reference): zaya's own results, written
// for an independent implementation to recompute and compare. `zaya optim-case` and
// `zaya dev reference-case` write them; tests/optim_reference.sh and tests/reference_model.sh
// compare.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "train/optim.h"

namespace zaya {

// A few optimizer steps on a real model's gradients (one fixed random batch; the gradients
// change with the weights from step to step), for tools/reference/optim_ref.py:
//   OUT/case.safetensors  p0.<name> (initial params), g<t>.<name> (the gradient used at step t,
//                         t = 1..S), final.<name> (zaya's params after S steps)
//   OUT/case.json         optimizer settings, per-step learning rates, and per tensor
//                         whether it is updated by Muon and whether it decays
struct OptimCaseOptions {
  std::string config, out;  // model config; output directory
  OptimizerSettings optimizer;
  int steps = 3, batch = 2, seq = 16;
  uint64_t seed = 5;
  double lr = 1e-2;  // of step 1; later steps vary it as a schedule would
};
struct OptimCaseResult {
  size_t tensors = 0;  // parameter tensors written
};
OptimCaseResult write_optim_case(const OptimCaseOptions& o);

// A model with non-trivial random weights in HF format (OUT/config.json, model.safetensors),
// a batch of ids (OUT/ids.txt) and zaya's logits, loss and every parameter gradient, fp32
// (OUT/zaya.safetensors). The weights are drawn until every routing decision is clear of
// ties and both the experts and the skip class are used.
struct ReferenceCaseOptions {
  std::string config, out;  // model config; output directory
  int batch = 2, seq = 16;
  int topk = 0;  // 0: the config's moe_router_topk
  uint64_t seed = 7;
};
struct ReferenceCaseResult {
  int topk = 0;
  double loss = 0;
  double routing_margin = 0;  // the closest any token came to a routing tie
  uint64_t seed = 0;          // the seed of the weights kept
};
ReferenceCaseResult write_reference_case(const ReferenceCaseOptions& o);

}  // namespace zaya
