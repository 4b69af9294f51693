#include "size/gemm_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya::size {
using json = nlohmann::json;

namespace {

double useful_flops(const GemmShape& g) { return 2.0 * g.M * g.N * g.K * g.batch; }

double roofline_seconds(const HardwareProfile& hw, const std::string& dtype, const GemmShape& g) {
  double bytes = g.bytes > 0 ? g.bytes : (g.M * g.K + g.K * g.N + g.M * g.N) * g.batch * dtype_bytes(dtype);
  return bytes / hw.achievable_bandwidth();
}

GemmTiming tile_model(const HardwareProfile& hw, const std::string& dtype, const GemmShape& g, double executed) {
  const double peak = hw.peak(dtype), cu = hw.compute_units;
  const double mem_s = roofline_seconds(hw, dtype, g);
  GemmTiming best;
  best.seconds = 1e300;
  for (const GemmTile& t : hw.tiles) {
    const double tm = std::ceil(g.M / t.m), tn = std::ceil(g.N / t.n);
    // Split-K: when the output tiles cannot fill the device, the library splits the
    // reduction over up to `split` chunks (each at least two K-tiles), then sums fp32 partials.
    for (double split = 1; split == 1 || (tm * tn * g.batch * split <= 2 * cu && g.K / split >= 2 * t.k); split *= 2) {
      GemmTiming x;
      x.tile = t;
      x.tiles = tm * tn * g.batch * split;
      x.waves = std::ceil(x.tiles / cu);
      x.tile_quant = (g.M * g.N) / (tm * t.m * tn * t.n);
      x.wave_quant = x.tiles / (x.waves * cu);
      x.split_k = split;
      const double kc = g.K / split, k_quant = kc / (std::ceil(kc / t.k) * t.k);
      const double eff = hw.gemm_efficiency * t.efficiency * x.tile_quant * x.wave_quant * k_quant;
      const double compute_s = executed * useful_flops(g) / (peak * eff);
      const double partials_s = split > 1 ? 2 * split * g.M * g.N * g.batch * 4.0 / hw.achievable_bandwidth() : 0;
      x.memory_bound = mem_s > compute_s;
      x.seconds = std::max(compute_s, mem_s) + partials_s + hw.kernel_overhead_us * 1e-6 * (split > 1 ? 2 : 1);
      if (x.seconds < best.seconds) best = x;
    }
  }
  best.efficiency = executed * useful_flops(g) / (best.seconds * peak);
  return best;
}

// Best measured TFLOP/s per shape (over engines) for one dtype.
struct TablePoint {
  double lm, ln, lk, log_tflops;
};

std::vector<TablePoint> table_points(const HardwareProfile& hw, const std::string& dtype) {
  std::map<std::tuple<double, double, double>, double> best;
  for (auto& r : hw.gemm_table)
    if (r.dtype == dtype) {
      double& b = best[{r.M, r.N, r.K}];
      b = std::max(b, r.tflops);
    }
  std::vector<TablePoint> pts;
  for (auto& [shape, tf] : best)
    pts.push_back({std::log(std::get<0>(shape)), std::log(std::get<1>(shape)), std::log(std::get<2>(shape)),
                   std::log(tf)});
  return pts;
}

GemmTiming table_model(const HardwareProfile& hw, const std::string& dtype, const GemmShape& g, double executed) {
  const std::vector<TablePoint> pts = table_points(hw, dtype);
  if (pts.empty()) {
    std::string have;
    for (auto& r : hw.gemm_table)
      if (have.find(r.dtype) == std::string::npos) have += (have.empty() ? "" : ", ") + r.dtype;
    fail(hw.source, ": the measured GEMM table has no rows for dtype ", dtype, " (has: ", have,
         "); pass --dtype accordingly");
  }
  const double lm = std::log(std::max(g.M, 1.0)), ln = std::log(std::max(g.N, 1.0)), lk = std::log(std::max(g.K, 1.0));
  // k nearest in log space, inverse squared distance weights.
  std::vector<std::pair<double, double>> near;  // (d2, log_tflops)
  for (auto& p : pts) {
    double d2 = (p.lm - lm) * (p.lm - lm) + (p.ln - ln) * (p.ln - ln) + (p.lk - lk) * (p.lk - lk);
    near.push_back({d2, p.log_tflops});
  }
  const size_t k = std::min<size_t>(4, near.size());
  std::partial_sort(near.begin(), near.begin() + k, near.end());
  double wsum = 0, lsum = 0;
  for (size_t i = 0; i < k; ++i) {
    if (near[i].first < 1e-12) {
      wsum = 1;
      lsum = near[i].second;
      break;
    }
    double w = 1.0 / near[i].first;
    wsum += w;
    lsum += w * near[i].second;
  }
  const double tflops = std::exp(lsum / wsum);
  GemmTiming x;
  x.from_table = true;
  // The table's time per call already includes the call overhead; each batched product is a call.
  const double compute_s = executed * useful_flops(g) / (tflops * 1e12);
  const double mem_s = roofline_seconds(hw, dtype, g);
  x.memory_bound = mem_s > compute_s;
  x.seconds = std::max(compute_s, mem_s);
  x.efficiency = executed * useful_flops(g) / (x.seconds * hw.peak(dtype));
  return x;
}

}  // namespace

GemmTiming gemm_time(const HardwareProfile& hw, const std::string& dtype, const GemmShape& g, double executed) {
  if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.batch <= 0) return GemmTiming{};
  return hw.measured_gemms() ? table_model(hw, dtype, g, executed) : tile_model(hw, dtype, g, executed);
}

WaveInfo wave_quantisation(const HardwareProfile& hw, const GemmShape& g) {
  HardwareProfile vendor = hw;
  vendor.gemm_table.clear();
  std::string dtype = hw.peak_tflops.count("bf16") ? "bf16" : hw.peak_tflops.begin()->first;
  GemmTiming t = tile_model(vendor, dtype, g, 1.0);
  return {t.tiles, t.waves, t.wave_quant, t.tile};
}

json gemm_timing_to_json(const GemmTiming& t) {
  json j = {{"seconds", t.seconds},
            {"efficiency", t.efficiency},
            {"memory_bound", t.memory_bound},
            {"from_table", t.from_table}};
  if (!t.from_table) {
    j["tile"] = {t.tile.m, t.tile.n, t.tile.k};
    j["tiles"] = t.tiles;
    j["waves"] = t.waves;
    j["tile_quantisation"] = t.tile_quant;
    j["wave_quantisation"] = t.wave_quant;
    j["split_k"] = t.split_k;
  }
  return j;
}

}  // namespace zaya::size
