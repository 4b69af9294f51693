// The 8 x 32 fp32 register tile of our AVX-512 attention products (attention_tiles.cpp): MR
// rows of A, each element broadcast from where it lies (any two strides), times a packed
// 32-column panel of B (row p at B + 32 p). 8 x 2 accumulators and 2 vectors of B: per step
// 10 loads for 16 FMAs, still bound by the FMAs. 8 rows rather than the GEMM kernel's 12
// (gemm_avx512.h): a 64-row attention block is 8 whole tiles, and the causal triangle is
// skipped in finer steps; the 12-row tile measured 3-4% slower on zaya1-small's layer
// (`build/bench_attention_fp32`, AMD Zen 5, 2 threads).
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace zaya {

// What both 16-lane tiles share: their accumulators zeroed, and C[i, 16 v ..] (+)= alpha c[i][v].
template <int MR, int NV>
__attribute__((target("avx512f"), always_inline)) inline void tile_zero(__m512 (&c)[MR][NV]) {
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) c[i][v] = _mm512_setzero_ps();
}
template <int MR, int NV>
__attribute__((target("avx512f"), always_inline)) inline void tile_store(const __m512 (&c)[MR][NV], float alpha,
                                                                         float* C, long ldc, bool acc) {
  const __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* cp = C + i * ldc + 16 * v;
      __m512 r = _mm512_mul_ps(c[i][v], al);
      if (acc) r = _mm512_add_ps(r, _mm512_loadu_ps(cp));
      _mm512_storeu_ps(cp, r);
    }
}

struct Avx512Tile {
  static constexpr int kRows = 8, kLanes = 16, kPanel = 32, kStep = 1;
  static constexpr const char* kName = "AVX-512 8x32 tiles";

  // C[MR x 16 NV] (+)= alpha * sum over p in [p0, p1) of a(i, p) B[p, :], a(i, p) = A[i ai + p ap].
  template <int MR, int NV>
  __attribute__((target("avx512f"))) static void tile(const float* A, long ai, long ap, const float* B, int p0,
                                                      int p1, float alpha, float* C, long ldc, bool acc) {
    __m512 c[MR][NV];
    tile_zero<MR, NV>(c);
    for (int p = p0; p < p1; ++p) {
      const float* b = B + kPanel * p;
      const __m512 b0 = _mm512_loadu_ps(b);
      const __m512 b1 = NV == 2 ? _mm512_loadu_ps(b + 16) : b0;
      const float* a = A + p * ap;
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 x = _mm512_set1_ps(a[i * ai]);
        c[i][0] = _mm512_fmadd_ps(x, b0, c[i][0]);
        if constexpr (NV == 2) c[i][1] = _mm512_fmadd_ps(x, b1, c[i][1]);
      }
    }
    tile_store<MR, NV>(c, alpha, C, ldc, acc);
  }
};

// The bf16 form (AVX512-BF16): 32-bit lanes hold bf16 pairs (k, k + 1), low half k, and
// VDPBF16PS takes the place of the FMA, two products per lane; sums stay fp32. A's pair (i, q)
// is the 32-bit unit at A[i ai + q aq], B's pair row q the 32 units at B + 32 q.
struct Avx512Bf16Tile {
  static constexpr int kRows = 8, kLanes = 16, kPanel = 32, kStep = 2;  // kStep: inner elements per A unit
  static constexpr const char* kName = "AVX512-BF16 8x32 tiles";

  // C[MR x 16 NV] (+)= alpha * sum over pairs q in [q0, q1) of a(i, q) . B[q, :].
  template <int MR, int NV>
  __attribute__((target("avx512f,avx512bf16"))) static void tile(const uint32_t* A, long ai, long aq,
                                                                 const uint32_t* B, int q0, int q1, float alpha,
                                                                 float* C, long ldc, bool acc) {
    __m512 c[MR][NV];
    tile_zero<MR, NV>(c);
    for (int q = q0; q < q1; ++q) {
      const uint32_t* b = B + kPanel * q;
      const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
      const __m512bh b1 = NV == 2 ? (__m512bh)_mm512_loadu_si512(b + 16) : b0;
      const uint32_t* a = A + q * aq;
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(int(a[i * ai]));
        c[i][0] = _mm512_dpbf16_ps(c[i][0], x, b0);
        if constexpr (NV == 2) c[i][1] = _mm512_dpbf16_ps(c[i][1], x, b1);
      }
    }
    tile_store<MR, NV>(c, alpha, C, ldc, acc);
  }
};

}  // namespace zaya
