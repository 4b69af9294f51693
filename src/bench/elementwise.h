// What bounds a CPU's elementwise work, measured: transcendental throughput (the softmax, loss,
// GELU and SiLU loops are bound by exp / erf evaluations rather than by memory bandwidth), the
// cost of one OpenMP parallel region (the launch overhead of a CPU "kernel"; it depends on
// OMP_WAIT_POLICY and on other load), the bandwidth the project's residual-merge and RMSNorm
// kernels reach (simple loops fall short of STREAM), and the trainer's AdamW update rate per
// tensor size. Each is timed with OpenMP over all threads, the best of repeated passes.
// `zaya size --measure-elementwise` writes them into a hardware profile (size/elementwise.h).
#pragma once
#include <utility>
#include <vector>

namespace zaya::bench {

struct ElementwiseMeasurement {
  double exp_f32_per_s = 0;       // exp(float) per second, summed per row by row_sum_exp (cross-entropy)
  double erf_f32_per_s = 0;       // std::erf(float) per second, one per element (GELU)
  double parallel_region_us = 0;  // fork + join of one OpenMP parallel loop over a few elements
  // Residual merge + RMSNorm, forward and backward, on [4096, 256] fp32, with the bytes the
  // step model counts for them.
  double kernels_GBps = 0;
  // AdamW over 8M parameters held as tensors of n elements: (n, elements per second), n ascending.
  std::vector<std::pair<double, double>> adamw_rates;
  int threads = 0;  // OpenMP threads used
};

// seconds_per_kind: how long each measurement repeats its passes (AdamW: half that per size).
ElementwiseMeasurement measure_elementwise(double seconds_per_kind = 0.2);

}  // namespace zaya::bench
