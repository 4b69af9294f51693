// Where the threads of a running OpenMP region cut a product's N output rows: thread t of nt
// takes [n0, n1). `cuts` (nt + 1 fractions, 0 = cuts[0] <= ... <= cuts[nt] = 1) gives each
// thread its share (model/team_balance.h sets them from the threads' measured speeds);
// nullptr cuts evenly. The decode kernels compute every output row alone, in the same order
// whichever thread has it, so the cuts move time between threads, never change a result.
#pragma once
#include <omp.h>

#include <cstdint>

namespace zaya {

struct RowRange {
  int n0 = 0, n1 = 0;
};

inline RowRange team_rows(int N, const float* cuts) {
  const int t = omp_get_thread_num(), nt = omp_get_num_threads();
  if (!cuts) return {int(int64_t(N) * t / nt), int(int64_t(N) * (t + 1) / nt)};
  auto at = [&](int i) { return i <= 0 ? 0 : i >= nt ? N : int(double(N) * double(cuts[i]) + 0.5); };
  return {at(t), at(t + 1)};
}

}  // namespace zaya
