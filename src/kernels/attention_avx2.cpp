// Decode attention over a KV cache for one (batch row, KV head) and its G query heads in AVX2
// (CPUs without AVX-512): attention_avx512.cpp's scheme in 8 lanes. K and V float or bf16
// (widened exactly as read), hd a multiple of 8; scores, softmax and sums in float.
//   scores: 8 keys at a time, each K row read once for the G heads, a tree sum of the 8;
//   softmax: vec_math's row_softmax (glibc's vector expf);
//   values: blocks of 64 keys, each V row read from memory once, 4 heads x 2 vectors of
//   accumulators per pass (AVX2 has 16 vector registers).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention_group.h"
#include "kernels/avx2_util.h"
#include "kernels/vec_math.h"

#define ZT __attribute__((target("avx2,fma")))

namespace zaya {

namespace {

ZT inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
ZT inline __m256 load8(const bf16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <class T>
constexpr int ahead_rows() {
  return kAttnPrefetchRows * int(sizeof(float) / sizeof(T));
}

// r[i] = the sum of a[i]'s 8 lanes, i < 8: pairs added level by level (hadd), the two
// 128-bit halves last.
ZT inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

// S[j * Tk + u] = scale * q_j . k_u for the G heads j and keys u < n.
template <class T>
ZT void scores(float* S, int Tk, const float* qg, const T* kb, int ldk, int hd, int G, int n, float scale) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  const int C = hd / 8;
  alignas(32) float kw[kFloat ? 1 : 8 * kAttnBf16MaxHd];  // bf16: 8 widened rows
  const auto row = [&](int u, int i) ZT -> const float* {
    const T* kt = kb + size_t(u) * ldk;
    if constexpr (kFloat) {
      return kt;
    } else {
      for (int c = 0; c < C; ++c) _mm256_store_ps(kw + i * hd + 8 * c, load8(kt + 8 * c));
      return kw + i * hd;
    }
  };
  const __m256 vscale = _mm256_set1_ps(scale);
  int u0 = 0;
  for (; u0 + 8 <= n; u0 += 8) {
    const float* rows[8];
    for (int u = 0; u < 8; ++u) {
      prefetch_row(kb + size_t(u0 + u + ahead_rows<T>()) * ldk, hd);
      rows[u] = row(u0 + u, u);
    }
    for (int j = 0; j < G; ++j) {
      const float* qr = qg + size_t(j) * hd;
      __m256 acc[8];
      for (int u = 0; u < 8; ++u) acc[u] = _mm256_setzero_ps();
      for (int c = 0; c < C; ++c) {
        const __m256 qv = _mm256_loadu_ps(qr + 8 * c);
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) acc[u] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(rows[u] + 8 * c), acc[u]);
      }
      _mm256_storeu_ps(S + size_t(j) * Tk + u0, _mm256_mul_ps(reduce8(acc), vscale));
    }
  }
  for (; u0 < n; ++u0) {
    const float* kr = row(u0, 0);
    for (int j = 0; j < G; ++j) {
      const float* qr = qg + size_t(j) * hd;
      __m256 a0 = _mm256_setzero_ps();
      for (int c = 0; c < C; ++c) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + 8 * c), _mm256_loadu_ps(kr + 8 * c), a0);
      S[size_t(j) * Tk + u0] = hsum8(a0) * scale;
    }
  }
}

// Keys [u0, u1) of og[j * hd + i] += sum_u P[j * Tk + u] v[u][i] for heads j0 + (0..gn) and
// lanes 8 * (c0 + (0..cn)) (gn <= 4, cn <= 2); og starts at zero when first. prefetch: this
// pass prefetches whole rows ahead.
template <class T>
ZT void values_pass(float* og, const float* P, int Tk, const T* vb, int ldv, int hd, int j0, int gn, int c0, int cn,
                    int u0, int u1, bool first, bool prefetch) {
  __m256 acc[4][2];
  for (int j = 0; j < 4; ++j)
    for (int c = 0; c < 2; ++c)
      acc[j][c] = first || j >= gn || c >= cn ? _mm256_setzero_ps()
                                              : _mm256_loadu_ps(og + size_t(j0 + j) * hd + 8 * (c0 + c));
  for (int u = u0; u < u1; ++u) {
    const T* vr = vb + size_t(u) * ldv;
    if (prefetch) prefetch_row(vr + size_t(ahead_rows<T>()) * ldv, hd);
    const __m256 v0 = load8(vr + 8 * c0), v1 = cn > 1 ? load8(vr + 8 * (c0 + 1)) : _mm256_setzero_ps();
    for (int j = 0; j < gn; ++j) {
      const __m256 p = _mm256_set1_ps(P[size_t(j0 + j) * Tk + u]);
      acc[j][0] = _mm256_fmadd_ps(p, v0, acc[j][0]);
      acc[j][1] = _mm256_fmadd_ps(p, v1, acc[j][1]);
    }
  }
  for (int j = 0; j < gn; ++j)
    for (int c = 0; c < cn; ++c) _mm256_storeu_ps(og + size_t(j0 + j) * hd + 8 * (c0 + c), acc[j][c]);
}

// og[j * hd + i] = sum_u P[j * Tk + u] v[u][i], one block of 64 keys at a time so that its V
// rows are read from memory once (at 4,096 positions a head's V is 1 MB, more than L2).
constexpr int kValueKeys = 64;
template <class T>
ZT void values(float* og, const float* P, int Tk, const T* vb, int ldv, int hd, int G, int n) {
  const int C = hd / 8;
  for (int u0 = 0; u0 < n; u0 += kValueKeys) {
    const int u1 = std::min(n, u0 + kValueKeys);
    for (int j0 = 0; j0 < G; j0 += 4)
      for (int c0 = 0; c0 < C; c0 += 2)
        values_pass(og, P, Tk, vb, ldv, hd, j0, std::min(4, G - j0), c0, std::min(2, C - c0), u0, u1, u0 == 0,
                    j0 == 0 && c0 == 0);
  }
}

template <class T>
void group(float* out, float* lse, const float* q, const T* k, const T* v, const AttnShape& s, int b, int g,
           float* S) {
  attention_group_rows(out, lse, q, k, v, s, b, g, S, scores<T>, row_softmax, values<T>);
}

}  // namespace

void attention_group_avx2(float* out, float* lse, const float* q, const float* k, const float* v, const AttnShape& s,
                          int b, int g, float* S) {
  group(out, lse, q, k, v, s, b, g, S);
}

void attention_group_avx2(float* out, float* lse, const float* q, const bf16* k, const bf16* v, const AttnShape& s,
                          int b, int g, float* S) {
  group(out, lse, q, k, v, s, b, g, S);
}

}  // namespace zaya
