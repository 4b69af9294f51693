#include "ft/inject.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"

namespace zaya::ft {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::pair<const char*, FaultKind> kKinds[] = {
    {"kill", FaultKind::Kill},   {"hang", FaultKind::Hang},           {"nan", FaultKind::Nan},
    {"spike", FaultKind::Spike}, {"corrupt-ckpt", FaultKind::CorruptCkpt}, {"enospc", FaultKind::Enospc},
    {"slow", FaultKind::Slow},   {"stop", FaultKind::Stop}};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

int64_t parse_int(const std::string& spec, const std::string& key, const std::string& v, int64_t lo) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZAYA_CHECK(used == v.size() && !v.empty() && x >= lo, "--inject ", spec, ": ", key, "=", v,
             " is not an integer >= ", lo);
  return x;
}

double parse_double(const std::string& spec, const std::string& key, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZAYA_CHECK(used == v.size() && !v.empty() && std::isfinite(x) && x > 0, "--inject ", spec, ": ", key, "=", v,
             " is not a positive number");
  return x;
}

}  // namespace

const char* fault_kind_name(FaultKind k) {
  for (auto& [n, kk] : kKinds)
    if (kk == k) return n;
  return "?";
}

std::string FaultSpec::text() const {
  std::string s = fault_kind_name(kind);
  std::vector<std::string> kv;
  if (kind != FaultKind::CorruptCkpt) kv.push_back(cat("rank=", rank));
  if (step >= 0) kv.push_back(cat("step=", step));
  if (kind == FaultKind::Slow || kind == FaultKind::Spike) kv.push_back(cat("factor=", factor));
  if (at_checkpoint) kv.push_back("at=checkpoint");
  if (kind == FaultKind::Enospc || (kind == FaultKind::Kill && nth > 0)) kv.push_back(cat("nth=", nth));
  for (size_t i = 0; i < kv.size(); ++i) s += (i ? "," : ":") + kv[i];
  return s;
}

FaultSpec parse_fault(const std::string& spec_in) {
  const std::string spec = trim(spec_in);
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  FaultSpec f;
  bool known = false;
  for (auto& [n, k] : kKinds)
    if (kind == n) f.kind = k, known = true;
  ZAYA_CHECK(known, "--inject ", spec, ": unknown fault \"", kind,
             "\" (kill | hang | nan | spike | corrupt-ckpt | enospc | slow | stop)");
  if (f.kind == FaultKind::Spike) f.factor = 1000;
  std::set<std::string> seen;
  bool kill_nth = false;
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = trim(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    ZAYA_CHECK(eq != std::string::npos, "--inject ", spec, ": \"", item, "\" is not key=value");
    const std::string key = item.substr(0, eq), v = item.substr(eq + 1);
    ZAYA_CHECK(seen.insert(key).second, "--inject ", spec, ": ", key, " given twice");
    const bool ranked = f.kind != FaultKind::CorruptCkpt;
    if (key == "rank" && ranked) f.rank = int(parse_int(spec, key, v, 0));
    else if (key == "step") f.step = parse_int(spec, key, v, 1);
    else if (key == "factor" && (f.kind == FaultKind::Slow || f.kind == FaultKind::Spike))
      f.factor = parse_double(spec, key, v);
    else if (key == "at" && (f.kind == FaultKind::Hang || f.kind == FaultKind::Stop || f.kind == FaultKind::Kill)) {
      ZAYA_CHECK(v == "step" || v == "checkpoint", "--inject ", spec, ": at=", v, " must be step or checkpoint");
      f.at_checkpoint = v == "checkpoint";
    } else if (key == "nth" && f.kind == FaultKind::Enospc) f.nth = int(parse_int(spec, key, v, 1));
    else if (key == "nth" && f.kind == FaultKind::Kill) f.nth = int(parse_int(spec, key, v, 1)), kill_nth = true;
    else fail("--inject ", spec, ": unknown key \"", key, "\" for ", kind);
  }
  const bool needs_step = f.kind != FaultKind::CorruptCkpt && f.kind != FaultKind::Slow;
  ZAYA_CHECK(!needs_step || f.step >= 1, "--inject ", spec, ": step=S is required for ", kind);
  if (f.kind == FaultKind::Kill && !kill_nth) f.nth = 0;
  ZAYA_CHECK(!kill_nth || f.at_checkpoint, "--inject ", spec, ": nth=K needs at=checkpoint");
  ZAYA_CHECK(f.kind != FaultKind::Slow || f.factor > 1, "--inject ", spec, ": factor=F > 1 is required for slow");
  return f;
}

