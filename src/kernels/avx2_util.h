// What the 8-lane (AVX2) kernels share: whether the CPU runs them, and horizontal reductions.
// (attention_avx2.cpp, linear_quant_avx2.cpp, linear_bf16.cpp, vec_math.cpp.)
#pragma once
#include <immintrin.h>

namespace zaya {

// AVX2 with FMA: every AVX2 kernel here uses both.
inline bool cpu_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

// The sum of h's 4 lanes, of v's 8, and the max of v's 8.
__attribute__((target("avx2"))) inline float hsum4(__m128 h) {
  const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}
__attribute__((target("avx2"))) inline float hsum8(__m256 v) {
  return hsum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}
// v in both 128-bit lanes.
__attribute__((target("avx2"))) inline __m256i lanes2(__m128i v) { return _mm256_broadcastsi128_si256(v); }
__attribute__((target("avx2"))) inline float hmax8(__m256 v) {
  const __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h2 = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h2, _mm_movehdup_ps(h2)));
}

}  // namespace zaya
