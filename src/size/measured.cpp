#include "size/measured.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya::size {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open file");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\r') {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream is(line);
  std::vector<std::string> out;
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end && *end == 0;
}

// A CSV with an exact header; rows as string vectors. `file` names the file in errors.
std::vector<std::vector<std::string>> read_csv(const std::string& file, const std::string& header) {
  std::istringstream is(read_text(file));
  std::string line;
  if (!std::getline(is, line)) fail(file, ": empty file, expected header '", header, "'");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != header) fail(file, ": header is '", line, "', expected '", header, "'");
  size_t ncol = split(header, ',').size();
  std::vector<std::vector<std::string>> rows;
  int lineno = 1;
  while (std::getline(is, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    auto f = split(line, ',');
    if (f.size() != ncol) fail(file, ":", lineno, ": ", f.size(), " fields, expected ", ncol);
    rows.push_back(std::move(f));
  }
  return rows;
}

double field_number(const std::string& s, const std::string& file, const char* col) {
  double v = 0;
  if (!parse_number(s, v)) fail(file, ": column '", col, "' has non-numeric value '", s, "'");
  return v;
}

// Rank and thread counts: whole numbers in [0, kMaxCount], checked before any cast to int
// (a cast out of range is undefined, and later products such as 2 (n - 1) must not overflow).
constexpr double kMaxCount = 1 << 24;
int count_value(const std::string& s, const std::string& file, const char* what) {
  double v = 0;
  if (!parse_number(s, v) || v < 0 || v > kMaxCount || v != std::floor(v))
    fail(file, ": ", what, " '", s, "' is not a whole number in [0, ", int(kMaxCount), "]");
  return int(v);
}

}  // namespace

std::string normalise_collective_name(const std::string& name) {
  std::string s;
  for (char ch : name) s += char(std::tolower(static_cast<unsigned char>(ch)));
  if (s.size() > 5 && s.ends_with("_perf")) s.resize(s.size() - 5);
  std::string bare;
  for (char ch : s)
    if (ch != '_' && ch != '-') bare += ch;
  static const std::map<std::string, std::string> names = {
      {"allreduce", "all_reduce"}, {"reducescatter", "reduce_scatter"}, {"allgather", "all_gather"},
      {"alltoall", "all_to_all"},  {"broadcast", "broadcast"},          {"reduce", "reduce"},
      {"sendrecv", "sendrecv"},    {"gather", "gather"},                {"scatter", "scatter"}};
  auto it = names.find(bare);
  return it == names.end() ? s : it->second;
}

int collective_steps(const std::string& op, int n) {
  if (n <= 1) return 0;
  if (op == "all_reduce") return 2 * (n - 1);
  if (op == "reduce_scatter" || op == "all_gather" || op == "all_to_all") return n - 1;
  return 1;
}

double collective_bus_factor(const std::string& op, int n) {
  if (n <= 1) return 0;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "reduce_scatter" || op == "all_gather" || op == "all_to_all") return double(n - 1) / n;
  return 1.0;
}

