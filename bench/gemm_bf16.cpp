// Our hand-written bf16 GEMMs (AMX, kernels/gemm_amx.h; AVX512-BF16, kernels/gemm_avx512.h)
// beside oneDNN's matmul on the trainer's shapes, all given the same bf16 operands as stored
// (no rounding in the timed call), in the three layouts training uses: forward x W^T (nt),
// backward dX = dY W (nn), dW = dY^T X (tn). Median of --reps calls after 2 warm-up calls,
// each engine's calls interleaved with the other's.
//
// Usage: build/bench_gemm_bf16 [--kernel amx|avx512] [--threads N] [--reps R]
//                              [--shapes MxNxK[@LDA],...] [--beta B] [--attention]
//                              [--attention-shape B,T,Hq,Hk]
// (--kernel: ours to compare, default the trainer's bf16 engine; @LDA: A stored with that
// leading dimension, as the trainer's strided operands are)
// Default shapes: zaya1-small at B*T = 2048 (projections, experts at ~256 rows, LM head).
// --attention: one layer of zaya1-small's attention, forward and backward, fp32 against bf16;
// --attention-shape: another layer's (head dim 64), e.g. zaya1-medium's 2,1024,8,2.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_layer.h"
#include "core/bf16.h"
#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "kernels/gemm.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_avx512.h"  // gemm_bf16_avx512_usable

using namespace zaya;
using attn_bench::median;
using attn_bench::now;

namespace {

struct Shape {
  int M, N, K;
  long lda = 0;  // A's leading dimension as stored (0: packed tight)
};

std::vector<Shape> parse_shapes(const std::string& s) {
  std::vector<Shape> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    Shape sh{};
    const std::string one = s.substr(i, j - i);
    const int got = std::sscanf(one.c_str(), "%dx%dx%d@%ld", &sh.M, &sh.N, &sh.K, &sh.lda);
    if (got < 3 || sh.M < 1 || sh.N < 1 || sh.K < 1 || (got == 4 && sh.lda < 1)) {
      std::fprintf(stderr, "bench_gemm_bf16: --shapes '%s': expected MxNxK[@LDA][,...]\n", s.c_str());
      std::exit(2);
    }
    out.push_back(sh);
    i = j + 1;
  }
  return out;
}

// One layer's attention, forward and backward, the fp32 path (per head) against the bf16 one
// (our bf16 kernel, causal blocks). Default zaya1-small's (B=8, T=256, 4 query heads over 2
// KV heads, head dim 64); --attention-shape B,T,Hq,Hk (zaya1-medium's: 2,1024,8,2).
void bench_attention(int reps, int B, int T, int Hq, int Hk) {
  const int hd = attn_bench::Layer::hd;
  attn_bench::Layer layer(B, T, Hq, Hk);
  const auto m = layer.time<2>(reps, [](int p) {
    gemm_settings().precision = p ? GemmPrecision::BF16 : GemmPrecision::F32;
  });
  gemm_settings().precision = GemmPrecision::F32;
  std::printf("attention B=%d T=%d Hq=%d Hk=%d hd=%d (one layer): forward fp32 %.2f ms, bf16 %.2f ms; backward fp32 "
              "%.2f ms, bf16 %.2f ms\n",
              B, T, Hq, Hk, hd, 1e3 * m[0].forward, 1e3 * m[1].forward, 1e3 * m[0].backward, 1e3 * m[1].backward);
}

}  // namespace

