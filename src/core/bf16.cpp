#include "core/bf16.h"

#include <omp.h>

namespace zaya {

namespace {
// dst[i] = f(src[i]). Short spans, or a caller already inside a parallel region (attention
// per head), convert on the calling thread: an OpenMP region costs microseconds even with an
// `if` clause that fails.
template <class S, class D, class F>
void convert(const S* src, D* dst, size_t n, F f) {
  if (n <= (1u << 16) || omp_in_parallel()) {
    for (size_t i = 0; i < n; ++i) dst[i] = f(src[i]);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) dst[i] = f(src[i]);
}
}  // namespace

// Lambdas, not function pointers: each is its own type, so the loops inline it and vectorise.
void convert_to_bf16(const float* src, bf16* dst, size_t n) {
  convert(src, dst, n, [](float x) { return to_bf16(x); });
}
void convert_to_bf16_weights(const float* src, bf16* dst, size_t n) {
  convert(src, dst, n, [](float x) { return to_bf16_weight(x); });
}
void convert_from_bf16(const bf16* src, float* dst, size_t n) {
  convert(src, dst, n, [](bf16 x) { return from_bf16(x); });
}

}  // namespace zaya
