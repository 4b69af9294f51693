// GCC 12 warns about its own _mm512_undefined_* inside the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/vec_math.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "kernels/avx2_util.h"
#include "kernels/gemm.h"

extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);  // glibc libmvec
extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_erff(__m512);  // glibc >= 2.35
extern "C" __attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256);
extern "C" __attribute__((target("avx2"))) __m256 _ZGVdN8v_erff(__m256);

namespace zaya {

namespace {

std::atomic<int> g_cap{int(KernelTier::Auto)};  // vec_math_force

KernelTier cap() { return KernelTier(g_cap.load(std::memory_order_relaxed)); }
bool use_avx512() { return cpu_features().avx512f && cap() == KernelTier::Auto; }
bool use_avx2() { return cpu_avx2_fma() && cap() != KernelTier::Portable; }

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

__attribute__((target("avx512f"))) float max_avx512(const float* x, int n) {
  const int full = n / 16 * 16;
  __m512 m = _mm512_set1_ps(kNegInf);
  for (int i = 0; i < full; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  if (n > full) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, __mmask16((1u << (n - full)) - 1), x + full));
  return _mm512_reduce_max_ps(m);
}

// sum_i exp(x_i - shift) in two accumulators over 32-wide steps; Store: the exponentials are
// written to y as well (the same sum, to the bit).
template <bool Store>
__attribute__((target("avx512f"))) float exp_sum_avx512(float* y, const float* x, int n, float shift) {
  const int full = n / 16 * 16;
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= full; i += 32) {
    const __m512 e0 = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    const __m512 e1 = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), sh));
    if constexpr (Store) _mm512_storeu_ps(y + i, e0), _mm512_storeu_ps(y + i + 16, e1);
    s0 = _mm512_add_ps(s0, e0), s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < full; i += 16) {
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    if constexpr (Store) _mm512_storeu_ps(y + i, e);
    s0 = _mm512_add_ps(s0, e);
  }
  if (n > full) {  // lanes past n are -inf: exp gives 0
    const __mmask16 tail = __mmask16((1u << (n - full)) - 1);
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(kNegInf), tail, x + full), sh));
    if constexpr (Store) _mm512_mask_storeu_ps(y + full, tail, e);
    s1 = _mm512_add_ps(s1, e);
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

__attribute__((target("avx512f"))) void swiglu_avx512(float* a, const float* g, const float* u, int n) {
  const __m512 one = _mm512_set1_ps(1.f), zero = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(zero, gv));
    _mm512_mask_storeu_ps(a + i, k, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), uv));
  }
}

__attribute__((target("avx512f"))) void swiglu_backward_avx512(float* dg, float* du, const float* da, const float* g,
                                                                const float* u, int n) {
  const __m512 one = _mm512_set1_ps(1.f), zero = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
    const __m512 dav = _mm512_maskz_loadu_ps(k, da + i);
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, _ZGVeN16v_expf(_mm512_sub_ps(zero, gv))));
    const __m512 silu = _mm512_mul_ps(gv, s);
    // da * up * s * (1 + g * (1 - s)), in the scalar loop's order
    const __m512 t = _mm512_add_ps(one, _mm512_mul_ps(gv, _mm512_sub_ps(one, s)));
    _mm512_mask_storeu_ps(dg + i, k, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(dav, uv), s), t));
    _mm512_mask_storeu_ps(du + i, k, _mm512_mul_ps(dav, silu));
  }
}

constexpr float kSqrtHalf = 0.70710678118654752440f, kInvSqrt2Pi = 0.39894228040143267794f;

__attribute__((target("avx512f"))) void gelu_avx512(float* y, const float* x, int n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.f), c = _mm512_set1_ps(kSqrtHalf);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(k, x + i);
    const __m512 e = _ZGVeN16v_erff(_mm512_mul_ps(xv, c));
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_mul_ps(half, xv), _mm512_add_ps(one, e)));
  }
}

__attribute__((target("avx512f"))) void gelu_grad_avx512(float* dx, const float* dy, const float* x, int n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.f), c = _mm512_set1_ps(kSqrtHalf);
  const __m512 mhalf = _mm512_set1_ps(-0.5f), ip = _mm512_set1_ps(kInvSqrt2Pi);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(k, x + i), dyv = _mm512_maskz_loadu_ps(k, dy + i);
    const __m512 cdf = _mm512_mul_ps(half, _mm512_add_ps(one, _ZGVeN16v_erff(_mm512_mul_ps(xv, c))));
    const __m512 pdf = _mm512_mul_ps(_ZGVeN16v_expf(_mm512_mul_ps(_mm512_mul_ps(mhalf, xv), xv)), ip);
    _mm512_mask_storeu_ps(dx + i, k, _mm512_mul_ps(dyv, _mm512_add_ps(cdf, _mm512_mul_ps(xv, pdf))));
  }
}

