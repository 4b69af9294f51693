// The decode kernels over quantized weights in AVX2 (with FMA and F16C): for
// CPUs without AVX-512 VNNI (AMD Zen 2 and 3, Intel client cores), where the
// portable loop would run. The integer products are vpmaddubsw (unsigned x
// signed bytes, pairs summed into 16 bits) and vpmaddwd (16-bit pairs into 32
// bits, by ones or by the sub-block scales), llama.cpp's AVX2 scheme: each
// block's or super-block's sum is exact in integers, then scaled once in float,
// as the other kernels do. x is in natural order (XQ::q) for q8_0 and q6_k, in
// the order the q4_0 and q4_k kernels read their nibbles for those (XQ::qk).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/avx2_util.h"
#include "kernels/linear_quant_xq.h"

#define ZA_TARGET __attribute__((target("avx2,fma,f16c")))

namespace zaya::qkern {

namespace {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;

// Bytes of software prefetch ahead of the weight read (hardware prefetch stops
// at pages).
constexpr int kPrefetch = 2048;

ZA_TARGET inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
ZA_TARGET inline int hsum_epi32(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1)));
}
// Prefetches [p + kPrefetch, p + kPrefetch + bytes) at most 64 bytes apart.
template <int Bytes>
ZA_TARGET inline void prefetch_block(const uint8_t *p) {
  for (int o = 0; o < Bytes; o += 60) _mm_prefetch(reinterpret_cast<const char *>(p) + kPrefetch + o, _MM_HINT_T0);
}
ZA_TARGET inline __m256i load32(const void *p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }

// 32 signed levels w against 32 signed x: |w| (unsigned, <= 128) times x with
// w's sign, so that vpmaddubsw's pairs stay within 16 bits (2 * 128 * 127); 8
// int32 sums of 4.
ZA_TARGET inline __m256i sdot32(__m256i w, __m256i x) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// vpshufb controls that copy one 16-bit element to every 16-bit lane of its
// 128-bit lane: element lo in the low lane, hi in the high lane. Built at
// compile time.
struct alignas(32) Spread {
  uint8_t b[32];
};
constexpr Spread spread(int lo, int hi) {
  Spread s{};
  for (int i = 0; i < 16; ++i) {
    s.b[i] = uint8_t(2 * lo + (i & 1));
    s.b[16 + i] = uint8_t(2 * hi + (i & 1));
  }
  return s;
}
// q6_k: a vector of 32 levels spans two scales of 16, 2j in its low lane and 2j + 1 in
// its high one; the super-block's 16 scales are held even | odd (scale 2j at element j of
// the low lane, 2j + 1 at element j of the high one), so vector j takes element j of each.
constexpr Spread kScaleSpread[8] = {spread(0, 0), spread(1, 1), spread(2, 2), spread(3, 3),
                                    spread(4, 4), spread(5, 5), spread(6, 6), spread(7, 7)};
// q4_k: the same from scale bytes (zero above each): byte 2c in the low lane's
// 16-bit lanes, 2c + 1 in the high lane's (blocks 2c | 2c + 1).
constexpr Spread spread_u8(int lo, int hi) {
  Spread s{};
  for (int i = 0; i < 16; ++i) {
    s.b[i] = i & 1 ? 0x80 : uint8_t(lo);
    s.b[16 + i] = i & 1 ? 0x80 : uint8_t(hi);
  }
  return s;
}
constexpr Spread kQ4kSpread[4] = {spread_u8(0, 1), spread_u8(2, 3), spread_u8(4, 5), spread_u8(6, 7)};
ZA_TARGET inline __m256i ctl(const Spread &s) { return _mm256_load_si256(reinterpret_cast<const __m256i *>(s.b)); }

// Every loop over r (W rows) and i (x rows) is unrolled so that the
// accumulators stay in registers; decode runs NR = kStreams rows side by side
// (see linear_quant.cpp's rows_range).

// x's vectors are the same for each of the NR W rows: the compiler would load
// them once and keep them across the rows, and with 16 ymm registers that
// spills them to the stack (q4_k: 9.4 ns per 256 weights against 7.0 read again
// from L1 per W row). The empty asm hides that the pointer is the same.
template <class T>
inline const T *fresh(const T *p) {
  asm volatile("" : "+r"(p));
  return p;
}

// q8_0: one block of 32 at a time, its signed levels against x's by sdot32.
template <int MR, int NR>
ZA_TARGET void kern_q8_0(const uint8_t *const *wr, const XQ &xq, int m0, float *out) {
  __m256 acc[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[r][i] = _mm256_setzero_ps();
  for (int b = 0; b < xq.nb; ++b)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const uint8_t *p = wr[r] + size_t(b) * sizeof(BlockQ8_0);
      _mm_prefetch(reinterpret_cast<const char *>(p) + kPrefetch, _MM_HINT_T0);
      uint16_t dh;
      std::memcpy(&dh, p, 2);
      const float dw = h2f(dh);
      const __m256i w = load32(p + 2);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m256i s = sdot32(w, load32(xq.qrow(m0 + i) + 32 * b));
        acc[r][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * xq.drow(m0 + i)[b]), acc[r][i]);
      }
    }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) out[r * MR + i] = hsum8(acc[r][i]);
}

