// Decode attention over a KV cache for one (batch row, KV head) and its G query heads, in
// AVX-512 (float, hd a multiple of 16). The portable loop in attention.cpp spent most of its
// time in scalar horizontal sums (GCC reduces `omp simd` sums through memory) and scalar
// expf: 49 us per (layer, group) at 546 cached positions, warm, on this machine.
//   scores: each K row read once, G dot products, one tree sum each;
//   softmax: vector max and glibc's vector expf (libmvec), normalised in place;
//   values: each V row read once per 64 output lanes, G x 4 accumulators in registers.
// GCC 12 warns about its own _mm512_undefined_* inside the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/attention_avx512.h"

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

__attribute__((target("avx512f"))) void scores(float* S, int Tk, const float* qg, const float* kb, int ldk, int hd,
                                               int G, int n, float scale) {
  const int C = hd / 16;
  for (int u = 0; u < n; ++u) {
    const float* kr = kb + size_t(u) * ldk;
    prefetch_row(kr + size_t(kAttnPrefetchRows) * ldk, hd);
    for (int j = 0; j < G; ++j) {
      const float* qr = qg + size_t(j) * hd;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
      int c = 0;
      for (; c + 2 <= C; c += 2) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 16 * c), _mm512_loadu_ps(kr + 16 * c), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 16 * c + 16), _mm512_loadu_ps(kr + 16 * c + 16), a1);
      }
      if (c < C) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 16 * c), _mm512_loadu_ps(kr + 16 * c), a0);
      S[size_t(j) * Tk + u] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * scale;
    }
  }
}

// row[0, n) <- softmax(row[0, n)); returns the log-sum-exp.
__attribute__((target("avx512f"))) float softmax_row(float* row, int n) {
  const int full = n / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (n - full)) - 1);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mv = ninf;
  for (int i = 0; i < full; i += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(row + i));
  if (tail) mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(ninf, tail, row + full));
  const float m = _mm512_reduce_max_ps(mv);
  const __m512 mb = _mm512_set1_ps(m);
  __m512 sv = _mm512_setzero_ps();
  for (int i = 0; i < full; i += 16) {
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(row + i), mb));
    _mm512_storeu_ps(row + i, e);
    sv = _mm512_add_ps(sv, e);
  }
  if (tail) {  // lanes past n are -inf: exp gives 0
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, tail, row + full), mb));
    _mm512_mask_storeu_ps(row + full, tail, e);
    sv = _mm512_add_ps(sv, e);
  }
  const float sum = _mm512_reduce_add_ps(sv);
  const __m512 inv = _mm512_set1_ps(1.f / sum);
  for (int i = 0; i < full; i += 16) _mm512_storeu_ps(row + i, _mm512_mul_ps(_mm512_loadu_ps(row + i), inv));
  if (tail) _mm512_mask_storeu_ps(row + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, row + full), inv));
  return m + std::log(sum);
}

// og[j * hd + i] = sum_u P[j * Tk + u] v[u][i], for up to 4 heads j and 64 lanes i per pass.
__attribute__((target("avx512f"))) void values(float* og, const float* P, int Tk, const float* vb, int ldv, int hd,
                                               int G, int n) {
  const int C = hd / 16;
  for (int j0 = 0; j0 < G; j0 += 4)
    for (int c0 = 0; c0 < C; c0 += 4) {
      const int gn = std::min(4, G - j0), cn = std::min(4, C - c0);
      __m512 acc[4][4];
      for (int j = 0; j < 4; ++j)
        for (int c = 0; c < 4; ++c) acc[j][c] = _mm512_setzero_ps();
      for (int u = 0; u < n; ++u) {
        const float* vr = vb + size_t(u) * ldv + 16 * c0;
        prefetch_row(vr + size_t(kAttnPrefetchRows) * ldv, 64);
        __m512 vv[4];
        for (int c = 0; c < 4; ++c) vv[c] = c < cn ? _mm512_loadu_ps(vr + 16 * c) : _mm512_setzero_ps();
        for (int j = 0; j < 4; ++j) {
          if (j >= gn) break;
          const __m512 p = _mm512_set1_ps(P[size_t(j0 + j) * Tk + u]);
          for (int c = 0; c < 4; ++c) acc[j][c] = _mm512_fmadd_ps(p, vv[c], acc[j][c]);
        }
      }
      for (int j = 0; j < gn; ++j)
        for (int c = 0; c < cn; ++c) _mm512_storeu_ps(og + size_t(j0 + j) * hd + 16 * (c0 + c), acc[j][c]);
    }
}

}  // namespace

bool attention_group_avx512_ok(const AttnShape& s) {
  return s.hd % 16 == 0 && cpu_features().avx512f && !g_portable.load(std::memory_order_relaxed);
}

void attention_group_force_portable(bool on) { g_portable = on; }

void attention_group_avx512(float* out, float* lse, const float* q, const float* k, const float* v, const AttnShape& s,
                            int b, int g, float* S) {
  const int G = s.Hq / s.Hk, hd = s.hd;
  const float scale = 1.f / std::sqrt(float(hd));
  const float* kb = k + s.kv_offset(b, g, s.ldk);
  const float* vb = v + s.kv_offset(b, g, s.ldv);
  for (int t = 0; t < s.Tq; ++t) {
    const float* qg = q + (size_t(b) * s.Tq + t) * s.ldq + size_t(g) * G * hd;
    float* og = out + (size_t(b) * s.Tq + t) * s.ldo + size_t(g) * G * hd;
    const int n = std::min(s.Tk - 1, s.q_pos0 + t) + 1;  // visible keys
    scores(S, s.Tk, qg, kb, s.ldk, hd, G, n, scale);
    for (int j = 0; j < G; ++j)
      lse[(size_t(b) * s.Hq + size_t(g) * G + j) * s.Tq + t] = softmax_row(S + size_t(j) * s.Tk, n);
    values(og, S, s.Tk, vb, s.ldv, hd, G, n);
  }
}

}  // namespace zaya
