// Trainer-side anomaly handling: a step whose loss or gradient norm is NaN/Inf, or spikes
// (z-score against a rolling window of recent accepted steps, off by default), is skipped;
// K consecutive anomalies abort the run (the trainer exits kExitAnomalies) so the supervisor
// rolls back to the checkpoint before them and skips their data window.
//
// A collapsed router (StepCheck::router: a MoE layer unhealthy for [anomaly] router_steps
// steps, train/router_health.h) is an anomaly of kind "router_collapse": recorded like a
// spike, and with router_rollback on it aborts at once, its window being the unhealthy
// streak, so the supervisor rolls back before the streak and skips its data.
//
// Every rank sees the same global loss and norm, so every rank reaches the same verdict; the
// trainer still reduces the verdicts (max), the one all-reduce of a flag.
#pragma once
#include <cstdint>
#include <deque>
#include <string>

#include "train/trainer.h"

namespace zaya::ft {

struct AnomalyOptions {
  double loss_z = 0;        // loss spike: z-score above this skips the step (0: off)
  double grad_norm_z = 0;   // gradient-norm spike threshold (0: off)
  int window = 20;          // rolling window of accepted steps
  int min_history = 20;     // no spike verdicts before this many accepted steps
  int max_consecutive = 5;  // K: this many anomalies in a row abort the run (0: never)
};

// Mean and standard deviation of the last `window` values.
class RollingWindow {
 public:
  explicit RollingWindow(int window) : window_(window) {}
  void push(double x);
  size_t size() const { return values_.size(); }
  double mean() const;
  double stddev() const;
  // (x - mean) / stddev, the deviation floored at 1% of the mean: a short, flat history (after a
  // restart) must not turn ordinary noise into spikes.
  double zscore(double x) const;

 private:
  int window_;
  std::deque<double> values_;
};

struct AnomalyDecision {
  StepVerdict verdict = StepVerdict::Update;
  std::string kind;       // "", "nonfinite", "loss_spike", "grad_norm_spike", "router_collapse"
  double z = 0;           // the z-score that triggered a spike verdict
  int consecutive = 0;    // anomalies in a row, this one included
  int64_t first_step = 0; // first step of the current run of anomalies
};

class AnomalyDetector {
 public:
  explicit AnomalyDetector(AnomalyOptions o) : opt_(o), loss_(o.window), gnorm_(o.window) {}
  AnomalyDecision judge(const StepCheck& c);
  // An accepted step from before a restart (metrics.jsonl): refills the windows so a resumed
  // run judges as the uninterrupted one would.
  void seed(double loss, double grad_norm) {
    loss_.push(loss);
    gnorm_.push(grad_norm);
  }
  int64_t anomalies() const { return total_; }

 private:
  AnomalyOptions opt_;
  RollingWindow loss_, gnorm_;
  int consecutive_ = 0;
  int64_t first_ = 0, total_ = 0, last_step_ = -1;
};

}  // namespace zaya::ft