// q4_0: two blocks a step, block b in the low 128-bit lane and b + 1 in the high one: their
// 16 bytes of nibbles as one vector, the low nibbles (elements 0-15) masked, the high ones
// (16-31) shifted and masked, against x laid out to match (XQ's q4_0 AVX2 layout: per pair
// of blocks b[0-15] b+1[0-15] b[16-31] b+1[16-31], zeros for a missing b + 1). The two
// vpmaddubsw products add in 16 bits (<= 4 x 15 x 127), one vpmaddwd by ones makes four
// sums per block, and one fma scales both blocks. The levels go in unsigned, 0..15; the
// offset of 8 comes off once per row from x's block sums: 8 sum_b d_w (d_x sum x_b), kept
// per lane (even | odd blocks) as explicit fmas, so every shape of the loop rounds alike.
// (One block a step, with a scalar scale each: 10.7 ns per 256 weights in cache on Zen 3.)
template <int MR, int NR, bool Two>
ZA_TARGET inline void q4_0_pair(const uint8_t *const *wr, const XQ &xq, int m0, int b, __m256 (&acc)[NR][MR],
                                __m128 (&off)[NR][MR]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    const uint8_t *p = wr[r] + size_t(b) * sizeof(BlockQ4_0);
    _mm_prefetch(reinterpret_cast<const char *>(p) + kPrefetch, _MM_HINT_T0);
    uint16_t h0, h1 = 0;
    std::memcpy(&h0, p, 2);
    if (Two) std::memcpy(&h1, p + sizeof(BlockQ4_0), 2);
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128(int(h0) | int(h1) << 16));  // d_w of b, b + 1
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 2));
    const __m256i v =
        Two ? _mm256_inserti128_si256(_mm256_castsi128_si256(q0),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + sizeof(BlockQ4_0) + 2)), 1)
            : _mm256_broadcastsi128_si256(q0);  // (x is zero against the high lane)
    const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const int8_t *x = fresh(xq.qkrow(m0 + i) + 32 * b);
      const __m256i pr =
          _mm256_add_epi16(_mm256_maddubs_epi16(lo, load32(x)), _mm256_maddubs_epi16(hi, load32(x + 32)));
      const float *dx = xq.drow(m0 + i) + b, *ds = xq.dsumrow(m0 + i) + b;
      const __m128 dx2 = Two ? _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double *>(dx))) : _mm_set_ss(*dx);
      const __m128 ds2 = Two ? _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double *>(ds))) : _mm_set_ss(*ds);
      off[r][i] = _mm_fmadd_ps(dw, ds2, off[r][i]);
      const __m256 f = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_mul_ps(dw, dx2)), spread);
      acc[r][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(pr, _mm256_set1_epi16(1))), f, acc[r][i]);
    }
  }
}
template <int MR, int NR>
ZA_TARGET void kern_q4_0(const uint8_t *const *wr, const XQ &xq, int m0, float *out) {
  __m256 acc[NR][MR];
  __m128 off[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[r][i] = _mm256_setzero_ps(), off[r][i] = _mm_setzero_ps();
  int b = 0;
  for (; b + 2 <= xq.nb; b += 2) q4_0_pair<MR, NR, true>(wr, xq, m0, b, acc, off);
  if (b < xq.nb) q4_0_pair<MR, NR, false>(wr, xq, m0, b, acc, off);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
      out[r * MR + i] = std::fma(-8.f, hsum4(off[r][i]), hsum8(acc[r][i]));
}

// q4_k: 64 levels (one 32-byte run of nibbles: block 2c in the low nibbles,
// 2c + 1 in the high) as two vectors, each a 16-byte half broadcast to both
// lanes and shifted by 0 in the low lane, 4 in the high: [block 2c | block 2c +
// 1] levels 0-15, then 16-31 (unsigned, 0..15). x is in the same order (XQ's
// q4_k AVX2 layout), so the two vpmaddubsw products add in 16 bits (pairs <=
// 2 * 15 * 127, so the sum stays < 2^13) before one vpmaddwd by [sc_2c | sc_2c+1]
// per lane: per 64 levels 2 vpmaddubsw and 1 vpmaddwd. Per super-block and x
// row: d dx sum_j sc_j (w_j . x_j) - dmin dx sum_j mn_j sum(x_j) (the mins
// against x's sums per 32, one vpmaddwd). What is per row but not per weight runs
// for two rows at once, row 2p in the low 128-bit lane and 2p + 1 in the high one:
// the scales' unpacking, d and dmin, the mins' term (its own accumulators, taken off
// at the end). (Per row these were ~15 of the ~65 vector instructions of a super-block:
// Zen 3, 1 thread, 1.2 MB in cache, 6.84-7.17 -> 6.49-6.66 ns per 256 weights.)
template <int MR, int NR>
ZA_TARGET void kern_q4_k(const uint8_t *const *wr, const XQ &xq, int m0, float *out) {
  constexpr int NP = (NR + 1) / 2;  // row pairs
  __m256 acc[NR][MR], macc[NP][MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[r][i] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) macc[p][i] = _mm256_setzero_ps();
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F), lane_shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  // f = (d0, dmin0, d1, dmin1) dx of a pair: d of row q everywhere, each row's dmin in its lane
  const __m256i d_idx[2] = {_mm256_set1_epi32(0), _mm256_set1_epi32(2)};
  const __m256i dmin_idx = _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3);
  for (int s = 0; s < xq.ns; ++s)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      constexpr bool kTwo = NR > 1;
      const BlockQ4_K *bp[2] = {reinterpret_cast<const BlockQ4_K *>(wr[2 * p]) + s,
                                reinterpret_cast<const BlockQ4_K *>(wr[kTwo ? 2 * p + 1 : 2 * p]) + s};
      int dd[2] = {0, 0};
      std::memcpy(&dd[0], bp[0], 4);
      if (kTwo) std::memcpy(&dd[1], bp[1], 4);
      const __m128 dm = _mm_cvtph_ps(_mm_setr_epi32(dd[0], dd[1], 0, 0));  // d, dmin of each row
      const __m256i scmn = q4k_scales_mins_pair(bp[0]->scales, kTwo ? bp[1]->scales : nullptr);
      const __m256i mn = _mm256_unpackhi_epi8(scmn, _mm256_setzero_si256());  // the mins as 16-bit
      __m256 f[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        f[i] = _mm256_castps128_ps256(_mm_mul_ps(dm, _mm_set1_ps(xq.drow(m0 + i)[s])));
        const __m256i msum = _mm256_madd_epi16(
            mn, lanes2(_mm_loadu_si128(reinterpret_cast<const __m128i *>(fresh(xq.bs32row(m0 + i)) + 8 * s))));
        macc[p][i] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_permutevar8x32_ps(f[i], dmin_idx), macc[p][i]);
      }
