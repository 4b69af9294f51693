// Training attention in fp32, one layer forward and backward: our register tiles
// (kernels/attention_tiles.h: AVX2, and AVX-512 where the CPU has it) against the per-block
// products (attention.cpp), the paths' calls interleaved on the same operands. Median of --reps calls after 2 warm-up
// calls each. GFLOP/s count only the causal half's useful work: 2 hd FLOPs per product per visible
// (query, key) pair, forward 2 products (QK^T, PV), backward 5 (QK^T again, dO V^T, P^T dO,
// dS K, dS^T Q), so skipping more of the triangle shows as less time, not more FLOP/s.
//
// Usage: build/bench_attention_fp32 [--threads N] [--reps R] [--shape B,T,Hq,Hk]...
// Default shapes: zaya1-small's layer (8,256,4,2) and zaya1-medium's (2,1024,8,2), head dim 64.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention_layer.h"
#include "kernels/attention.h"
#include "kernels/attention_tiles.h"
#include "kernels/avx2_util.h"
#include "kernels/gemm.h"

using namespace zaya;

namespace {

struct Shape {
  int B, T, Hq, Hk;
};

// The paths compared: the per-block products (Portable: our AVX-512 GEMM on a CPU with
// AVX-512, OpenBLAS's kernels on one without), the AVX2 tiles, and the AVX-512 tiles where the
// CPU has them (Auto).
struct Path {
  KernelTier cap;
  const char* name;
};

template <int N>
void bench(const Shape& sh, int reps, const std::array<Path, N>& paths) {
  const int hd = attn_bench::Layer::hd, B = sh.B, T = sh.T;
  attn_bench::Layer layer(B, T, sh.Hq, sh.Hk);
  const auto m = layer.time<N>(reps, [&](int p) { attention_tiles_force(paths[size_t(p)].cap); });
  attention_tiles_force(KernelTier::Auto);
  const double pairs = double(B) * sh.Hq * T * (T + 1) / 2, ff = 4.0 * hd * pairs, fb = 10.0 * hd * pairs;
  const std::string name = std::to_string(B) + "," + std::to_string(T) + "," + std::to_string(sh.Hq) + "," +
                           std::to_string(sh.Hk);
  for (int pass = 0; pass < 2; ++pass) {
    std::printf("%-16s", pass ? "" : name.c_str());
    for (int p = 0; p < N; ++p) {
      const double t = pass ? m[size_t(p)].backward : m[size_t(p)].forward;
      std::printf(" %8.2f ms %6.1f GFLOP/s", 1e3 * t, 1e-9 * (pass ? fb : ff) / t);
    }
    std::printf("   %s", pass ? "(backward)" : "(forward)");
    for (int p = 1; p < N; ++p) {
      const double t0 = pass ? m[0].backward : m[0].forward, t = pass ? m[size_t(p)].backward : m[size_t(p)].forward;
      std::printf(" %5.2fx", t0 / t);
    }
    std::printf("\n");
  }
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
  const Path blocks{KernelTier::Portable, cpu_features().avx512f ? "per-block AVX-512 GEMM" : "per-block OpenBLAS"},
      avx2{KernelTier::Avx2, "AVX2 6x16 tiles"}, avx512{KernelTier::Auto, "AVX-512 8x32 tiles"};
  const bool has512 = cpu_features().avx512f;
  std::printf("%-16s %-26s %-26s", "B,T,Hq,Hk", blocks.name, avx2.name);
  if (has512) std::printf(" %-26s", avx512.name);
  std::printf("   speed-up over the first\n");
  for (const Shape& sh : shapes) {
    if (has512)
      bench<3>(sh, reps, {blocks, avx2, avx512});
    else
      bench<2>(sh, reps, {blocks, avx2});
  }
}
