// The decode kernels over quantized weights in AVX-512 VNNI (with BW, VL, DQ, F16C, FMA): the
// kernels linear_quant.cpp runs where the CPU has them (AMD Zen 4 and 5, Intel Ice Lake and
// later). Integer products: vpdpbusd of unsigned weight levels against x's int8 levels (q8_0's
// moved up by 128, q4_0's 0..15 as they are), and for the k-quants vpdpbusd, a pack into 16
// bits and vpdpwssd by the block scales, so that a super-block is integer sums up to one
// float scale. Decode (one x row) runs kStreams W rows side by side; the results are the
// portable loop's integer sums per block (q4_0's offset of 8 comes off in float, as in the
// AVX2 kernel).
#include <immintrin.h>

#include <cstring>

#include "kernels/linear_quant_xq.h"

// GCC 12 warns about its own _mm512_undefined_* inside the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace zaya::qkern {

using quant::BlockQ4_K;
using quant::BlockQ6_K;

namespace {

#define ZQ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,f16c,fma")))
// Bytes of software prefetch ahead of the weight read (hardware prefetch stops at pages). On the
// 2-core Zen 5 VM (bench_quant_kernels, 2 threads, 2 MB pages, 5 rounds alternating 1, 2 and
// 4 KB): medians q4_k 63.7 / 63.0 / 54.9 GB/s, q6_k 56.6 / 57.2 / 57.2, q8_0 59.4 / 60.7 / 53.9.
constexpr int kPrefetch = 2048;

ZQ_TARGET inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
ZQ_TARGET inline __m512 pair_ps(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}
ZQ_TARGET inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
ZQ_TARGET inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
ZQ_TARGET inline float hsum128(__m128 h) {
  const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}
ZQ_TARGET inline float hsum256(__m256 v) {
  return hsum128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}
// The lane sums of N vectors, four at a time: a 4 x 4 transpose by unpacks and shuffles within
// each 128-bit lane, then the four lanes added (12 instructions for four, where one
// _mm512_reduce_add_ps each took 32: an epilogue per four rows of 2048 weights is ~3% of
// a call). Every vector's sum is ((v0 + v2) + (v1 + v3)) per 128-bit lane, then (lane 0 +
// lane 2) + (lane 1 + lane 3), wherever it stands: a row's value does not depend on which
// rows it was reduced with (team cuts move rows between groups; their results must not move).
template <int N>
ZQ_TARGET inline void reduce_lanes(const __m512* v, float* out) {
  for (int g = 0; g < N; g += 4) {
    const __m512 z = _mm512_setzero_ps();
    const __m512 a = v[g], b = g + 1 < N ? v[g + 1] : z, c = g + 2 < N ? v[g + 2] : z, d = g + 3 < N ? v[g + 3] : z;
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));  // a02 b02 a13 b13
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));  // a b c d
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));  // L0+L2 | L1+L3
    alignas(16) float o[4];
    _mm_store_ps(o, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (int j = g; j < N && j < g + 4; ++j) out[j] = o[j - g];
  }
}
// Prefetches [p + kPrefetch, p + kPrefetch + bytes) at most 64 bytes apart.
template <int Bytes>
ZQ_TARGET inline void prefetch_block(const uint8_t* p) {
  for (int o = 0; o < Bytes; o += 60) _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetch + o, _MM_HINT_T0);
}

// The kernels take NR W rows (wr[r]) against MR x rows (from m0) and write out[r * MR + i].
// Every loop over r and i is unrolled, so that the accumulator arrays live in registers.
// Decode (one x row) runs NR = kStreams rows at once, one from each stream (rows_range), a
// block group of each in turn, so that the memory system sees NR sequential reads in flight
// (as the bf16 decode kernel does; reading rows one after another left q4_k and q6_k at ~0.7
// of bf16's bytes per second); more x rows run one W row at a time (NR = 1).

// vpermw / vpermt2w controls, built at compile time (16-bit word indices per 16-bit lane).
struct alignas(64) WordControl {
  uint16_t w[32];
};
ZQ_TARGET inline __m512i load_control(const WordControl& c) { return _mm512_load_si512(c.w); }

