#include "size/elementwise.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya::size {
using json = nlohmann::json;

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
  volatile double sink = sums[0] + y[n - 1];
  (void)sink;
  return r;
}

json elementwise_to_json(const ElementwiseRates& r) {
  return {{"exp_f32_per_s", r.exp_f32_per_s},
          {"erf_f32_per_s", r.erf_f32_per_s},
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
  ElementwiseRates r;
  for (auto [key, out] : {std::pair{"exp_f32_per_s", &r.exp_f32_per_s}, {"erf_f32_per_s", &r.erf_f32_per_s}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number() || j[key].get<double>() < 0) fail(path, ": field '", key, "' must be a number >= 0");
    *out = j[key].get<double>();
  }
  if (j.contains("threads") && j["threads"].is_number_integer()) r.threads = j["threads"].get<int>();
  return r;
}

}  // namespace zaya::size