#pragma GCC unroll 2
      for (int q = 0; q < (kTwo ? 2 : 1); ++q) {
        const BlockQ4_K *b = bp[q];
        prefetch_block<144>(reinterpret_cast<const uint8_t *>(b));
        const __m256i sc = _mm256_permute2x128_si256(scmn, scmn, q ? 0x11 : 0x00);  // row q's lane in both
        const int8_t *x[MR];
        __m256i isum[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) x[i] = fresh(xq.qkrow(m0 + i) + 256 * s), isum[i] = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          __m256i w[2];
          for (int h = 0; h < 2; ++h) {
            const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b->qs + 32 * c + 16 * h));
            w[h] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_broadcastsi128_si256(half), lane_shift), m4);
          }
          const __m256i scl = _mm256_shuffle_epi8(sc, ctl(kQ4kSpread[c]));
#pragma GCC unroll 4
          for (int i = 0; i < MR; ++i) {
            const __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(w[0], load32(x[i] + 64 * c)),
                                                _mm256_maddubs_epi16(w[1], load32(x[i] + 64 * c + 32)));
            isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(pr, scl));
          }
        }
        const int r = 2 * p + q;
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i)
          acc[r][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_permutevar8x32_ps(f[i], d_idx[q]), acc[r][i]);
      }
    }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 m = macc[r / 2][i];  // row r's mins term: its pair's lane r % 2, summed
      out[r * MR + i] = hsum8(acc[r][i]) - hsum4(r % 2 ? _mm256_extractf128_ps(m, 1) : _mm256_castps256_ps128(m));
    }
}

