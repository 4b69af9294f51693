#include "size/hardware.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "core/error.h"

namespace zaya::size {
using json = nlohmann::json;

int dtype_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32") return 4;
  if (dtype == "fp8") return 1;
  fail("dtype '", dtype, "' is not one of bf16, fp16, fp32, fp8");
}

double HardwareProfile::peak(const std::string& dtype) const {
  auto it = peak_tflops.find(dtype);
  if (it == peak_tflops.end() || it->second <= 0) {
    std::string have;
    for (auto& [k, v] : peak_tflops) have += (have.empty() ? "" : ", ") + k;
    fail(source, ": profile '", name, "' has no peak for dtype ", dtype, " (has: ", have, ")");
  }
  return it->second * 1e12;
}

void HardwareProfile::validate() const {
  auto pos = [&](const char* k, double v) {
    if (!(v > 0)) fail(source, ": field '", k, "' must be positive, got ", v);
  };
  if (peak_tflops.empty()) fail(source, ": no peak_tflops_<dtype> field");
  for (auto& [k, v] : peak_tflops) pos(("peak_tflops_" + k).c_str(), v);
  pos("compute_units", compute_units);
  if (!(gemm_efficiency > 0 && gemm_efficiency <= 1))
    fail(source, ": field 'gemm_efficiency' must be in (0, 1], got ", gemm_efficiency);
  if (!measured_gemms() && tiles.empty()) fail(source, ": field 'tiles' must list at least one GEMM tile");
  for (auto& t : tiles)
    if (t.m <= 0 || t.n <= 0 || t.k <= 0 || !(t.efficiency > 0 && t.efficiency <= 1))
      fail(source, ": field 'tiles': tile [", t.m, ", ", t.n, ", ", t.k, ", ", t.efficiency,
           "] needs positive sizes and an efficiency in (0, 1]");
  pos("width_multiple", width_multiple);
  if (kernel_overhead_us < 0) fail(source, ": field 'kernel_overhead_us' must be >= 0");
  if (elementwise.exp_f32_per_s < 0 || elementwise.erf_f32_per_s < 0 || elementwise.kernels_GBps < 0)
    fail(source, ": fields 'exp_f32_per_s', 'erf_f32_per_s' and 'elementwise_GBps' must be >= 0");
  if (memory_GB < 0) fail(source, ": field 'capacity_GB' must be >= 0");
  pos("bandwidth_GBps", memory_bandwidth_GBps);
  if (!(memory_efficiency > 0 && memory_efficiency <= 1))
    fail(source, ": field 'bandwidth_efficiency' must be in (0, 1], got ", memory_efficiency);
  pos("devices_per_node", devices_per_node);
  pos("intra_bandwidth_GBps", intra.bandwidth_GBps);
  pos("inter_bandwidth_GBps", inter.bandwidth_GBps);
  if (intra.latency_us < 0 || inter.latency_us < 0) fail(source, ": link latencies must be >= 0");
}

namespace {

// Strict reader over one TOML table: every key must be known, types are checked.
struct TableReader {
  const toml::table& t;
  std::string where;
  std::set<std::string> used;

  const toml::node* get(const std::string& k) {
    used.insert(k);
    return t.get(k);
  }
  double num(const std::string& k, double dflt, bool required) {
    const toml::node* n = get(k);
    if (!n) {
      if (required) fail(where, ": missing field '", k, "'");
      return dflt;
    }
    if (auto v = n->as_floating_point()) return v->get();
    if (auto v = n->as_integer()) return double(v->get());
    fail(where, ": field '", k, "' must be a number");
  }
  std::string str(const std::string& k, const std::string& dflt) {
    const toml::node* n = get(k);
    if (!n) return dflt;
    if (auto v = n->as_string()) return v->get();
    fail(where, ": field '", k, "' must be a string");
  }
  void reject_unknown() {
    for (auto&& [k, v] : t) {
      std::string key(k.str());
      if (!used.count(key) && !v.is_table()) fail(where, ": unknown field '", key, "'");
    }
  }
};

const toml::table& sub_table(const toml::table& t, const char* name, const std::string& path) {
  const toml::node* n = t.get(name);
  if (!n || !n->is_table()) fail(path, ": missing table [", name, "]");
  return *n->as_table();
}

}  // namespace

