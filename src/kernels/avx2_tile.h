// The 6 x 16 fp32 register tile of our AVX2 products (attention_avx2_train.cpp): MR rows of A,
// each element broadcast from where it lies (any two strides), times a packed 16-column panel
// of B (row p at B + 16 p). 6 x 2 accumulators, 2
// vectors of B and a broadcast take 15 of the 16 registers.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>

namespace zaya {

constexpr int kTileRows = 6;

template <int MR, int NV>
struct TileAcc {
  __m256 c[MR][NV];
};

// acc = sum over p in [p0, p1) of a(i, p) B[p, :] with a(i, p) = A[i ai + p ap]. The sums run
// in locals, copied to acc once: accumulators the caller may take the address of (its epilogue
// through a buffer) would otherwise be stored to the stack on every step.
template <int MR, int NV>
__attribute__((target("avx2,fma"), always_inline)) inline void tile_sum(TileAcc<MR, NV>& acc, const float* A,
                                                                         long ai, long ap, const float* B, int p0,
                                                                         int p1) {
  __m256 c[MR][NV];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) c[i][v] = _mm256_setzero_ps();
  for (int p = p0; p < p1; ++p) {
    const float* b = B + 16 * p;
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
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc.c[i][v] = c[i][v];
}

// B (K x N, element (p, j) at src[p sp + j sj]) packed for tile_sum: 16-column panels of K rows,
// panel j0 / 16 at dst + j0 K, columns past N zero; (N + 15) / 16 * 16 * K floats.
inline void pack_panels(float* dst, const float* src, int K, int N, long sp, long sj) {
  for (int j0 = 0; j0 < N; j0 += 16) {
    float* d = dst + size_t(j0) * K;
    const int nj = std::min(16, N - j0);
    for (int p = 0; p < K; ++p, d += 16) {
      const float* s = src + p * sp + j0 * sj;
      if (sj == 1)
        std::copy(s, s + nj, d);
      else
        for (int j = 0; j < nj; ++j) d[j] = s[j * sj];
      std::fill(d + nj, d + 16, 0.f);
    }
  }
}

}  // namespace zaya
