// Per-rank heartbeats for the supervisor: DIR/rank-<r>.json holds one fixed-size JSON line
// that the rank overwrites in place (one pwrite, no fsync: the supervisor reads the page
// cache) at every trainer stage. A few microseconds per step, measured in the record itself:
// hb_s is the time spent writing heartbeats, steps_s the time spent in steps.
//
// The line carries seq at both ends (seq, seq2); a reader that catches a write half done
// sees them differ and keeps the previous value.
//
// Every record also carries the rank's rolling compute time (the median over its last W
// steps, and the step the window ends at): the supervisor judges stragglers on that window,
// which every later record (down to the last one, "done") still holds, so a poll that misses
// a step misses nothing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
  double window_s = 0;      // median compute time over the last window_n steps
  int window_n = 0;         // steps in the window so far
  int window_w = 0;         // the window's size (0: none reported)
  int64_t window_step = 0;  // the step the window ends at
  bool window_full() const { return window_w > 0 && window_n >= window_w; }
};

// The last W values and their median (the mean of the two middle ones for an even count).
class MedianWindow {
 public:
  explicit MedianWindow(int w);
  void push(double x);
  double median() const;
  int size() const { return int(v_.size()); }
  int capacity() const { return w_; }

 private:
  int w_;
  size_t next_ = 0;
  std::vector<double> v_;
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
  // Carried by every later write.
  void set_window(const MedianWindow& w, int64_t step);
  const Heartbeat& last() const { return hb_; }

 private:
  int fd_ = -1;
  std::string path_;
  Heartbeat hb_;
};

}  // namespace zaya::ft