std::vector<FaultSpec> parse_faults(const std::string& list) {
  std::vector<FaultSpec> out;
  std::string cur;
  for (char c : list + ";") {
    if (c == ';' || c == ' ' || c == '\n' || c == '\t') {
      if (!trim(cur).empty()) out.push_back(parse_fault(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

std::string corrupt_checkpoint(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  ZAYA_CHECK(!files.empty(), "corrupt-ckpt: ", dir, " has no .safetensors file");
  std::sort(files.begin(), files.end());
  std::string target = files[0];
  for (const std::string& f : files)
    if (fs::path(f).filename().string().rfind("params", 0) == 0) {
      target = f;
      break;
    }
  // The data section runs to the end of the file: its last byte belongs to the last tensor.
  const auto size = fs::file_size(target);
  ZAYA_CHECK(size > 16, "corrupt-ckpt: ", target, " is too small to corrupt");
  int fd = ::open(target.c_str(), O_RDWR);
  ZAYA_CHECK(fd >= 0, "corrupt-ckpt: cannot open ", target, " (", std::strerror(errno), ")");
  unsigned char b = 0;
  const off_t at = off_t(size - 1);
  bool ok = ::pread(fd, &b, 1, at) == 1;
  b ^= 0x5a;
  ok = ok && ::pwrite(fd, &b, 1, at) == 1 && ::fsync(fd) == 0;
  ::close(fd);
  ZAYA_CHECK(ok, "corrupt-ckpt: cannot rewrite ", target);
  return target;
}

// ---------------------------------------------------------------------------------------

FaultInjector::FaultInjector(std::vector<FaultSpec> specs, int rank, std::string record, bool resume)
    : specs_(std::move(specs)), rank_(rank), record_(std::move(record)) {
  if (specs_.empty()) return;
  if (resume) {
    std::ifstream in(record_);
    std::string line;
    while (std::getline(in, line)) {
      json j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.contains("fault")) fired_.insert(j["fault"].get<std::string>());
    }
  } else if (rank_ == 0) {
    std::error_code ec;
    fs::remove(record_, ec);
  }
}

FaultInjector::~FaultInjector() { disarm_write_hook(); }

void FaultInjector::disarm_write_hook() {
  if (write_hook_armed_) write_fault_hook() = nullptr;
  write_hook_armed_ = false;
}

// The hook sees each file a save creates, in order: the tensor files, the manifest, `latest`.
void FaultInjector::arm_write_hook(const FaultSpec& f, int64_t step) {
  armed_ = f;
  save_writes_ = 0;
  write_hook_armed_ = true;
  write_fault_hook() = [this, step](const std::string& path) {
    if (++save_writes_ != armed_.nth) return;
    fire(armed_, step);
    if (armed_.kind == FaultKind::Kill) {
      std::fprintf(stderr, "inject: killed before writing %s\n", path.c_str());
      ::raise(SIGKILL);
    }
    fail(path, ": write failed (", std::strerror(ENOSPC), ") [injected]");
  };
}

double FaultInjector::slow_factor(int64_t step) const {
  double f = 1;
  for (const FaultSpec& s : specs_)
    if (s.kind == FaultKind::Slow && s.rank == rank_ && step >= std::max<int64_t>(s.step, 1)) f *= s.factor;
  return f;
}

bool FaultInjector::due(const FaultSpec& f, int64_t step) const {
  return f.rank == rank_ && f.step == step && !fired_.count(f.text());
}

void FaultInjector::fire(const FaultSpec& f, int64_t step) {
  fired_.insert(f.text());
  std::fprintf(stderr, "inject: rank %d step %lld: %s\n", rank_, (long long)step, f.text().c_str());
  std::fflush(stderr);
  const std::string line =
      json{{"fault", f.text()}, {"rank", rank_}, {"step", step}, {"time", double(std::time(nullptr))}}.dump() + "\n";
  // O_APPEND: each rank's record lands whole; the page cache outlives a SIGKILL of this process.
  int fd = ::open(record_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ssize_t w = ::write(fd, line.data(), line.size());
    (void)w;
    ::close(fd);
  }
}

void FaultInjector::before_step(int64_t step, double last_compute_s, bool counted_clock) {
  const double slow = slow_factor(step);
  if (slow > 1 && last_compute_s > 0 && !counted_clock)
    std::this_thread::sleep_for(std::chrono::duration<double>((slow - 1) * last_compute_s));
  for (const FaultSpec& f : specs_) {
    if (!due(f, step) || f.at_checkpoint) continue;
    if (f.kind == FaultKind::Kill) {
      fire(f, step);
      ::raise(SIGKILL);
    }
    if (f.kind == FaultKind::Hang) {
      fire(f, step);
      for (;;) ::pause();
    }
    if (f.kind == FaultKind::Stop) {
      fire(f, step);
      ::raise(SIGSTOP);
    }
  }
}

void FaultInjector::after_backward(int64_t step, float* grads, size_t n) {
  for (const FaultSpec& f : specs_) {
    if (!due(f, step) || n == 0) continue;
    if (f.kind == FaultKind::Nan) {
      fire(f, step);
      // The whole buffer: under ZeRO-1 each rank's norm covers only its own shard.
      std::fill(grads, grads + n, std::numeric_limits<float>::quiet_NaN());
    } else if (f.kind == FaultKind::Spike) {
      fire(f, step);
      for (size_t i = 0; i < n; ++i) grads[i] *= float(f.factor);
    }
  }
}

void FaultInjector::on_stage(const char* stage, int64_t step) {
  const std::string s = stage;
  if (s == "checkpoint") {
    disarm_write_hook();  // a failed save ends without checkpoint_done
    for (const FaultSpec& f : specs_) {
      if (!due(f, step)) continue;
      if (f.kind == FaultKind::Kill && f.at_checkpoint && f.nth == 0) {
        fire(f, step);
        ::raise(SIGKILL);
      }
      if (f.kind == FaultKind::Kill && f.at_checkpoint && !write_hook_armed_) arm_write_hook(f, step);
      if (f.kind == FaultKind::Hang && f.at_checkpoint) {
        fire(f, step);
        for (;;) ::pause();
      }
      if (f.kind == FaultKind::Stop && f.at_checkpoint) {
        fire(f, step);
        ::raise(SIGSTOP);
      }
      if (f.kind == FaultKind::Enospc && !write_hook_armed_) arm_write_hook(f, step);
    }
  } else if (s == "checkpoint_done" || s == "done") {
    disarm_write_hook();
  }
}

void FaultInjector::after_checkpoint(int64_t step, const std::string& dir) {
  disarm_write_hook();
  if (rank_ != 0) return;
  for (const FaultSpec& f : specs_) {
    if (f.kind != FaultKind::CorruptCkpt || fired_.count(f.text()) || (f.step >= 0 && f.step != step)) continue;
    fire(f, step);
    std::fprintf(stderr, "inject: corrupted %s\n", corrupt_checkpoint(dir).c_str());
  }
}

}  // namespace zaya::ft
