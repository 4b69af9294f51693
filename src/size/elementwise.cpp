#include "size/elementwise.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/norm.h"
#include "model/params.h"
#include "train/optim.h"

namespace zaya::size {
using json = nlohmann::json;

double ElementwiseRates::adamw_rate(double n) const {
  if (adamw_rates.empty()) return 0;
  if (n <= adamw_rates.front().first) return adamw_rates.front().second;
  for (size_t i = 1; i < adamw_rates.size(); ++i)
    if (n <= adamw_rates[i].first) {
      auto [n0, r0] = adamw_rates[i - 1];
      auto [n1, r1] = adamw_rates[i];
      double f = std::log(n / n0) / std::log(n1 / n0);
      return r0 + f * (r1 - r0);
    }
  return adamw_rates.back().second;
}

double special_seconds(const SpecialCounts& c, const ElementwiseRates& r) {
  double s = 0;
  if (r.exp_f32_per_s > 0) s += c.exp_f32 / r.exp_f32_per_s;
  if (r.erf_f32_per_s > 0) s += c.erf_f32 / r.erf_f32_per_s;
  return s;
}

namespace {

// Best rate over repeated passes of `body` over n elements until `seconds` have elapsed.
template <class F>
double best_rate(size_t n, double seconds, F&& body) {
  using clock = std::chrono::steady_clock;
  double best = 0;
  auto start = clock::now();
  int passes = 0;
  do {
    auto t0 = clock::now();
    body();
    double dt = std::chrono::duration<double>(clock::now() - t0).count();
    if (passes > 0) best = std::max(best, double(n) / dt);  // the first pass warms up
    ++passes;
  } while (passes < 3 || std::chrono::duration<double>(clock::now() - start).count() < seconds);
  return best;
}

}  // namespace

ElementwiseRates measure_elementwise_rates(double seconds_per_kind) {
  const size_t rows = 256, cols = 8192, n = rows * cols;  // a [rows, cols] block, like logits
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) x[i] = -8.0f * float(i % 1021) / 1021.0f;
  std::vector<double> sums(rows);
  ElementwiseRates r;
  r.threads = omp_get_max_threads();
  // Cross-entropy / softmax: a float exp per element, summed per row.
  r.exp_f32_per_s = best_rate(n, seconds_per_kind, [&] {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; ++i) {
      float s = 0;
      const float* z = &x[i * cols];
      for (size_t v = 0; v < cols; ++v) s += std::exp(z[v] - 0.5f);
      sums[i] = s;
    }
  });
  // GELU: a float erf per element.
  r.erf_f32_per_s = best_rate(n, seconds_per_kind, [&] {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; ++i)
      for (size_t v = 0; v < cols; ++v) y[i * cols + v] = std::erf(x[i * cols + v] * 0.70710678f);
  });
  // One parallel loop over a few elements per thread: what a small kernel pays to fork and join.
  {
    using clock = std::chrono::steady_clock;
    const int reps = 2000;
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      auto t0 = clock::now();
      for (int i = 0; i < reps; ++i) {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < 64; ++t) y[size_t(t)] = x[size_t(t)] + float(i);
      }
      best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count() / reps);
    }
    r.parallel_region_us = best * 1e6;
  }
  // zaya's residual merge + RMSNorm, forward and backward, on [4096, 256] fp32 (the step
  // model's bytes for them: forward N*D*(4 + 3*4 + 4 + 4), backward twice that).
  {
    const int N = 4096, D = 256;
    const size_t nd = size_t(N) * D;
    const size_t n_rows = size_t(N), width = size_t(D);
    std::vector<float> h(nd, 0.5f), res(nd, 0.25f), out(nd), xn(nd), rstd(n_rows), dout(nd, 1e-3f), dx(nd), dh(nd),
        dres(nd), w(width, 1.0f), b(width, 0.0f), dw(width), d1(width), d2(width), d3(width), d4(width);
    const double bytes = 3.0 * double(nd) * (4 + 3 * 4 + 4 + 4);
    const double per_s = best_rate(1, seconds_per_kind, [&] {
      res_merge_forward(out.data(), h.data(), res.data(), w.data(), b.data(), w.data(), b.data(), N, D);
      rmsnorm_forward(xn.data(), rstd.data(), out.data(), w.data(), N, D, 1e-5);
      rmsnorm_backward(dx.data(), dw.data(), dout.data(), out.data(), w.data(), rstd.data(), N, D);
      res_merge_backward(dh.data(), dres.data(), d1.data(), d2.data(), d3.data(), d4.data(), dx.data(), h.data(),
                         res.data(), w.data(), b.data(), w.data(), b.data(), N, D);
    });
    r.kernels_GBps = bytes * per_s / 1e9;
  }
  // The trainer's AdamW over 8M parameters held as tensors of one size (a model's worth, so
  // the state streams from memory as in training rather than sitting in cache).
  for (double size : {1024.0, 4096.0, 16384.0, 32768.0, 131072.0, 1048576.0, 4194304.0}) {
    const size_t count = size_t(8388608 / size);
    ParamTable table;
    for (size_t i = 0; i < count; ++i) table.add("w" + std::to_string(i), {int64_t(size)}, ParamRole::Matrix, 0);
    Optimizer opt(table, OptimizerSettings{});
    std::vector<float> p(table.total, 0.01f), g(table.total, 1e-3f);
    r.adamw_rates.push_back(
        {size, best_rate(table.total, seconds_per_kind / 2, [&] { opt.step(p.data(), g.data(), 1e-4); })});
  }
  volatile double sink = sums[0] + y[n - 1];
  (void)sink;
  return r;
}

