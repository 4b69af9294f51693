#include "core/bf16.h"

namespace zaya {

void convert_to_bf16(const float* src, bf16* dst, size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void convert_from_bf16(const bf16* src, float* dst, size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; ++i) dst[i] = from_bf16(src[i]);
}

}  // namespace zaya
