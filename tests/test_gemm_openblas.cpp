// OpenBLAS as zaya runs it: which core zaya asks for (blas_core_upgrade, kernels/gemm.h) and
// that the binary re-executes itself into it (a generic core, what DYNAMIC_ARCH gives a CPU
// model it does not know, must not be kept on a CPU with AVX2 or AVX-512 kernels to run); and
// large products shared across threads by rows or columns (gemm.cpp's sgemm_shared) within
// fp32 rounding of a double reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/gemm.h"
#include "test_util.h"

using namespace zaya;

TEST(BlasCore, UpgradesGenericCoresToTheWidestKernels) {
  CpuFeatures avx2;
  avx2.avx2 = avx2.fma = true;
  CpuFeatures avx512 = avx2;
  avx512.avx512f = true;
  const CpuFeatures sse{};
  auto name = [](const char* c) { return std::string(c ? c : "(keep)"); };
  for (const char* generic : {"Prescott", "Nehalem", "Sandybridge", "Katmai"}) {
    EXPECT_EQ(name(blas_core_upgrade(avx2, generic)), "Haswell") << generic;
    EXPECT_EQ(name(blas_core_upgrade(avx512, generic)), "SkylakeX") << generic;
    EXPECT_EQ(name(blas_core_upgrade(sse, generic)), "(keep)") << generic;
  }
  for (const char* c : {"Haswell", "Zen", "HASWELL"}) {
    EXPECT_EQ(name(blas_core_upgrade(avx2, c)), "(keep)") << c;
    EXPECT_EQ(name(blas_core_upgrade(avx512, c)), "SkylakeX") << c;  // the image's Haswell pin
  }
  for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(name(blas_core_upgrade(avx2, c)), "(keep)") << c;
    EXPECT_EQ(name(blas_core_upgrade(avx512, c)), "(keep)") << c;
  }
  CpuFeatures avx2_no_fma = avx2;  // Haswell's kernels are FMA kernels
  avx2_no_fma.fma = false;
  EXPECT_EQ(name(blas_core_upgrade(avx2_no_fma, "Prescott")), "(keep)");
}

// `zaya info` started with OPENBLAS_CORETYPE=Prescott reports the core this CPU should run;
// with ZAYA_BLAS_CORE=keep, Prescott.
TEST(BlasCore, BinaryReexecutesIntoTheUpgradedCore) {
  const char* want = blas_core_upgrade(cpu_features(), "Prescott");
  if (!want) GTEST_SKIP() << "this CPU has neither AVX2 + FMA nor AVX-512: Prescott is kept";
  int status = 0;
  std::string out = test_util::command_output(
      "env -u ZAYA_BLAS_REEXEC OPENBLAS_CORETYPE=Prescott " + std::string(ZAYA_BIN) + " info", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find(std::string("core=") + want + " "), std::string::npos) << out;
  out = test_util::command_output(
      "env -u ZAYA_BLAS_REEXEC OPENBLAS_CORETYPE=Prescott ZAYA_BLAS_CORE=keep " + std::string(ZAYA_BIN) + " info",
      &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("core=Prescott "), std::string::npos) << out;
}

// Rows (M >= N) and columns shared, every layout, beta 0 and not, leading dims wider than the
// matrices: every element of the 2-thread product within fp32 rounding of a double reference
// ((K + 2) u of its terms' magnitudes), C past column N untouched. (Not bit for bit against one
// thread: OpenBLAS's own threading was not either, its row tails take other kernels.)
TEST(GemmOpenBLAS, ProductsSharedAcrossThreadsAgreeWithTheReference) {
  if (gemm_resolve(GemmPrecision::F32) != GemmEngine::OpenBLAS)
    GTEST_SKIP() << "OpenBLAS is not this CPU's fp32 engine: its products are not shared by zaya";
  std::mt19937 g(7);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const double u = std::ldexp(1.0, -24);
  for (auto [M, N, K] : {std::tuple{530, 257, 520}, std::tuple{257, 530, 520}})  // >= 64M multiply-adds
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (float beta : {0.f, 0.5f}) {
          const int lda = (ta == Trans::N ? K : M) + 3, ldb = (tb == Trans::N ? N : K) + 5, ldc = N + 7;
          std::vector<float> A(size_t(ta == Trans::N ? M : K) * lda), B(size_t(tb == Trans::N ? K : N) * ldb),
              C(size_t(M) * ldc);
          for (float& x : A) x = d(g);
          for (float& x : B) x = d(g);
          for (float& x : C) x = d(g);
          const std::vector<float> C0 = C;
          const int saved = omp_get_max_threads();
          omp_set_num_threads(2);
          gemm_with(GemmEngine::OpenBLAS, GemmPrecision::F32, ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, beta,
                    C.data(), ldc);
          omp_set_num_threads(saved);
          int bad = 0;
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < ldc; ++j) {
              const size_t e = size_t(i) * ldc + j;
              if (j >= N) {
                if (C[e] != C0[e] && ++bad <= 3) ADD_FAILURE() << "wrote past N at (" << i << ", " << j << ")";
                continue;
              }
              double ref = beta * double(C0[e]), mag = std::fabs(ref);
              for (int k = 0; k < K; ++k) {
                const double t = double(ta == Trans::N ? A[size_t(i) * lda + k] : A[size_t(k) * lda + i]) *
                                 double(tb == Trans::N ? B[size_t(k) * ldb + j] : B[size_t(j) * ldb + k]);
                ref += t, mag += std::fabs(t);
              }
              if (!(std::fabs(C[e] - ref) <= (K + 2) * u * mag) && ++bad <= 3)
                ADD_FAILURE() << "M " << M << " N " << N << " ta " << int(ta) << " tb " << int(tb) << " beta "
                              << beta << " at (" << i << ", " << j << "): " << C[e] << " vs " << ref;
            }
          ASSERT_EQ(bad, 0);
        }
}