// q8_0 and q4_0, eight blocks at a time. The levels go in unsigned: q4_0's 0..15 as they
// are, q8_0's as w + 128 (a flip of the sign bit); so each product carries L::kOffset x too
// (8 or 128), taken off once per block as kOffset d_w d_x sum(x). L::group reads eight
// blocks as a few 64-byte loads and picks the scales and the levels out of them with
// vpermt2w (the blocks' 34 or 18 bytes start at even offsets). Against eight scalar loads
// of the scales and two loads per pair of blocks (a gather was slower still), in a pass over
// L3 (1 thread, Zen 5, medians of 4 alternated): q8_0 5.9 -> 5.5 ns per 256 weights, q4_0
// 5.2 -> 4.0. L::pair(a, b): blocks a and b's levels as one vector, for the last < 8 blocks
// (b nullptr: a lone block, x masked to zero above it).
constexpr WordControl q8_0_words(int k) {  // blocks 2k, 2k + 1's 32 words, from loads 64k and 64(k + 1)
  WordControl c{};
  for (int j = 0; j < 32; ++j) c.w[j] = uint16_t(1 + 2 * k + j + (j >= 16 ? 1 : 0));
  return c;
}
constexpr WordControl q4_0_words(int k) {  // blocks 2k, 2k + 1's 8 words each, twice; loads 0, 64 (k 3: 64, 128)
  WordControl c{};
  for (int L = 0; L < 4; ++L)
    for (int e = 0; e < 8; ++e) c.w[8 * L + e] = uint16_t(18 * k + 1 - (k == 3 ? 32 : 0) + (L >= 2 ? 9 : 0) + e);
  return c;
}
constexpr WordControl scale_words(int step, int first) {  // words first + step j, j < 8
  WordControl c{};
  for (int j = 0; j < 8; ++j) c.w[j] = uint16_t(first + step * j);
  return c;
}
constexpr WordControl kQ8_0Words[4] = {q8_0_words(0), q8_0_words(1), q8_0_words(2), q8_0_words(3)};
constexpr WordControl kQ4_0Words[4] = {q4_0_words(0), q4_0_words(1), q4_0_words(2), q4_0_words(3)};
constexpr WordControl kQ8_0Scales = scale_words(17, 0), kQ4_0Scales = scale_words(9, 0);

