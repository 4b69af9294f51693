// A barrier for the threads of one OpenMP region that meet hundreds of times a step (decode:
// ~480 times per ZAYA1-base token). A dissemination barrier over per-thread epoch flags:
// ceil(log2(nt)) rounds; in round k thread t raises the flag of thread t + 2^k and waits for
// its own, so every flag has one writer and one reader and no line is fought over. Measured
// on the 2-core Zen 5 VM, 2 threads meeting in a loop: 0.3 us per meeting, libgomp's barrier
// 1.45 us. A waiter spins (with pause) for a while, then sleeps on its flag (a futex, through
// std::atomic::wait) until the writer's notify, so that a partner the scheduler has taken off
// its CPU (other processes) gets it back. For more threads than CPUs it is the wrong tool
// (a sleep and a wake per round: 4 threads on 2 cores met in 50 us where libgomp's barrier,
// which wakes the whole team at once, took 15): `fits` says whether a team should use it.
#pragma once
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace zaya {

class SpinBarrier {
 public:
  // Outside the region: for a team of nt threads (flags from zero).
  void reset(int nt) {
    nt_ = nt;
    rounds_ = 0;
    while ((1 << rounds_) < nt) ++rounds_;
    flags_ = std::vector<Flag>(size_t(nt) * size_t(rounds_));
    epoch_ = std::vector<Flag>(size_t(nt));
  }
  // Whether a team of nt threads should meet here: no more threads than the process's CPUs.
  static bool fits(int nt) { return nt <= omp_get_num_procs(); }
  int size() const { return nt_; }
  // Thread t of the team; every thread calls it the same number of times.
  void wait(int t) {
    const uint32_t e = epoch_[size_t(t)].v.load(std::memory_order_relaxed) + 1;
    epoch_[size_t(t)].v.store(e, std::memory_order_relaxed);
    for (int k = 0; k < rounds_; ++k) {
      std::atomic<uint32_t>& to = flags_[size_t((t + (1 << k)) % nt_) * size_t(rounds_) + size_t(k)].v;
      to.store(e, std::memory_order_release);
      to.notify_one();  // (no system call unless its reader sleeps)
      std::atomic<uint32_t>& mine = flags_[size_t(t) * size_t(rounds_) + size_t(k)].v;
      for (int spins = 0;; ++spins) {
        const uint32_t v = mine.load(std::memory_order_acquire);
        if (int32_t(v - e) >= 0) break;  // raised for this meeting (epochs wrap: compare the difference)
        if (spins < kSpins)
          pause();
        else
          mine.wait(v, std::memory_order_acquire);
      }
    }
  }

 private:
  static constexpr int kSpins = 1 << 13;  // ~0.15 ms of pause, then sleep
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  struct alignas(64) Flag {  // one cache line each
    std::atomic<uint32_t> v{0};
  };
  int nt_ = 0, rounds_ = 0;
  std::vector<Flag> flags_;  // [thread][round]: raised by thread - 2^round
  std::vector<Flag> epoch_;  // each thread's count of meetings (its own line)
};

}  // namespace zaya
