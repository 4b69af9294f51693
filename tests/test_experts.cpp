// The local experts' team schedules (model/moe.cpp run_experts): on several threads, whole
// experts side by side where they balance, else the rows cut into equal runs, one per thread,
// an expert cut in two taking its share of the weight gradients by output rows. Each product
// sums every element in one order whatever its rows, so the team gives exactly what one
// thread running whole experts gives: outputs, input gradients and weight gradients, fp32 and
// bf16, for routings that whole experts balance, that cut one expert in several pieces, that
// send every row to one expert, that leave experts empty, and that are smaller than a cut's
// 16-row step.
#include <gtest/gtest.h>
#include "test_util.h"
#include <omp.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/rng.h"
#include "kernels/gemm.h"
#include "model/moe.h"

using namespace zaya;

namespace {

struct Result {
  std::vector<float> y, dx, dW;
};

struct ExpertsCase {
  ModelConfig cfg;
  MoeOffsets o;
  std::vector<float> W, x, dy;
  std::vector<int64_t> counts;
  size_t rows = 0;
};

std::vector<float> randn(size_t n, uint64_t seed) {
  Philox rng(seed, 11);
  std::vector<float> v(n);
  for (float& a : v) a = float(rng.normal());
  return v;
}

// D = 48 and H = 40 put tails in both directions of every product.
ExpertsCase make_case(std::vector<int64_t> counts) {
  ExpertsCase c;
  c.cfg.hidden_size = 48;
  c.cfg.ffn_hidden_size = 80;
  c.cfg.num_experts = int(counts.size());
  const size_t D = 48, F = 80, H = 40;
  size_t off = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    c.o.fc1.push_back(off), off += F * D;
    c.o.fc2.push_back(off), off += D * H;
  }
  c.W = randn(off, 1);
  for (float& w : c.W) w *= 0.1f;
  c.counts = std::move(counts);
  c.rows = size_t(std::accumulate(c.counts.begin(), c.counts.end(), int64_t(0)));
  c.x = randn(c.rows * D, 2);
  c.dy = randn(c.rows * D, 3);
  return c;
}

// Forward, then backward with weight gradients accumulated onto ones (beta = 1) or written
// (beta = 0, over NaN), on `threads` threads.
Result run(const ExpertsCase& c, int threads, GradMode mode) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  LocalExperts<float> ex(ExpertRange{0, c.cfg.num_experts}, 1);
  ex.resize(c.cfg, int(c.rows));
  Result r;
  r.y.assign(c.x.size(), NAN);
  r.dx.assign(c.x.size(), NAN);
  r.dW.assign(c.W.size(), mode == GradMode::Overwrite ? NAN : 1.f);
  ex.forward(0, c.counts.data(), c.x.data(), r.y.data(), c.W.data(), c.o);
  ex.backward(0, c.counts.data(), c.x.data(), c.dy.data(), r.dx.data(), c.W.data(), r.dW.data(), c.o, mode);
  omp_set_num_threads(saved);
  return r;
}

size_t differ(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

using test_util::PrecisionScope;

}  // namespace

TEST(Experts, TeamPiecesEqualWholeExpertsBitForBit) {
  const std::vector<std::vector<int64_t>> routings = {
      {0, 37, 300, 5, 130},  // 2 threads cut expert 2; 3 threads cut it twice
      {472, 0, 0, 0, 0},     // every row to one expert: each thread a piece of it
      {3, 1, 2, 0, 1},       // fewer rows than a cut's step: one thread takes them all
      {64, 64, 64, 64, 64},
      {60, 60, 60, 60, 60, 60}};  // whole experts balance 2 and 3 threads
  for (GemmPrecision p : {GemmPrecision::F32, GemmPrecision::BF16}) {
    if (p == GemmPrecision::BF16 && !bf16_gemm_supported()) continue;
    PrecisionScope scope(p);
    // Where the products are OpenBLAS's (fp32 without AVX-512), a product on one thread takes
    // other tail kernels than one split over threads: equal to the last bits only.
    const bool exact = gemm_resolve(p == GemmPrecision::BF16 ? p : GemmPrecision::F32) == GemmEngine::Avx512 ||
                       gemm_resolve(p) == GemmEngine::Amx;
    for (const auto& counts : routings) {
      const ExpertsCase c = make_case(counts);
      for (GradMode mode : {GradMode::Overwrite, GradMode::Accumulate}) {
        const Result one = run(c, 1, mode);
        size_t nan = 0;
        for (const auto* v : {&one.y, &one.dx, &one.dW})
          for (float a : *v) nan += std::isnan(a);
        ASSERT_EQ(nan, 0u) << "an entry no expert wrote";
        for (int threads : {2, 3}) {
          const Result team = run(c, threads, mode);
          const std::string what = std::string(dtype_name(p)) + " routing " + std::to_string(counts[0]) + "," +
                                   std::to_string(counts[1]) + ",... threads " + std::to_string(threads);
          if (exact) {
            EXPECT_EQ(differ(one.y, team.y), 0u) << what;
            EXPECT_EQ(differ(one.dx, team.dx), 0u) << what;
            EXPECT_EQ(differ(one.dW, team.dW), 0u) << what;
          } else {
            for (const auto& [a, b] : {std::pair{&one.y, &team.y}, {&one.dx, &team.dx}, {&one.dW, &team.dW}})
              for (size_t i = 0; i < a->size(); ++i)
                ASSERT_NEAR((*a)[i], (*b)[i], 1e-4f * (1.f + std::fabs((*a)[i]))) << what << " entry " << i;
          }
        }
      }
    }
  }
}
