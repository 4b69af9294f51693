#include "train/balancer.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya {

const char* balance_method_name(BalanceMethod m) {
  switch (m) {
    case BalanceMethod::None: return "none";
    case BalanceMethod::BiasAdamW: return "bias_adamw";
    case BalanceMethod::BiasSign: return "bias_sign";
    case BalanceMethod::AuxLoss: return "aux_loss";
  }
  return "?";
}

RouterBalancer::RouterBalancer(const ModelLayout& layout, const BalancerSettings& s) : s_(s) {
  const ModelConfig& c = layout.cfg;
  classes_ = c.num_classes();
  has_skip_ = c.use_mod;
  topk_ = c.topk;
  for (const SublayerOffsets& so : layout.sub)
    if (!so.attention) bias_offset_.push_back(so.moe.router.balancing_bias);
  layers_ = int(bias_offset_.size());
  counts_.assign(2 * size_t(layers_) * classes_, 0);
  loads_.assign(size_t(layers_), {});
  m_.assign(layout.buffers.total, 0.f);
  v_.assign(layout.buffers.total, 0.f);
  // follow_mean's first step takes each class's mean from the uniform 1 / classes, so the
  // spread of the class means at initialisation is cancelled at once.
  p_.assign(layout.buffers.total, -1.f);
  for (size_t off : bias_offset_) std::fill_n(p_.begin() + ptrdiff_t(off), classes_, 1.f / float(classes_));
  frac_.assign(size_t(classes_), 0.0);
}

void RouterBalancer::clear_counts() { std::fill(counts_.begin(), counts_.end(), 0); }

void RouterBalancer::add_counts(const std::vector<std::vector<int64_t>>& per_layer,
                                const std::vector<std::vector<double>>& prob_sums) {
  ZAYA_CHECK(int(per_layer.size()) == layers_, "balancer: counts for ", per_layer.size(), " MoE layers, expected ",
             layers_);
  for (int l = 0; l < layers_; ++l) {
    ZAYA_CHECK(int(per_layer[size_t(l)].size()) == classes_, "balancer: layer ", l, " has ",
               per_layer[size_t(l)].size(), " class counts, expected ", classes_);
    for (int e = 0; e < classes_; ++e) counts_[size_t(l) * classes_ + e] += per_layer[size_t(l)][size_t(e)];
  }
  if (prob_sums.empty()) return;
  ZAYA_CHECK(int(prob_sums.size()) == layers_, "balancer: probability sums for ", prob_sums.size(),
             " MoE layers, expected ", layers_);
  int64_t* ps = counts_.data() + size_t(layers_) * classes_;
  for (int l = 0; l < layers_; ++l) {
    ZAYA_CHECK(int(prob_sums[size_t(l)].size()) == classes_, "balancer: layer ", l, " has ",
               prob_sums[size_t(l)].size(), " probability sums, expected ", classes_);
    for (int e = 0; e < classes_; ++e)
      ps[size_t(l) * classes_ + e] += std::llround(prob_sums[size_t(l)][size_t(e)] * 0x1p24);
  }
}

// Load statistics are over the routed experts (fractions of the tokens that did not skip),
// whatever the balanced set; the skip rate is reported on its own.
void RouterBalancer::compute_loads() {
  const int experts = has_skip_ ? classes_ - 1 : classes_;
  for (int l = 0; l < layers_; ++l) {
    const int64_t* c = counts_.data() + size_t(l) * classes_;
    int64_t all = 0, routed = 0;
    for (int e = 0; e < classes_; ++e) all += c[e];
    for (int e = 0; e < experts; ++e) routed += c[e];
    LayerLoad& ld = loads_[size_t(l)];
    ld = {};
    if (all == 0) continue;
    ld.skip_rate = has_skip_ ? double(c[classes_ - 1]) / double(all) : 0.0;
    if (routed == 0) continue;
    ld.max_frac = 0;
    ld.min_frac = 1;
    double h = 0;
    for (int e = 0; e < experts; ++e) {
      const double f = double(c[e]) / double(routed);
      ld.max_frac = std::max(ld.max_frac, f);
      ld.min_frac = std::min(ld.min_frac, f);
      if (f > 0) h -= f * std::log(f);
    }
    ld.max_rel = ld.max_frac * experts;
    ld.min_rel = ld.min_frac * experts;
    ld.entropy = experts > 1 ? h / std::log(double(experts)) : 1.0;
  }
}