HardwareProfile parse_hardware_profile(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail(path, ":", e.source().begin.line, ": TOML syntax error: ", e.description());
  }
  HardwareProfile hw;
  hw.source = path;
  for (auto&& [k, v] : root)
    if (v.is_table() && k.str() != "compute" && k.str() != "memory" && k.str() != "network")
      fail(path, ": unknown table [", std::string(k.str()), "] (expected compute, memory, network)");
  TableReader top{root, path, {}};
  hw.name = top.str("name", "");
  if (hw.name.empty()) fail(path, ": missing field 'name'");
  hw.kind = top.str("kind", "gpu");
  if (hw.kind != "gpu" && hw.kind != "cpu") fail(path, ": field 'kind' must be 'gpu' or 'cpu', got '", hw.kind, "'");
  top.get("notes");
  top.reject_unknown();

  // Counts and tile sizes are whole numbers in [0, 2^30], checked before the cast to int (a
  // double out of int's range, such as 1.2e12, is undefined behaviour: tests/fuzz's hardware).
  auto count = [&](double v, const std::string& field) {
    if (!(v >= 0 && v <= double(1 << 30)) || v != std::floor(v))
      fail(path, ": field '", field, "' must be a whole number in [0, 2^30], got ", v);
    return int(v);
  };
  const toml::table& c = sub_table(root, "compute", path);
  TableReader cr{c, path + " [compute]", {}};
  for (auto&& [k, v] : c) {
    std::string key(k.str());
    if (key.rfind("peak_tflops_", 0) == 0) {
      std::string dt = key.substr(12);
      dtype_bytes(dt);  // known dtype
      hw.peak_tflops[dt] = cr.num(key, 0, true);
    }
  }
  hw.compute_units = count(cr.num("compute_units", 0, true), "compute_units");
  hw.gemm_efficiency = cr.num("gemm_efficiency", 0, true);
  hw.width_multiple = count(cr.num("width_multiple", 64, false), "width_multiple");
  hw.kernel_overhead_us = cr.num("kernel_overhead_us", 0, false);
  hw.elementwise.exp_f32_per_s = cr.num("exp_f32_per_s", 0, false);
  hw.elementwise.erf_f32_per_s = cr.num("erf_f32_per_s", 0, false);
  if (const toml::node* tn = cr.get("tiles")) {
    const toml::array* arr = tn->as_array();
    if (!arr) fail(path, ": field 'tiles' must be a list of [m, n, k, efficiency]");
    for (auto&& e : *arr) {
      const toml::array* a = e.as_array();
      if (!a || a->size() != 4) fail(path, ": field 'tiles': each entry must be [m, n, k, efficiency]");
      auto val = [&](size_t i) {
        const toml::node& x = *a->get(i);
        if (auto v = x.as_integer()) return double(v->get());
        if (auto v = x.as_floating_point()) return v->get();
        fail(path, ": field 'tiles': entries must be numbers");
      };
      hw.tiles.push_back({count(val(0), "tiles"), count(val(1), "tiles"), count(val(2), "tiles"), val(3)});
    }
  }
  cr.reject_unknown();

  const toml::table& m = sub_table(root, "memory", path);
  TableReader mr{m, path + " [memory]", {}};
  hw.memory_GB = mr.num("capacity_GB", 0, false);
  hw.memory_bandwidth_GBps = mr.num("bandwidth_GBps", 0, true);
  hw.memory_efficiency = mr.num("bandwidth_efficiency", 1.0, false);
  hw.cache_MB = mr.num("cache_MB", 0, false);
  hw.elementwise.kernels_GBps = mr.num("elementwise_GBps", 0, false);
  mr.reject_unknown();

  const toml::table& n = sub_table(root, "network", path);
  TableReader nr{n, path + " [network]", {}};
  hw.devices_per_node = count(nr.num("devices_per_node", 1, false), "devices_per_node");
  hw.intra.bandwidth_GBps = nr.num("intra_bandwidth_GBps", 0, true);
  hw.intra.latency_us = nr.num("intra_latency_us", 0, false);
  hw.inter.bandwidth_GBps = nr.num("inter_bandwidth_GBps", 0, true);
  hw.inter.latency_us = nr.num("inter_latency_us", 0, false);
  nr.reject_unknown();
  hw.network_source = path;
  hw.validate();
  return hw;
}

