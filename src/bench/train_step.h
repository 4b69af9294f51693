// Training-step throughput of a model config on random tokens: warm-up steps, then timed steps
// of forward + backward + optimizer step, each on fresh random tokens; medians of the timed
// steps, the share of the step spent in GEMMs, and peak memory. `zaya train-bench` prints it;
// bench/train_step.sh runs it beside the PyTorch peer; zaya size validates against it.
#pragma once
#include <cstddef>
#include <vector>

#include "core/profile.h"
#include "model/config.h"
#include "train/optim.h"

namespace zaya::bench {

struct TrainStepOptions {
  int batch = 8, seq = 256, steps = 10, warmup = 2;
  bool bf16 = false;  // bf16 GEMMs (fp32 ones, with a warning, where the CPU has none)
  OptimizerSettings optimizer;
  bool profile = false;  // time named zones over the timed steps (core/profile.h)
  prof::Clock profile_clock = prof::Clock::Wall;
};

struct TrainStepResult {
  // Medians over the timed steps, in seconds.
  double step_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0;
  double gemm_fraction = 0;     // median GEMM time / median step time
  size_t peak_rss_bytes = 0;    // of this process
  double loss = 0;              // of the last step
  // Share of the routing choices that took the skip (MoD) class over the timed steps: the
  // experts' rows depend on it, so zaya size is given it when it is held against this step.
  double skip_share = 0;
  std::vector<prof::Row> profile;  // with TrainStepOptions::profile: zone totals over the timed steps
};

TrainStepResult measure_train_step(const ModelConfig& cfg, const TrainStepOptions& o);

}  // namespace zaya::bench
