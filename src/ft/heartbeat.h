// Per-rank heartbeats for the supervisor: DIR/rank-<r>.json holds one fixed-size JSON line
// that the rank overwrites in place (one pwrite, no fsync: the supervisor reads the page
// cache) at every trainer stage. A few microseconds per step, measured in the record itself:
// hb_s is the time spent writing heartbeats, steps_s the time spent in steps.
//
// The line carries seq at both ends (seq, seq2); a reader that catches a write half done
// sees them differ and keeps the previous value.
#pragma once
#include <cstdint>
#include <string>

namespace zaya::ft {

struct Heartbeat {
  int64_t seq = 0;
  int rank = 0;
  int pid = 0;
  std::string stage;     // start, step, eval, checkpoint, checkpoint_done, done
  int64_t step = 0;      // steps completed
  double time = 0;       // unix seconds at the write
  double step_s = 0;     // wall time of the last step
  double compute_s = 0;  // the last step's forward/backward on this rank (no waiting on peers)
  double hb_s = 0;       // cumulative seconds spent writing heartbeats
  double steps_s = 0;    // cumulative step seconds
  int64_t writes = 0;
};

std::string heartbeat_path(const std::string& dir, int rank);
// false when the file is missing, empty or caught mid-write.
bool read_heartbeat(const std::string& path, Heartbeat& hb);

class HeartbeatWriter {
 public:
  HeartbeatWriter(const std::string& dir, int rank);
  ~HeartbeatWriter();
  HeartbeatWriter(const HeartbeatWriter&) = delete;
  HeartbeatWriter& operator=(const HeartbeatWriter&) = delete;
  void write(const char* stage, int64_t step, double step_s, double compute_s);
  const Heartbeat& last() const { return hb_; }

 private:
  int fd_ = -1;
  std::string path_;
  Heartbeat hb_;
};

}  // namespace zaya::ft