struct LevelsQ8_0 {
  static constexpr int kBytes = 34;
  static constexpr float kOffset = 128.f;
  ZQ_TARGET __m512i pair(const uint8_t* a, const uint8_t* b) const {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2));
    const __m512i w = b ? join(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2))) : _mm512_zextsi256_si512(lo);
    return _mm512_xor_si512(w, _mm512_set1_epi8(char(0x80)));
  }
  // 272 bytes: four 64-byte loads and the last 16 bytes
  ZQ_TARGET __m256 group(const uint8_t* p, __m512i* w) const {
    __m512i v[5];
    for (int j = 0; j < 4; ++j) v[j] = _mm512_loadu_si512(p + 64 * j);
    v[4] = _mm512_zextsi128_si512(load128(p + 256));
    for (int k = 0; k < 4; ++k)
      w[k] = _mm512_xor_si512(_mm512_permutex2var_epi16(v[k], load_control(kQ8_0Words[k]), v[k + 1]),
                              _mm512_set1_epi8(char(0x80)));
    // scales 0-3 at words 0, 17, 34, 51 of loads 0-1; 4-7 at the same of loads 2-3 shifted by 4 words
    const __m512i ds = load_control(kQ8_0Scales);
    const __m512i s03 = _mm512_permutex2var_epi16(v[0], ds, v[1]);
    const __m512i s47 = _mm512_permutex2var_epi16(v[2], _mm512_add_epi16(ds, _mm512_set1_epi16(4)), v[3]);
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm512_castsi512_si128(s03), _mm512_castsi512_si128(s47)));
  }
};
// q4_0: a block's 16 bytes in two 128-bit lanes, the second shifted right by 4, masked (the
// low nibbles hold elements 0-15, the high ones 16-31).
struct LevelsQ4_0 {
  static constexpr int kBytes = 18;
  static constexpr float kOffset = 8.f;
  ZQ_TARGET static __m512i nibbles(__m512i v) {
    return _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(0x0F));
  }
  ZQ_TARGET __m512i pair(const uint8_t* a, const uint8_t* b) const {
    const __m512i v = _mm512_broadcast_i32x4(load128(a + 2));
    return nibbles(b ? _mm512_mask_broadcast_i32x4(v, 0xFF00, load128(b + 2)) : v);
  }
  // 144 bytes: two 64-byte loads and the last 16 bytes
  ZQ_TARGET __m256 group(const uint8_t* p, __m512i* w) const {
    const __m512i v0 = _mm512_loadu_si512(p), v1 = _mm512_loadu_si512(p + 64);
    const __m512i v2 = _mm512_zextsi128_si512(load128(p + 128));
    for (int k = 0; k < 3; ++k) w[k] = nibbles(_mm512_permutex2var_epi16(v0, load_control(kQ4_0Words[k]), v1));
    w[3] = nibbles(_mm512_permutex2var_epi16(v1, load_control(kQ4_0Words[3]), v2));
    const __m512i s = _mm512_permutex2var_epi16(v0, load_control(kQ4_0Scales), v1);
    return _mm256_cvtph_ps(_mm512_castsi512_si128(s));
  }
};
template <int MR, int NR, class L>
ZQ_TARGET void kern_32(const uint8_t* const* wr, const XQ& xq, int m0, float* out, L levels) {
  constexpr int B = L::kBytes;
  const int nb = xq.nb;
  __m512 acc[NR][MR][2];
  __m256 cacc[NR][MR];
  float ctail[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
      acc[r][i][0] = acc[r][i][1] = _mm512_setzero_ps(), cacc[r][i] = _mm256_setzero_ps(), ctail[r][i] = 0;
  const __m512i pidx[4] = {_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                           _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
                           _mm512_set_epi32(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
                           _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6)};
  int b = 0;
  for (; b + 8 <= nb; b += 8)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const uint8_t* p = wr[r] + size_t(b) * B;
      prefetch_block<8 * B>(p);
      __m512i w[4];
      const __m256 dw8 = levels.group(p, w);
      __m512 f8[MR];  // d_w d_x per block
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        cacc[r][i] = _mm256_fmadd_ps(dw8, _mm256_loadu_ps(xq.dsumrow(m0 + i) + b), cacc[r][i]);
        f8[i] = _mm512_castps256_ps512(_mm256_mul_ps(dw8, _mm256_loadu_ps(xq.drow(m0 + i) + b)));
      }
      for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) {
          const __m512i si =
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[k], _mm512_loadu_si512(xq.qrow(m0 + i) + 32 * b + 64 * k));
          acc[r][i][k & 1] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_permutexvar_ps(pidx[k], f8[i]), acc[r][i][k & 1]);
        }
      }
    }
  for (; b < nb; b += 2)  // the last < 8 blocks, a pair at a time (a lone last block: x masked)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const bool two = b + 1 < nb;
      const uint8_t* p = wr[r] + size_t(b) * B;
      uint16_t h0, h1 = 0;
      std::memcpy(&h0, p, 2);
      if (two) std::memcpy(&h1, p + B, 2);
      const float d0 = h2f(h0), d1 = two ? h2f(h1) : 0.f;
      const __m512i w = levels.pair(p, two ? p + B : nullptr);
      const __m512 dwp = pair_ps(d0, d1);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const int8_t* xr = xq.qrow(m0 + i) + 32 * b;
        const __m512i xv = two ? _mm512_loadu_si512(xr) : _mm512_maskz_loadu_epi8(0xffffffffull, xr);
        const __m512 f = _mm512_mul_ps(dwp, _mm512_loadu_ps(xq.dpairrow(m0 + i) + 8 * b));
        acc[r][i][0] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv)), f, acc[r][i][0]);
        ctail[r][i] += d0 * xq.dsumrow(m0 + i)[b] + (two ? d1 * xq.dsumrow(m0 + i)[b + 1] : 0.f);
      }
    }
  __m512 sum[NR * MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) sum[r * MR + i] = _mm512_add_ps(acc[r][i][0], acc[r][i][1]);
  reduce_lanes<NR * MR>(sum, out);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) out[r * MR + i] -= L::kOffset * (hsum256(cacc[r][i]) + ctail[r][i]);
}

