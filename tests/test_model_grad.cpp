// Whole-model finite-difference gradient check in double precision on the tiny config:
// every parameter tensor (every entry of the small ones, kSampled entries of each large
// one), with EDA, the MoD skip class, top-k = 1 and 2 and the Switch aux loss. Routing is
// discontinuous, so the inputs are chosen such that no token sits near a tie, and the test
// asserts it through every perturbed forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "core/rng.h"
#include "check_util.h"
#include "gradcheck.h"
#include "model/model.h"

using namespace zaya;

static ModelConfig tiny(int topk) {
  ModelConfig c = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  c.topk = topk;
  c.init_std = 0.2;
  return c;
}

static void randomise(Model<double>& m, uint64_t seed) {
  randomize_for_checks(m.layout, seed, m.params.data(), m.buffers.data());
}

struct Batch {
  std::vector<int32_t> in, tgt;
};
static Batch make_batch(const ModelConfig& c, int B, int T, uint64_t seed) {
  Batch b;
  Philox r(seed, 7);
  for (int i = 0; i < B * T; ++i) {
    b.in.push_back(int32_t(r.below(c.vocab_size)));
    b.tgt.push_back(i % 5 == 4 ? -100 : int32_t(r.below(c.vocab_size)));  // some ignored targets
  }
  return b;
}

static constexpr size_t kAllUpTo = 128;  // tensors up to this size: every entry
static constexpr size_t kSampled = 32;   // larger ones: this many distinct entries
static constexpr double kFloor = 1e-2;   // error denominator floor, relative to the tensor's largest gradient

static void check_model(int topk, double aux = 0) {
  const ModelConfig c = tiny(topk);
  const int B = 2, T = 6;
  Model<double> m(c);
  m.set_aux_loss_coeff(aux);
  // Find a seed whose routing is well away from ties (margin >> FD step).
  uint64_t seed = 0;
  Batch batch;
  double margin = 0;
  auto both_paths = [&] {  // some tokens go to experts, some to the skip class
    int64_t skip = 0, routed = 0;
    for (auto& cc : m.class_counts()) {
      skip += cc.back();
      for (size_t e = 0; e + 1 < cc.size(); ++e) routed += cc[e];
    }
    return skip > 0 && routed > 0;
  };
  for (uint64_t s = 1; s < 200; ++s) {
    randomise(m, s);
    batch = make_batch(c, B, T, s);
    m.forward(batch.in.data(), batch.tgt.data(), B, T);
    margin = m.min_routing_margin();
    seed = s;
    if (margin >= 2e-3 && both_paths()) break;
  }
  ASSERT_GE(margin, 2e-3) << "no seed gave routing away from ties";
  randomise(m, seed);
  // Every class path is exercised: experts and the skip class are chosen.
  m.forward(batch.in.data(), batch.tgt.data(), B, T);
  int64_t skip = 0, routed = 0;
  for (auto& cc : m.class_counts()) {
    skip += cc.back();
    for (size_t e = 0; e + 1 < cc.size(); ++e) routed += cc[e];
  }
  std::string counts;
  for (auto& cc : m.class_counts())
    for (auto v : cc) counts += std::to_string(v) + " ";
  EXPECT_GT(skip, 0) << "the MoD skip class was never chosen; class counts: " << counts << " seed " << seed;
  EXPECT_GT(routed, 0);
  const auto counts0 = m.class_counts();
  m.zero_grads();
  m.backward();
  // 4-point central differences, error ~ h^4 |f^(5)| / 30 + 1.5 u |loss| / h (u = 1.1e-16):
  // at h = 1e-3 ~1e-12 absolute (measured: 1e-4 gave ~1e-11, rounding-bound), where the
  // 2-point stencil at 1e-6 had ~1e-9. The router's gradients are ~1e-7..1e-3, so this noise
  // matters. Every perturbed forward must keep the routing away from ties and take the same
  // decisions (class counts unchanged).
  const double h = 1e-3;
  auto loss_at = [&](double& w, double v) {
    w = v;
    auto r = m.forward(batch.in.data(), batch.tgt.data(), B, T);
    EXPECT_GE(m.min_routing_margin(), 1e-3);
    EXPECT_EQ(m.class_counts(), counts0);
    return r.loss + r.aux_loss;
  };
  test::OneThread one;  // thousands of tiny forwards (see gradcheck.h); backward above kept its threads
  Philox pick(seed, 3);
  double worst = 0;
  size_t checked = 0;
  std::string worst_name;
  for (const ParamInfo& p : m.layout.params.params) {
    // Every entry of a small tensor, kSampled distinct ones of a large one.
    std::set<size_t> idx;
    if (p.numel <= kAllUpTo)
      for (size_t i = 0; i < p.numel; ++i) idx.insert(i);
    else
      while (idx.size() < kSampled) idx.insert(pick.below(p.numel));
    // The error of an entry is relative to its own size, floored at kFloor of the largest
    // analytic gradient of its tensor: an entry near zero is judged against the tensor's
    // scale, not against an absolute 1e-2 (which bounded small tensors at 1e-8 absolute).
    test_util::MaxError g;  // the tensor's analytic gradient: every entry finite; scale its largest |entry|
    for (size_t i = 0; i < p.numel; ++i) g.add_error(m.grads[p.offset + i]);
    ASSERT_TRUE(g.finite()) << p.name << ": analytic gradient " << g.describe();
    const double scale = g.worst;
    for (size_t i : idx) {
      double& w = m.params[p.offset + i];
      const double w0 = w;
      const double fd =
          (8 * (loss_at(w, w0 + h) - loss_at(w, w0 - h)) - (loss_at(w, w0 + 2 * h) - loss_at(w, w0 - 2 * h))) /
          (12 * h);
      w = w0;
      if (::testing::Test::HasFailure()) return;
      const double an = m.grads[p.offset + i];
      double err = std::fabs(fd - an) / std::max({std::fabs(fd), std::fabs(an), kFloor * scale, 1e-300});
      if (!std::isfinite(err)) err = std::numeric_limits<double>::infinity();  // fails, where > would pass a NaN
      ++checked;
      if (err > worst) {
        worst = err;
        char buf[200];
        std::snprintf(buf, sizeof buf, "[%zu] fd=%.10g an=%.10g (tensor scale %.3g)", i, fd, an, scale);
        worst_name = p.name + buf;
      }
    }
  }
  std::printf("  top-%d aux %g: %zu entries, worst error %.2e at %s\n", topk, aux, checked, worst, worst_name.c_str());
  EXPECT_LT(worst, 1e-6) << worst_name;
}

TEST(ModelGrad, TinyTop1EveryTensor) { check_model(1); }
TEST(ModelGrad, TinyTop2EveryTensor) { check_model(2); }
TEST(ModelGrad, TinyTop1WithSwitchAuxLoss) { check_model(1, 0.1); }

TEST(ModelGrad, LossIsMeanOverCountedTargets) {
  const ModelConfig c = tiny(1);
  Model<double> m(c);
  m.init(5);
  Batch b = make_batch(c, 2, 6, 5);
  auto r = m.forward(b.in.data(), b.tgt.data(), 2, 6);
  int expect = 0;
  for (auto t : b.tgt) expect += t != -100;
  EXPECT_EQ(r.count, expect);
  EXPECT_NEAR(r.loss, r.loss_sum / expect, 1e-12);
  // Near-uniform at init (std 0.2 embeddings with a tied head are close to uniform).
  EXPECT_LT(std::fabs(r.loss - std::log(double(c.vocab_size))), 1.5);
}