void RouterBalancer::update(float* buffers) {
  compute_loads();
  if (s_.method != BalanceMethod::BiasAdamW && s_.method != BalanceMethod::BiasSign) return;
  const int balanced = (has_skip_ && !s_.include_skip) ? classes_ - 1 : classes_;
  ++t_;
  const double bc1 = 1 - std::pow(s_.beta1, double(t_)), bc2 = 1 - std::pow(s_.beta2, double(t_));
  for (int l = 0; l < layers_; ++l) {
    const int64_t* c = counts_.data() + size_t(l) * classes_;
    int64_t over = 0;
    for (int e = 0; e < balanced; ++e) over += c[e];
    if (over == 0) continue;
    const size_t off = bias_offset_[size_t(l)];
    if (s_.follow_mean) follow_means(l, balanced, buffers + off, p_.data() + off);
    for (int e = 0; e < balanced; ++e) {
      const double g = double(c[e]) / double(over) - 1.0 / balanced;  // > 0: over-loaded
      float& b = buffers[off + e];
      if (s_.method == BalanceMethod::BiasSign) {
        // The rate halves where g's sign flips (the class's share jumped across its target:
        // the step was larger than the spread of the tokens' scores) and grows back by 1.2
        // per step of a steady sign, up to sign_rate. m holds the last sign, v the rate.
        const float sg = float((g > 0) - (g < 0));
        float& last = m_[off + e];
        float& rate = v_[off + e];
        if (rate == 0) rate = float(s_.sign_rate);
        else if (sg * last < 0) rate = std::max(rate * 0.5f, float(s_.sign_rate * 1e-3));
        else if (sg * last > 0) rate = std::min(rate * 1.2f, float(s_.sign_rate));
        if (sg != 0) last = sg;
        b -= rate * sg;
        continue;
      }
      float& m = m_[off + e];
      float& v = v_[off + e];
      b *= float(1 - s_.lr * s_.weight_decay);
      m = float(s_.beta1 * m + (1 - s_.beta1) * g);
      v = float(s_.beta2 * v + (1 - s_.beta2) * g * g);
      b -= float(s_.lr * (m / bc1) / (std::sqrt(v / bc2) + s_.eps));
    }
  }
}

// The tokens' router scores move together when the model's hidden states do (early in
// training they all lean one way): the feedback step, sized below the spread between tokens,
// cannot keep up, so the change of each class's mean probability is taken off its bias.
void RouterBalancer::follow_means(int l, int balanced, float* bias, float* last) const {
  const int64_t* c = counts_.data() + size_t(l) * classes_;
  const int64_t* ps = counts_.data() + size_t(layers_ + l) * classes_;
  int64_t slots = 0;
  for (int e = 0; e < classes_; ++e) slots += c[e];
  if (slots == 0) return;
  const double tokens = double(slots) / topk_;
  for (int e = 0; e < balanced; ++e) {
    const float mean = float(double(ps[e]) * 0x1p-24 / tokens);
    if (last[e] >= 0) bias[e] -= mean - last[e];
    last[e] = mean;
  }
}

LayerLoad RouterBalancer::worst() const {
  LayerLoad w;
  w.min_rel = w.min_frac = w.entropy = layers_ ? 1e300 : 0;
  for (const LayerLoad& l : loads_) {
    w.max_frac = std::max(w.max_frac, l.max_frac);
    w.max_rel = std::max(w.max_rel, l.max_rel);
    w.min_frac = std::min(w.min_frac, l.min_frac);
    w.min_rel = std::min(w.min_rel, l.min_rel);
    w.entropy = std::min(w.entropy, l.entropy);
    w.skip_rate = std::max(w.skip_rate, l.skip_rate);
  }
  return w;
}

nlohmann::json RouterBalancer::state() const {
  return {{"method", balance_method_name(s_.method)},
          {"step", t_},
          {"lr", s_.lr},
          {"beta1", s_.beta1},
          {"beta2", s_.beta2},
          {"eps", s_.eps},
          {"weight_decay", s_.weight_decay},
          {"sign_rate", s_.sign_rate},
          {"aux_coeff", s_.aux_coeff},
          {"include_skip", s_.include_skip},
          {"follow_mean", s_.follow_mean}};
}

void RouterBalancer::load_state(const nlohmann::json& j) {
  ZAYA_CHECK(j.is_object() && j.contains("step") && j["step"].is_number_integer(),
             "balancer state: missing field step");
  t_ = j["step"].get<int64_t>();
  std::string method = j.value("method", "");
  if (method != balance_method_name(s_.method))
    t_ = 0;  // a different method starts its own moment estimates (bias values are kept)
}

}  // namespace zaya
