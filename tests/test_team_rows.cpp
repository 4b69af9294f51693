// kernels/team_rows.h: a team's products with stealing run every row exactly once, whatever
// the cuts, the team size, the claim size and the order the threads get there in; a thread
// far ahead takes steps of a thread behind only from the product the other is on, never one
// it has still to start.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <vector>

#include "kernels/team_rows.h"

using namespace zaya;

namespace {

std::vector<float> cuts_for(int nt, float first) {
  std::vector<float> c(size_t(nt) + 1);
  for (int i = 0; i <= nt; ++i)
    c[size_t(i)] = i == 0 ? 0.f : i == nt ? 1.f : first + (1.f - first) * float(i - 1) / float(nt - 1);
  return c;
}

}  // namespace

// Products back to back with no barrier between them; one thread of the team runs each of its
// steps slower, so the others mostly finish first and take from it (whether they do is the
// scheduler's; the next test makes a thread take, whatever the scheduler does).
TEST(TeamSteal, EveryRowOnceWhateverTheOrder) {
  for (int nt : {2, 3, 4})
    for (int N : {1, 5, 61, 1000})
      for (float first : {0.1f, 0.5f, 0.9f})
        for (int batch : {1, 2, 5}) {
          const std::vector<float> cuts = cuts_for(nt, first);
          TeamSteal steal;
          steal.reset(nt);
          const int products = 12;
          std::vector<std::atomic<int>> hit(size_t(products) * N);
          std::atomic<int> team{0}, delay{0};
#pragma omp parallel num_threads(nt)
          {
            const int t = omp_get_thread_num(), slow = (N + batch) % nt;
            if (t == 0) team = omp_get_num_threads();
            for (int p = 0; p < products && omp_get_num_threads() == nt; ++p) {
              int rows = 0;
              const int ran = team_steps(N, cuts.data(), 4, batch, &steal, [&](const int* start, int S, int k0, int count) {
                for (int k = k0; k < k0 + count; ++k)
                  for (int s = 0; s < S; ++s) {
                    const int r = start[s] + k;
                    hit[size_t(p) * N + size_t(r)].fetch_add(1);
                    ++rows;
                    if (t == slow)
                      for (int spin = 0; spin < 2000; ++spin) delay.fetch_add(1, std::memory_order_relaxed);
                  }
              });
              EXPECT_EQ(ran, rows);
            }
          }
          if (team != nt) continue;  // (the runtime gave fewer threads)
          for (int p = 0; p < products; ++p)
            for (int r = 0; r < N; ++r)
              ASSERT_EQ(hit[size_t(p) * N + size_t(r)].load(), 1)
                  << "threads " << nt << " N " << N << " first cut " << first << " batch " << batch << " product "
                  << p << " row " << r;
        }
}

// Thread 1 starts only when thread 0 has run all its products: thread 0 takes from thread 1's
// first product (the one thread 1 is on: it opened none, so product 1 is next), halves of
// what is left down to one step (520 steps: 260, 130, 65, 32, 16, 16 taken), and then from no
// later one, whose steps stay thread 1's; every row still runs once.
TEST(TeamSteal, AThreadAheadTakesOnlyFromTheProductTheOtherIsOn) {
  const int N = 2 * 4 * 520, products = 5, batch = 2;
  TeamSteal steal;
  steal.reset(2);
  std::vector<std::vector<int>> by(products, std::vector<int>(N, -1));
  std::atomic<bool> done0{false};
  std::atomic<int> team{0};
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    if (t == 0) team = omp_get_num_threads();
    if (omp_get_num_threads() == 2) {
      if (t == 1)
        while (!done0.load()) {
        }
      for (int p = 0; p < products; ++p)
        team_steps(N, nullptr, 4, batch, &steal, [&](const int* start, int S, int k0, int count) {
          for (int k = k0; k < k0 + count; ++k)
            for (int s = 0; s < S; ++s) {
              int& owner = by[size_t(p)][size_t(start[s] + k)];
              EXPECT_EQ(owner, -1);
              owner = t;
            }
        });
      if (t == 0) done0 = true;
    }
  }
  ASSERT_EQ(team, 2) << "the runtime gave fewer than 2 threads: nothing was tested";
  for (int p = 0; p < products; ++p) {
    int theirs0 = 0;
    for (int r = 0; r < N; ++r) {
      ASSERT_NE(by[size_t(p)][size_t(r)], -1) << "product " << p << " row " << r;
      if (r >= N / 2 && by[size_t(p)][size_t(r)] == 0) ++theirs0;
    }
    if (p == 0)
      EXPECT_EQ(theirs0, 4 * 519) << "thread 0 took all but one step of thread 1's share of the first product";
    else
      EXPECT_EQ(theirs0, 0) << "product " << p;
  }
}