// ---------------------------------------------------------------- AVX2 (8 lanes)
// The same loops for CPUs without AVX-512 (glibc's AVX2 expf and erff). The last n % 8
// elements go through masked loads and stores; lanes past n read -inf (exp gives 0) or 0.

#define VM_AVX2 __attribute__((target("avx2,fma")))

VM_AVX2 inline __m256i tail_mask(int rem) {  // lanes < rem
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// x[i .. i + 8) with lanes at or past n set to `fill`.
VM_AVX2 inline __m256 load_tail(const float* x, int i, int n, float fill) {
  const __m256i k = tail_mask(n - i);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(x + i, k), _mm256_castsi256_ps(k));
}

VM_AVX2 float max_avx2(const float* x, int n) {
  const int full = n / 8 * 8;
  __m256 m = _mm256_set1_ps(kNegInf);
  for (int i = 0; i < full; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  if (n > full) m = _mm256_max_ps(m, load_tail(x, full, n, kNegInf));
  return hmax8(m);
}

template <bool Store>
VM_AVX2 float exp_sum_avx2(float* y, const float* x, int n, float shift) {
  const int full = n / 8 * 8;
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= full; i += 16) {
    const __m256 e0 = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
    const __m256 e1 = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), sh));
    if constexpr (Store) _mm256_storeu_ps(y + i, e0), _mm256_storeu_ps(y + i + 8, e1);
    s0 = _mm256_add_ps(s0, e0), s1 = _mm256_add_ps(s1, e1);
  }
  for (; i < full; i += 8) {
    const __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
    if constexpr (Store) _mm256_storeu_ps(y + i, e);
    s0 = _mm256_add_ps(s0, e);
  }
  if (n > full) {
    const __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(load_tail(x, full, n, kNegInf), sh));
    if constexpr (Store) _mm256_maskstore_ps(y + full, tail_mask(n - full), e);
    s1 = _mm256_add_ps(s1, e);
  }
  return hsum8(_mm256_add_ps(s0, s1));
}

VM_AVX2 void exp_scale_avx2(float* y, const float* x, int n, float shift, float scale) {
  const __m256 sh = _mm256_set1_ps(shift), sc = _mm256_set1_ps(scale);
  for (int i = 0; i < n; i += 8) {
    const __m256 e = _mm256_mul_ps(_ZGVdN8v_expf(_mm256_sub_ps(load_tail(x, i, n, kNegInf), sh)), sc);
    if (n - i >= 8)
      _mm256_storeu_ps(y + i, e);
    else
      _mm256_maskstore_ps(y + i, tail_mask(n - i), e);
  }
}

VM_AVX2 inline void store_tail(float* y, int i, int n, __m256 v) {
  if (n - i >= 8)
    _mm256_storeu_ps(y + i, v);
  else
    _mm256_maskstore_ps(y + i, tail_mask(n - i), v);
}

VM_AVX2 void swiglu_avx2(float* a, const float* g, const float* u, int n) {
  const __m256 one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 gv = load_tail(g, i, n, 0.f), uv = load_tail(u, i, n, 0.f);
    const __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(zero, gv));
    store_tail(a, i, n, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), uv));
  }
}

VM_AVX2 void swiglu_backward_avx2(float* dg, float* du, const float* da, const float* g, const float* u, int n) {
  const __m256 one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 gv = load_tail(g, i, n, 0.f), uv = load_tail(u, i, n, 0.f), dav = load_tail(da, i, n, 0.f);
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, _ZGVdN8v_expf(_mm256_sub_ps(zero, gv))));
    const __m256 silu = _mm256_mul_ps(gv, s);
    const __m256 t = _mm256_add_ps(one, _mm256_mul_ps(gv, _mm256_sub_ps(one, s)));
    store_tail(dg, i, n, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(dav, uv), s), t));
    store_tail(du, i, n, _mm256_mul_ps(dav, silu));
  }
}

