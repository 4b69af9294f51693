// Internal to the decode kernels over quantized weights (linear_quant.cpp, the
// dispatch and the portable loop; linear_quant_avx512.cpp and linear_quant_avx2.cpp,
// the AVX-512 VNNI and AVX2 kernels): x as the integer kernels read it, and the
// kernels' entry points.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/avx2_util.h"
#include "quant/blocks.h"

namespace zaya::qkern {

using quant::QType;

// W rows read side by side in decode (one x row): each kernel call takes a row
// of each.
constexpr int kStreams = 4;

// x quantized for the integer kernels, per row. q8_0 and q4_0 (blocks of 32):
// levels q[K], per block the scale d and the scale times the block's level sum
// (dsum: q8_0's offset of 128 in the native kernel, q4_0's 8 in the native and AVX2 ones),
// and for the native kernels dpair, the scales as 16 lanes per pair of blocks (8
// lanes each; 0 past the end). q4_k and q6_k
// (super-blocks of 256): levels q[K] with one scale d per super-block and the
// level sums per 16 (bs16), and for q4_k the sums per 32 (bs32) and the levels
// of each super-block in the order its kernel reads the nibbles (qk): for the
// native kernel block order 0 2 1 3 4 6 5 7 (one 64-byte load of nibbles holds
// blocks 4k and 4k+2 in its low nibbles, 4k+1 and 4k+3 in its high ones), for
// the AVX2 kernel per 64 levels (blocks 2c, 2c + 1) the 16-level runs 2c[0-15]
// 2c+1[0-15] 2c[16-31] 2c+1[16-31]. The AVX2 q4_0 kernel reads q4_0's x in that order
// too (qk, np * 64 a row: zeros for the missing block of an odd count). The AVX2 q6_k
// kernel reads each super-block's 16 bs16 even | odd (0 2 .. 14 1 3 .. 15).
enum class XLayout { Natural, Native, Avx2 };
struct XQ {
  QType t = QType::Q8_0;
  int M = 0, K = 0, nb = 0, np = 0,
      ns = 0;  // blocks of 32, pairs of them, blocks of the scale d
  std::vector<int8_t> q, qk;
  std::vector<float> d, dsum, dpair;
  std::vector<int16_t> bs16, bs32;
  // layout: Native adds what the AVX-512 kernels also read (dpair, qk), Avx2
  // q4_k's and q4_0's qk for the AVX2 kernels.
  void prepare(QType t_, const float *x, int ldx, int M_, int K_, XLayout layout);
  const int8_t *qrow(int m) const { return &q[size_t(m) * K]; }
  const int8_t *qkrow(int m) const { return &qk[size_t(m) * np * 64]; }  // (q4_k: np * 64 = K)
  const float *drow(int m) const { return &d[size_t(m) * ns]; }
  const float *dsumrow(int m) const { return &dsum[size_t(m) * nb]; }
  const float *dpairrow(int m) const { return &dpair[size_t(m) * np * 16]; }
  const int16_t *bs16row(int m) const { return &bs16[size_t(m) * K / 16]; }
  const int16_t *bs32row(int m) const { return &bs32[size_t(m) * nb]; }
};

// q4_k super-blocks' eight 6-bit scales and eight 6-bit mins (quant::q4k_scale_min) as
// bytes 0-7 and 8-15 of a 128-bit lane: row a's in the low lane, row b's (b nullptr: none)
// in the high one. The 12 bytes u hold sc0-3 | mn0-3 in the low 6 bits of u[0-3] | u[4-7],
// and sc4-7 | mn4-7 in the low | high nibbles of u[8-11] with their top 2 bits in the top 2
// bits of u[0-3] | u[4-7]. (The 16-byte load reads 4 bytes of the levels after them.) Every
// step stays within its lane, so two rows cost one row's instructions. The AVX2 kernel's;
// the AVX-512 one runs the same steps on four rows at once (q4k_scales_mins_rows in
// linear_quant_avx512.cpp).
__attribute__((target("avx2"))) inline __m256i q4k_scales_mins_pair(const uint8_t *a, const uint8_t *b) {
  __m256i u = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(a)));
  if (b) u = _mm256_inserti128_si256(u, _mm_loadu_si128(reinterpret_cast<const __m128i *>(b)), 1);
  // p: u0-3 | u8-11 | u4-7 | u8-11 >> 4, masked to the 6 or 4 bits each part takes
  __m256i p = _mm256_shuffle_epi8(u, lanes2(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
  p = _mm256_and_si256(_mm256_srlv_epi32(p, lanes2(_mm_setr_epi32(0, 0, 0, 4))),
                       lanes2(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)));
  // the top 2 bits of u0-3 (for sc4-7) and u4-7 (for mn4-7) at bits 4-5
  const __m256i t = _mm256_shuffle_epi8(u, lanes2(_mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7)));
  return _mm256_or_si256(p, _mm256_and_si256(_mm256_srli_epi16(t, 2), _mm256_set1_epi8(0x30)));
}

// The x-to-int8 loop (linear_quant.cpp's quantize_blocks) in AVX2: the same
// bits.
void quantize_blocks_avx2(const float *x, int K, int B, int8_t *q, float *d, float *dsum, int16_t *bsum16);

// NR W rows (wr[r]) against MR x rows from m0 (MR 1..4; NR 1 or kStreams):
// out[r * MR + i], the same integer sums per block as the other kernels (q4_0's
// offset of 8 taken off in float). Types q8_0, q4_0, q4_k, q6_k; x as
// prepare(..., XLayout::Avx2) leaves it.
void kern_avx2(QType t, int MR, int NR, const uint8_t *const *wr, const XQ &xq, int m0, float *out);

// The same in AVX-512 VNNI (linear_quant_avx512.cpp), x as prepare(..., XLayout::Native)
// leaves it; a CPU with avx512f/bw/vl/dq and avx512_vnni. NR == kStreams reads x row 0
// (m0 = 0), as decode calls it.
void kern_avx512(QType t, int MR, int NR, const uint8_t *const *wr, const XQ &xq, int m0, float *out);

}  // namespace zaya::qkern
