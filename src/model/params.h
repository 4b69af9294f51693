// The parameter table: every trainable tensor of the model, by its HF name, with its
// shape and its place in one flat buffer. Parameters and gradients are flat arrays laid
// out by this table, so ZeRO-1 can shard them, checkpoints can slice them, and HF
// import/export is a lookup by name. Balancing biases are buffers (not trained by
// gradient) and live in a second flat array with their own table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/config.h"

namespace zaya {

enum class ParamRole {
  Embedding,     // tied token embedding / LM head
  Matrix,        // hidden 2-D projection (Muon-eligible)
  ExpertMatrix,  // expert fc1 / fc2 (Muon-eligible, expert-parallel)
  Conv,          // CCA conv weights (3-D)
  Norm,          // RMSNorm weights
  Scale,         // residual scales, EDA scale, temperature
  Bias,          // every bias vector
};

struct ParamInfo {
  std::string name;            // HF name
  std::vector<int64_t> shape;  // global shape
  size_t offset = 0;           // into the flat buffer
  size_t numel = 0;
  ParamRole role = ParamRole::Matrix;
  int sublayer = -1;           // -1: embedding / final
  int expert = -1;             // global expert index for expert weights
  bool decay() const { return role == ParamRole::Matrix || role == ParamRole::ExpertMatrix || role == ParamRole::Conv; }
  bool muon() const { return role == ParamRole::Matrix || role == ParamRole::ExpertMatrix; }
};

struct ParamTable {
  std::vector<ParamInfo> params;
  size_t total = 0;
  std::unordered_map<std::string, size_t> index;  // name -> position in params
  size_t add(const std::string& name, std::vector<int64_t> shape, ParamRole role, int sublayer, int expert = -1);
  const ParamInfo* find(const std::string& name) const;
};

constexpr size_t kNone = size_t(-1);

struct ResScaleOffsets {
  size_t hs_scale = kNone, hs_bias = kNone, res_scale = kNone, res_bias = kNone;
};
struct CcaOffsets {
  size_t wq, wk, wv1, wv2, conv0_w, conv0_b, conv1_w, conv1_b, temp, wo;
};
struct RouterOffsets {
  size_t down_w, down_b, eda_scale = kNone, norm_w, mlp0_w, mlp0_b, mlp2_w, mlp2_b, mlp4_w;
  size_t balancing_bias;  // into the buffer array, num_classes entries
};
// How a backward writes the parameter gradients (Model::backward, ExpertCompute::backward):
// added to what the array holds, or in place of it.
enum class GradMode { Accumulate, Overwrite };

struct MoeOffsets {
  RouterOffsets router;
  std::vector<size_t> fc1, fc2;  // per local expert
};
struct SublayerOffsets {
  bool attention = true;
  ResScaleOffsets rs;
  size_t norm = kNone;
  CcaOffsets cca{};
  MoeOffsets moe{};
};

// Which experts this process holds (expert parallel); [0, E) when not sharded.
struct ExpertRange {
  int begin = 0, end = -1;
  int count() const { return end - begin; }
};

struct ModelLayout {
  ModelConfig cfg;
  ExpertRange experts;
  ParamTable params;
  ParamTable buffers;  // balancing biases
  size_t embed = 0;
  std::vector<SublayerOffsets> sub;
  ResScaleOffsets final_rs;
  size_t final_norm = 0;
};

ModelLayout build_layout(const ModelConfig& cfg, ExpertRange experts = {});

// Training-from-scratch initialisation, a pure function of (seed, tensor name, index):
// the same weights whatever the sharding. Buffers get their spec values (skip bias -1).
template <class T>
void init_params(const ModelLayout& L, uint64_t seed, T* params);
template <class T>
void init_buffers(const ModelLayout& L, T* buffers);

// Non-trivial values everywhere for correctness checks (gradient checks, the PyTorch
// reference): init with cfg.init_std, then scales, norms, biases and temperatures moved
// off their init values, balancing biases random with the skip class competitive.
template <class T>
void randomize_for_checks(const ModelLayout& L, uint64_t seed, T* params, T* buffers);

// Parameter counts from the config alone (all experts), with a per-component breakdown.
struct ParamCounts {
  int64_t cca_core = 0;           // one CCA core (q, k, v1, v2, conv0, conv1, temp, o)
  int64_t attention_total = 0;    // all attention sub-layers incl. norms and residual scaling
  int64_t expert = 0;             // one expert
  int64_t router = 0;             // one router with EDA
  int64_t router_first = 0;       // the first MoE sub-layer's router (no EDA scale)
  int64_t moe_total = 0;          // all MoE sub-layers incl. norms and residual scaling
  int64_t final_ = 0;             // final residual scaling + final norm
  int64_t embedding = 0;
  int64_t total = 0;              // without embedding
  int64_t active = 0;             // without embedding, top-k experts per MoE sub-layer
  int64_t total_with_embedding() const { return total + embedding; }
  int64_t active_with_embedding() const { return active + embedding; }
};
ParamCounts count_params(const ModelConfig& cfg);

// A range [begin, end) of the flat parameter / gradient / optimizer-state buffers.
struct FlatRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// ZeRO-1's cut of the flat buffer (parallel/zero1.h), also the optimizer's owned range:
// near-equal contiguous ranges, one per rank, that keep every Muon tensor whole when
// muon_whole is set (ranges may then be unequal, or even empty, for tiny models) and never
// cut a row of a product's weight (SplitMaster's rows).
std::vector<FlatRange> shard_ranges(const ParamTable& table, int world, bool muon_whole);

// Sum of squares of g[r.begin, r.end) in double, with a fixed reduction order (the same
// value for the same data whatever the thread schedule): resume stays bit-exact.
double sum_squares(const float* g, FlatRange r);

}  // namespace zaya
