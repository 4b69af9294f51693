// Decode attention over a KV cache for one (batch row, KV head) and its G query heads, in
// AVX-512: K and V float or bf16 (widened exactly as read), hd a multiple of 16; scores,
// softmax and sums in float. The portable loops (attention.cpp, attention_quant.cpp) spend
// their time in scalar horizontal sums (GCC reduces `omp simd` sums through memory) and
// scalar expf (`bench_quant_kernels --attention`: 60 against 16-20 us per layer of ZAYA1-base
// at 512 cached bf16 positions, 2 threads, Zen 5).
//   scores: 16 keys at a time, each K row read once for the G heads, a tree sum of the 16;
//   softmax: vector max and glibc's vector expf (libmvec), normalised in place;
//   values: blocks of 64 keys, each V row read from memory once, G x 4 accumulators in
//   registers per 64 output lanes.
// GCC 12 warns about its own _mm512_undefined_* inside the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/attention_group.h"
#include "kernels/avx2_util.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/gemm.h"

extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);  // glibc libmvec

namespace zaya {

namespace {

std::atomic<int> g_cap{int(KernelTier::Auto)};  // attention_group_force
KernelTier cap() { return KernelTier(g_cap.load(std::memory_order_relaxed)); }

// 16 cached elements as floats (bf16: widened exactly, its bits in the high half).
__attribute__((target("avx512f"))) inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
__attribute__((target("avx512f"))) inline __m512 load16(const bf16* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Rows prefetched ahead: the same bytes ahead for either element type.
template <class T>
constexpr int ahead_rows() {
  return kAttnPrefetchRows * int(sizeof(float) / sizeof(T));
}

// r[i] = the sum of a[i]'s 16 lanes, i < 16: pairs of vectors interleaved and added level by
// level (45 shuffles and adds for 16 sums, against ~8 per sum for one reduce_add each).
__attribute__((target("avx512f"))) inline __m512 reduce16(const __m512* a) {
  __m512 b[8], c[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: a[2i] at 0, 2 and a[2i+1] at 1, 3
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the lane's sums of a[4i .. 4i+3]
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(b[2 * i]), _mm512_castps_pd(b[2 * i + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(b[2 * i]), _mm512_castps_pd(b[2 * i + 1]));
    c[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));  // (moved as doubles, added as floats)
  }
  // The four 128-bit lanes of each c[i] summed, c[i]'s sums landing in lane i.
  const __m512 e0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 e1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// S[j * Tk + u] = scale * q_j . k_u for the G heads j and keys u < n. Keys go 16 at a time
// (each K row read once for the G heads; a bf16 row widened once into kw), one accumulator
// per key and a tree sum of the 16; the last n % 16 keys one at a time.
template <class T>
__attribute__((target("avx512f"))) void scores(float* S, int Tk, const float* qg, const T* kb, int ldk, int hd, int G,
                                               int n, float scale) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  const int C = hd / 16;
  alignas(64) float kw[kFloat ? 1 : 16 * kAttnBf16MaxHd];  // bf16: 16 widened rows
  // Key u's row as floats: a float row in place, a bf16 row widened into kw's slot i.
  const auto row = [&](int u, int i) __attribute__((target("avx512f"))) -> const float* {
    const T* kt = kb + size_t(u) * ldk;
    if constexpr (kFloat) {
      return kt;
    } else {
      for (int c = 0; c < C; ++c) _mm512_store_ps(kw + i * hd + 16 * c, load16(kt + 16 * c));
      return kw + i * hd;
    }
  };
  const __m512 vscale = _mm512_set1_ps(scale);
  int u0 = 0;
  for (; u0 + 16 <= n; u0 += 16) {
    const float* rows[16];
    for (int u = 0; u < 16; ++u) {
      prefetch_row(kb + size_t(u0 + u + ahead_rows<T>()) * ldk, hd);
      rows[u] = row(u0 + u, u);
    }
    for (int j = 0; j < G; ++j) {
      const float* qr = qg + size_t(j) * hd;
      __m512 acc[16];
      for (int u = 0; u < 16; ++u) acc[u] = _mm512_setzero_ps();
      for (int c = 0; c < C; ++c) {
        const __m512 qv = _mm512_loadu_ps(qr + 16 * c);
#pragma GCC unroll 16
        for (int u = 0; u < 16; ++u) acc[u] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rows[u] + 16 * c), acc[u]);
      }
      _mm512_storeu_ps(S + size_t(j) * Tk + u0, _mm512_mul_ps(reduce16(acc), vscale));
    }
  }
  for (; u0 < n; ++u0) {
    const float* kr = row(u0, 0);
    for (int j = 0; j < G; ++j) {
      const float* qr = qg + size_t(j) * hd;
      __m512 a0 = _mm512_setzero_ps();
      for (int c = 0; c < C; ++c) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 16 * c), _mm512_loadu_ps(kr + 16 * c), a0);
      S[size_t(j) * Tk + u0] = _mm512_reduce_add_ps(a0) * scale;
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

// Keys [u0, u1) of og[j * hd + i] += sum_u P[j * Tk + u] v[u][i] for heads j0 + (0..gn) and
// lanes 16 * (c0 + (0..cn)) (gn, cn <= 4; Full: both 4, no run-time bounds in the loop); og
// starts at zero when first. prefetch: this pass prefetches whole rows ahead.
template <class T, bool Full>
__attribute__((target("avx512f"))) void values_pass(float* og, const float* P, int Tk, const T* vb, int ldv, int hd,
                                                    int j0, int gn, int c0, int cn, int u0, int u1, bool first,
                                                    bool prefetch) {
  if constexpr (Full) gn = cn = 4;
  __m512 acc[4][4];
  for (int j = 0; j < 4; ++j)
    for (int c = 0; c < 4; ++c)
      acc[j][c] = first || j >= gn || c >= cn ? _mm512_setzero_ps()
                                              : _mm512_loadu_ps(og + size_t(j0 + j) * hd + 16 * (c0 + c));
  for (int u = u0; u < u1; ++u) {
    const T* vr = vb + size_t(u) * ldv;
    if (prefetch) prefetch_row(vr + size_t(ahead_rows<T>()) * ldv, hd);
    __m512 vv[4];
    for (int c = 0; c < 4; ++c) vv[c] = Full || c < cn ? load16(vr + 16 * (c0 + c)) : _mm512_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      if (!Full && j >= gn) break;
      const __m512 p = _mm512_set1_ps(P[size_t(j0 + j) * Tk + u]);
      for (int c = 0; c < 4; ++c) acc[j][c] = _mm512_fmadd_ps(p, vv[c], acc[j][c]);
    }
  }
  for (int j = 0; j < gn; ++j)
    for (int c = 0; c < cn; ++c) _mm512_storeu_ps(og + size_t(j0 + j) * hd + 16 * (c0 + c), acc[j][c]);
}

// og[j * hd + i] = sum_u P[j * Tk + u] v[u][i]: G x 4 accumulators of 16 lanes per pass, the
// passes over one block of kValueKeys keys at a time, so that its V rows are read from memory
// once (at 4,096 positions a head's V is 1 MB, more than L2: a pass over all keys per 64
// lanes read it twice).
constexpr int kValueKeys = 64;
template <class T>
__attribute__((target("avx512f"))) void values(float* og, const float* P, int Tk, const T* vb, int ldv, int hd, int G,
                                               int n) {
  const int C = hd / 16;
  for (int u0 = 0; u0 < n; u0 += kValueKeys) {
    const int u1 = std::min(n, u0 + kValueKeys);
    for (int j0 = 0; j0 < G; j0 += 4)
      for (int c0 = 0; c0 < C; c0 += 4) {
        const int gn = std::min(4, G - j0), cn = std::min(4, C - c0);
        const bool first = u0 == 0, pf = j0 == 0 && c0 == 0;
        if (gn == 4 && cn == 4)
          values_pass<T, true>(og, P, Tk, vb, ldv, hd, j0, gn, c0, cn, u0, u1, first, pf);
        else
          values_pass<T, false>(og, P, Tk, vb, ldv, hd, j0, gn, c0, cn, u0, u1, first, pf);
      }
  }
}

template <class T>
void group(float* out, float* lse, const float* q, const T* k, const T* v, const AttnShape& s, int b, int g,
           float* S) {
  attention_group_rows(out, lse, q, k, v, s, b, g, S, scores<T>, softmax_row, values<T>);
}

}  // namespace

bool attention_group_avx512_ok(const AttnShape& s) {
  return s.hd % 16 == 0 && cpu_features().avx512f && cap() == KernelTier::Auto;
}

bool attention_group_avx2_ok(const AttnShape& s) {
  return s.hd % 8 == 0 && cpu_avx2_fma() && cap() != KernelTier::Portable;
}

const char* attention_group_kernel(const AttnShape& s, bool bf16_cache) {
  if (bf16_cache ? attention_group_avx512_ok_bf16(s) : attention_group_avx512_ok(s)) return "avx512";
  if (bf16_cache ? attention_group_avx2_ok_bf16(s) : attention_group_avx2_ok(s)) return "avx2";
  return "portable";
}

void attention_group_force(KernelTier k) { g_cap = int(k); }

void attention_group_avx512(float* out, float* lse, const float* q, const float* k, const float* v, const AttnShape& s,
                            int b, int g, float* S) {
  group(out, lse, q, k, v, s, b, g, S);
}

void attention_group_avx512(float* out, float* lse, const float* q, const bf16* k, const bf16* v, const AttnShape& s,
                            int b, int g, float* S) {
  group(out, lse, q, k, v, s, b, g, S);
}

}  // namespace zaya
