#include "train/router_health.h"

#include <cmath>

namespace zaya {

// Written so that NaN fails both tests: a NaN load is never healthy.
bool RouterHealthMonitor::healthy(const LayerLoad& l) const {
  const bool entropy_ok = s_.min_entropy <= 0 || l.entropy >= s_.min_entropy;
  const bool skip_ok = l.skip_rate <= s_.max_skip;
  return entropy_ok && skip_ok && !std::isnan(l.entropy);
}

RouterHealthEvents RouterHealthMonitor::observe(int64_t step, const std::vector<LayerLoad>& loads) {
  RouterHealthEvents ev;
  if (!enabled()) return ev;
  if (streaks_.size() != loads.size() || (last_step_ >= 0 && step != last_step_ + 1)) streaks_.assign(loads.size(), {});
  last_step_ = step;
  for (size_t l = 0; l < loads.size(); ++l) {
    Streak& s = streaks_[l];
    const LayerLoad& ld = loads[l];
    if (healthy(ld)) {
      if (s.alarm) ev.recovered.push_back({int(l), s.first, step, s.steps, ld.entropy, ld.skip_rate, s_.rollback});
      s = {};
      continue;
    }
    if (s.steps == 0) s.first = step;
    ++s.steps;
    if (!s.alarm && s.steps >= s_.steps) {
      s.alarm = true;
      ev.alarms.push_back({int(l), s.first, step, s.steps, ld.entropy, ld.skip_rate, s_.rollback});
    }
  }
  return ev;
}

int RouterHealthMonitor::alarmed() const {
  int n = 0;
  for (const Streak& s : streaks_) n += s.alarm;
  return n;
}

}  // namespace zaya
