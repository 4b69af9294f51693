// One run's metrics.jsonl, read as it grows: each refresh() reads only the bytes appended
// since the last one, keeps the complete lines that parse as records, and counts the rest.
// The trainer rewrites the file when a run resumes (records past the checkpoint dropped):
// a file that shrank or was replaced is read again from the start under a new generation,
// so a client holding the old records knows to drop them.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya::dashboard {

enum class RunState {
  Missing,  // the run directory does not exist
  NoLog,    // the directory exists, metrics.jsonl does not (yet)
  Empty,    // metrics.jsonl exists and holds no record yet
  Live,     // at least one record
};
const char* run_state_name(RunState s);

class RunLog {
 public:
  // `arg`: a run directory (its out_dir, holding metrics.jsonl) or a metrics.jsonl file.
  explicit RunLog(const std::string& arg);

  // Reads what was appended since the last call. Never throws for the file's content:
  // a line that is not a JSON object with a "type" is skipped and counted.
  void refresh();

  const std::string& arg() const { return arg_; }
  const std::string& dir() const { return dir_; }
  const std::string& metrics_path() const { return metrics_path_; }
  RunState state() const;

  // {path, metrics, state, message, records, malformed, malformed_last, generation, last_step}
  nlohmann::json summary() const;
  // The records from index `since` on (at most `max`), as
  // {generation, reset, since, next, total, records}. A `generation` other than the
  // current one (a client that read an older file) starts again from 0 with reset = true.
  nlohmann::json records_since(size_t since, uint64_t generation, size_t max) const;

  // Longest line kept; a longer one is counted as malformed (a log line is < 4 KB).
  static constexpr size_t kMaxLine = 1 << 20;

 private:
  void reset_locked();
  void take_line_locked(std::string_view line);

  std::string arg_, dir_, metrics_path_;
  mutable std::mutex mu_;
  RunState state_ = RunState::Missing;
  std::vector<nlohmann::json> records_;
  uint64_t offset_ = 0;       // bytes of the file consumed (complete lines and `pending_`)
  uint64_t inode_ = 0;        // the file read, to notice a replaced file
  uint64_t generation_ = 1;
  uint64_t lines_ = 0;        // complete lines seen
  uint64_t malformed_ = 0;
  std::string malformed_last_;
  std::string pending_;       // a last line without its newline yet
  bool pending_overlong_ = false;
  int64_t last_step_ = -1;
};

}  // namespace zaya::dashboard
