#include "bench/interleaved.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace zaya::bench {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

namespace {

double spread_of(const std::vector<double>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *lo > 0 ? *hi / *lo : INFINITY;
}

// One round of every item in `which`, appended to rounds[i].
void one_round(std::vector<TimedItem>& items, const std::vector<size_t>& which,
               std::vector<std::vector<double>>& rounds, const std::function<double()>& clock) {
  for (size_t i : which) {
    const double t0 = clock();
    for (int r = 0; r < items[i].reps; ++r) items[i].run();
    rounds[i].push_back((clock() - t0) / items[i].reps);
  }
}

}  // namespace

std::vector<ItemTiming> measure_interleaved(std::vector<TimedItem> items, const InterleavedOptions& o,
                                            const std::function<double()>& clock) {
  if (o.rounds < 1) fail("measure_interleaved: rounds must be at least 1, got ", o.rounds);
  std::vector<size_t> all(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    all[i] = i;
    TimedItem& it = items[i];
    for (int w = 0; w < o.warmup; ++w) it.run();
    if (it.reps <= 0) {
      const double t0 = clock();
      it.run();
      const double one = std::max(clock() - t0, 1e-9);
      it.reps = std::clamp(int(o.round_seconds / one), 1, 1000);
    }
  }
  std::vector<std::vector<double>> rounds(items.size());
  for (int r = 0; r < o.rounds; ++r) one_round(items, all, rounds, clock);
  std::vector<ItemTiming> out(items.size());
  std::vector<size_t> pending;
  for (size_t i = 0; i < items.size(); ++i)
    if (spread_of(rounds[i]) > o.spread_limit) pending.push_back(i);
  // Disagreeing items get fresh sets of rounds, still interleaved among themselves.
  std::vector<int> remeasures(items.size(), 0);
  for (int m = 0; m < o.max_remeasures && !pending.empty(); ++m) {
    for (size_t i : pending) rounds[i].clear(), ++remeasures[i];
    for (int r = 0; r < o.rounds; ++r) one_round(items, pending, rounds, clock);
    std::vector<size_t> still;
    for (size_t i : pending)
      if (spread_of(rounds[i]) > o.spread_limit) still.push_back(i);
    pending = still;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    ItemTiming& t = out[i];
    t.name = items[i].name;
    t.rounds = rounds[i];
    t.seconds = median_of(rounds[i]);
    t.spread = spread_of(rounds[i]);
    t.reps = items[i].reps;
    t.remeasures = remeasures[i];
    t.flagged = t.spread > o.spread_limit;
  }
  return out;
}

std::vector<ItemTiming> measure_interleaved(std::vector<TimedItem> items, const InterleavedOptions& o) {
  return measure_interleaved(std::move(items), o, [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  });
}

}  // namespace zaya::bench
