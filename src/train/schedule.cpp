#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace zaya {

const char* lr_schedule_name(LrScheduleKind k) {
  switch (k) {
    case LrScheduleKind::Constant: return "constant";
    case LrScheduleKind::Cosine: return "cosine";
    case LrScheduleKind::WSD: return "wsd";
  }
  return "?";
}

double LrSchedule::at(int64_t step, int64_t total_steps) const {
  if (warmup_steps > 0 && step < warmup_steps) return peak_lr * double(step + 1) / double(warmup_steps);
  const double lo = peak_lr * min_lr_ratio;
  const int64_t after = std::max<int64_t>(1, total_steps - warmup_steps);
  const double x = std::clamp(double(step - warmup_steps) / double(after), 0.0, 1.0);  // progress after warmup
  switch (kind) {
    case LrScheduleKind::Constant:
      return peak_lr;
    case LrScheduleKind::Cosine:
      return lo + (peak_lr - lo) * 0.5 * (1 + std::cos(M_PI * x));
    case LrScheduleKind::WSD: {
      const double start = 1.0 - decay_fraction;
      if (x < start || decay_fraction <= 0) return peak_lr;
      return peak_lr + (lo - peak_lr) * std::min(1.0, (x - start) / decay_fraction);
    }
  }
  return peak_lr;
}

int BatchRamp::batch_at(int phase_batch, uint64_t tokens_so_far, int multiple) const {
  double f = 1.0;
  if (ramp_tokens > 0)
    f = std::min(1.0, start_fraction + (1.0 - start_fraction) * double(tokens_so_far) / double(ramp_tokens));
  int b = int(std::floor(phase_batch * f / multiple)) * multiple;
  return std::clamp(b, multiple, phase_batch);
}

TrainPlan::TrainPlan(std::vector<PhaseShape> phases, BatchRamp ramp, int batch_multiple)
    : phases_(std::move(phases)) {
  ZAYA_CHECK(!phases_.empty(), "run config: at least one [[phases]] entry is needed");
  ZAYA_CHECK(batch_multiple >= 1, "plan: batch multiple ", batch_multiple, " must be >= 1");
  uint64_t tokens = 0;
  int64_t step = 0;
  for (size_t p = 0; p < phases_.size(); ++p) {
    const PhaseShape& ph = phases_[p];
    ZAYA_CHECK(ph.seq_len >= 1 && ph.global_batch >= batch_multiple && ph.global_batch % batch_multiple == 0,
               "phase ", ph.name, ": global batch ", ph.global_batch, " must be a positive multiple of ",
               batch_multiple, " (micro-batch x ranks)");
    ZAYA_CHECK(ph.tokens > 0, "phase ", ph.name, ": token budget must be > 0");
    uint64_t in_phase = 0;
    while (in_phase < ph.tokens) {
      const int b = ramp.batch_at(ph.global_batch, tokens, batch_multiple);
      const uint64_t step_tokens = uint64_t(b) * uint64_t(ph.seq_len);
      if (segments_.empty() || segments_.back().phase != int(p) || segments_.back().batch != b)
        segments_.push_back({step, 0, int(p), b, tokens});
      ++segments_.back().count;
      ++step;
      tokens += step_tokens;
      in_phase += step_tokens;
    }
  }
  total_steps_ = step;
  total_tokens_ = tokens;
}

StepShape TrainPlan::at(int64_t step) const {
  ZAYA_CHECK(step >= 0 && step < total_steps_, "plan: step ", step, " outside [0, ", total_steps_, ")");
  auto it = std::upper_bound(segments_.begin(), segments_.end(), step,
                             [](int64_t s, const Segment& g) { return s < g.first; });
  const Segment& g = *(it - 1);
  StepShape s;
  s.phase = g.phase;
  s.global_batch = g.batch;
  s.seq_len = phases_[size_t(g.phase)].seq_len;
  s.tokens_before = g.tokens_before + uint64_t(step - g.first) * uint64_t(g.batch) * uint64_t(s.seq_len);
  s.phase_start = step == phase_first_step(g.phase);
  return s;
}

int64_t TrainPlan::phase_first_step(int phase) const {
  for (const Segment& g : segments_)
    if (g.phase == phase) return g.first;
  return total_steps_;
}

double clip_factor(double grad_norm, double max_norm) {
  if (max_norm <= 0 || !std::isfinite(grad_norm) || grad_norm <= max_norm) return 1.0;
  return max_norm / (grad_norm + 1e-6);
}

}  // namespace zaya