// q6_k: levels 0..63 (low nibble | two high bits << 4) go in unsigned; the
// offset of 32 is taken off in the integers, as 32 sum_g sc_g sum(x_g)
// (vpmaddwd of the scales against x's sums per 16, both even | odd: XQ's AVX2
// layout). Per half of 128 levels:
// ql's 64 bytes hold levels 0-63's low nibbles (bytes 0-31 for 0-31, 32-63 for
// 32-63) and 64-127's (their high nibbles); qh's 32 bytes hold the two high
// bits of levels l, l + 32, l + 64, l + 96 at bits 0-1, 2-3, 4-5, 6-7 of byte
// l.
template <int MR, int NR>
ZA_TARGET void kern_q6_k(const uint8_t *const *wr, const XQ &xq, int m0, float *out) {
  __m256 acc[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[r][i] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int s = 0; s < xq.ns; ++s)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const BlockQ6_K *b = reinterpret_cast<const BlockQ6_K *>(wr[r]) + s;
      prefetch_block<210>(reinterpret_cast<const uint8_t *>(b));
      const __m256i sc16 = _mm256_cvtepi8_epi16(
          _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b->scales)), even_odd));
      const float d = h2f(b->d);
      const int8_t *x[MR];
      __m256i isum[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) x[i] = fresh(xq.qrow(m0 + i) + 256 * s), isum[i] = _mm256_setzero_si256();
      // Each 32 levels go into the sums as they are made: all 8 with their 8
      // scale vectors held at once would spill.
      for (int n = 0; n < 2; ++n) {
        const __m256i ql0 = load32(b->ql + 64 * n), ql1 = load32(b->ql + 64 * n + 32), qh = load32(b->qh + 32 * n);
        const __m256i w[4] = {
            _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
            _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30))};
        for (int k = 0; k < 4; ++k) {
          const __m256i scl = _mm256_shuffle_epi8(sc16, ctl(kScaleSpread[4 * n + k]));
#pragma GCC unroll 4
          for (int i = 0; i < MR; ++i)
            isum[i] = _mm256_add_epi32(
                isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(w[k], load32(x[i] + 128 * n + 32 * k)), scl));
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m256i osum = _mm256_madd_epi16(sc16, load32(xq.bs16row(m0 + i) + 16 * s));
        const __m256i isum_i = _mm256_sub_epi32(isum[i], _mm256_slli_epi32(osum, 5));
        acc[r][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum_i), _mm256_set1_ps(d * xq.drow(m0 + i)[s]), acc[r][i]);
      }
    }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) out[r * MR + i] = hsum8(acc[r][i]);
}

template <int MR, int NR>
void kern(QType t, const uint8_t *const *wr, const XQ &xq, int m0, float *out) {
  switch (t) {
    case QType::Q8_0:
      return kern_q8_0<MR, NR>(wr, xq, m0, out);
    case QType::Q4_0:
      return kern_q4_0<MR, NR>(wr, xq, m0, out);
    case QType::Q4_K:
      return kern_q4_k<MR, NR>(wr, xq, m0, out);
    case QType::Q6_K:
      return kern_q6_k<MR, NR>(wr, xq, m0, out);
    default:
      return;
  }
}

}  // namespace

void kern_avx2(QType t, int MR, int NR, const uint8_t *const *wr, const XQ &xq, int m0, float *out) {
  if (NR == kStreams) return kern<1, kStreams>(t, wr, xq, m0, out);
  switch (MR) {
    case 4:
      return kern<4, 1>(t, wr, xq, m0, out);
    case 3:
      return kern<3, 1>(t, wr, xq, m0, out);
    case 2:
      return kern<2, 1>(t, wr, xq, m0, out);
    default:
      return kern<1, 1>(t, wr, xq, m0, out);
  }
}

// The same bits as the portable loop: the same float products, vcvtps2dq rounds
// to nearest even as nearbyint does, and a NaN is skipped by the max (vmaxps
// returns its second operand when the first is NaN) as std::max skips it.
ZA_TARGET void quantize_blocks_avx2(const float *x, int K, int B, int8_t *q, float *d, float *dsum, int16_t *bsum16) {
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  const __m256 sign = _mm256_set1_ps(-0.f);
  for (int b = 0; b < K / B; ++b) {
    const float *xb = x + size_t(B) * b;
    __m256 m = _mm256_setzero_ps();
    for (int g = 0; g < B / 8; ++g) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * g)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
    const float s = amax / 127.f, is = s > 0 ? 1.f / s : 0.f;
    d[b] = s;
    const __m256 vis = _mm256_set1_ps(is);
    int total = 0;
    for (int g = 0; g < B / 16; ++g) {
      const float *xg = xb + 16 * g;
      const auto level = [&](int o) ZA_TARGET {
        return _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + o), vis)), hi),
                                lo);
      };
      const __m256i i0 = level(0), i1 = level(8);
      const __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i0, i1),
                                                   0xD8);  // 16 x int16 in order
      _mm_storeu_si128(reinterpret_cast<__m128i *>(q + size_t(B) * b + 16 * g),
                       _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1)));
      const int sum = hsum_epi32(_mm256_add_epi32(i0, i1));
      if (bsum16) bsum16[size_t(B / 16) * b + g] = int16_t(sum);
      total += sum;
    }
    if (dsum) dsum[b] = s * float(total);
  }
}

}  // namespace zaya::qkern
