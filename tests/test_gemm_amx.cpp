// The AMX bf16 kernel (kernels/gemm_amx.h) on every machine: its packing, tile blocking, K
// blocks, thread split and edges run on the emulated tile unit (gemm_amx_bf16_emulated)
// against a double reference; where the CPU has AMX, the instructions agree with the
// emulation. The hardware path's own reference test is GemmAmx.InPlacePacked... in
// test_train_bf16.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "core/bf16.h"
#include "core/rng.h"
#include "kernels/gemm_amx.h"

using namespace zaya;

namespace {

std::vector<bf16> random_bf16(size_t n, uint64_t seed) {
  std::vector<bf16> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = to_bf16(float(normal_at(seed, 0, i)));
  return v;
}

struct Product {
  Trans ta, tb;
  int M, N, K;
  long lda, ldb, ldc;
  float alpha, beta;
  std::vector<bf16> A, B;
  std::vector<float> C0;
  Product(Trans ta_, Trans tb_, int M_, int N_, int K_, long lda_extra, float beta_)
      : ta(ta_), tb(tb_), M(M_), N(N_), K(K_), alpha(0.5f), beta(beta_) {
    lda = (ta == Trans::N ? K : M) + lda_extra;
    ldb = tb == Trans::N ? N : K;
    ldc = N + 3;  // columns past N must stay as they were
    A = random_bf16(size_t(ta == Trans::N ? M : K) * lda, 1 + M);
    B = random_bf16(size_t(tb == Trans::N ? K : N) * ldb, 2 + N);
    C0.resize(size_t(M) * ldc);
    for (size_t i = 0; i < C0.size(); ++i) C0[i] = float(normal_at(3 + K, 0, i));
  }
  float a(int i, int k) const { return from_bf16(ta == Trans::N ? A[size_t(i) * lda + k] : A[size_t(k) * lda + i]); }
  float b(int k, int j) const { return from_bf16(tb == Trans::N ? B[size_t(k) * ldb + j] : B[size_t(j) * ldb + k]); }
  std::vector<float> run(bool emulated) const {
    std::vector<float> C = C0;
    (emulated ? gemm_amx_bf16_emulated : gemm_amx_bf16)(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta,
                                                        C.data(), ldc);
    return C;
  }
  // Every element within `bound` x (sum of |terms|) of the exact product; columns past N untouched.
  ::testing::AssertionResult matches_reference(const std::vector<float>& C, double bound) const {
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double s = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          const double t = double(a(i, k)) * b(k, j);
          s += t, mag += std::fabs(t);
        }
        const size_t e = size_t(i) * ldc + j;
        const double ref = alpha * s + beta * C0[e];
        mag = std::fabs(alpha) * mag + std::fabs(beta * C0[e]);
        const double err = std::fabs(C[e] - ref);
        if (!std::isfinite(C[e]) || !(err <= bound * (mag + 1e-30)))
          return ::testing::AssertionFailure() << "C(" << i << ", " << j << ") = " << C[e] << ", reference " << ref
                                               << " (sum of |terms| " << mag << ")";
      }
      for (long j = N; j < ldc; ++j)
        if (C[size_t(i) * ldc + j] != C0[size_t(i) * ldc + j])
          return ::testing::AssertionFailure() << "wrote C(" << i << ", " << j << ") past N = " << N;
    }
    return ::testing::AssertionSuccess();
  }
};

const char* name(Trans t) { return t == Trans::N ? "N" : "T"; }

// The kernel's paths, as the hardware test covers them: A read in place (K a multiple of 32,
// rows <= 2 KB apart) or packed (rows further apart, transposed, K not a multiple of 32);
// K in several blocks (K > 2048: later blocks add into C); rows split (M >= N) or columns
// (16 rows of wide weights); row, column and depth tails down to 1 x 5 x 3.
const std::tuple<int, int, int, long> kShapes[] = {{96, 64, 2112, 0}, {40, 70, 2100, 0}, {16, 300, 64, 0},
                                                   {50, 33, 1024, 1056}, {1, 5, 3, 0}, {66, 130, 512, 0}};

struct Threads {  // sets OpenMP's thread count for a scope
  int saved = omp_get_max_threads();
  explicit Threads(int n) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
};

}  // namespace

// Every layout and shape on the emulated tile unit: within 2^-16 of the sum of |terms| of
// the exact product of the bf16 operands (fp32 accumulation over up to 2,112 terms), with
// and without beta C, at 1 and 3 threads with bit-identical results (the kernel's sum order
// does not depend on the thread split).
TEST(GemmAmx, EmulatedTilesAgreeWithTheReferenceAtAnyThreadCount) {
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T})
      for (auto [M, N, K, lda_extra] : kShapes)
        for (float beta : {0.f, 1.f}) {
          const Product p(ta, tb, M, N, K, lda_extra, beta);
          std::vector<float> one, three;
          {
            Threads t(1);
            one = p.run(true);
          }
          {
            Threads t(3);
            three = p.run(true);
          }
          SCOPED_TRACE(::testing::Message() << name(ta) << name(tb) << " M " << M << " N " << N << " K " << K
                                            << " lda+" << lda_extra << " beta " << beta);
          EXPECT_TRUE(p.matches_reference(one, 1.0 / (1 << 16)));
          EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float)))
              << "1 and 3 threads differ";
        }
}

// beta = 0 never reads C (a NaN there stays out of the result), and alpha scales the sum.
TEST(GemmAmx, EmulatedBetaZeroDoesNotReadC) {
  Product p(Trans::N, Trans::T, 33, 20, 70, 0, 0.f);
  for (int i = 0; i < p.M; ++i)
    for (int j = 0; j < p.N; ++j) p.C0[size_t(i) * p.ldc + j] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> C = p.run(true);
  p.C0.assign(p.C0.size(), 0.f);  // the reference with beta 0: C's old values do not count
  for (int i = 0; i < p.M; ++i)
    for (long j = p.N; j < p.ldc; ++j) p.C0[size_t(i) * p.ldc + j] = C[size_t(i) * p.ldc + j];
  EXPECT_TRUE(p.matches_reference(C, 1.0 / (1 << 16)));
}

// Where the CPU has AMX: the instructions give the emulation's results, shape by shape.
TEST(GemmAmx, HardwareTilesAgreeWithTheEmulation) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "no AMX-BF16 (the emulated tests above cover the kernel)";
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T})
      for (auto [M, N, K, lda_extra] : kShapes) {
        const Product p(ta, tb, M, N, K, lda_extra, 1.f);
        const std::vector<float> hw = p.run(false), emu = p.run(true);
        SCOPED_TRACE(::testing::Message() << name(ta) << name(tb) << " M " << M << " N " << N << " K " << K);
        EXPECT_TRUE(p.matches_reference(hw, 1.0 / (1 << 16)));
        double worst = 0;
        for (size_t e = 0; e < hw.size(); ++e) {
          ASSERT_TRUE(std::isfinite(hw[e]) && std::isfinite(emu[e])) << "element " << e;
          worst = std::max(worst, double(std::fabs(hw[e] - emu[e])) / (std::fabs(emu[e]) + 1e-3));
        }
        EXPECT_LE(worst, 1e-5) << "hardware and emulated tiles differ";
      }
}
