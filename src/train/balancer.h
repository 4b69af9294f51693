// Router load balancing (spec section 4) and expert-load statistics.
//
// After each optimizer step, per MoE sub-layer, with f_e = the fraction of the global batch's
// tokens that chose class e (counted over the balanced classes):
//   bias_adamw  (ZAYA1): an internal AdamW on the "gradient" g_e = f_e - 1/E' updates the
//               balancing biases (over-loaded classes fall, under-loaded rise); lr 1e-3,
//               betas (0.9, 0.999), weight decay 0 by default.
//   bias_sign   (DeepSeek-V3): b_e -= rate_e * sign(g_e); rate_e starts at sign_rate (1e-3),
//               halves where g_e's sign flips (the share overshot its target: the step was
//               wider than the tokens' spread of scores) and grows back by 1.2x per step of a
//               steady sign, up to sign_rate (docs/train.md, "Routing health").
//   follow_mean (with either bias method): each balanced class's bias first moves against the
//               change of the class's mean probability over the batch since the last update
//               (the first update: since the uniform 1 / classes), so a drift that moves every
//               token's score at once is cancelled one step after it is seen instead of being
//               chased at the feedback's rate (docs/train.md, "Routing health").
//   aux_loss    (Switch): no bias update; the trainer sets Model::set_aux_loss_coeff(coeff).
//   none        statistics only.
// E' is the number of classes balanced over: with MoD, all E + 1 router outputs (the skip
// class included, include_skip = true, the default) or only the E routed experts (then the
// skip class's bias stays where it is and f_e is over the tokens that did not skip).
//
// Counts are summed over the micro-batches of a step (add_counts) into one flat int64
// array, counts(), which a data-parallel run all-reduces before update(): the statistics
// and the update are then those of the global batch, identical on every rank. Its second half
// holds the classes' probability sums in units of 2^-24 (integers, so the sum is exact and
// the same on every rank).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/params.h"

namespace zaya {

enum class BalanceMethod { None, BiasAdamW, BiasSign, AuxLoss };
const char* balance_method_name(BalanceMethod m);

struct BalancerSettings {
  BalanceMethod method = BalanceMethod::BiasAdamW;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double sign_rate = 1e-3;
  double aux_coeff = 1e-2;
  bool include_skip = true;
  bool follow_mean = false;
};

// One MoE sub-layer's load over its E routed experts (fractions of the tokens that did not
// skip), and its skip rate.
struct LayerLoad {
  double max_frac = 0, min_frac = 0;  // largest / smallest expert share
  double max_rel = 0, min_rel = 0;    // the same times E (1 = uniform)
  double entropy = 0;                 // of the expert shares / log E (1 = uniform)
  double skip_rate = 0;               // share of all tokens that took the skip class
};

class RouterBalancer {
 public:
  RouterBalancer(const ModelLayout& layout, const BalancerSettings& s);

  const BalancerSettings& settings() const { return s_; }
  int num_layers() const { return layers_; }
  int num_classes() const { return classes_; }

  void clear_counts();
  // Adds one forward's Model::class_counts() (per MoE sub-layer, tokens per class) and
  // Model::class_prob_sums() (empty: none).
  void add_counts(const std::vector<std::vector<int64_t>>& per_layer,
                  const std::vector<std::vector<double>>& prob_sums = {});
  // [layer * classes + class], then the probability sums likewise: all-reduce (sum) these
  // over data-parallel ranks before update().
  std::vector<int64_t>& counts() { return counts_; }

  // Load statistics of the counts, then the bias update (bias methods) on the model's
  // buffer array (laid out by layout.buffers). Call once per optimizer step.
  void update(float* buffers);
  // Statistics only (no update), e.g. for an evaluation batch.
  void compute_loads();
  const std::vector<LayerLoad>& loads() const { return loads_; }
  LayerLoad worst() const;  // max of max_rel/skip, min of min_rel/entropy over layers

  // Internal optimizer state: moments laid out like the buffer array, and the step count.
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }
  // follow_mean: each class's mean probability at the last update (1 / classes before the
  // first, -1: unknown, as after a resume from a checkpoint without it).
  std::vector<float>& p() { return p_; }
  nlohmann::json state() const;
  void load_state(const nlohmann::json& j);

 private:
  void follow_means(int l, int balanced, float* bias, float* last) const;
  BalancerSettings s_;
  int layers_ = 0, classes_ = 0;
  bool has_skip_ = false;
  int topk_ = 1;
  std::vector<size_t> bias_offset_;  // per MoE sub-layer, into the buffer array
  std::vector<int64_t> counts_;
  std::vector<LayerLoad> loads_;
  std::vector<float> m_, v_, p_;
  std::vector<double> frac_;  // scratch: fractions of one layer
  int64_t t_ = 0;
};

}  // namespace zaya
