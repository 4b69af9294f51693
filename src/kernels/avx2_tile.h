// The 6 x 16 fp32 register tile of our AVX2 attention products (attention_tiles.cpp): MR rows
// of A, each element broadcast from where it lies (any two strides), times a packed 16-column
// panel of B (row p at B + 16 p). 6 x 2 accumulators, 2 vectors of B and a broadcast take 15
// of the 16 registers.
#pragma once
#include <immintrin.h>

namespace zaya {

struct Avx2Tile {
  static constexpr int kRows = 6, kLanes = 8, kPanel = 16, kStep = 1;
  static constexpr const char* kName = "AVX2 6x16 tiles";

  // C[MR x 8 NV] (+)= alpha * sum over p in [p0, p1) of a(i, p) B[p, :], a(i, p) = A[i ai + p ap].
  template <int MR, int NV>
  __attribute__((target("avx2,fma"))) static void tile(const float* A, long ai, long ap, const float* B, int p0,
                                                        int p1, float alpha, float* C, long ldc, bool acc) {
    __m256 c[MR][NV];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) c[i][v] = _mm256_setzero_ps();
    for (int p = p0; p < p1; ++p) {
      const float* b = B + kPanel * p;
      const __m256 b0 = _mm256_loadu_ps(b);
      const __m256 b1 = NV == 2 ? _mm256_loadu_ps(b + 8) : b0;
      const float* a = A + p * ap;
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        const __m256 x = _mm256_broadcast_ss(a + i * ai);
        c[i][0] = _mm256_fmadd_ps(x, b0, c[i][0]);
        if constexpr (NV == 2) c[i][1] = _mm256_fmadd_ps(x, b1, c[i][1]);
      }
    }
    const __m256 al = _mm256_set1_ps(alpha);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) {
        float* cp = C + i * ldc + 8 * v;
        __m256 r = _mm256_mul_ps(c[i][v], al);
        if (acc) r = _mm256_add_ps(r, _mm256_loadu_ps(cp));
        _mm256_storeu_ps(cp, r);
      }
  }
};

}  // namespace zaya
