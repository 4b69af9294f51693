// Which OpenBLAS core zaya asks for (blas_core_upgrade, kernels/gemm.h), and that the binary
// re-executes itself into it: a generic core (what DYNAMIC_ARCH gives a CPU model it does not
// know) must not be kept on a CPU with AVX2 or AVX-512 kernels to run.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

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
