// Where the threads of a running OpenMP region cut a product's N output rows: thread t of nt
// takes [n0, n1). `cuts` (nt + 1 fractions, 0 = cuts[0] <= ... <= cuts[nt] = 1) gives each
// thread its share (model/team_balance.h sets them from the threads' measured speeds);
// nullptr cuts evenly. The decode kernels compute every output row alone, in the same order
// whichever thread has it, so the cuts move time between threads, never change a result.
//
// Shares set from past speeds still leave one thread waiting for the other whenever a VM's
// vCPU or a loaded core slows down within a token. With a TeamSteal, a thread that ends its
// share takes work from the back of a slower thread's (team_steps).
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

namespace zaya {

struct RowRange {
  int n0 = 0, n1 = 0;
};

// Thread t's rows of nt (cuts as above).
inline RowRange team_rows(int N, const float* cuts, int t, int nt) {
  if (!cuts) return {int(int64_t(N) * t / nt), int(int64_t(N) * (t + 1) / nt)};
  auto at = [&](int i) { return i <= 0 ? 0 : i >= nt ? N : int(double(N) * double(cuts[i]) + 0.5); };
  return {at(t), at(t + 1)};
}
inline RowRange team_rows(int N, const float* cuts) {
  return team_rows(N, cuts, omp_get_thread_num(), omp_get_num_threads());
}

// A thread's rows as the decode kernels read them: S streams side by side (the memory system
// sees S sequential reads in flight), `steps` rows of each (a step: one row of every stream,
// stream p's at start[p] + step), then `extra` (< S) rows one at a time.
struct RowStreams {
  static constexpr int kMax = 8;
  int S = 0, steps = 0, extra = 0;
  int start[kMax] = {};
  RowStreams(RowRange r, int streams) {
    const int rows = r.n1 - r.n0;
    S = std::min(streams, kMax);
    steps = rows / S;
    extra = rows % S;
    for (int p = 0; p < S; ++p) start[p] = r.n0 + p * steps + std::min(p, extra);
  }
};

// The words a team's threads claim steps through, one per thread: its current product's
// number and the steps [lo, hi) of its share not yet taken. The owner takes from lo up (its
// streams go on where they were); a thread done with its own share takes the back half of
// another's (from hi down). Every claim is one compare-and-swap, so no step runs twice.
class TeamSteal {
 public:
  // Outside the region: for a team of nt threads (every word at product 0).
  void reset(int nt) {
    if (int(words_.size()) != nt) {
      words_ = std::vector<Word>(size_t(nt));
      seq_ = std::vector<Word>(size_t(nt));
    }
    for (size_t t = 0; t < size_t(nt); ++t) {
      words_[t].v.store(0, std::memory_order_relaxed);
      seq_[t].v.store(0, std::memory_order_relaxed);
    }
  }
  int size() const { return int(words_.size()); }
  // Thread t: the number of the product it starts (every thread of the team starts the same
  // products in the same order, so they agree on it without meeting).
  uint32_t next(int t) { return uint32_t(seq_[size_t(t)].v.fetch_add(1, std::memory_order_relaxed) + 1) & kSeqMask; }
  static bool fits(int steps) { return steps >= 0 && steps <= int(kStepMask); }