HardwareProfile load_hardware_profile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open hardware profile");
  std::ostringstream os;
  os << f.rdbuf();
  return parse_hardware_profile(os.str(), path);
}

// A TOML basic string: quotes, backslashes and control characters escaped, so a name read
// from a profile (where "\u0001" is legal) is written back as TOML that parses.
static std::string toml_quoted(const std::string& v) {
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') out += '\\', out += char(c);
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", unsigned(c));
      out += buf;
    } else out += char(c);
  }
  return out + "\"";
}

std::string hardware_profile_to_toml(const HardwareProfile& hw) {
  std::ostringstream os;
  os.precision(10);
  const std::string notes = "built from " + hw.source +
                            (hw.network_source.empty() || hw.network_source == hw.source ? "" : " and " + hw.network_source);
  os << "name = " << toml_quoted(hw.name) << "\nkind = " << toml_quoted(hw.kind) << "\nnotes = " << toml_quoted(notes)
     << "\n\n[compute]\n";
  for (auto& [k, v] : hw.peak_tflops) os << "peak_tflops_" << k << " = " << v << "\n";
  os << "compute_units = " << hw.compute_units << "\ngemm_efficiency = " << hw.gemm_efficiency
     << "\nwidth_multiple = " << hw.width_multiple << "\nkernel_overhead_us = " << hw.kernel_overhead_us
     << "\nexp_f32_per_s = " << hw.elementwise.exp_f32_per_s
     << "\nerf_f32_per_s = " << hw.elementwise.erf_f32_per_s << "\ntiles = [";
  for (size_t i = 0; i < hw.tiles.size(); ++i)
    os << (i ? ", " : "") << "[" << hw.tiles[i].m << ", " << hw.tiles[i].n << ", " << hw.tiles[i].k << ", "
       << hw.tiles[i].efficiency << "]";
  os << "]\n\n[memory]\ncapacity_GB = " << hw.memory_GB << "\nbandwidth_GBps = " << hw.memory_bandwidth_GBps
     << "\nbandwidth_efficiency = " << hw.memory_efficiency << "\ncache_MB = " << hw.cache_MB
     << "\nelementwise_GBps = " << hw.elementwise.kernels_GBps
     << "\n\n[network]\ndevices_per_node = " << hw.devices_per_node
     << "\nintra_bandwidth_GBps = " << hw.intra.bandwidth_GBps << "\nintra_latency_us = " << hw.intra.latency_us
     << "\ninter_bandwidth_GBps = " << hw.inter.bandwidth_GBps << "\ninter_latency_us = " << hw.inter.latency_us
     << "\n";
  return os.str();
}

json hardware_profile_to_json(const HardwareProfile& hw) {
  json tiles = json::array();
  for (auto& t : hw.tiles) tiles.push_back({t.m, t.n, t.k, t.efficiency});
  json j = {{"name", hw.name},
            {"kind", hw.kind},
            {"source", hw.source},
            {"peak_tflops", hw.peak_tflops},
            {"compute_units", hw.compute_units},
            {"gemm_efficiency", hw.gemm_efficiency},
            {"tiles", tiles},
            {"width_multiple", hw.width_multiple},
            {"kernel_overhead_us", hw.kernel_overhead_us},
            {"elementwise", elementwise_to_json(hw.elementwise)},
            {"memory_GB", hw.memory_GB},
            {"memory_bandwidth_GBps", hw.memory_bandwidth_GBps},
            {"memory_efficiency", hw.memory_efficiency},
            {"cache_MB", hw.cache_MB},
            {"devices_per_node", hw.devices_per_node},
            {"intra", {{"bandwidth_GBps", hw.intra.bandwidth_GBps}, {"latency_us", hw.intra.latency_us}}},
            {"inter", {{"bandwidth_GBps", hw.inter.bandwidth_GBps}, {"latency_us", hw.inter.latency_us}}},
            {"network_source", hw.network_source},
            {"measured_gemm_rows", hw.gemm_table.size()},
            {"measured_comm_rows", hw.comm_table.size()}};
  return j;
}

}  // namespace zaya::size
