// Row loops of the kernels. f(i) for i in [0, n), split over a new OpenMP region, or run on
// the calling thread when it is already inside an active region. Decode calls the kernels
// between its products from inside its team. There, libgomp charges ~3.4 us for a nested
// region even when it gets a single thread, and an `if` clause does not avoid that cost.
// At decode sizes this is more than the work of most such loops.
#pragma once
#include <omp.h>

#include <cstdint>

namespace zaya {

template <class F>
inline void parallel_for(int64_t n, F&& f) {
  if (omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace zaya
