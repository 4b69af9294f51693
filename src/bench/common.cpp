#include "bench/common.h"

#include <cpuid.h>
#include <sched.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "kernels/gemm.h"

namespace zaya::bench {

namespace fs = std::filesystem;

static std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

int64_t parse_size(const std::string& s0, const std::string& what) {
  std::string s = trim(s0);
  if (s.empty()) fail(what, ": empty size");
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0) fail(what, ": '", s0, "' is not a size (expected e.g. 8, 64K, 64M, 1G)");
  int64_t v = 0;
  try {
    v = std::stoll(s.substr(0, i));
  } catch (const std::exception&) {
    fail(what, ": '", s0, "' is out of range");
  }
  std::string suf = s.substr(i);
  int64_t mul = 1;
  if (suf.empty() || suf == "B" || suf == "b") mul = 1;
  else if (suf == "K" || suf == "k" || suf == "KB" || suf == "KiB") mul = int64_t(1) << 10;
  else if (suf == "M" || suf == "m" || suf == "MB" || suf == "MiB") mul = int64_t(1) << 20;
  else if (suf == "G" || suf == "g" || suf == "GB" || suf == "GiB") mul = int64_t(1) << 30;
  else fail(what, ": '", s0, "' has an unknown suffix '", suf, "' (use K, M or G)");
  if (v > (int64_t(1) << 50) / mul) fail(what, ": '", s0, "' is too large");
  return v * mul;
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<int64_t> parse_int_list(const std::string& s, const std::string& what) {
  std::vector<int64_t> out;
  for (const std::string& item : split_names(s)) {
    size_t c1 = item.find(':');
    if (c1 == std::string::npos) {
      out.push_back(parse_size(item, what));
      continue;
    }
    size_t c2 = item.find(':', c1 + 1);
    if (c2 == std::string::npos) fail(what, ": range '", item, "' needs start:stop:step or start:stop:*factor");
    int64_t a = parse_size(item.substr(0, c1), what), b = parse_size(item.substr(c1 + 1, c2 - c1 - 1), what);
    std::string st = trim(item.substr(c2 + 1));
    if (a <= 0 || b < a) fail(what, ": range '", item, "' needs 0 < start <= stop");
    if (!st.empty() && st[0] == '*') {
      int64_t f = parse_size(st.substr(1), what);
      if (f < 2) fail(what, ": range '", item, "': factor must be >= 2");
      for (int64_t v = a; v <= b; v *= f) out.push_back(v);
    } else {
      int64_t step = parse_size(st, what);
      if (step <= 0) fail(what, ": range '", item, "': step must be > 0");
      for (int64_t v = a; v <= b; v += step) out.push_back(v);
    }
  }
  if (out.empty()) fail(what, ": empty list");
  for (int64_t v : out)
    if (v <= 0) fail(what, ": values must be positive (got ", v, ")");
  return out;
}

CsvWriter::CsvWriter(const std::string& path, const std::string& header) : path_(path) {
  if (path.empty()) return;
  ensure_parent_dir(path);
  out_.open(path);
  if (!out_) fail("cannot write CSV file '", path, "'");
  out_ << header << "\n";
  ncols_ = split_names(header).size();
}

void CsvWriter::row(const std::vector<std::string>& cells) {
  if (!out_.is_open()) return;
  if (cells.size() != ncols_) fail("CSV '", path_, "': row has ", cells.size(), " cells, header has ", ncols_);
  for (size_t i = 0; i < cells.size(); ++i) out_ << (i ? "," : "") << cells[i];
  out_ << "\n";
  out_.flush();
}

std::string fmt(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

void ensure_parent_dir(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  if (p.empty()) return;
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) fail("cannot create directory '", p.string(), "': ", ec.message());
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  ensure_parent_dir(path);
  std::ofstream f(path);
  if (!f) fail("cannot write JSON file '", path, "'");
  f << j.dump(2) << "\n";
}

void merge_json_file(const std::string& path, const nlohmann::json& add) {
  nlohmann::json j = nlohmann::json::object();
  if (fs::exists(path)) {
    std::ifstream f(path);
    try {
      j = nlohmann::json::parse(f);
    } catch (const std::exception& e) {
      fail("'", path, "' is not valid JSON: ", e.what());
    }
    if (!j.is_object()) fail("'", path, "' is not a JSON object");
  }
  for (auto it = add.begin(); it != add.end(); ++it) j[it.key()] = it.value();
  write_json_file(path, j);
}

static int64_t read_sys_size(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  int64_t v = std::atoll(s.c_str());
  char u = s.back();
  if (u == 'K') v <<= 10;
  else if (u == 'M') v <<= 20;
  return v;
}

CacheSizes detect_caches() {
  CacheSizes c;
  c.l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  c.l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  c.l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 5; ++i) {  // sysfs when glibc had nothing
    std::ifstream lv(base + std::to_string(i) + "/level"), ty(base + std::to_string(i) + "/type");
    int level = 0;
    std::string type;
    if (!(lv >> level) || !(ty >> type)) continue;
    int64_t sz = read_sys_size(base + std::to_string(i) + "/size");
    if (level == 1 && type == "Data" && c.l1d <= 0) c.l1d = sz;
    if (level == 2 && c.l2 <= 0) c.l2 = sz;
    if (level == 3 && c.l3 <= 0) c.l3 = sz;
  }
  if (c.l1d < 0) c.l1d = 0;
  if (c.l2 < 0) c.l2 = 0;
  if (c.l3 < 0) c.l3 = 0;
  return c;
}

