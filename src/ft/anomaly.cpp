#include "ft/anomaly.h"

#include <algorithm>
#include <cmath>

namespace zaya::ft {

void RollingWindow::push(double x) {
  values_.push_back(x);
  while (int(values_.size()) > window_) values_.pop_front();
}

double RollingWindow::mean() const {
  if (values_.empty()) return 0;
  double s = 0;
  for (double v : values_) s += v;
  return s / double(values_.size());
}

double RollingWindow::stddev() const {
  if (values_.size() < 2) return 0;
  const double m = mean();
  double s = 0;
  for (double v : values_) s += (v - m) * (v - m);
  return std::sqrt(s / double(values_.size() - 1));
}

double RollingWindow::zscore(double x) const {
  const double m = mean();
  const double sd = std::max({stddev(), 1e-2 * std::fabs(m), 1e-12});
  return (x - m) / sd;
}

AnomalyDecision AnomalyDetector::judge(const StepCheck& c) {
  AnomalyDecision d;
  // A gap in the steps (a restart, a skipped data window) breaks a run of anomalies.
  if (last_step_ >= 0 && c.step != last_step_ + 1) consecutive_ = 0;
  last_step_ = c.step;
  if (!c.finite || !std::isfinite(c.loss) || !std::isfinite(c.grad_norm)) {
    d.kind = "nonfinite";
  } else if (int(loss_.size()) >= opt_.min_history) {
    const double zl = loss_.zscore(c.loss), zg = gnorm_.zscore(c.grad_norm);
    if (opt_.loss_z > 0 && zl > opt_.loss_z) d.kind = "loss_spike", d.z = zl;
    else if (opt_.grad_norm_z > 0 && zg > opt_.grad_norm_z) d.kind = "grad_norm_spike", d.z = zg;
  }
  if (d.kind.empty() && c.router) {
    // The step itself is sound: its update goes ahead unless the alarm asks for a rollback.
    d.kind = "router_collapse";
    d.consecutive = c.router->steps;
    d.first_step = c.router->first_step;
    ++total_;
    if (c.router->rollback) {
      d.verdict = StepVerdict::Abort;
      return d;
    }
    loss_.push(c.loss);
    gnorm_.push(c.grad_norm);
    consecutive_ = 0;
    return d;
  }
  if (d.kind.empty()) {
    loss_.push(c.loss);
    gnorm_.push(c.grad_norm);
    consecutive_ = 0;
    return d;
  }
  if (consecutive_ == 0) first_ = c.step;
  ++consecutive_;
  ++total_;
  d.consecutive = consecutive_;
  d.first_step = first_;
  d.verdict = opt_.max_consecutive > 0 && consecutive_ >= opt_.max_consecutive ? StepVerdict::Abort : StepVerdict::Skip;
  return d;
}

}  // namespace zaya::ft