// 256 x levels against a super-block's four vectors of unsigned weight levels (64 each):
// vpdpbusd sums four products per 32-bit lane (|.| <= 4 * 63 * 128 < 2^15), vpackssdw packs two
// vectors of those into 16-bit lanes (no saturation: the values are kept), and vpdpwssd
// multiplies them by the scale of each 16-bit lane's block (scl[0] for w[0], w[1]; scl[1] for
// w[2], w[3]) and adds pairs into 32 bits. So a super-block is integer sums up to one float
// scale, as llama.cpp's k-quant dot products are. vpackssdw interleaves per 128-bit lane: lane L
// of pack(a, b) holds a's lane L in words 0-3 and b's in words 4-7. (Against vpmaddubsw +
// vpdpwssd per vector: 6 multiplies and 2 packs where there were 8 multiplies and 2 more scale
// shuffles. Zen 5, 1 thread from L2, 8 rounds alternating, median: q4_k 4.37 -> 4.21 ns per
// 256 weights, q6_k 5.06 -> 4.76.)
ZQ_TARGET inline __m512i dot_256_scaled(const __m512i* w, const __m512i* scl, const int8_t* xr) {
  const __m512i z = _mm512_setzero_si512();
  __m512i p[4];
  for (int v = 0; v < 4; ++v) p[v] = _mm512_dpbusd_epi32(z, w[v], _mm512_loadu_si512(xr + 64 * v));
  const __m512i s = _mm512_dpwssd_epi32(z, _mm512_packs_epi32(p[0], p[1]), scl[0]);
  return _mm512_dpwssd_epi32(s, _mm512_packs_epi32(p[2], p[3]), scl[1]);
}

// vpshufb controls that spread byte scales to the 16-bit lanes of dot_256_scaled's packed
// vectors: in 128-bit lane L, words 0-3 take byte a[L] and words 4-7 byte b[L] of the same
// lane, each with a zero above it. Built at compile time: a kernel call covers only a few
// rows, and building them per call cost ~10 instructions per 256 weights.
struct alignas(64) ScaleControl {
  uint8_t b[64];
};
constexpr ScaleControl scale_control_u8(int a_lo, int b_lo, int a_hi, int b_hi) {  // lanes 0-1 | 2-3
  ScaleControl c{};
  for (int L = 0; L < 4; ++L)
    for (int e = 0; e < 8; ++e) {
      c.b[16 * L + 2 * e] = uint8_t(e < 4 ? (L < 2 ? a_lo : a_hi) : (L < 2 ? b_lo : b_hi));
      c.b[16 * L + 2 * e + 1] = 0x80;
    }
  return c;
}
// q4_k: the blocks of w[v]'s 128-bit lanes 0-1 | 2-3 are 0|2, 1|3, 4|6, 5|7; packed two by two,
// pack(w0, w1) holds blocks 0, 1 | 2, 3 and pack(w2, w3) blocks 4, 5 | 6, 7.
constexpr ScaleControl kQ4kControl[2] = {scale_control_u8(0, 1, 2, 3), scale_control_u8(4, 5, 6, 7)};
// q6_k: w[v] holds levels 64v..64v+63, 16 per scale: its 128-bit lane L has scale 4v + L, so
// lane L of pack(w0, w1) takes scales L, 4 + L and of pack(w2, w3) 8 + L, 12 + L, picked by
// vpermw from the 16 scales as 16-bit words (kQ6kWords[k]: the word index per 16-bit lane).
constexpr WordControl q6k_words(int k) {
  WordControl c{};
  for (int L = 0; L < 4; ++L)
    for (int e = 0; e < 8; ++e) c.w[8 * L + e] = uint16_t(8 * k + (e < 4 ? 0 : 4) + L);
  return c;
}
constexpr WordControl kQ6kWords[2] = {q6k_words(0), q6k_words(1)};
ZQ_TARGET inline __m512i load_control(const ScaleControl& c) { return _mm512_load_si512(c.b); }

