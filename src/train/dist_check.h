// The distributed agreement check behind `zaya dist-check` (tests/dist_*.sh): N training steps
// of a model config on random tokens with Model + Optimizer + ZeRO-1 / expert parallel, for
// any DP x EP layout, so runs at different layouts can be compared weight for weight.
// Sample i of the global batch of step s is a pure function of (seed, s, i), and rank
// (dp, ep) takes the global samples [data_rank * local, (data_rank + 1) * local): the same
// global batch whatever the layout. The final weights come back in the global layout (all
// experts, build_layout(cfg) order) on world rank 0, to be hashed, written raw (fp32) and
// compared with a file another layout wrote.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/params.h"
#include "train/optim.h"

namespace zaya {

struct DistCheckOptions {
  std::string config = "configs/zaya1-tiny.toml";  // model config
  OptimizerKind optimizer = OptimizerKind::Muon;
  int steps = 20, batch = 8, seq = 16;  // batch: global, in sequences
  int ep = 1;                           // expert-parallel ranks; dp = world / ep
  uint64_t seed = 7;
  double lr = 1e-2, clip = 1.0;
  size_t bucket = size_t(1) << 20;  // reduce-scatter bucket, fp32 elements
  bool zero1 = true;                // false: plain DP (all-reduce, replicated optimizer)
  bool overlap = true;              // reduce gradient buckets during backward
  bool force_mpi = false;           // initialise MPI even without mpirun
  double comm_timeout = 300;        // seconds before a wait on a peer fails
  // Fault injection: world rank die_rank exits (code 3), or hangs, at step die_at (-1: never).
  int die_at = -1, die_rank = 1;
  bool hang = false;
};

// The run as laid out, before the first step.
struct DistCheckSetup {
  bool root = false;  // world rank 0 (the one that prints)
  int world = 1, dp = 1, ep = 1;
  FlatRange shard;    // this rank's ZeRO-1 shard of the flat parameters
  size_t params = 0;  // parameters on this rank
};

struct DistCheckStep {
  int step = 0;
  double loss = 0, grad_norm = 0;  // global-batch mean loss; norm before clipping
  double seconds = 0;
  double comm_seconds = 0;  // blocked in communication: the three below together
  double exposed_reduce_seconds = 0, gather_seconds = 0, ep_all_to_all_seconds = 0;
};

struct DistCheckResult {
  DistCheckSetup setup;
  std::vector<DistCheckStep> steps;
  // After the first step (that one warms up): tokens per second, seconds and comm seconds per step.
  double tokens_per_second = 0, seconds_per_step = 0, comm_seconds_per_step = 0;
  std::vector<double> peak_rss_mb;  // per world rank
  std::vector<float> weights;       // global layout, world rank 0 only (empty elsewhere)
  uint64_t weights_hash = 0;        // of the weights' bytes (world rank 0)
  double max_abs_weight = 0;
};

struct DistCheckCallbacks {
  std::function<void(const DistCheckSetup&)> on_start;  // every rank, before step 1
  std::function<void(const DistCheckStep&)> on_step;    // every rank, after each step
};

// Joins the world (comm::init_world), runs the steps, gathers the weights. Collective.
DistCheckResult run_dist_check(const DistCheckOptions& o, const DistCheckCallbacks& cb = {});

// Raw fp32 weights (the --out file).
void write_weights(const std::string& path, const std::vector<float>& w);

struct WeightDiff {
  double max_abs = 0, max_rel = 0;  // over the finite pairs (relative to max(|ref|, 1e-3))
  size_t nonfinite = 0;             // pairs with a NaN or infinity on either side
};
// Reads `path` (exactly w.size() fp32 values) and measures w against it.
WeightDiff compare_weights(const std::vector<float>& w, const std::string& path);
// Fails when any weight is non-finite or the largest difference exceeds tol.
void check_weight_diff(const WeightDiff& d, double tol, const std::string& path);

}  // namespace zaya
