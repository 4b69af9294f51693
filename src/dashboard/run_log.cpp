#include "dashboard/run_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace zaya::dashboard {
namespace fs = std::filesystem;

const char* run_state_name(RunState s) {
  switch (s) {
    case RunState::Missing: return "missing";
    case RunState::NoLog: return "no_log";
    case RunState::Empty: return "empty";
    case RunState::Live: return "live";
  }
  return "?";
}

RunLog::RunLog(const std::string& arg) : arg_(arg) {
  std::error_code ec;
  if (fs::is_regular_file(arg, ec)) {
    metrics_path_ = arg;
    dir_ = fs::path(arg).parent_path().string();
    if (dir_.empty()) dir_ = ".";
  } else {
    dir_ = arg;
    metrics_path_ = (fs::path(arg) / "metrics.jsonl").string();
  }
}

RunState RunLog::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void RunLog::reset_locked() {
  if (!records_.empty() || malformed_ > 0 || offset_ > 0) ++generation_;
  records_.clear();
  offset_ = 0;
  lines_ = 0;
  malformed_ = 0;
  malformed_last_.clear();
  pending_.clear();
  pending_overlong_ = false;
  last_step_ = -1;
}

void RunLog::take_line_locked(std::string_view line) {
  ++lines_;
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.empty()) return;  // a blank line carries nothing and breaks nothing
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    ++malformed_;
    malformed_last_ = cat("line ", lines_, ": ",
                          j.is_discarded() ? "not JSON" : "not a record (a JSON object with a \"type\")");
    return;
  }
  if (j.contains("step") && j["step"].is_number_integer()) last_step_ = std::max<int64_t>(last_step_, j["step"].get<int64_t>());
  records_.push_back(std::move(j));
}

void RunLog::refresh() {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    reset_locked();
    state_ = RunState::Missing;
    return;
  }
  const int fd = ::open(metrics_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    reset_locked();
    state_ = RunState::NoLog;
    return;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return;  // keep what was read; the next refresh tries again
  }
  const uint64_t size = uint64_t(st.st_size), inode = uint64_t(st.st_ino);
  if (inode != inode_ || size < offset_) reset_locked();  // replaced or rewritten shorter
  inode_ = inode;
  std::string buf;
  constexpr size_t kChunk = 1 << 16;
  while (offset_ < size) {
    buf.resize(size_t(std::min<uint64_t>(kChunk, size - offset_)));
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), off_t(offset_));
    if (n <= 0) break;
    offset_ += uint64_t(n);
    std::string_view rest(buf.data(), size_t(n));
    for (size_t nl; (nl = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(nl + 1)) {
      if (pending_overlong_) {
        ++lines_;
        ++malformed_;
        malformed_last_ = cat("line ", lines_, ": longer than ", kMaxLine, " bytes");
        pending_overlong_ = false;
        continue;
      }
      if (pending_.empty()) {
        take_line_locked(rest.substr(0, nl));
      } else {
        pending_.append(rest.substr(0, nl));
        take_line_locked(pending_);
        pending_.clear();
      }
    }
    if (!pending_overlong_) pending_.append(rest);
    if (pending_.size() > kMaxLine) {
      pending_.clear();
      pending_overlong_ = true;
    }
  }
  ::close(fd);
  state_ = records_.empty() ? RunState::Empty : RunState::Live;
}

nlohmann::json RunLog::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string message;
  switch (state_) {
    case RunState::Missing: message = cat("run directory ", dir_, " does not exist"); break;
    case RunState::NoLog: message = "waiting for first log line (no metrics.jsonl yet)"; break;
    case RunState::Empty: message = "waiting for first log line (metrics.jsonl has no record yet)"; break;
    case RunState::Live: message = cat(records_.size(), " records, last step ", last_step_); break;
  }
  return {{"path", arg_},
          {"metrics", metrics_path_},
          {"state", run_state_name(state_)},
          {"message", message},
          {"records", records_.size()},
          {"malformed", malformed_},
          {"malformed_last", malformed_last_},
          {"generation", generation_},
          {"last_step", last_step_}};
}

nlohmann::json RunLog::records_since(size_t since, uint64_t generation, size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  const bool reset = generation != generation_ || since > records_.size();
  if (reset) since = 0;
  const size_t end = std::min(records_.size(), since + max);
  nlohmann::json recs = nlohmann::json::array();
  for (size_t i = since; i < end; ++i) recs.push_back(records_[i]);
  return {{"generation", generation_}, {"reset", reset},           {"since", since},
          {"next", end},               {"total", records_.size()}, {"records", std::move(recs)}};
}

}  // namespace zaya::dashboard