ZQ_TARGET inline __m512i lanes(__m128i v) { return _mm512_broadcast_i32x4(v); }
// vpermd / vpermps indices for the kernels that hold row r in 128-bit lane r: every lane
// takes lane r (lane_idx), or every element takes element e (elem_idx). Built once per call
// (r is not an immediate before the row loops unroll).
ZQ_TARGET inline __m512i lane_idx(int r) {
  return _mm512_add_epi32(_mm512_set1_epi32(4 * r), _mm512_set_epi32(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0));
}
ZQ_TARGET inline __m512i elem_idx(int e) { return _mm512_set1_epi32(e); }

// q4k_scales_mins_pair (linear_quant_xq.h) for one super-block of each of NR <= 4 rows: row r's
// bytes sc0-7 mn0-7 in 128-bit lane r. Every step of it stays within a 128-bit lane, so one
// pass serves the four streams of a decode call; per row it was a third of the kernel's
// instructions.
template <int NR>
ZQ_TARGET inline __m512i q4k_scales_mins_rows(const BlockQ4_K* const* b) {
  __m512i u = _mm512_zextsi128_si512(load128(b[0]->scales));
  if constexpr (NR > 1) u = _mm512_inserti32x4(u, load128(b[1]->scales), 1);
  if constexpr (NR > 2) u = _mm512_inserti32x4(u, load128(b[2]->scales), 2);
  if constexpr (NR > 3) u = _mm512_inserti32x4(u, load128(b[3]->scales), 3);
  static_assert(NR >= 1 && NR <= 4);
  const __m512i a = _mm512_shuffle_epi8(u, lanes(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
  const __m512i bits = _mm512_shuffle_epi8(u, lanes(_mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7)));
  // (a >> 0|0|0|4 per 32 bits) & 6|4|6|4 bits, | the top two bits moved to bits 4-5
  return _mm512_or_si512(
      _mm512_and_si512(_mm512_srlv_epi32(a, lanes(_mm_setr_epi32(0, 0, 0, 4))),
                       lanes(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f))),
      _mm512_and_si512(_mm512_srli_epi16(bits, 2), _mm512_set1_epi8(0x30)));
}

