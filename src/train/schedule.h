// Learning-rate schedules, the batch-size ramp, the step plan of a phased run, and
// gradient clipping by global norm.
//
// The plan is a pure function of the run config: for every optimizer step it says the
// phase, the global batch (sequences) and the sequence length, so the total number of
// steps (and hence the LR schedule) is known up front, and a resumed run (or a reshaped
// one) finds the same shape for step s without replaying anything.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

enum class LrScheduleKind { Constant, Cosine, WSD };
const char* lr_schedule_name(LrScheduleKind k);

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Cosine;
  double peak_lr = 3e-4;
  double min_lr_ratio = 0.1;     // final rate = min_lr_ratio * peak_lr (cosine, WSD)
  int64_t warmup_steps = 0;      // linear from peak/warmup to peak
  double decay_fraction = 0.2;   // WSD: the last share of the steps decays (linearly)
  // Rate for step `step` (0-based: the step about to be taken) of `total_steps`.
  double at(int64_t step, int64_t total_steps) const;
};

// Batch-size ramp (ZAYA1 ramps its batch during training). The global batch of a phase is
// multiplied by f = min(1, start_fraction + (1 - start_fraction) * tokens / ramp_tokens),
// tokens being all tokens trained so far, and rounded down to a multiple of `multiple`
// (micro-batch x data-parallel ranks), at least one multiple. ramp_tokens = 0: no ramp.
struct BatchRamp {
  double start_fraction = 1.0;
  uint64_t ramp_tokens = 0;
  int batch_at(int phase_batch, uint64_t tokens_so_far, int multiple) const;
};

struct PhaseShape {
  std::string name;
  uint64_t tokens = 0;   // token budget: the phase ends at the first step that reaches it
  int seq_len = 0;
  int global_batch = 0;  // sequences per optimizer step (before the ramp)
};

struct StepShape {
  int phase = 0;
  int global_batch = 0;
  int seq_len = 0;
  uint64_t tokens_before = 0;  // tokens trained before this step
  bool phase_start = false;    // first step of its phase
};

class TrainPlan {
 public:
  TrainPlan(std::vector<PhaseShape> phases, BatchRamp ramp, int batch_multiple);
  int64_t total_steps() const { return total_steps_; }
  uint64_t total_tokens() const { return total_tokens_; }
  StepShape at(int64_t step) const;  // step in [0, total_steps)
  int64_t phase_first_step(int phase) const;
  int num_phases() const { return int(phases_.size()); }
  const PhaseShape& phase(int i) const { return phases_.at(size_t(i)); }

 private:
  struct Segment {  // steps [first, first + count) share phase and batch
    int64_t first = 0, count = 0;
    int phase = 0, batch = 0;
    uint64_t tokens_before = 0;
  };
  std::vector<PhaseShape> phases_;
  std::vector<Segment> segments_;
  int64_t total_steps_ = 0;
  uint64_t total_tokens_ = 0;
};

// Factor to multiply gradients by so their global norm is at most max_norm (1 when
// max_norm <= 0 or the norm is already within it; 0 for a non-finite norm is NOT applied
// here: the trainer decides what to do with NaN/Inf).
double clip_factor(double grad_norm, double max_norm);

}  // namespace zaya
