// Shape search: enumerate ZAYA1-family shapes (hidden size, layers, head dim and so head
// counts, KV heads, experts, expert width, top-k) whose total and active parameter counts
// (without embedding) are within a tolerance of the targets, predict each one's training
// tokens/s per device and decode latency on a profile, rank them and find the Pareto front
// (more training throughput, less decode latency). A reference shape (ZAYA1-base by default)
// is always evaluated and placed among them.
#pragma once
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "model/params.h"
#include "size/hardware.h"
#include "size/workload.h"

namespace zaya::size {

struct SearchSpace {
  std::vector<int> hidden = {1024, 1536, 2048, 2560, 3072, 4096};
  std::vector<int> layers = {16, 20, 24, 28, 32, 36, 40, 44, 48, 56, 64};
  std::vector<int> head_dims = {64, 128};
  std::vector<int> kv_heads = {1, 2, 4};
  std::vector<int> experts = {8, 16, 32, 64};
  std::vector<int> expert_widths = {512, 768, 1024, 1536, 2048, 3072, 4096};  // F/2
  std::vector<int> topks = {1, 2, 4};
};

struct SearchTargets {
  double total = 0, active = 0;  // parameters without embedding
  double tolerance = 0.10;       // relative
  int decode_batch = 1;
  int context = 4096;
};

struct Candidate {
  ModelConfig cfg;
  ParamCounts params;
  double tokens_per_s = 0, mfu = 0, step_s = 0;
  double decode_s = 0;
  double memory_bytes = 0;
  bool fits = true;
  bool pareto = false;
  bool reference = false;
  bool in_window = true;      // within the targets' tolerance
  int rank_train = 0, rank_decode = 0;  // 1-based among candidates in the window
  int dominated_by = 0;       // candidates that beat it on both axes
};

struct SearchResult {
  long enumerated = 0;        // shapes enumerated
  std::vector<Candidate> candidates;  // in the window, sorted by tokens/s (best first)
  Candidate reference;        // placed: ranks as if inserted into the candidates
  int pareto_count = 0;
};

// `base` supplies the fields the search does not vary (vocab, router width, conv kernels,
// MoD/EDA, residual options); `reference` is the shape to place (usually `base` itself).
SearchResult search_shapes(const ModelConfig& base, const ModelConfig& reference, const SearchSpace& space,
                           const SearchTargets& targets, const RunLayout& run, const HardwareProfile& hw);

nlohmann::json search_to_json(const SearchResult& r, size_t top);
nlohmann::json candidate_to_json(const Candidate& c);

}  // namespace zaya::size
