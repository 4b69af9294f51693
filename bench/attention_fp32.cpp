// Training attention in fp32, one layer forward and backward: our AVX2 tiles
// (kernels/attention_avx2_train.h) against the per-block OpenBLAS products (attention.cpp), the
// two paths' calls interleaved on the same operands. Median of --reps calls after 2 warm-up
// calls each. GFLOP/s count only the causal half's useful work: 2 hd FLOPs per product per visible
// (query, key) pair, forward 2 products (QK^T, PV), backward 5 (QK^T again, dO V^T, P^T dO,
// dS K, dS^T Q), so skipping more of the triangle shows as less time, not more FLOP/s.
//
// Usage: build/bench_attention_fp32 [--threads N] [--reps R] [--shape B,T,Hq,Hk]...
// Default shapes: zaya1-small's layer (8,256,4,2) and zaya1-medium's (2,1024,8,2), head dim 64.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention_layer.h"
#include "kernels/attention.h"
#include "kernels/attention_avx2_train.h"
#include "kernels/avx2_util.h"
#include "kernels/gemm.h"

using namespace zaya;

namespace {

struct Shape {
  int B, T, Hq, Hk;
};

void bench(const Shape& sh, int reps) {
  const int hd = attn_bench::Layer::hd, B = sh.B, T = sh.T;
  attn_bench::Layer layer(B, T, sh.Hq, sh.Hk);
  const KernelTier tiers[2] = {KernelTier::Portable, KernelTier::Avx2};  // BLAS blocks, AVX2 tiles
  const auto m = layer.time<2>(reps, [&](int p) { attention_avx2_train_force(tiers[p]); });
  attention_avx2_train_force(KernelTier::Auto);
  const double pairs = double(B) * sh.Hq * T * (T + 1) / 2, ff = 4.0 * hd * pairs, fb = 10.0 * hd * pairs;
  const double f[2] = {m[0].forward, m[1].forward}, b[2] = {m[0].backward, m[1].backward};
  std::printf("%-16s %8.2f ms %6.1f GFLOP/s %8.2f ms %6.1f GFLOP/s   %5.2fx %5.2fx\n",
              (std::to_string(B) + "," + std::to_string(T) + "," + std::to_string(sh.Hq) + "," +
               std::to_string(sh.Hk))
                  .c_str(),
              1e3 * f[0], 1e-9 * ff / f[0], 1e3 * f[1], 1e-9 * ff / f[1], f[0] / f[1], b[0] / b[1]);
  std::printf("%-16s %8.2f ms %6.1f GFLOP/s %8.2f ms %6.1f GFLOP/s   (backward)\n", "", 1e3 * b[0],
              1e-9 * fb / b[0], 1e3 * b[1], 1e-9 * fb / b[1]);
}

}  // namespace

int main(int argc, char** argv) {
  maybe_reexec_for_blas_core(argv);  // the OpenBLAS core zaya itself runs
  int threads = omp_get_max_threads(), reps = 20;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    Shape sh{};
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--shape" && i + 1 < argc &&
             std::sscanf(argv[i + 1], "%d,%d,%d,%d", &sh.B, &sh.T, &sh.Hq, &sh.Hk) == 4 && sh.B > 0 && sh.T > 0 &&
             sh.Hk > 0 && sh.Hq % sh.Hk == 0)
      shapes.push_back(sh), ++i;
    else {
      std::fprintf(stderr, "usage: bench_attention_fp32 [--threads N] [--reps R] [--shape B,T,Hq,Hk]...\n");
      return 2;
    }
  }
  if (!cpu_avx2_fma()) {
    std::fprintf(stderr, "bench_attention_fp32: this CPU has no AVX2 with FMA; nothing to compare\n");
    return 0;
  }
  if (shapes.empty()) shapes = {{8, 256, 4, 2}, {2, 1024, 8, 2}};
  omp_set_num_threads(threads);
  std::printf("training attention fp32, one layer, head dim 64, %d threads, median of %d\n%s\n", threads, reps,
              gemm_runtime_info().c_str());
  std::printf("%-16s %-26s %-26s   %s\n", "B,T,Hq,Hk", "BLAS blocks", "AVX2 tiles", "fwd   bwd speed-up");
  for (const Shape& sh : shapes) bench(sh, reps);
}
