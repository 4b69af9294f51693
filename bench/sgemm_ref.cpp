// Reference sgemm timing: cblas_sgemm called directly (no zaya code), one warm-up call, then
// calls until both ITERS calls and MIN_TIME seconds; mean time per call. Used to cross-check
// the maximum fp32 FLOP/s of `zaya bench gemm`.
//   bench_sgemm_ref M N K [LAYOUT=nt] [ITERS=2] [MIN_TIME=0.2]
#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: bench_sgemm_ref M N K [nn|nt|tn|tt] [ITERS] [MIN_TIME]\n");
    return 2;
  }
  const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
  std::string layout = argc > 4 ? argv[4] : "nt";
  int iters = argc > 5 ? std::atoi(argv[5]) : 2;
  double min_time = argc > 6 ? std::atof(argv[6]) : 0.2;
  if (M <= 0 || N <= 0 || K <= 0 || layout.size() != 2) {
    std::fprintf(stderr, "bench_sgemm_ref: bad arguments\n");
    return 2;
  }
  CBLAS_TRANSPOSE ta = layout[0] == 't' ? CblasTrans : CblasNoTrans, tb = layout[1] == 't' ? CblasTrans : CblasNoTrans;
  std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N);
  unsigned s = 12345;
  for (auto& x : A) x = float((s = s * 1103515245u + 12345u) >> 8) / 16777216.f - 0.5f;
  for (auto& x : B) x = float((s = s * 1103515245u + 12345u) >> 8) / 16777216.f - 0.5f;
  int lda = ta == CblasNoTrans ? K : M, ldb = tb == CblasNoTrans ? N : K;
  auto call = [&] { cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(), N); };
  call();
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  int done = 0;
  double el = 0;
  while (done < iters || el < min_time) {
    call();
    ++done;
    el = std::chrono::duration<double>(clk::now() - t0).count();
  }
  double t = el / done, tflops = 2.0 * M * N * K / t / 1e12;
  std::printf("sgemm_ref %s M=%d N=%d K=%d calls=%d time_us=%.1f tflops=%.6f core=%s\n", layout.c_str(), M, N, K, done,
              t * 1e6, tflops, openblas_get_corename());
  return 0;
}