int main(int argc, char** argv) {
  maybe_reexec_for_blas_core(argv);  // OpenBLAS's AVX-512 kernels for the fp32 side, as in zaya
  int threads = omp_get_max_threads(), reps = 20;
  bool attention = false;
  int ab = 8, at = 256, aq = 4, ak = 2;  // --attention-shape
  std::string kernel;
  float beta = 0.f;  // 1: accumulate into C, as the dW products do
  std::string shapes = "2048x512x512,2048x256x512,2048x128x512,2048x512x256,256x1024x512,256x512x512,2048x8192x512";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--shapes" && i + 1 < argc)
      shapes = argv[++i];
    else if (a == "--kernel" && i + 1 < argc)
      kernel = argv[++i];
    else if (a == "--attention")
      attention = true;
    else if (a == "--attention-shape" && i + 1 < argc &&
             std::sscanf(argv[i + 1], "%d,%d,%d,%d", &ab, &at, &aq, &ak) == 4 && ab > 0 && at > 0 && ak > 0 &&
             aq % ak == 0)
      attention = true, ++i;
    else if (a == "--beta" && i + 1 < argc)
      beta = float(std::atof(argv[++i]));
    else {
      std::fprintf(stderr,
                   "usage: %s [--kernel amx|avx512] [--threads N] [--reps R] [--shapes MxNxK[@LDA],...] [--beta B] "
                   "[--attention] [--attention-shape B,T,Hq,Hk]\n",
                   argv[0]);
      return 2;
    }
  }
  if (kernel.empty()) kernel = amx_bf16_usable() ? "amx" : "avx512";
  if (kernel != "amx" && kernel != "avx512") {
    std::fprintf(stderr, "bench_gemm_bf16: --kernel '%s': expected amx or avx512\n", kernel.c_str());
    return 2;
  }
  const bool amx = kernel == "amx";
  if (amx ? !amx_bf16_usable() : !gemm_bf16_avx512_usable()) {
    std::printf("bench_gemm_bf16: this CPU has no usable %s; nothing to compare\n", amx ? "AMX-BF16" : "AVX512-BF16");
    return 0;
  }
  const GemmEngine ours = amx ? GemmEngine::Amx : GemmEngine::Avx512;
  gemm_settings().engine = ours;  // attention's bf16 path and the products below
  omp_set_num_threads(threads);
  std::printf("# bench_gemm_bf16: kernel %s, %d threads, median of %d calls; %s\n", kernel.c_str(), threads, reps,
              gemm_runtime_info().c_str());
  if (attention) {
    bench_attention(reps, ab, at, aq, ak);
    return 0;
  }
  const std::string head = kernel + " GFLOP/s";
  std::printf("%-6s %6s %6s %6s  %14s %12s  %8s  %10s\n", "layout", "M", "N", "K", head.c_str(), "onednn", "ratio",
              "max |diff|");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const Shape& s : parse_shapes(shapes)) {
    for (const char* lay : {"nt", "nn", "tn"}) {
      const Trans ta = lay[0] == 't' ? Trans::T : Trans::N, tb = lay[1] == 't' ? Trans::T : Trans::N;
      // Storage: op(A) [M,K] is A [M,K] (n) or [K,M] (t); op(B) [K,N] is B [K,N] (n) or [N,K] (t).
      const long lda = std::max(s.lda, long(ta == Trans::N ? s.K : s.M)), ldb = tb == Trans::N ? s.N : s.K;
      std::vector<bf16> A(size_t(ta == Trans::N ? s.M : s.K) * lda), B(size_t(s.K) * s.N);
      for (auto& x : A) x = to_bf16(u(rng));
      for (auto& x : B) x = to_bf16(u(rng));
      std::vector<float> C1(size_t(s.M) * s.N), C2(C1.size());
      std::vector<double> t_ours, t_dnnl;
      for (int r = 0; r < reps + 2; ++r) {
        double t0 = now();
        gemm_bf16_kernel(ours, ta, tb, s.M, s.N, s.K, 1.f, A.data(), lda, B.data(), ldb, beta, C1.data(), s.N);
        double t1 = now();
        gemm_settings().engine = GemmEngine::OneDNN;
        gemm_bf16(ta, tb, s.M, s.N, s.K, 1.f, GemmOperand{nullptr, A.data(), int(lda)},
                  GemmOperand{nullptr, B.data(), int(ldb)}, beta, C2.data(), s.N);
        gemm_settings().engine = ours;
        double t2 = now();
        if (r >= 2) t_ours.push_back(t1 - t0), t_dnnl.push_back(t2 - t1);
      }
      double diff = 0;
      for (size_t i = 0; i < C1.size(); ++i)  // a NaN or infinity on either side reads as inf, not as agreement
        diff = std::isfinite(C1[i]) && std::isfinite(C2[i]) ? std::max(diff, double(std::fabs(C1[i] - C2[i]))) : INFINITY;
      const double flop = 2.0 * s.M * s.N * s.K, ga = flop / median(t_ours) / 1e9, gd = flop / median(t_dnnl) / 1e9;
      std::printf("%-6s %6d %6d %6d  %14.1f %12.1f  %7.2fx  %10.2e\n", lay, s.M, s.N, s.K, ga, gd, ga / gd, diff);
    }
  }
  return 0;
}