// q4_k: per super-block two 64-byte loads of nibbles, low (& 0x0F) and high (>> 4) against
// x laid out in the same block order (XQ::qk). What is per row but not per weight runs for
// the NR rows at once, row r in 128-bit lane r: the 6-bit scales and mins unpacked
// (q4k_scales_mins_rows), d and dmin, and the mins' term. Per super-block and x row:
// sum_j sc_j (w_j . x_j) in int32 lanes times d dx (sc_j spread per row from its lane), and
// sum_j mn_j sum(x_j) (vpmaddwd of each lane's mins against x's sums per 32) times dmin dx.
// (In a 1-thread pass over 0.6 MB of weights on Zen 5 the shared steps and the two sum
// chains of dot_256_scaled took the loop from 4.36 to about 3.9 ns per 256 weights.)
template <int MR, int NR>
ZQ_TARGET void kern_q4_k(const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  static_assert(NR >= 1 && NR <= 4);
  __m512 acc[NR][MR], macc[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    macc[i] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[r][i] = _mm512_setzero_ps();
  }
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const __m512i ctl[2] = {load_control(kQ4kControl[0]), load_control(kQ4kControl[1])};
  const __m512i mctl = lanes(_mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
  // f = (d, dmin) * dx of each row r: its d (element 2r) as a whole vector, its dmin
  // (element 2r + 1) in its own lane
  const __m512i sc_idx[4] = {lane_idx(0), lane_idx(1), lane_idx(2), lane_idx(3)};
  const __m512i d_idx[4] = {elem_idx(0), elem_idx(2), elem_idx(4), elem_idx(6)};
  const __m512i dmin_idx = _mm512_set_epi32(7, 7, 7, 7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1);
  // The scales of super-block s + 1 are unpacked while s is summed: their chain of shuffles
  // is long, and the vector scheduler does not reach that far ahead by itself.
  auto unpack = [&](int s, __m256* dm, __m512i* scmn) ZQ_TARGET {
    const BlockQ4_K* bs[NR];
    int dd[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      bs[r] = reinterpret_cast<const BlockQ4_K*>(wr[r]) + s;
      std::memcpy(&dd[r], bs[r], 4);
    }
    *dm = _mm256_cvtph_ps(_mm_setr_epi32(dd[0], dd[1], dd[2], dd[3]));  // d, dmin of row 0, 1, ...
    *scmn = q4k_scales_mins_rows<NR>(bs);
  };
  __m256 dm_next;
  __m512i scmn_next;
  unpack(0, &dm_next, &scmn_next);
  for (int s = 0; s < xq.ns; ++s) {
    const __m256 dm = dm_next;
    const __m512i scmn = scmn_next;
    unpack(std::min(s + 1, xq.ns - 1), &dm_next, &scmn_next);  // (the last one again: no branch)
    const BlockQ4_K* bs[NR];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) bs[r] = reinterpret_cast<const BlockQ4_K*>(wr[r]) + s;
    const __m512i mn = _mm512_shuffle_epi8(scmn, mctl);  // each lane's mins as 16-bit
    __m512 f[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      f[i] = _mm512_castps256_ps512(_mm256_mul_ps(dm, _mm256_set1_ps(xq.drow(m0 + i)[s])));
      const __m512i msum = _mm512_madd_epi16(mn, lanes(load128(xq.bs32row(m0 + i) + 8 * s)));
      macc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_permutexvar_ps(dmin_idx, f[i]), macc[i]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const BlockQ4_K* b = bs[r];
      prefetch_block<144>(reinterpret_cast<const uint8_t*>(b));
      const __m512i sc = _mm512_permutexvar_epi32(sc_idx[r], scmn);  // row r's lane in every lane
      const __m512i v0 = _mm512_loadu_si512(b->qs), v1 = _mm512_loadu_si512(b->qs + 64);
      const __m512i w[4] = {_mm512_and_si512(v0, lo4), _mm512_and_si512(_mm512_srli_epi16(v0, 4), lo4),
                            _mm512_and_si512(v1, lo4), _mm512_and_si512(_mm512_srli_epi16(v1, 4), lo4)};
      const __m512i scl[2] = {_mm512_shuffle_epi8(sc, ctl[0]), _mm512_shuffle_epi8(sc, ctl[1])};
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m512i isum = dot_256_scaled(w, scl, xq.qkrow(m0 + i) + 256 * s);
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_permutexvar_ps(d_idx[r], f[i]), acc[r][i]);
      }
    }
  }
  reduce_lanes<NR * MR>(&acc[0][0], out);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {  // each 128-bit lane's sum, (m0 + m2) + (m1 + m3), in its element 0
    __m512 m = _mm512_add_ps(macc[i], _mm512_permute_ps(macc[i], 0x4E));
    m = _mm512_add_ps(m, _mm512_permute_ps(m, 0xB1));
    alignas(64) float ms[16];
    _mm512_store_ps(ms, m);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) out[r * MR + i] -= ms[4 * r];
  }
}

