#include "core/bf16.h"

#include <omp.h>

namespace zaya {

// Short spans, or a caller already inside a parallel region (attention per head), convert on
// the calling thread: an OpenMP region costs microseconds even with an `if` clause that fails.
void convert_to_bf16(const float* src, bf16* dst, size_t n) {
  if (n <= (1u << 16) || omp_in_parallel()) {
    for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void convert_to_bf16_weights(const float* src, bf16* dst, size_t n) {
  if (n <= (1u << 16) || omp_in_parallel()) {
    for (size_t i = 0; i < n; ++i) dst[i] = to_bf16_weight(src[i]);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16_weight(src[i]);
}

void convert_from_bf16(const bf16* src, float* dst, size_t n) {
  if (n <= (1u << 16) || omp_in_parallel()) {
    for (size_t i = 0; i < n; ++i) dst[i] = from_bf16(src[i]);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) dst[i] = from_bf16(src[i]);
}

}  // namespace zaya
