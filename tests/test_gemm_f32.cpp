// The AVX-512 fp32 GEMM kernel (kernels/gemm_f32.h) against a double reference, through its
// own paths: A read in place or packed (transposed, or rows more than 2 KB apart), K in
// several passes (the later ones adding into C), row and column tails (12-row blocks,
// 32-column panels, masks), threads splitting rows or columns, alpha and beta.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_f32.h"

using namespace zaya;

namespace {

std::vector<float> uniform(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

struct Case {
  Trans ta, tb;
  int M, N, K;
  long lda, ldb, ldc;
  float alpha, beta;
};

// Runs the case on `threads` threads; C starts as c0 (NaN where beta == 0: it must not be read).
std::vector<float> run(const Case& c, const std::vector<float>& A, const std::vector<float>& B,
                       const std::vector<float>& c0, int threads) {
  std::vector<float> C = c0;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  gemm_f32_avx512(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), c.lda, B.data(), c.ldb, c.beta, C.data(), c.ldc);
  omp_set_num_threads(saved);
  return C;
}

void check(const Case& c) {
  const size_t arows = c.ta == Trans::N ? c.M : c.K, brows = c.tb == Trans::N ? c.K : c.N;
  const auto A = uniform(arows * c.lda, 1), B = uniform(brows * c.ldb, 2);
  std::vector<float> c0 = uniform(size_t(c.M) * c.ldc, 3);
  if (c.beta == 0.f) std::fill(c0.begin(), c0.end(), std::numeric_limits<float>::quiet_NaN());
  auto a = [&](int i, int k) { return double(c.ta == Trans::N ? A[size_t(i) * c.lda + k] : A[size_t(k) * c.lda + i]); };
  auto b = [&](int k, int j) { return double(c.tb == Trans::N ? B[size_t(k) * c.ldb + j] : B[size_t(j) * c.ldb + k]); };
  const std::vector<float> one = run(c, A, B, c0, 1), two = run(c, A, B, c0, 2);
  const double u = std::ldexp(1.0, -24);
  int bad = 0;
  for (int i = 0; i < c.M; ++i)
    for (int j = 0; j < c.N; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < c.K; ++k) ref += a(i, k) * b(k, j), mag += std::fabs(a(i, k) * b(k, j));
      const double cij = c.beta == 0.f ? 0.0 : double(c0[size_t(i) * c.ldc + j]);
      ref = c.alpha * ref + c.beta * cij;
      // Sequential fp32 sums with FMAs: |error| <= (K + 2) u (|alpha| sum |terms| + |beta c|).
      const double bound = (c.K + 2) * u * (std::fabs(c.alpha) * mag + std::fabs(c.beta * cij)) + 1e-30;
      const float got = one[size_t(i) * c.ldc + j];
      if (!(std::fabs(got - ref) <= bound) && ++bad <= 3)
        ADD_FAILURE() << "M " << c.M << " N " << c.N << " K " << c.K << " ta " << int(c.ta) << " tb " << int(c.tb)
                      << " beta " << c.beta << " at (" << i << ", " << j << "): " << got << " vs " << ref;
    }
  // The result does not depend on the thread count, and C past column N is left alone.
  for (size_t e = 0; e < one.size(); ++e) {
    if (size_t(e % c.ldc) < size_t(c.N)) {
      EXPECT_EQ(one[e], two[e]) << "threads changed element " << e;
    } else {
      EXPECT_TRUE(std::isnan(c0[e]) ? std::isnan(one[e]) : one[e] == c0[e]) << "wrote past N at " << e;
    }
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace

TEST(GemmF32, InPlacePackedPassesTailsAndSplitsAgreeWithTheReference) {
  if (!gemm_f32_usable()) GTEST_SKIP() << "no AVX-512";
  // {M, N, K, extra leading dim of A}: tails of every block size; K over two passes; A's
  // rows 4 KB apart (packed); a wide product (columns split); one element.
  for (auto [M, N, K, extra] : {std::tuple{37, 70, 100, 0}, std::tuple{24, 64, 1100, 0}, std::tuple{13, 300, 33, 0},
                                std::tuple{50, 33, 200, 1100}, std::tuple{1, 1, 1, 0}, std::tuple{130, 9, 128, 3}})
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (auto [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{0.5f, 1.f}, std::pair{-1.f, 0.25f}}) {
          const long lda = (ta == Trans::N ? K : M) + extra, ldb = tb == Trans::N ? N : K;
          check(Case{ta, tb, M, N, K, lda, ldb, long(N) + 5, alpha, beta});
          if (::testing::Test::HasFailure()) return;
        }
}

// Through zaya::gemm_with, as the trainer calls it: the same numbers as OpenBLAS within the
// rounding of two fp32 sums.
TEST(GemmF32, EngineEntryMatchesOpenBLAS) {
  if (!gemm_f32_usable()) GTEST_SKIP() << "no AVX-512";
  const int M = 77, N = 45, K = 300;
  const auto A = uniform(size_t(M) * K, 4), B = uniform(size_t(N) * K, 5);
  std::vector<float> c1(size_t(M) * N), c2(c1.size());
  gemm_with(GemmEngine::Avx512, GemmPrecision::F32, Trans::N, Trans::T, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f,
            c1.data(), N);
  gemm_with(GemmEngine::OpenBLAS, GemmPrecision::F32, Trans::N, Trans::T, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f,
            c2.data(), N);
  for (size_t e = 0; e < c1.size(); ++e) ASSERT_NEAR(c1[e], c2[e], 1e-4) << e;
}
