// 16 x 16 transpose of 32-bit elements in AVX-512 registers, shared by the GEMM kernels'
// packing (bf16 pairs on AMX and AVX512-BF16, fp32 on AVX-512): out[c] = column c of the rows r[0..15].
#pragma once
#include <immintrin.h>

namespace zaya {

__attribute__((target("avx512f"), always_inline)) inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // rows 4g..4g+3: u[4g + q] holds column 4L + q of them in lane L
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88), v1 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xDD);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x88),
                  v3 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xDD);
    r[q] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[8 + q] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[4 + q] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + q] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

}  // namespace zaya
