// What bounds a CPU's elementwise work, measured: transcendental throughput (the softmax, loss,
// GELU and SiLU loops are bound by exp / erf evaluations rather than by memory bandwidth), the
// cost of one OpenMP parallel region (the launch overhead of a CPU "kernel"; it depends on
// OMP_WAIT_POLICY and on other load), the bandwidth the project's residual-merge and RMSNorm
// kernels reach (simple loops fall short of STREAM), and the trainer's AdamW update rate per
// tensor size. Each is timed with OpenMP over all threads, all of them in interleaved rounds, the median
// kept (bench/interleaved.h).
// `zaya size --measure-elementwise` writes them into a hardware profile (size/elementwise.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace zaya::bench {

struct ElementwiseMeasurement {
  double exp_f32_per_s = 0;       // exp(float) per second, summed per row by row_sum_exp (cross-entropy)
  double erf_f32_per_s = 0;       // erf(float) per second, one per element, by gelu_row (GELU)
  double parallel_region_us = 0;  // fork + join of one OpenMP parallel loop over a few elements
  // Residual merge + RMSNorm, forward and backward, on [4096, 256] fp32, with the bytes the
  // step model counts for them.
  double kernels_GBps = 0;
  // AdamW over 8M parameters held as tensors of n elements: (n, elements per second), n ascending.
  std::vector<std::pair<double, double>> adamw_rates;
  int threads = 0;  // OpenMP threads used
  std::vector<std::string> flagged;  // items whose rounds still disagreed by more than 2x
};

// seconds_per_kind: about how long each item's rounds take together.
ElementwiseMeasurement measure_elementwise(double seconds_per_kind = 0.2);

}  // namespace zaya::bench
