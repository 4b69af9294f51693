// What `zaya train` gets from ft: its flags (--inject, --skip-steps, --anomaly-*,
// --heartbeat-dir) and install(), which hangs heartbeats, anomaly handling and fault
// injection on the trainer's hooks. Files it writes under the run's out_dir:
//   heartbeat/rank-<r>.json   (when --heartbeat-dir or ZAYA_HEARTBEAT_DIR names a directory)
//   anomalies.jsonl           one line per skipped step (rank 0)
//   anomaly-abort.json        {first, last}: the window of K consecutive anomalies that aborted
//   faults-injected.jsonl     the faults fired so far (see inject.h)
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ft/anomaly.h"
#include "train/trainer.h"

namespace zaya::ft {

constexpr const char* kAnomaliesFile = "anomalies.jsonl";
constexpr const char* kAbortFile = "anomaly-abort.json";
constexpr const char* kFaultsFile = "faults-injected.jsonl";

struct FtTrainOptions {
  std::vector<std::string> inject;      // fault specs (plus ZAYA_INJECT)
  std::vector<std::string> skip_steps;  // "A:B" or "S" windows
  double anomaly_z = 0;                 // both spike thresholds at once
  double loss_z = -1, grad_norm_z = -1; // per-signal thresholds (-1: anomaly_z)
  int window = 20, max_consecutive = 5;
  std::string heartbeat_dir;
  int straggler_window = 8;  // steps in the rolling compute time each heartbeat reports
  // "wall": a step's compute time is measured; "counted": it is the step's tokens x 1 us (times
  // an injected slow factor), so that a test's straggler verdict follows from what it injected.
  std::string compute_clock = "wall";
};

void add_train_flags(CLI::App& app, FtTrainOptions& o);

// "A:B" / "S" (1-based, inclusive); errors name the value.
std::pair<int64_t, int64_t> parse_skip_window(const std::string& s);

// This process's rank as the launcher set it (Open MPI, PMIx, PMI), 0 without one.
int launcher_rank();

// Adds skip windows to `opt` and the ft hooks to `hooks` (chaining any already there).
void install(const FtTrainOptions& o, TrainerOptions& opt, TrainerHooks& hooks, const std::string& out_dir,
             int rank = launcher_rank());

}  // namespace zaya::ft
