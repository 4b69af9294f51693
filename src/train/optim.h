// Optimizers over the model's flat parameter buffer: AdamW, and Muon (Newton-Schulz
// orthogonalised momentum for hidden 2-D matrices, AdamW for everything else).
//
// Sharding (ZeRO-1). An optimizer owns one contiguous range [begin, end) of the flat buffer
// and keeps its state only for that range: state index = flat index - begin, so with one
// rank (range = everything) the state arrays have exactly the parameters' layout, and a
// checkpoint slices them by tensor name with the same offsets. AdamW is elementwise and
// may own any cut of a tensor. Muon needs the whole matrix (the orthogonalisation mixes all
// of its entries), so a range must hold each Muon tensor whole or not at all:
// shard_ranges() cuts the buffer into near-equal ranges whose boundaries never fall inside
// a Muon tensor (AdamW tensors such as the embedding may be split anywhere). Each rank then
// steps its own range on the reduced gradients and all-gathers the parameters.
//
// State: two fp32 arrays over the owned range, `m` and `v`. For AdamW elements they are the
// first and second moments; for Muon tensors `m` is the momentum buffer and `v` is unused
// (left zero, not saved). Plus the step counter (bias correction).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/bf16.h"
#include "model/params.h"
#include "model/split_master.h"

namespace zaya {

enum class OptimizerKind { AdamW, Muon };
// Every kind by its name (run configs, --optimizer, checkpoints' optimizer state).
inline constexpr std::array<std::pair<const char*, OptimizerKind>, 2> kOptimizerKinds = {
    {{"adamw", OptimizerKind::AdamW}, {"muon", OptimizerKind::Muon}}};
const char* optimizer_kind_name(OptimizerKind k);
const std::vector<std::string>& optimizer_kind_names();  // {"adamw", "muon"}: CLI11's IsMember
// The kind named `name`; otherwise fails with "<where> must be adamw or muon, got '<name>'".
OptimizerKind parse_optimizer_kind(const std::string& name, const std::string& where);

struct AdamWSettings {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // decoupled; only on tensors with ParamInfo::decay()
};

struct MuonSettings {
  double momentum = 0.95;
  bool nesterov = true;
  int ns_steps = 5;
  // Update RMS matching (Moonlight, ZAYA1): the orthogonalised update of an m x n matrix has
  // RMS ~ 1/sqrt(max(m, n)); scaling it by rms_scale * sqrt(max(m, n)) gives it AdamW's
  // typical update RMS (~0.2), so one learning rate serves both.
  double rms_scale = 0.2;
};

struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::AdamW;
  AdamWSettings adamw;
  MuonSettings muon;
  bool decay_embeddings = false;  // weight decay on the (tied) embedding too
  // The MoE routers' parameters (every tensor under `.router.`) step at lr x this: the bias
  // balancer must outpace the router's own drift (docs/train.md, "Routing health").
  double router_lr_scale = 1.0;
};

// The Newton-Schulz quintic iteration (coefficients 3.4445, -4.7750, 2.0315) on a rows x cols
// row-major matrix, in place: an approximate U V^T of its SVD. scratch: any vector (resized).
void newton_schulz5(float* X, int rows, int cols, int steps, std::vector<float>& scratch);

class Optimizer {
 public:
  Optimizer(const ParamTable& table, const OptimizerSettings& s, FlatRange owned);
  Optimizer(const ParamTable& table, const OptimizerSettings& s) : Optimizer(table, s, {0, table.total}) {}

  // One update of params[begin, end) from grads[begin, end) (full flat arrays, indexed by
  // flat offset): grads are multiplied by grad_scale first (clipping), lr is this step's rate.
  // params_bf16 (optional, a full flat array): the updated weights rounded to bf16 in the same
  // pass, for bf16 GEMMs (Model::params_bf16). split (optional): params' product weights are
  // stored split (Model::split_master()) and are updated as they are stored; params_bf16 is
  // then not written for them.
  void step(float* params, const float* grads, double lr, double grad_scale = 1.0, bf16* params_bf16 = nullptr,
            const SplitMaster* split = nullptr);

  const OptimizerSettings& settings() const { return s_; }
  FlatRange owned() const { return owned_; }
  int64_t steps_taken() const { return t_; }
  // True when this tensor is updated with Muon (kind Muon and ParamInfo::muon()).
  bool uses_muon(const ParamInfo& p) const;
  bool decays(const ParamInfo& p) const;

  // State arrays over the owned range (index = flat - owned().begin).
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }
  nlohmann::json state() const;          // settings + step counter (arrays go to safetensors)
  void load_state(const nlohmann::json& j);  // checks the kind matches

 private:
  struct AdamWRule adamw_rule(double lr, double wd, double gs) const;
  void muon_tensor(const ParamInfo& info, float* p, const float* g, float* m, double lr, double wd, double gs,
                   bf16* p16, int split_row);

  const ParamTable& table_;
  OptimizerSettings s_;
  FlatRange owned_;
  std::vector<float> m_, v_;
  int64_t t_ = 0;
  std::vector<float> upd_, ns_scratch_;  // Muon work buffers (sized once, reused)
};

}  // namespace zaya
