// Logging to stderr, with a level set once from ZAYA_LOG (error|warn|info|debug).
#pragma once
#include <string>
#include "core/error.h"

namespace zaya {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };
LogLevel log_level();
void set_log_level(LogLevel l);
void log_line(LogLevel l, const std::string& msg);

template <class... Args> void log_info(const Args&... a) { if (log_level() >= LogLevel::Info) log_line(LogLevel::Info, cat(a...)); }
template <class... Args> void log_warn(const Args&... a) { if (log_level() >= LogLevel::Warn) log_line(LogLevel::Warn, cat(a...)); }
template <class... Args> void log_debug(const Args&... a) { if (log_level() >= LogLevel::Debug) log_line(LogLevel::Debug, cat(a...)); }

// Peak resident set size of this process in bytes (VmHWM).
size_t peak_rss_bytes();
size_t current_rss_bytes();
// A /proc/meminfo figure in bytes ("MemTotal", "MemAvailable"; 0 when unknown).
size_t meminfo_bytes(const char* key);
std::string human_bytes(double b);

}  // namespace zaya
