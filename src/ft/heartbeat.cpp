#include "ft/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya::ft {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr size_t kRecord = 512;  // fixed length: each write replaces the whole line
}

std::string heartbeat_path(const std::string& dir, int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank-%d.json", rank);
  return (fs::path(dir) / buf).string();
}

bool read_heartbeat(const std::string& path, Heartbeat& hb) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  char buf[kRecord + 1];
  const ssize_t n = ::pread(fd, buf, kRecord, 0);
  ::close(fd);
  if (n <= 0) return false;
  json j = json::parse(std::string(buf, size_t(n)), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("seq") || j["seq"] != j.value("seq2", json())) return false;
  Heartbeat h;
  h.seq = j["seq"].get<int64_t>();
  h.rank = j.value("rank", 0);
  h.pid = j.value("pid", 0);
  h.stage = j.value("stage", "");
  h.step = j.value("step", int64_t(0));
  h.time = j.value("time", 0.0);
  h.step_s = j.value("step_s", 0.0);
  h.compute_s = j.value("compute_s", 0.0);
  h.hb_s = j.value("hb_s", 0.0);
  h.steps_s = j.value("steps_s", 0.0);
  h.writes = j.value("writes", int64_t(0));
  h.window_s = j.value("win_s", 0.0);
  h.window_n = j.value("win_n", 0);
  h.window_w = j.value("win_w", 0);
  h.window_step = j.value("win_step", int64_t(0));
  hb = h;
  return true;
}

MedianWindow::MedianWindow(int w) : w_(w) {
  ZAYA_CHECK(w >= 1, "rolling window: size ", w, " is not >= 1");
}

void MedianWindow::push(double x) {
  if (int(v_.size()) < w_) v_.push_back(x);
  else v_[next_] = x;
  next_ = (next_ + 1) % size_t(w_);
}

double MedianWindow::median() const {
  if (v_.empty()) return 0;
  std::vector<double> s = v_;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

HeartbeatWriter::HeartbeatWriter(const std::string& dir, int rank) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  path_ = heartbeat_path(dir, rank);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ZAYA_CHECK(fd_ >= 0, "heartbeat ", path_, ": cannot create (", std::strerror(errno), ")");
  hb_.rank = rank;
  hb_.pid = int(::getpid());
}

HeartbeatWriter::~HeartbeatWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void HeartbeatWriter::set_window(const MedianWindow& w, int64_t step) {
  hb_.window_s = w.median();
  hb_.window_n = w.size();
  hb_.window_w = w.capacity();
  hb_.window_step = step;
}

void HeartbeatWriter::write(const char* stage, int64_t step, double step_s, double compute_s) {
  const auto t0 = std::chrono::steady_clock::now();
  ++hb_.seq;
  ++hb_.writes;
  hb_.stage = stage;
  hb_.step = step;
  hb_.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  hb_.step_s = step_s;
  hb_.compute_s = compute_s;
  hb_.steps_s += step_s;
  char buf[kRecord + 1];
  int n = std::snprintf(buf, sizeof buf,
                        "{\"seq\":%lld,\"rank\":%d,\"pid\":%d,\"stage\":\"%s\",\"step\":%lld,\"time\":%.6f,"
                        "\"step_s\":%.6g,\"compute_s\":%.6g,\"hb_s\":%.6g,\"steps_s\":%.6g,\"writes\":%lld,"
                        "\"win_s\":%.6g,\"win_n\":%d,\"win_w\":%d,\"win_step\":%lld,\"seq2\":%lld}",
                        (long long)hb_.seq, hb_.rank, hb_.pid, stage, (long long)step, hb_.time, step_s, compute_s,
                        hb_.hb_s, hb_.steps_s, (long long)hb_.writes, hb_.window_s, hb_.window_n, hb_.window_w,
                        (long long)hb_.window_step, (long long)hb_.seq);
  if (n < 0 || size_t(n) >= kRecord) return;
  std::memset(buf + n, ' ', kRecord - 1 - size_t(n));
  buf[kRecord - 1] = '\n';
  ssize_t w = ::pwrite(fd_, buf, kRecord, 0);
  (void)w;  // a missed heartbeat is the supervisor's business, never the step's
  hb_.hb_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace zaya::ft
