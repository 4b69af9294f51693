// Timing several kernels robustly in one process: rounds that visit every item in turn
// (interleaved, so a burst of load from other processes lands on one round of each item rather
// than on every round of one), the median of the rounds per item, and a re-measure of an item
// whose rounds disagree by more than a factor (a descheduled OpenMP thread can stretch one call
// 100x; the median of too few rounds would keep it).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace zaya::bench {

struct TimedItem {
  std::string name;
  std::function<void()> run;  // one call of the kernel
  int reps = 1;               // calls per round (set by calibration when 0)
};

struct InterleavedOptions {
  int rounds = 5;             // rounds per item
  double spread_limit = 2.0;  // max / min of an item's rounds above this: re-measure it
  int max_remeasures = 3;     // extra sets of rounds for a disagreeing item
  double round_seconds = 0.02;  // calibration target: reps so that one round takes about this
  int warmup = 1;             // untimed calls per item before the rounds
};

struct ItemTiming {
  std::string name;
  double seconds = 0;     // median over the kept rounds, per call
  double spread = 0;      // max / min of the kept rounds
  int reps = 1;
  int remeasures = 0;     // sets of rounds taken again
  bool flagged = false;   // still disagreeing after max_remeasures
  std::vector<double> rounds;  // per call, the kept set
};

// Median of v (the upper median for an even count); v not empty.
double median_of(std::vector<double> v);

// clock: seconds since an arbitrary origin (tests pass a fake one). Calibrates reps for items
// with reps == 0 from one call, then runs the rounds.
std::vector<ItemTiming> measure_interleaved(std::vector<TimedItem> items, const InterleavedOptions& o,
                                            const std::function<double()>& clock);
// The same on the wall clock.
std::vector<ItemTiming> measure_interleaved(std::vector<TimedItem> items, const InterleavedOptions& o);

}  // namespace zaya::bench
