// zaya launch: runs `zaya train` (through mpirun for np > 1), watches the per-rank heartbeats
// and restarts the job after a crash (a rank exits non-zero or by a signal), a hang (no
// heartbeat progress within the start-up, step or checkpoint timeout) or K consecutive
// anomalies (exit code 17: roll back before them and skip their data window). Each restart
// resumes from the newest checkpoint that verifies, after an exponential backoff, at most
// max_restarts times. A job that does not exit within finalize_timeout after every rank
// reported "done" is a hang too (stage "finalize"); the training is complete then, so
// the supervisor ends the job and exits with kExitFinalizeHang without a restart while the
// newest checkpoint verifies. A hang is attributed to one rank (ft/diagnose.h) and every
// rank's last stage is recorded. Stragglers (a rolling median compute time above factor x
// the ranks' lower median) are reported.
//
// Files under the run's out_dir: incidents.jsonl (one line per incident: time, kind, rank,
// step_at_failure (steps completed), step_resumed_from, steps_lost, seconds_lost = how much
// later the run reached step_at_failure again than it first did), launch-summary.json, and
// heartbeat/ (the ranks' heartbeats).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace zaya::ft {

struct LaunchOptions {
  int np = 1;
  int max_restarts = 3;
  double step_timeout = 120;        // no heartbeat progress between steps (also evals)
  double startup_timeout = 300;     // from the start until the first step
  double checkpoint_timeout = 600;  // during a checkpoint save
  double finalize_timeout = 60;     // from every rank's "done" until the job exits
  double poll_s = 0.1;
  double backoff_s = 1, backoff_max_s = 60;
  double straggler_factor = 1.5;    // on the ranks' rolling median compute times
  double term_grace_s = 5;          // SIGTERM -> SIGKILL
  std::string mpirun = "mpirun";
  // Every event line ("launch: attempt 1: ...", restarts, hangs, the summary), without its
  // newline: the library prints nothing; zaya launch prints and flushes each one.
  std::function<void(const std::string& line)> on_event;
  std::string zaya;                 // the zaya binary (default: this executable)
  std::vector<std::string> train_args;  // `zaya train` arguments (a leading "train" is dropped)
};

// Trained to the end, the newest checkpoint verifies, but the job hung in finalisation.
constexpr int kExitFinalizeHang = 3;

// Returns the exit code for `zaya launch`: 0 when the run finished, 1 when it gave up,
// kExitFinalizeHang.
int supervise(const LaunchOptions& o);

}  // namespace zaya::ft
