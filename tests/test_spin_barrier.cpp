// core/spin_barrier.h: no thread leaves a meeting before every thread has reached it, and
// what a thread wrote before it is seen by every thread after it; teams of 1 to 5 threads (5
// is more than the cores of the CI machine: the waiters must yield for the others to run).
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <vector>

#include "core/spin_barrier.h"

using namespace zaya;

TEST(SpinBarrier, NoThreadPassesEarlyAndWritesAreSeen) {
  for (int nt : {1, 2, 3, 4, 5}) {
    SpinBarrier b;
    b.reset(nt);
    ASSERT_EQ(b.size(), nt);
    const int meetings = nt > 2 ? 300 : 3000;
    std::atomic<int> arrived{0}, early{0}, stale{0}, team{0};
    std::vector<int> slot(size_t(nt), -1);  // plain writes, published by the barrier
#pragma omp parallel num_threads(nt)
    {
      const int t = omp_get_thread_num(), size = omp_get_num_threads();  // (every thread sees the size)
      if (t == 0) team = size;
      for (int m = 0; m < meetings && size == nt; ++m) {
        slot[size_t(t)] = m;
        arrived.fetch_add(1);
        b.wait(t);
        if (arrived.load() < nt * (m + 1)) early.fetch_add(1);
        for (int u = 0; u < nt; ++u)
          if (slot[size_t(u)] != m) stale.fetch_add(1);
        b.wait(t);  // nobody writes slot m + 1 before all have read slot m
      }
    }
    ASSERT_EQ(team.load(), nt) << "OpenMP gave " << team.load() << " threads for " << nt << ": nothing was tested";
    EXPECT_EQ(early.load(), 0) << nt << " threads";
    EXPECT_EQ(stale.load(), 0) << nt << " threads";
    EXPECT_EQ(arrived.load(), nt * meetings);
  }
}