NcclTestsRun parse_nccl_tests_output(const std::string& text, const std::string& path) {
  NcclTestsRun run;
  std::istringstream is(text);
  std::string line, op_hint, redop;
  std::set<std::string> hosts;
  int rank_lines = 0, ngpus = 0, nthreads = 1;
  int root = -1;
  std::vector<std::pair<double, double>> ratios;  // busbw / algbw per row
  static const char* kOps[] = {"all_reduce", "allreduce", "reduce_scatter", "reducescatter", "all_gather",
                               "allgather",  "alltoall",  "broadcast",      "sendrecv",      "reduce_perf"};
  for (std::string fname = fs::path(path).filename().string(); const char* k : kOps)
    if (op_hint.empty() && fname.find(k) != std::string::npos) op_hint = normalise_collective_name(k);
  while (std::getline(is, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto w = words(line);
    if (w.empty()) continue;
    if (w[0][0] == '#') {
      std::string low;
      for (char ch : line) low += char(std::tolower(static_cast<unsigned char>(ch)));
      for (const char* k : kOps)
        if (op_hint.empty() && low.find(k) != std::string::npos) op_hint = normalise_collective_name(k);
      for (size_t i = 0; i + 1 < w.size(); ++i) {
        if (w[i] == "nGpus") ngpus = count_value(w[i + 1], path, "nGpus");
        if (w[i] == "nThread") nthreads = count_value(w[i + 1], path, "nThread");
      }
      if (w.size() >= 3 && (w[0] == "#" && w[1] == "Rank")) {
        ++rank_lines;
        for (size_t i = 0; i + 1 < w.size(); ++i)
          if (w[i] == "on") hosts.insert(w[i + 1]);
      }
      auto pos = low.find("avg bus bandwidth");
      auto colon = pos == std::string::npos ? pos : line.find(':', pos);
      if (colon != std::string::npos) {
        auto after = words(line.substr(colon + 1));
        double v = 0;
        if (!after.empty() && parse_number(after[0], v)) run.avg_busbw_GBps = v;
      }
      continue;
    }
    // Data row: size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong
    if (w.size() != 13 && w.size() != 12) continue;
    double size = 0, count = 0;
    if (!parse_number(w[0], size) || !parse_number(w[1], count)) continue;
    size_t t = w.size() == 13 ? 5 : 4;
    if (double rv = 0; w.size() == 13) root = parse_number(w[4], rv) && rv >= 0 ? 0 : -1;  // only "has a root" matters
    redop = w[3];
    MeasuredCollective r;
    double algbw = 0;
    if (!parse_number(w[t], r.time_us) || !parse_number(w[t + 1], algbw) || !parse_number(w[t + 2], r.busbw_GBps))
      fail(path, ": data row '", line, "' has non-numeric time/algbw/busbw");
    r.size_bytes = size;
    if (algbw > 0) ratios.push_back({algbw, r.busbw_GBps});
    run.rows.push_back(r);
  }
  if (run.rows.empty()) fail(path, ": no nccl-tests data rows (size count type redop root time algbw busbw #wrong ...)");
  const int64_t ranks = rank_lines > 0 ? int64_t(rank_lines) : int64_t(ngpus) * nthreads;
  if (ranks > int64_t(kMaxCount)) fail(path, ": ", ranks, " ranks (nGpus x nThread) is more than ", int(kMaxCount));
  run.nranks = int(ranks);
  run.hosts = int(hosts.size());
  if (run.nranks <= 0) fail(path, ": cannot tell the number of ranks (no '#  Rank' lines and no nGpus)");
  run.op = op_hint;
  if (run.op.empty()) {
    // Infer from busbw / algbw (nccl-tests PERFORMANCE.md factors) and the redop / root columns.
    // The row with the largest algbw has the most digits in the printed figures.
    double ratio = 0, best_alg = 0;
    for (auto& [a, b] : ratios)
      if (a > best_alg) {
        best_alg = a;
        ratio = b / a;
      }
    int n = run.nranks;
    if (n > 1 && std::fabs(ratio - 2.0 * (n - 1) / n) < 0.02) run.op = "all_reduce";
    else if (n > 1 && std::fabs(ratio - double(n - 1) / n) < 0.02) run.op = redop == "none" ? "all_gather" : "reduce_scatter";
    else run.op = root >= 0 ? (redop == "none" ? "broadcast" : "reduce") : "sendrecv";
  }
  for (auto& r : run.rows) {
    r.op = run.op;
    r.nranks = run.nranks;
    r.inter_node = run.hosts > 1;
  }
  return run;
}

std::vector<MeasuredCollective> parse_comm_csv(const std::string& path) {
  static const std::string kHeader =
      "op,nranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,"
      "ip_busbw,ip_wrong";
  std::vector<MeasuredCollective> out;
  for (auto& f : read_csv(path, kHeader)) {
    MeasuredCollective r;
    r.op = normalise_collective_name(f[0]);
    r.nranks = count_value(f[1], path, "column 'nranks'");
    r.size_bytes = field_number(f[2], path, "size_bytes");
    r.time_us = field_number(f[7], path, "oop_time_us");
    r.busbw_GBps = field_number(f[9], path, "oop_busbw");
    if (r.nranks > 1 && r.time_us > 0) out.push_back(r);
  }
  return out;
}

void apply_network_measurements(HardwareProfile& hw, const std::vector<MeasuredCollective>& rows,
                                const std::string& source) {
  bool any = false;
  for (int inter = 0; inter < 2; ++inter) {
    double bw = 0, lat = 1e30;
    for (auto& r : rows) {
      if (r.inter_node != bool(inter) || r.nranks < 2) continue;
      if (r.op != "all_reduce" && r.op != "reduce_scatter" && r.op != "all_gather" && r.op != "all_to_all") continue;
      bw = std::max(bw, r.busbw_GBps);
      lat = std::min(lat, r.time_us / collective_steps(r.op, r.nranks));
    }
    if (bw <= 0) continue;
    any = true;
    LinkProfile& link = inter ? hw.inter : hw.intra;
    link.bandwidth_GBps = bw;
    link.latency_us = lat;
  }
  if (!any) fail(source, ": no all_reduce / reduce_scatter / all_gather / all_to_all rows with 2 or more ranks");
  hw.comm_table.insert(hw.comm_table.end(), rows.begin(), rows.end());
  hw.network_source = hw.network_source.empty() || hw.network_source == hw.source
                          ? source
                          : hw.network_source + ", " + source;
}

void apply_nccl_tests_file(HardwareProfile& hw, const std::string& path) {
  NcclTestsRun run = parse_nccl_tests_output(read_text(path), path);
  if (run.hosts > 1) hw.devices_per_node = std::max(1, run.nranks / run.hosts);
  apply_network_measurements(hw, run.rows, path);
}

HardwareProfile profile_from_bench_dir(const std::string& dir) {
  if (!fs::is_directory(dir)) fail(dir, ": not a directory of bench outputs");
  HardwareProfile hw;
  hw.source = dir;
  hw.kind = "cpu";
  hw.name = "measured (" + fs::path(dir).lexically_normal().string() + ")";
  for (const char* dt : {"fp32", "bf16"}) {
    const std::string kcsv = (fs::path(dir) / (std::string("kernels-") + dt + ".csv")).string();
    if (!fs::exists(kcsv)) continue;
    for (auto& f : read_csv(kcsv, "kind,dtype,engine,dims,time_us,spread,rounds,remeasures,flagged")) {
      MeasuredKernel k{f[0], f[1], f[2], {}, field_number(f[4], kcsv, "time_us")};
      if (k.dtype != dt) fail(kcsv, ": dtype '", k.dtype, "' in the ", dt, " table");
      for (size_t a = 0, b; a <= f[3].size(); a = b + 1) {
        b = f[3].find('x', a);
        if (b == std::string::npos) b = f[3].size();
        k.dims.push_back(field_number(f[3].substr(a, b - a), kcsv, "dims"));
      }
      if (!(k.time_us > 0)) fail(kcsv, ": time_us must be positive, got ", f[4]);
      hw.kernel_table.push_back(k);
      // The GEMM rows also feed the interpolated table (shapes the model asks for and the
      // kernel table lacks).
      if (k.kind.rfind("gemm_", 0) == 0 && k.dims.size() == 3) {
        const double fl = 2 * k.dims[0] * k.dims[1] * k.dims[2];
        hw.gemm_table.push_back({k.dtype, k.engine, k.dims[0], k.dims[1], k.dims[2], k.time_us, fl / k.time_us * 1e-6});
      }
    }
  }
  const std::string gemm_csv = (fs::path(dir) / "gemm.csv").string();
  if (!fs::exists(gemm_csv) && hw.kernel_table.empty())
    fail(gemm_csv, ": missing (run `zaya bench gemm` or `zaya bench kernels` to write it)");
  const std::vector<std::vector<std::string>> gemm_rows =
      fs::exists(gemm_csv) ? read_csv(gemm_csv, "dtype,engine,M,N,K,time_us,tflops,efficiency")
                           : std::vector<std::vector<std::string>>{};
  for (auto& f : gemm_rows) {
    MeasuredGemm g;
    g.dtype = f[0];
    g.engine = f[1];
    g.M = field_number(f[2], gemm_csv, "M");
    g.N = field_number(f[3], gemm_csv, "N");
    g.K = field_number(f[4], gemm_csv, "K");
    g.time_us = field_number(f[5], gemm_csv, "time_us");
    g.tflops = field_number(f[6], gemm_csv, "tflops");
    if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.tflops <= 0) continue;
    dtype_bytes(g.dtype);
    hw.gemm_table.push_back(g);
  }
  if (hw.gemm_table.empty()) fail(gemm_csv, ": no rows with positive M, N, K and tflops");
  double triad_MBps = 0;
  const std::string peak_json = (fs::path(dir) / "peak.json").string();
  if (fs::exists(peak_json)) {
    json j;
    try {
      j = json::parse(read_text(peak_json));
    } catch (const json::parse_error& e) {
      fail(peak_json, ": invalid JSON: ", e.what());
    }
    for (auto [key, dt] : {std::pair{"fp32_tflops", "fp32"}, {"bf16_tflops", "bf16"}})
      if (j.contains(key)) {
        if (!j[key].is_number()) fail(peak_json, ": field '", key, "' must be a number");
        if (j[key].get<double>() > 0) hw.peak_tflops[dt] = j[key].get<double>();
      }
    if (j.contains("triad_MBps")) {
      if (!j["triad_MBps"].is_number()) fail(peak_json, ": field 'triad_MBps' must be a number");
      triad_MBps = j["triad_MBps"].get<double>();
    }
  }
  // Peaks missing from peak.json: the best measured GEMM rate of that dtype.
  std::map<std::string, double> best_rate;
  for (auto& g : hw.gemm_table) best_rate[g.dtype] = std::max(best_rate[g.dtype], g.tflops);
  for (auto& [dt, tf] : best_rate)
    if (hw.peak_tflops[dt] <= 0) hw.peak_tflops[dt] = tf;
  const std::string mem_csv = (fs::path(dir) / "mem.csv").string();
  int threads = 0;
  if (fs::exists(mem_csv)) {
    // The triad row with the largest arrays (a --sweep also writes cache-resident sizes).
    double best = 0, largest = 0;
    for (auto& f : read_csv(mem_csv, "kernel,threads,array_bytes,best_MBps,avg_MBps,min_MBps")) {
      int t = count_value(f[1], mem_csv, "column 'threads'");
      threads = std::max(threads, t);
      if (f[0] != "triad") continue;
      double bytes = field_number(f[2], mem_csv, "array_bytes"), bw = field_number(f[3], mem_csv, "best_MBps");
      if (bytes > largest) {
        largest = bytes;
        best = bw;
      } else if (bytes == largest) {
        best = std::max(best, bw);
      }
    }
    if (triad_MBps <= 0) triad_MBps = best;
  }
  if (triad_MBps <= 0) fail(dir, ": no memory bandwidth (peak.json 'triad_MBps' or triad rows in mem.csv)");
  hw.memory_bandwidth_GBps = triad_MBps / 1e3;
  hw.memory_efficiency = 1.0;
  hw.compute_units = threads > 0 ? threads : 1;
  double best_eff = 0;
  for (auto& g : hw.gemm_table) best_eff = std::max(best_eff, g.tflops / hw.peak_tflops[g.dtype]);
  hw.gemm_efficiency = std::min(1.0, best_eff);
  hw.tiles = {{64, 64, 64, 1.0}};
  hw.width_multiple = 64;
  // A CPU kernel's launch cost is an OpenMP parallel region: measured by `zaya size
  // --measure-elementwise` (elementwise.json), else assumed 2 us.
  hw.kernel_overhead_us = 2.0;
  const std::string elementwise_json = (fs::path(dir) / "elementwise.json").string();
  if (fs::exists(elementwise_json)) hw.elementwise = read_elementwise_json(elementwise_json);
  if (hw.elementwise.parallel_region_us > 0) hw.kernel_overhead_us = hw.elementwise.parallel_region_us;
  // Network: comm.csv and nccl-tests text files; without them, shared memory at half the
  // triad bandwidth (an assumption, said in network_source).
  hw.devices_per_node = 1 << 20;
  hw.intra = {hw.memory_bandwidth_GBps / 2, 5.0};
  hw.inter = hw.intra;
  hw.network_source = "assumed (no comm.csv or nccl-tests output in " + dir + ")";
  const std::string comm_csv = (fs::path(dir) / "comm.csv").string();
  std::string measured_net;
  if (fs::exists(comm_csv)) {
    auto rows = parse_comm_csv(comm_csv);
    if (!rows.empty()) {
      hw.network_source = hw.source;
      apply_network_measurements(hw, rows, comm_csv);
    }
  }
  std::vector<fs::path> texts;
  for (auto& e : fs::directory_iterator(dir)) {
    auto ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".txt" || ext == ".log" || ext == ".out")) texts.push_back(e.path());
  }
  std::sort(texts.begin(), texts.end());
  for (auto& p : texts) {
    std::string text = read_text(p.string());
    if (text.find("bus bandwidth") == std::string::npos && text.find("busbw") == std::string::npos) continue;
    if (hw.comm_table.empty()) hw.network_source = hw.source;
    apply_nccl_tests_file(hw, p.string());
  }
  if (hw.inter.bandwidth_GBps <= 0) hw.inter = hw.intra;
  hw.validate();
  return hw;
}

}  // namespace zaya::size
