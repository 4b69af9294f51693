// Routing health: a MoE layer whose load entropy stays below a threshold (or whose skip share
// stays above one) for N steps in a row is a collapsed router. The trainer runs this on every
// step's global-batch loads (RouterBalancer::loads()), warns, writes a `router_health` record
// to metrics.jsonl, and with `rollback` on hands the alarm to the anomaly handling (StepCheck),
// which aborts the run for a rollback as it does for K consecutive loss spikes.
//
// Settings come from the run config's [anomaly] section:
//   router_min_entropy  (0.5)  normalised expert-load entropy below this is unhealthy (0: off)
//   router_max_skip     (0.9)  skip share above this is unhealthy (1: off)
//   router_steps        (20)   N: unhealthy steps in a row that raise the alarm
//   router_rollback     (false) abort at the alarm so `zaya launch` rolls back before the streak
// A NaN entropy or skip share is unhealthy.
#pragma once
#include <cstdint>
#include <vector>

#include "train/balancer.h"

namespace zaya {

struct RouterHealthSettings {
  double min_entropy = 0.5;
  double max_skip = 0.9;
  int steps = 20;
  bool rollback = false;
};

// One layer's unhealthy streak as it stands at `step`.
struct RouterAlarm {
  int layer = -1;
  int64_t first_step = 0;  // first step of the streak
  int64_t step = 0;        // the step that completed N in a row
  int steps = 0;           // streak length (N at the alarm)
  double entropy = 0, skip = 0;
  bool rollback = false;   // the settings' rollback
};

// What changed at one step: layers whose streak reached N (alarms) and layers that were in
// alarm and are healthy again (recovered).
struct RouterHealthEvents {
  std::vector<RouterAlarm> alarms;
  std::vector<RouterAlarm> recovered;  // layer, first_step, step (the healthy one), steps
};

class RouterHealthMonitor {
 public:
  explicit RouterHealthMonitor(RouterHealthSettings s = {}) : s_(s) {}
  const RouterHealthSettings& settings() const { return s_; }
  bool enabled() const { return s_.steps > 0 && (s_.min_entropy > 0 || s_.max_skip < 1); }
  bool healthy(const LayerLoad& l) const;
  // One step's loads (one entry per MoE layer). A gap in the steps (a skipped data window, a
  // restart) ends every streak.
  RouterHealthEvents observe(int64_t step, const std::vector<LayerLoad>& loads);
  // Layers currently in alarm.
  int alarmed() const;

 private:
  struct Streak {
    int64_t first = 0;
    int steps = 0;
    bool alarm = false;
  };
  RouterHealthSettings s_;
  std::vector<Streak> streaks_;
  int64_t last_step_ = -1;
};

}  // namespace zaya
