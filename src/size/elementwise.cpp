#include "size/elementwise.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/elementwise.h"
#include "core/error.h"

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

ElementwiseRates measure_elementwise_rates(double seconds_per_kind) {
  const bench::ElementwiseMeasurement m = bench::measure_elementwise(seconds_per_kind);
  ElementwiseRates r;
  r.exp_f32_per_s = m.exp_f32_per_s;
  r.erf_f32_per_s = m.erf_f32_per_s;
  r.parallel_region_us = m.parallel_region_us;
  r.kernels_GBps = m.kernels_GBps;
  r.adamw_rates = m.adamw_rates;
  r.threads = m.threads;
  r.flagged = m.flagged;
  return r;
}

json elementwise_to_json(const ElementwiseRates& r) {
  return {{"exp_f32_per_s", r.exp_f32_per_s},
          {"erf_f32_per_s", r.erf_f32_per_s},
          {"parallel_region_us", r.parallel_region_us},
          {"kernels_GBps", r.kernels_GBps},
          {"adamw_rates", r.adamw_rates},
          {"threads", r.threads},
          {"flagged", r.flagged}};
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
  if (j.contains("flagged") && j["flagged"].is_array())
    for (const json& n : j["flagged"])
      if (n.is_string()) r.flagged.push_back(n.get<std::string>());
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
