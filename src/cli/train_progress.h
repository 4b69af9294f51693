// What `zaya train` shows of a run, printed from the trainer's reports (world rank 0 only):
// the run header, phase switches, a progress line every run.log_interval steps, validation
// losses and saved checkpoints on stdout (none with --quiet); the [eval] tasks' table on stdout
// and where the weights came from (resume, init-from) in the log on stderr, whatever --quiet says.
#pragma once
#include <cstdint>
#include <vector>

#include "eval/runner.h"
#include "train/trainer.h"

namespace zaya::cli {

void install_train_progress(TrainerReports& report, int64_t log_interval, bool quiet);

// The [eval] tasks' results at a validation step (eval::install_train_tasks's report).
void print_train_tasks(int64_t step, const std::vector<eval::TaskResult>& results);

}  // namespace zaya::cli