  // Thread v's word made current for product seq with `steps` steps (by v, or by a thread
  // ahead of it). False when v has moved on to a later product (nothing left here for others).
  bool open(int v, uint32_t seq, int steps) {
    std::atomic<uint64_t>& a = words_[size_t(v)].v;
    uint64_t w = a.load(std::memory_order_acquire);
    for (;;) {
      const int32_t d = int32_t(((seq_of(w) - seq) & kSeqMask) << 16) >> 16;  // v's product minus seq
      if (d == 0) return true;
      // Only from the product just before, and with no steps of it left: a later product,
      // an earlier one still to open or with steps left are v's (behind) to run.
      if (d != -1 || lo_of(w) < hi_of(w)) return false;
      if (a.compare_exchange_weak(w, pack(seq, 0, uint32_t(steps)), std::memory_order_acq_rel)) return true;
    }
  }
  // The owner's next steps from the front: half of those left, at least `least`; false when
  // none are left. Few claims a product: each compare-and-swap is a full fence, which stalls
  // the loads in flight (claims of a fixed ~16 KB of weights read 3-5% slower).
  bool take_front(int t, uint32_t seq, int least, int& k0, int& count) {
    std::atomic<uint64_t>& a = words_[size_t(t)].v;
    uint64_t w = a.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t lo = lo_of(w), hi = hi_of(w);
      if (seq_of(w) != seq || lo >= hi) return false;
      const uint32_t c = std::min(std::max(uint32_t(least), (hi - lo) / 2), hi - lo);
      if (a.compare_exchange_weak(w, pack(seq, lo + c, hi), std::memory_order_acq_rel)) {
        k0 = int(lo), count = int(c);
        return true;
      }
    }
  }
  // Another thread's back half (at least `least` steps, and only if that many are left).
  bool take_back(int v, uint32_t seq, int least, int& k0, int& count) {
    std::atomic<uint64_t>& a = words_[size_t(v)].v;
    uint64_t w = a.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t lo = lo_of(w), hi = hi_of(w);
      if (seq_of(w) != seq || hi < lo + uint32_t(least)) return false;
      const uint32_t c = std::max(uint32_t(least), (hi - lo) / 2);
      if (a.compare_exchange_weak(w, pack(seq, lo, hi - c), std::memory_order_acq_rel)) {
        k0 = int(hi - c), count = int(c);
        return true;
      }
    }
  }

 private:
  static constexpr uint32_t kSeqMask = 0xFFFF, kStepMask = 0xFFFFFF;  // 16 + 24 + 24 bits
  static uint64_t pack(uint32_t seq, uint32_t lo, uint32_t hi) {
    return uint64_t(seq & kSeqMask) << 48 | uint64_t(hi) << 24 | uint64_t(lo);
  }
  static uint32_t seq_of(uint64_t w) { return uint32_t(w >> 48); }
  static uint32_t hi_of(uint64_t w) { return uint32_t(w >> 24) & kStepMask; }
  static uint32_t lo_of(uint64_t w) { return uint32_t(w) & kStepMask; }
  struct alignas(64) Word {  // one cache line each
    std::atomic<uint64_t> v{0};
  };
  std::vector<Word> words_, seq_;
};

// Rows r of RowStreams(r, streams): run(start, S, 0, steps) and the extra rows; returns their count.
template <class Run>
int run_streams(RowRange r, int streams, Run&& run) {
  const RowStreams rs(r, streams);
  if (rs.steps) run(rs.start, rs.S, 0, rs.steps);
  for (int p = 0; p < rs.extra; ++p) {
    const int row = rs.start[p] + rs.steps;
    run(&row, 1, 0, 1);
  }
  return r.n1 - r.n0;
}

// One decode product's rows on the calling thread of a running region: its share (cuts) as
// `streams` streams, run(start, S, k0, count) running rows start[p] + k0 + r (r < count, p <
// S); with `steal`, in claims of at least `batch` steps, then steps taken from the backs of
// the other threads' shares, kStealBatches batches or more at a time. (Each steal starts new
// streams and pulls the owner's word to another core: small steals between threads running
// at one speed cost more than the waits they remove.) Returns the rows this thread ran.
constexpr int kStealBatches = 8;
template <class Run>
int team_steps(int N, const float* cuts, int streams, int batch, TeamSteal* steal, Run&& run) {
  const int t = omp_get_thread_num(), nt = omp_get_num_threads();
  // (The same choice on every thread: they number their products alike.)
  if (!steal || steal->size() != nt || nt == 1 || !TeamSteal::fits(N)) return run_streams(team_rows(N, cuts, t, nt), streams, run);
  const RowStreams own(team_rows(N, cuts, t, nt), streams);
  const uint32_t seq = steal->next(t);
  int rows = 0, k0 = 0, count = 0;
  steal->open(t, seq, own.steps);
  while (steal->take_front(t, seq, batch, k0, count)) run(own.start, own.S, k0, count), rows += own.S * count;
  for (int p = 0; p < own.extra; ++p) {  // (never taken by others)
    const int row = own.start[p] + own.steps;
    run(&row, 1, 0, 1);
    ++rows;
  }
  for (int i = 1; i < nt; ++i) {
    const int v = (t + i) % nt;
    const RowStreams theirs(team_rows(N, cuts, v, nt), streams);
    if (!steal->open(v, seq, theirs.steps)) continue;
    while (steal->take_back(v, seq, kStealBatches * batch, k0, count)) run(theirs.start, theirs.S, k0, count), rows += theirs.S * count;
  }
  return rows;
}

}  // namespace zaya
