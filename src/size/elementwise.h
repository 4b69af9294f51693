// Transcendental throughput: on a CPU the softmax, loss, GELU and SiLU loops are bound by
// exp / erf evaluations rather than by memory bandwidth, so a CPU profile carries measured
// rates (evaluations per second on all cores) and the step-time model charges each
// elementwise op max(bytes / bandwidth, evaluations / rate). A rate of 0 means "not a
// bottleneck" (GPU profiles: the special-function units outrun HBM).
//
// `zaya size --measure-elementwise DIR` measures them (bench/elementwise.h: the loop shapes the
// kernels use, the cost of one OpenMP parallel region, the bandwidth of the project's
// residual-merge and RMSNorm kernels, the trainer's AdamW update rate per tensor size) and
// writes DIR/elementwise.json, which --profile-from DIR reads.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zaya::size {

struct ElementwiseRates {
  double exp_f32_per_s = 0;  // exp(float), vectorised as the loss runs it (row_sum_exp)
  double erf_f32_per_s = 0;  // erf(float), vectorised as the GELU runs it (gelu_row)
  double parallel_region_us = 0;  // fork + join of one OpenMP parallel loop (0: not measured)
  // Bandwidth zaya's own elementwise kernels reach (residual merge + RMSNorm, forward and
  // backward, bytes counted as the step model counts them); 0: use the profile's memory bandwidth.
  double kernels_GBps = 0;
  // zaya's AdamW step over tensors of n elements: (n, elements per second), n ascending
  // (small tensors may run on one thread); empty: the bandwidth model.
  std::vector<std::pair<double, double>> adamw_rates;
  int threads = 0;
  std::vector<std::string> flagged;  // measurements whose rounds still disagreed by more than 2x
  double adamw_rate(double n) const;  // interpolated in log n, clamped at the ends
};

// Counts of evaluations of each kind (one pass of one op).
struct SpecialCounts {
  double exp_f32 = 0, erf_f32 = 0;
};

// Seconds for `c` evaluations at `r` (rates of 0 cost nothing).
double special_seconds(const SpecialCounts& c, const ElementwiseRates& r);

ElementwiseRates measure_elementwise_rates(double seconds_per_kind = 0.2);  // bench::measure_elementwise
void write_elementwise_json(const ElementwiseRates& r, const std::string& path);
ElementwiseRates read_elementwise_json(const std::string& path);  // fails naming the file and field
nlohmann::json elementwise_to_json(const ElementwiseRates& r);

}  // namespace zaya::size