json elementwise_to_json(const ElementwiseRates& r) {
  return {{"exp_f32_per_s", r.exp_f32_per_s},
          {"erf_f32_per_s", r.erf_f32_per_s},
          {"parallel_region_us", r.parallel_region_us},
          {"kernels_GBps", r.kernels_GBps},
          {"adamw_rates", r.adamw_rates},
          {"threads", r.threads}};
}

void write_elementwise_json(const ElementwiseRates& r, const std::string& path) {
  std::ofstream f(path);
  if (!f) fail(path, ": cannot write");
  f << elementwise_to_json(r).dump(2) << "\n";
}

ElementwiseRates read_elementwise_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail(path, ": cannot open file");
  std::ostringstream os;
  os << f.rdbuf();
  json j;
  try {
    j = json::parse(os.str());
  } catch (const json::parse_error& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
  // Exactly the fields the writer writes: another JSON file (a tokenizer.json, say) is refused.
  if (!j.is_object()) fail(path, ": not a JSON object of elementwise rates");
  const json known = elementwise_to_json(ElementwiseRates{});
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.contains(it.key())) fail(path, ": unknown field '", it.key(), "' (not an elementwise.json)");
  ElementwiseRates r;
  for (auto [key, out] : {std::pair{"exp_f32_per_s", &r.exp_f32_per_s}, {"erf_f32_per_s", &r.erf_f32_per_s},
                          {"parallel_region_us", &r.parallel_region_us}, {"kernels_GBps", &r.kernels_GBps}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number() || j[key].get<double>() < 0) fail(path, ": field '", key, "' must be a number >= 0");
    *out = j[key].get<double>();
  }
  if (j.contains("threads") && j["threads"].is_number_integer()) r.threads = j["threads"].get<int>();
  if (j.contains("adamw_rates")) {
    const json& a = j["adamw_rates"];
    bool ok = a.is_array();
    for (size_t i = 0; ok && i < a.size(); ++i) {
      ok = a[i].is_array() && a[i].size() == 2 && a[i][0].is_number() && a[i][1].is_number() &&
           a[i][0].get<double>() > 0 && a[i][1].get<double>() > 0 &&
           (i == 0 || a[i][0].get<double>() > a[i - 1][0].get<double>());
      if (ok) r.adamw_rates.push_back({a[i][0].get<double>(), a[i][1].get<double>()});
    }
    if (!ok) fail(path, ": field 'adamw_rates' must be a list of [elements, elements per second], elements ascending");
  }
  return r;
}

}  // namespace zaya::size
