// The AVX-512 GEMM kernels (kernels/gemm_avx512.h), fp32 and bf16, against a double
// reference, through their own paths: A read in place or packed (transposed, rows more than
// 2 KB apart, bf16 pairs split by an odd leading dim), K in several passes (the later ones
// adding into C), odd K (bf16: a zero partner), row and column tails (12-row blocks, 32-column
// panels, masks), threads splitting rows or columns, alpha and beta.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/gemm.h"
#include "core/bf16.h"
#include "kernels/gemm_avx512.h"

using namespace zaya;

namespace {

std::vector<float> uniform(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// Operands in the kernel's element type (bf16: uniform values rounded).
template <class T>
std::vector<T> operand(size_t n, unsigned seed) {
  const std::vector<float> f = uniform(n, seed);
  if constexpr (std::is_same_v<T, float>) {
    return f;
  } else {
    std::vector<bf16> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = to_bf16(f[i]);
    return h;
  }
}
double value(float x) { return x; }
double value(bf16 x) { return from_bf16(x); }

struct Case {
  Trans ta, tb;
  int M, N, K;
  long lda, ldb, ldc;
  float alpha, beta;
};

// Runs the case on `threads` threads; C starts as c0 (NaN where beta == 0: it must not be read).
template <class T>
std::vector<float> run(const Case& c, const T* A, const T* B, const std::vector<float>& c0, int threads) {
  std::vector<float> C = c0;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  if constexpr (std::is_same_v<T, float>)
    gemm_f32_avx512(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda, B, c.ldb, c.beta, C.data(), c.ldc);
  else
    gemm_bf16_avx512(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda, B, c.ldb, c.beta, C.data(), c.ldc);
  omp_set_num_threads(saved);
  return C;
}

// a_offset: A starts that many elements into its buffer (bf16: 1 puts its pairs off 4-byte
// alignment, so the kernel must pack A rather than read it in place).
template <class T>
void check(const Case& c, int a_offset = 0) {
  const size_t arows = c.ta == Trans::N ? c.M : c.K, brows = c.tb == Trans::N ? c.K : c.N;
  auto Abuf = operand<T>(arows * c.lda + size_t(a_offset), 1), B = operand<T>(brows * c.ldb, 2);
  const T* A = Abuf.data() + a_offset;
  // Elements past a row's end (leading dims wider than the matrix) are NaN: reading one, such
  // as an odd K's missing partner, poisons the result.
  const size_t acols = c.ta == Trans::N ? c.K : c.M, bcols = c.tb == Trans::N ? c.N : c.K;
  T nan{};
  if constexpr (std::is_same_v<T, float>)
    nan = std::numeric_limits<float>::quiet_NaN();
  else
    nan = to_bf16(std::numeric_limits<float>::quiet_NaN());
  for (size_t r = 0; r < arows; ++r)
    for (size_t e = acols; e < size_t(c.lda); ++e) Abuf[size_t(a_offset) + r * c.lda + e] = nan;
  for (size_t r = 0; r < brows; ++r)
    for (size_t e = bcols; e < size_t(c.ldb); ++e) B[r * c.ldb + e] = nan;
  std::vector<float> c0 = uniform(size_t(c.M) * c.ldc, 3);
  if (c.beta == 0.f) std::fill(c0.begin(), c0.end(), std::numeric_limits<float>::quiet_NaN());
  auto a = [&](int i, int k) { return value(c.ta == Trans::N ? A[size_t(i) * c.lda + k] : A[size_t(k) * c.lda + i]); };
  auto b = [&](int k, int j) { return value(c.tb == Trans::N ? B[size_t(k) * c.ldb + j] : B[size_t(j) * c.ldb + k]); };
  const std::vector<float> one = run(c, A, B.data(), c0, 1), two = run(c, A, B.data(), c0, 2);
  const double u = std::ldexp(1.0, -24);
  int bad = 0;
  for (int i = 0; i < c.M; ++i)
    for (int j = 0; j < c.N; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < c.K; ++k) ref += a(i, k) * b(k, j), mag += std::fabs(a(i, k) * b(k, j));
      const double cij = c.beta == 0.f ? 0.0 : double(c0[size_t(i) * c.ldc + j]);
      ref = c.alpha * ref + c.beta * cij;
      // Sequential fp32 sums with FMAs (bf16: products of bf16 are exact in fp32, added one by
      // one or two by two): |error| <= (K + 2) u (|alpha| sum |terms| + |beta c|).
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
  // rows 4 KB apart (packed); a wide product (columns split); one element; 14 panels, whose
  // K blocks shorten for A stored [k][i] (432, 432, 136).
  for (auto [M, N, K, extra] : {std::tuple{37, 70, 100, 0}, std::tuple{24, 64, 1100, 0}, std::tuple{13, 300, 33, 0},
                                std::tuple{50, 33, 200, 1100}, std::tuple{1, 1, 1, 0}, std::tuple{130, 9, 128, 3},
                                std::tuple{30, 420, 1000, 0}})
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (auto [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{0.5f, 1.f}, std::pair{-1.f, 0.25f}}) {
          const long lda = (ta == Trans::N ? K : M) + extra, ldb = tb == Trans::N ? N : K;
          check<float>(Case{ta, tb, M, N, K, lda, ldb, long(N) + 5, alpha, beta});
          if (::testing::Test::HasFailure()) return;
        }
}

TEST(GemmBf16Avx512, InPlacePackedOddKPassesTailsAndSplitsAgreeWithTheReference) {
  if (!gemm_bf16_avx512_usable()) GTEST_SKIP() << "no AVX512-BF16";
  // {M, N, K, extra leading dim of A, A's offset}: tails; A in place (even K and lda); K over
  // two passes (1100: 550 pairs); odd K (13 x 300 x 33, K = 1); A's rows 2.6 KB apart; odd lda
  // (131) and A off 4-byte alignment, both splitting pairs (packed); one element; 14 panels
  // over 501 pairs, in K blocks of 432 and 69 pairs for A stored [k][i].
  for (auto [M, N, K, extra, off] :
       {std::tuple{37, 70, 100, 0, 0}, std::tuple{20, 40, 64, 2, 0}, std::tuple{24, 64, 1100, 0, 0},
        std::tuple{13, 300, 33, 0, 0}, std::tuple{50, 33, 200, 1100, 0}, std::tuple{130, 9, 128, 3, 0},
        std::tuple{29, 45, 96, 0, 1}, std::tuple{1, 1, 1, 0, 0}, std::tuple{30, 420, 1001, 0, 0}})
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (auto [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{0.5f, 1.f}, std::pair{-1.f, 0.25f}}) {
          const long lda = (ta == Trans::N ? K : M) + extra, ldb = (tb == Trans::N ? N : K) + 1;
          check<bf16>(Case{ta, tb, M, N, K, lda, ldb, long(N) + 5, alpha, beta}, off);
          if (::testing::Test::HasFailure()) return;
        }
}

// Through zaya::gemm_with, as the trainer calls it (bf16: fp32 operands rounded to bf16 on
// the way in): the same numbers as another engine of the same precision within the rounding
// of two fp32 sums.
static void expect_engines_agree(GemmPrecision prec, GemmEngine ours, GemmEngine peer, Trans tb) {
  const int M = 77, N = 45, K = 300, ldb = tb == Trans::N ? N : K;
  const auto A = uniform(size_t(M) * K, 4), B = uniform(size_t(N) * K, 5);
  std::vector<float> c1(size_t(M) * N), c2(c1.size());
  gemm_with(ours, prec, Trans::N, tb, M, N, K, 1.f, A.data(), K, B.data(), ldb, 0.f, c1.data(), N);
  gemm_with(peer, prec, Trans::N, tb, M, N, K, 1.f, A.data(), K, B.data(), ldb, 0.f, c2.data(), N);
  for (size_t e = 0; e < c1.size(); ++e) ASSERT_NEAR(c1[e], c2[e], 1e-4) << e;
}

TEST(GemmF32, EngineEntryMatchesOpenBLAS) {
  if (!gemm_f32_usable()) GTEST_SKIP() << "no AVX-512";
  expect_engines_agree(GemmPrecision::F32, GemmEngine::Avx512, GemmEngine::OpenBLAS, Trans::T);
}

TEST(GemmBf16Avx512, EngineEntryMatchesOneDNN) {
  if (!gemm_bf16_avx512_usable()) GTEST_SKIP() << "no AVX512-BF16";
  expect_engines_agree(GemmPrecision::BF16, GemmEngine::Avx512, GemmEngine::OneDNN, Trans::N);
}