void flops_per_cycle(const std::string& vendor, int family, bool avx2, bool avx512f, bool avx512_bf16,
                     bool amx_bf16, int& fp32, int& bf16, std::string& note) {
  // Two FMA pipes per core on every x86 core considered here; the vector width they run at
  // decides the rest. fp32 FLOPs/cycle = 2 pipes x lanes x 2 (multiply + add).
  fp32 = 0;
  if (avx512f) {
    if (vendor == "AMD" && family < 0x1A) {
      fp32 = 32;
      note = "AMD Zen 4: AVX-512 on 256-bit FMA pipes, 2 x 8 lanes x 2";
    } else {
      fp32 = 64;
      note = vendor == "AMD" ? "AMD Zen 5: 2 x 512-bit FMA pipes, 2 x 16 lanes x 2"
                             : "2 x 512-bit FMA pipes, 2 x 16 lanes x 2";
    }
  } else if (avx2) {
    fp32 = 32;
    note = "AVX2: 2 x 256-bit FMA pipes, 2 x 8 lanes x 2";
  } else {
    note = "no AVX2: nominal FLOPs/cycle unknown";
  }
  if (amx_bf16) {
    bf16 = 1024;
    note += "; bf16: AMX TMUL 1024 FLOPs/cycle";
  } else if (avx512_bf16 && vendor != "AMD") {
    // Intel's VDPBF16PS issues one per two cycles: a register-only loop ran at 84 GFLOP/s per
    // thread beside fp32 FMAs' 168 on an Emerald Rapids VM without AMX (oneDNN's bf16 GEMM
    // reaches the same half; README "GEMM engines").
    bf16 = fp32 / 2;
    note += "; bf16: AVX512-BF16 dot products, one per 2 cycles (half of fp32)";
  } else if (avx512_bf16) {
    bf16 = 2 * fp32;  // VDPBF16PS on AMD's FMA pipes: two products per fp32 lane
    note += "; bf16: AVX512-BF16 dot products, 2x fp32";
  } else {
    bf16 = fp32;
    note += "; bf16: no bf16 ISA, runs as fp32";
  }
}

const CpuInfo& cpu_info() {
  static CpuInfo ci = [] {
    CpuInfo c;
    unsigned a = 0, b = 0, cc = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &cc, &d)) {
      char v[13] = {};
      std::memcpy(v, &b, 4);
      std::memcpy(v + 4, &d, 4);
      std::memcpy(v + 8, &cc, 4);
      c.vendor = v;
      if (c.vendor == "AuthenticAMD") c.vendor = "AMD";
      else if (c.vendor == "GenuineIntel") c.vendor = "Intel";
    }
    if (__get_cpuid(1, &a, &b, &cc, &d)) {
      int fam = (a >> 8) & 0xf;
      c.family = fam == 0xf ? fam + int((a >> 20) & 0xff) : fam;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    c.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : int(sysconf(_SC_NPROCESSORS_ONLN));
    std::ifstream info("/proc/cpuinfo");
    std::string line;
    double mhz = 0;
    while (std::getline(info, line)) {
      auto val = [&] { size_t p = line.find(':'); return p == std::string::npos ? std::string() : trim(line.substr(p + 1)); };
      if (c.model.empty() && line.rfind("model name", 0) == 0) c.model = val();
      if (mhz == 0 && line.rfind("cpu MHz", 0) == 0) mhz = std::atof(val().c_str());
    }
    std::ifstream mx("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
    double khz = 0;
    if (mx >> khz && khz > 0) {
      c.ghz = khz / 1e6;
      c.ghz_source = "cpufreq cpuinfo_max_freq";
    } else if (mhz > 0) {
      c.ghz = mhz / 1e3;
      c.ghz_source = "/proc/cpuinfo cpu MHz (no cpufreq: boost clock not visible)";
    }
    const CpuFeatures& f = cpu_features();
    flops_per_cycle(c.vendor, c.family, f.avx2, f.avx512f, f.avx512_bf16, f.amx_bf16, c.fp32_flops_per_cycle,
                    c.bf16_flops_per_cycle, c.flops_note);
    return c;
  }();
  return ci;
}

double CpuInfo::nominal_tflops(bool bf16) const {
  int fpc = bf16 ? bf16_flops_per_cycle : fp32_flops_per_cycle;
  return cores * ghz * fpc / 1e3;
}

bool run_plot(const std::string& kind, const std::vector<std::string>& args) {
  std::string script;
  if (const char* e = std::getenv("ZAYA_PLOT_SCRIPT"); e && *e) script = e;
  else script = std::string(ZAYA_SOURCE_DIR) + "/scripts/plot_bench.py";
  if (!fs::exists(script)) {
    log_warn("plot script '", script, "' not found (set ZAYA_PLOT_SCRIPT): no PNG written");
    return false;
  }
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
  };
  // Debian's python3-matplotlib lives where a pyenv/venv python3 on the PATH does not look.
  std::string py = "python3";
  if (const char* e = std::getenv("ZAYA_PYTHON"); e && *e) py = e;
  else if (fs::exists("/usr/bin/python3")) py = "/usr/bin/python3";
  std::string cmd = quote(py) + " " + quote(script) + " " + quote(kind);
  for (const auto& a : args) cmd += " " + quote(a);
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    log_warn("plotting failed (", cmd, "): is python3-matplotlib installed? no PNG written");
    return false;
  }
  return true;
}

}  // namespace zaya::bench
