// Shared pieces of the hardware benchmarks (zaya bench comm|comm-sweep|gemm|mem): size and
// list parsing, CSV/JSON output, what the machine says about itself (caches, clock, nominal
// FLOP/s), and running the plotting script.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zaya::bench {

// "64M", "8", "1K", "2G" (binary multiples, as nccl-tests reads -b/-e). Throws on junk.
int64_t parse_size(const std::string& s, const std::string& what);

// Integer list: comma-separated items, each a value ("1024"), an arithmetic range
// "start:stop:step" (inclusive) or a geometric one "start:stop:*factor". Size suffixes allowed.
std::vector<int64_t> parse_int_list(const std::string& s, const std::string& what);

// Comma-separated names, trimmed, empty items dropped.
std::vector<std::string> split_names(const std::string& s);

// CSV with a fixed header; the file is (re)created on open. Empty path: a no-op writer.
class CsvWriter {
 public:
  CsvWriter() = default;
  CsvWriter(const std::string& path, const std::string& header);
  bool active() const { return out_.is_open(); }
  void row(const std::vector<std::string>& cells);

 private:
  std::ofstream out_;
  std::string path_;
  size_t ncols_ = 0;
};

std::string fmt(double v, int prec);  // fixed-point, no locale surprises
void write_json_file(const std::string& path, const nlohmann::json& j);
// Reads `path` when it exists (an object), overwrites the keys of `add`, writes it back.
void merge_json_file(const std::string& path, const nlohmann::json& add);
// Creates the parent directory of a file path when it is missing.
void ensure_parent_dir(const std::string& path);

// What the machine says about itself.
struct CacheSizes {
  int64_t l1d = 0, l2 = 0, l3 = 0;  // bytes; 0 when unknown
  int64_t last_level() const { return l3 ? l3 : l2 ? l2 : l1d; }
};
CacheSizes detect_caches();

struct CpuInfo {
  std::string model;
  std::string vendor;   // "AMD", "Intel" or what CPUID says
  int family = 0;       // CPUID display family
  int cores = 0;        // online logical CPUs usable by this process
  double ghz = 0;       // nominal clock: cpufreq max if exposed, else /proc/cpuinfo "cpu MHz"
  std::string ghz_source;
  // FLOPs per cycle per core, from the ISA and the microarchitecture (0 when unknown).
  int fp32_flops_per_cycle = 0, bf16_flops_per_cycle = 0;
  std::string flops_note;  // how the per-cycle figures were chosen
  double nominal_tflops(bool bf16) const;  // cores x GHz x FLOPs/cycle / 1e3, 0 when unknown
};
const CpuInfo& cpu_info();
// FLOPs/cycle/core for a vendor/family/ISA (exposed for tests).
void flops_per_cycle(const std::string& vendor, int family, bool avx2, bool avx512f, bool avx512_bf16,
                     bool amx_bf16, int& fp32, int& bf16, std::string& note);

// Runs scripts/plot_bench.py KIND ARGS... (path from ZAYA_PLOT_SCRIPT, else the source tree)
// with $ZAYA_PYTHON, else /usr/bin/python3 (Debian's, where python3-matplotlib is), else python3. Returns false (with a warning) when python3/matplotlib or the script is missing.
bool run_plot(const std::string& kind, const std::vector<std::string>& args);

}  // namespace zaya::bench