VM_AVX2 void gelu_avx2(float* y, const float* x, int n) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.f), c = _mm256_set1_ps(kSqrtHalf);
  for (int i = 0; i < n; i += 8) {
    const __m256 xv = load_tail(x, i, n, 0.f);
    const __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(xv, c));
    store_tail(y, i, n, _mm256_mul_ps(_mm256_mul_ps(half, xv), _mm256_add_ps(one, e)));
  }
}

VM_AVX2 void gelu_grad_avx2(float* dx, const float* dy, const float* x, int n) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.f), c = _mm256_set1_ps(kSqrtHalf);
  const __m256 mhalf = _mm256_set1_ps(-0.5f), ip = _mm256_set1_ps(kInvSqrt2Pi);
  for (int i = 0; i < n; i += 8) {
    const __m256 xv = load_tail(x, i, n, 0.f), dyv = load_tail(dy, i, n, 0.f);
    const __m256 cdf = _mm256_mul_ps(half, _mm256_add_ps(one, _ZGVdN8v_erff(_mm256_mul_ps(xv, c))));
    const __m256 pdf = _mm256_mul_ps(_ZGVdN8v_expf(_mm256_mul_ps(_mm256_mul_ps(mhalf, xv), xv)), ip);
    store_tail(dx, i, n, _mm256_mul_ps(dyv, _mm256_add_ps(cdf, _mm256_mul_ps(xv, pdf))));
  }
}

}  // namespace

void gelu_row(float* y, const float* x, int n) {
  if (use_avx512()) return gelu_avx512(y, x, n);
  if (use_avx2()) return gelu_avx2(y, x, n);
  for (int i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * kSqrtHalf));
}

void gelu_grad_row(float* dx, const float* dy, const float* x, int n) {
  if (use_avx512()) return gelu_grad_avx512(dx, dy, x, n);
  if (use_avx2()) return gelu_grad_avx2(dx, dy, x, n);
  for (int i = 0; i < n; ++i) {
    const float cdf = 0.5f * (1.f + std::erf(x[i] * kSqrtHalf));
    const float pdf = std::exp(-0.5f * x[i] * x[i]) * kInvSqrt2Pi;
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

void swiglu_row(float* a, const float* g, const float* u, int n) {
  if (use_avx512()) return swiglu_avx512(a, g, u, n);
  if (use_avx2()) return swiglu_avx2(a, g, u, n);
  for (int i = 0; i < n; ++i) a[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
}

void swiglu_row_backward(float* dg, float* du, const float* da, const float* g, const float* u, int n) {
  if (use_avx512()) return swiglu_backward_avx512(dg, du, da, g, u, n);
  if (use_avx2()) return swiglu_backward_avx2(dg, du, da, g, u, n);
  for (int i = 0; i < n; ++i) {
    const float s = 1.f / (1.f + std::exp(-g[i])), silu = g[i] * s;
    dg[i] = da[i] * u[i] * s * (1.f + g[i] * (1.f - s));
    du[i] = da[i] * silu;
  }
}

void vec_math_force(KernelTier k) { g_cap = int(k); }

float row_max(const float* x, int n) {
  if (use_avx512()) return max_avx512(x, n);
  if (use_avx2()) return max_avx2(x, n);
  float m = kNegInf;
  for (int i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

float row_sum_exp(const float* x, int n, float shift) {
  if (use_avx512()) return exp_sum_avx512<false>(nullptr, x, n, shift);
  if (use_avx2()) return exp_sum_avx2<false>(nullptr, x, n, shift);
  float s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - shift);
  return s;
}

float row_exp_sum(float* y, const float* x, int n, float shift) {
  if (use_avx512()) return exp_sum_avx512<true>(y, x, n, shift);
  if (use_avx2()) return exp_sum_avx2<true>(y, x, n, shift);
  float s = 0;
  for (int i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - shift));
  return s;
}

float row_softmax(float* row, int n) {
  const float m = row_max(row, n), sum = row_exp_sum(row, row, n, m), inv = 1.f / sum;
  for (int i = 0; i < n; ++i) row[i] *= inv;
  return m + std::log(sum);
}

void row_exp_scale(float* y, const float* x, int n, float shift, float scale) {
  if (use_avx512()) return exp_scale_avx512(y, x, n, shift, scale);
  if (use_avx2()) return exp_scale_avx2(y, x, n, shift, scale);
  for (int i = 0; i < n; ++i) y[i] = std::exp(x[i] - shift) * scale;
}

}  // namespace zaya