// q6_k: levels 0..63 (low nibble | two high bits << 4) go in unsigned; the offset of 32 is
// taken off in the integers, as 32 sum_g sc_g sum(x_g) (vpmaddwd of the scales against x's
// sums per 16). A 64-byte load of ql holds 128 levels' low (& 0x0F) and high (>> 4) nibbles;
// the 32 bytes of qh, broadcast to both halves, shifted right by 0 | 2 and masked (t), hold
// the two bits of the low nibbles' levels at bits 0-1 and of the high nibbles' at bits 4-5:
// one ternary-logic merge each ((ql & 0x0F) | (t << 4 & 0xF0), (ql >> 4 & 0x0F) | (t & 0xF0)).
// Scales: one vpmovsxbw, then a vpermw per two vectors of levels (dot_256_scaled packs them).
template <int MR, int NR>
ZQ_TARGET void kern_q6_k(const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  __m512 acc[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[r][i] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m33 = _mm512_set1_epi8(0x33);
  const __m512i shr = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
  const __m512i pw[2] = {load_control(kQ6kWords[0]), load_control(kQ6kWords[1])};
  const __m512i d_idx[4] = {elem_idx(0), elem_idx(1), elem_idx(2), elem_idx(3)};
  for (int s = 0; s < xq.ns; ++s) {
    // d of the NR rows, times dx of each x row (one conversion for the rows)
    uint16_t dh[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) std::memcpy(&dh[r], &(reinterpret_cast<const BlockQ6_K*>(wr[r]) + s)->d, 2);
    const __m128 d4 = _mm_cvtph_ps(_mm_setr_epi16(short(dh[0]), short(dh[1]), short(dh[2]), short(dh[3]), 0, 0, 0, 0));
    __m512 f[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) f[i] = _mm512_castps128_ps512(_mm_mul_ps(d4, _mm_set1_ps(xq.drow(m0 + i)[s])));
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(wr[r]) + s;
      prefetch_block<210>(reinterpret_cast<const uint8_t*>(b));
      // the 16 scales as 16-bit (sc16), spread by one vpermw per vector of levels
      const __m256i sc16 = _mm256_cvtepi8_epi16(load128(b->scales));
      const __m512i sc = _mm512_castsi256_si512(sc16);
      const __m512i scl[2] = {_mm512_permutexvar_epi16(pw[0], sc), _mm512_permutexvar_epi16(pw[1], sc)};
      __m512i w[4];
      for (int n = 0; n < 2; ++n) {
        const __m512i ql = _mm512_loadu_si512(b->ql + 64 * n);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * n)));
        // t: the lower half's fields 0 and 2, the upper half's 1 and 3, at bits 0-1 and 4-5
        const __m512i t = _mm512_and_si512(_mm512_srlv_epi64(qh, shr), m33);
        w[2 * n] = _mm512_ternarylogic_epi64(ql, _mm512_slli_epi16(t, 4), m4, 0xE4);  // (A & C) | (B & ~C)
        w[2 * n + 1] = _mm512_ternarylogic_epi64(_mm512_srli_epi16(ql, 4), t, m4, 0xE4);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m512i isum = dot_256_scaled(w, scl, xq.qrow(m0 + i) + 256 * s);
        const __m256i osum =
            _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.bs16row(m0 + i) + 16 * s)));
        const __m512i tot = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(osum, 5)));
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), _mm512_permutexvar_ps(d_idx[r], f[i]), acc[r][i]);
      }
    }
  }
  reduce_lanes<NR * MR>(&acc[0][0], out);
}

template <int MR, int NR>
void kern(QType t, const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  switch (t) {
    case QType::Q8_0: return kern_32<MR, NR>(wr, xq, m0, out, LevelsQ8_0{});
    case QType::Q4_0: return kern_32<MR, NR>(wr, xq, m0, out, LevelsQ4_0{});
    case QType::Q4_K: return kern_q4_k<MR, NR>(wr, xq, m0, out);
    case QType::Q6_K: return kern_q6_k<MR, NR>(wr, xq, m0, out);
    default: return;
  }
}

}  // namespace

void kern_avx512(QType t, int MR, int NR, const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  // Decode: x row 0 alone (as a constant, m0 frees a register in the loops: q6_k took 6.9
  // against 6.6 ns per 256 weights with it passed through).
  if (NR == kStreams) return kern<1, kStreams>(t, wr, xq, 0, out);
  switch (MR) {
    case 4: return kern<4, 1>(t, wr, xq, m0, out);
    case 3: return kern<3, 1>(t, wr, xq, m0, out);
    case 2: return kern<2, 1>(t, wr, xq, m0, out);
    default: return kern<1, 1>(t, wr, xq, m0, out);
  }
}

}  // namespace zaya::qkern
