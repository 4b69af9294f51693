#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace zaya {

static LogLevel g_level = [] {
  const char* e = std::getenv("ZAYA_LOG");
  if (!e) return LogLevel::Info;
  if (!std::strcmp(e, "error")) return LogLevel::Error;
  if (!std::strcmp(e, "warn")) return LogLevel::Warn;
  if (!std::strcmp(e, "debug")) return LogLevel::Debug;
  return LogLevel::Info;
}();

LogLevel log_level() { return g_level; }
void set_log_level(LogLevel l) { g_level = l; }

void log_line(LogLevel l, const std::string& msg) {
  static const char* tags[] = {"error", "warn", "info", "debug"};
  std::fprintf(stderr, "[zaya %s] %s\n", tags[int(l)], msg.c_str());
}

// The kB figure after "key:" in a /proc file (0 when absent).
static size_t proc_kb(const char* file, const char* key) {
  std::ifstream f(file);
  std::string line;
  size_t klen = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, klen, key) == 0 && line.size() > klen && line[klen] == ':')
      return std::strtoull(line.c_str() + klen + 1, nullptr, 10);
  return 0;
}

size_t peak_rss_bytes() { return proc_kb("/proc/self/status", "VmHWM") * 1024; }
size_t current_rss_bytes() { return proc_kb("/proc/self/status", "VmRSS") * 1024; }
size_t meminfo_bytes(const char* key) { return proc_kb("/proc/meminfo", key) * 1024; }

std::string human_bytes(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) { b /= 1024; ++i; }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, u[i]);
  return buf;
}

}  // namespace zaya
