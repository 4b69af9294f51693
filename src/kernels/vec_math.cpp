// GCC 12 warns about its own _mm512_undefined_* inside the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/vec_math.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "kernels/gemm.h"

extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);  // glibc libmvec

namespace zaya {

namespace {

std::atomic<bool> g_portable{false};

bool use_avx512() { return cpu_features().avx512f && !g_portable.load(std::memory_order_relaxed); }

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

__attribute__((target("avx512f"))) float max_avx512(const float* x, int n) {
  const int full = n / 16 * 16;
  __m512 m = _mm512_set1_ps(kNegInf);
  for (int i = 0; i < full; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  if (n > full) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, __mmask16((1u << (n - full)) - 1), x + full));
  return _mm512_reduce_max_ps(m);
}

__attribute__((target("avx512f"))) float sum_exp_avx512(const float* x, int n, float shift) {
  const int full = n / 16 * 16;
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= full; i += 32) {
    s0 = _mm512_add_ps(s0, _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh)));
    s1 = _mm512_add_ps(s1, _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), sh)));
  }
  for (; i < full; i += 16) s0 = _mm512_add_ps(s0, _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh)));
  if (n > full) {  // lanes past n are -inf: exp gives 0
    const __m512 t = _mm512_mask_loadu_ps(_mm512_set1_ps(kNegInf), __mmask16((1u << (n - full)) - 1), x + full);
    s1 = _mm512_add_ps(s1, _ZGVeN16v_expf(_mm512_sub_ps(t, sh)));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target("avx512f"))) void exp_scale_avx512(float* y, const float* x, int n, float shift, float scale) {
  const int full = n / 16 * 16;
  const __m512 sh = _mm512_set1_ps(shift), sc = _mm512_set1_ps(scale);
  for (int i = 0; i < full; i += 16)
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh)), sc));
  if (n > full) {
    const __mmask16 tail = __mmask16((1u << (n - full)) - 1);
    const __m512 t = _mm512_mask_loadu_ps(_mm512_set1_ps(kNegInf), tail, x + full);
    _mm512_mask_storeu_ps(y + full, tail, _mm512_mul_ps(_ZGVeN16v_expf(_mm512_sub_ps(t, sh)), sc));
  }
}

}  // namespace

void vec_math_force_portable(bool on) { g_portable = on; }

float row_max(const float* x, int n) {
  if (use_avx512()) return max_avx512(x, n);
  float m = kNegInf;
  for (int i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

float row_sum_exp(const float* x, int n, float shift) {
  if (use_avx512()) return sum_exp_avx512(x, n, shift);
  float s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - shift);
  return s;
}

void row_exp_scale(float* y, const float* x, int n, float shift, float scale) {
  if (use_avx512()) return exp_scale_avx512(y, x, n, shift, scale);
  for (int i = 0; i < n; ++i) y[i] = std::exp(x[i] - shift) * scale;
}

}  // namespace zaya
