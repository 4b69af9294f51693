// The supervisor's view of a checkpoint root before a restart: the newest checkpoint that
// verifies (checksums of every slice), optionally older than a given step (a rollback past a
// window of anomalies). Broken checkpoints newer than the choice are moved aside to
// .corrupt-step_XXXXXXXX-<time> and valid ones past the rollback point to
// .rolledback-step_XXXXXXXX-<time> (hidden from list_checkpoints and `latest`, kept for a
// post-mortem); `latest` is rewritten to the choice, or removed when nothing verifies.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zaya::ft {

struct ResumePoint {
  std::string dir;   // "" when nothing usable: the run starts from scratch
  int64_t step = 0;
  std::vector<std::pair<int64_t, std::string>> corrupt;  // step, verify error
  std::vector<int64_t> rolled_back;                      // valid checkpoints set aside
};

// below_step > 0: only checkpoints with step < below_step qualify.
ResumePoint choose_resume_point(const std::string& ckpt_root, int64_t below_step = 0);

}  // namespace zaya::ft
