// How a decode team shares each product's rows between its threads. The vCPUs of a VM (or
// the cores of a loaded machine) do not run at one speed: with even shares the faster
// thread waits at every barrier (on the 2-core Zen 5 VM the second thread read its rows
// 5-18% slower, token after token). Each thread adds up the time and the weight bytes of its
// shares during a token; after the token every share moves a quarter of the way toward the
// thread's part of the team's measured rate. The cuts change which thread computes a row,
// not the row's value (kernels/team_rows.h). The gain is smaller than the wait it removes
// (when one thread stops early the other draws more of the memory bandwidth): zaya generate,
// alternating runs, q4_k ZAYA1-base +1.6% tokens/s (7 pairs of 8 faster), bf16 +1.3-3%.
// What the shares miss within a token (a vCPU slowed for a while) a thread done first takes
// from the back of the slower one's share (kernels/team_rows.h, TeamSteal).
#pragma once
#include <algorithm>
#include <vector>

namespace zaya {

class TeamBalance {
 public:
  // Before a region of nt threads: a new team size starts from even shares.
  void start(int nt) {
    if (int(share_.size()) != nt) {
      share_.assign(size_t(nt), 1.0 / nt);
      cut();
    }
    slots_.assign(size_t(nt), Slot{});
  }
  const float* cuts() const { return cuts_.data(); }
  // Inside the region: thread t's share of one product took `seconds` over `bytes`.
  void add(int t, double seconds, double bytes) {
    slots_[size_t(t)].seconds += seconds;
    slots_[size_t(t)].bytes += bytes;
  }
  // After the region: shares toward the measured rates, each kept within [1/4, 7/4] of even.
  void update() {
    if (fixed_) return;
    const size_t nt = share_.size();
    double total = 0;
    for (const Slot& s : slots_) {
      if (s.seconds <= 0 || s.bytes <= 0) return;  // a thread without products: no measure
      total += s.bytes / s.seconds;
    }
    double sum = 0;
    for (size_t t = 0; t < nt; ++t) {
      const double target = slots_[t].bytes / slots_[t].seconds / total;
      share_[t] = std::clamp(share_[t] + kStep * (target - share_[t]), 0.25 / double(nt), 1.75 / double(nt));
      sum += share_[t];
    }
    for (double& s : share_) s /= sum;
    cut();
  }
  // Tests: shares held fixed (they sum to 1; one per thread of the teams to come).
  void fix_shares(const std::vector<double>& shares) {
    share_ = shares;
    fixed_ = true;
    cut();
  }
  const std::vector<double>& shares() const { return share_; }

 private:
  static constexpr double kStep = 0.25;
  struct alignas(64) Slot {  // one cache line per thread
    double seconds = 0, bytes = 0;
  };
  void cut() {
    cuts_.assign(share_.size() + 1, 0.f);
    double c = 0;
    for (size_t t = 0; t < share_.size(); ++t) cuts_[t + 1] = float(c += share_[t]);
    cuts_.back() = 1.f;
  }
  std::vector<double> share_;
  bool fixed_ = false;
  std::vector<float> cuts_;
  std::vector<Slot> slots_;
};

}  // namespace zaya
