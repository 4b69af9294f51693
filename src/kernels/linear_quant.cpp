#include "kernels/linear_quant.h"

// GCC 12 warns about its own _mm512_undefined_* inside the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "core/bf16.h"
#include "kernels/gemm.h"

namespace zaya {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::QType;

namespace {

std::atomic<bool> g_portable{false};
std::atomic<int> g_gemm_rows{16};

bool cpu_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}
bool cpu_vnni() {
  static const bool ok = cpu_avx512() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c");
  return ok;
}
bool use_native() { return !g_portable.load(std::memory_order_relaxed) && cpu_vnni(); }

// ---------------------------------------------------------------- x to int8

// One row of x to int8 levels in blocks of 32 (scale amax / 127, round to nearest even), with
// each block's scale times its level sum and, when s16 is given, the same per 16 levels.
void quantize_sums_portable(const float* x, int K, int8_t* q, float* d, float* dsum, float* s16) {
  for (int b = 0; b < K / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float s = amax / 127.f, is = s > 0 ? 1.f / s : 0.f;
    d[b] = s;
    int sum[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      q[32 * b + j] = int8_t(std::clamp(int(std::nearbyint(xb[j] * is)), -127, 127));
      sum[j / 16] += q[32 * b + j];
    }
    if (dsum) dsum[b] = s * float(sum[0] + sum[1]);
    if (s16) s16[2 * b] = s * float(sum[0]), s16[2 * b + 1] = s * float(sum[1]);
  }
}

// The same values, bit for bit: the same float products, and vcvtps2dq rounds to nearest even
// as nearbyint does; a NaN lane is skipped by the max as std::max skips it.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_sums_avx512(const float* x, int K, int8_t* q,
                                                                               float* d, float* dsum, float* s16) {
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int b = 0; b < K / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    __m512 m = _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps());
    m = _mm512_max_ps(_mm512_abs_ps(v1), m);
    const float amax = _mm512_reduce_max_ps(m);
    const float s = amax / 127.f, is = s > 0 ? 1.f / s : 0.f;
    d[b] = s;
    const __m512 vis = _mm512_set1_ps(is);
    const __m512i i0 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vis)), hi), lo);
    const __m512i i1 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vis)), hi), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), _mm512_cvtsepi32_epi8(i1));
    const int s0 = _mm512_reduce_add_epi32(i0), s1 = _mm512_reduce_add_epi32(i1);
    if (dsum) dsum[b] = s * float(s0 + s1);
    if (s16) s16[2 * b] = s * float(s0), s16[2 * b + 1] = s * float(s1);
  }
}

void quantize_activation_sums(const float* x, int K, int8_t* q, float* d, float* dsum, float* s16) {
  if (cpu_avx512() && !g_portable.load(std::memory_order_relaxed))
    quantize_sums_avx512(x, K, q, d, dsum, s16);
  else
    quantize_sums_portable(x, K, q, d, dsum, s16);
}

// x quantized for the integer kernels: per row, levels q[K] and per 32-block the scale d and
// the scale times the block's level sum (q4_k's mins; q8_0's and q6_k's level offsets), plus
// what the native kernel of the row's type multiplies by (only that type's arrays are filled):
//   dpair  q8_0, q4_0: the scales as 16 lanes per pair of blocks (8 lanes each; 0 past the end)
//   qk, dk q4_k: the levels of each super-block in block order 0 2 1 3 4 6 5 7 (one 64-byte
//          load of nibbles holds blocks 4k and 4k+2 in its low nibbles, 4k+1 and 4k+3 in its
//          high ones) and the scales with the high-nibble blocks' divided by 16 (those nibbles
//          go in unshifted, as 16 q)
//   d16, s16  q6_k: per 16 levels the scale and the scale times the 16 levels' sum
struct XQ {
  QType t = QType::Q8_0;
  int M = 0, K = 0, nb = 0, np = 0;
  std::vector<int8_t> q, qk;
  std::vector<float> d, dsum, dpair, dk, d16, s16;
  void prepare(QType t_, const float* x, int ldx, int M_, int K_, bool native) {
    t = t_, M = M_, K = K_, nb = K / 32, np = (nb + 1) / 2;
    q.resize(size_t(M) * K);
    d.resize(size_t(M) * nb);
    dsum.resize(size_t(M) * nb);
    const bool k16 = native && t == QType::Q6_K;
    if (k16) d16.resize(size_t(M) * nb * 2), s16.resize(size_t(M) * nb * 2);
    for (int m = 0; m < M; ++m)
      quantize_activation_sums(x + size_t(m) * ldx, K, &q[size_t(m) * K], &d[size_t(m) * nb], &dsum[size_t(m) * nb],
                               k16 ? &s16[size_t(m) * nb * 2] : nullptr);
    if (!native) return;
    if (t == QType::Q8_0 || t == QType::Q4_0) {
      dpair.assign(size_t(M) * np * 16, 0.f);
      for (int m = 0; m < M; ++m)
        for (int b = 0; b < nb; ++b) {
          float* dp = &dpair[(size_t(m) * np + size_t(b / 2)) * 16 + size_t(b % 2) * 8];
          std::fill(dp, dp + 8, d[size_t(m) * nb + b]);
        }
    } else if (t == QType::Q4_K) {
      static constexpr int kOrder[8] = {0, 2, 1, 3, 4, 6, 5, 7};
      qk.resize(size_t(M) * K);
      dk.resize(size_t(M) * nb);
      for (int m = 0; m < M; ++m)
        for (int b = 0; b < nb; ++b) {
          const int sb = b / 8, j = b % 8;
          std::memcpy(&qk[size_t(m) * K + size_t(sb) * 256 + size_t(j) * 32],
                      &q[size_t(m) * K + size_t(sb) * 256 + size_t(kOrder[j]) * 32], 32);
          dk[size_t(m) * nb + b] = d[size_t(m) * nb + b] * (j % 2 ? 1.f / 16 : 1.f);
        }
    } else if (t == QType::Q6_K) {
      for (int m = 0; m < M; ++m)
        for (int h = 0; h < 2 * nb; ++h) d16[size_t(m) * nb * 2 + h] = d[size_t(m) * nb + h / 2];
    }
  }
  const int8_t* qrow(int m) const { return &q[size_t(m) * K]; }
  const int8_t* qkrow(int m) const { return &qk[size_t(m) * K]; }
  const float* drow(int m) const { return &d[size_t(m) * nb]; }
  const float* dsumrow(int m) const { return &dsum[size_t(m) * nb]; }
  const float* dpairrow(int m) const { return &dpair[size_t(m) * np * 16]; }
  const float* dkrow(int m) const { return &dk[size_t(m) * nb]; }
  const float* d16row(int m) const { return &d16[size_t(m) * nb * 2]; }
  const float* s16row(int m) const { return &s16[size_t(m) * nb * 2]; }
};

// ---------------------------------------------------------------- portable

int dot32(const int8_t* a, const int8_t* b, int n) {
  int s = 0;
  for (int j = 0; j < n; ++j) s += int(a[j]) * int(b[j]);
  return s;
}

// One W row against one x row, the same integer sums as the native kernels.
float row_portable(QType t, const uint8_t* wr, const XQ& xq, int m) {
  const int8_t* xq8 = xq.qrow(m);
  const float* dx = xq.drow(m);
  int8_t lv[256];
  double acc = 0;
  switch (t) {
    case QType::Q8_0: {
      const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(wr);
      for (int i = 0; i < xq.nb; ++i) acc += double(from_fp16(b[i].d) * dx[i]) * dot32(b[i].qs, xq8 + 32 * i, 32);
      break;
    }
    case QType::Q4_0: {
      const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(wr);
      for (int i = 0; i < xq.nb; ++i) {
        for (int j = 0; j < 16; ++j) lv[j] = int8_t((b[i].qs[j] & 0xF) - 8), lv[j + 16] = int8_t((b[i].qs[j] >> 4) - 8);
        acc += double(from_fp16(b[i].d) * dx[i]) * dot32(lv, xq8 + 32 * i, 32);
      }
      break;
    }
    case QType::Q4_K: {
      const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(wr);
      const float* dsum = xq.dsumrow(m);
      for (int i = 0; i < xq.nb / 8; ++i) {
        const float d = from_fp16(b[i].d), dmin = from_fp16(b[i].dmin);
        for (int c = 0; c < 4; ++c)
          for (int l = 0; l < 32; ++l) lv[64 * c + l] = int8_t(b[i].qs[32 * c + l] & 0xF), lv[64 * c + 32 + l] = int8_t(b[i].qs[32 * c + l] >> 4);
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, mn;
          quant::q4k_scale_min(j, b[i].scales, &sc, &mn);
          acc += double(d * sc * dx[8 * i + j]) * dot32(lv + 32 * j, xq8 + 256 * i + 32 * j, 32) -
                 double(dmin * mn * dsum[8 * i + j]);
        }
      }
      break;
    }
    case QType::Q6_K: {
      const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(wr);
      for (int i = 0; i < xq.nb / 8; ++i) {
        const float d = from_fp16(b[i].d);
        for (int n = 0; n < 2; ++n) {
          const uint8_t* ql = b[i].ql + 64 * n;
          const uint8_t* qh = b[i].qh + 32 * n;
          int8_t* o = lv + 128 * n;
          for (int l = 0; l < 32; ++l) {
            o[l] = int8_t(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
            o[l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
          }
        }
        for (int s = 0; s < 16; ++s)
          acc += double(d * b[i].scales[s] * dx[8 * i + s / 2]) * dot32(lv + 16 * s, xq8 + 256 * i + 16 * s, 16);
      }
      break;
    }
    default: break;
  }
  return float(acc);
}

// ---------------------------------------------------------------- AVX-512 VNNI

#define ZQ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,f16c")))
constexpr int kPrefetch = 4096;  // bytes ahead of the weight read (hardware prefetch stops at pages)
constexpr int kStreams = 4;

ZQ_TARGET inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
ZQ_TARGET inline __m512 pair_ps(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}
ZQ_TARGET inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
ZQ_TARGET inline __m256i nibbles16(const uint8_t* qs) {  // 16 bytes -> 32 levels 0..15 in order
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// Signed w (levels) times signed x: vpdpbusd multiplies unsigned by signed, so |w| times x
// with w's sign moved onto x.
ZQ_TARGET inline __m512i sdot(__m512i aw, __mmask64 neg, __m512i xv) {
  const __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx);
}

// The 64 levels of two consecutive 32-blocks of one row (and a pair with only its first
// block: the upper half zero, the x load masked to the row).
template <int MR, class Load>
ZQ_TARGET void pairs_signed(const uint8_t* wr, int nb, int bbytes, const XQ& xq, int m0, float* out, Load load) {
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int p = 0; p < (nb + 1) / 2; ++p) {
    const bool two = 2 * p + 1 < nb;
    const uint8_t* b0 = wr + size_t(2 * p) * bbytes;
    _mm_prefetch(reinterpret_cast<const char*>(b0) + kPrefetch, _MM_HINT_T0);
    float d0, d1;
    const __m512i w = load(b0, two ? b0 + bbytes : nullptr, &d0, &d1);
    const __m512 dw = pair_ps(d0, d1);
    const __m512i aw = _mm512_abs_epi8(w);
    const __mmask64 neg = _mm512_movepi8_mask(w);
    for (int i = 0; i < MR; ++i) {
      const int8_t* xr = xq.qrow(m0 + i) + 64 * p;
      const __m512i xv = two ? _mm512_loadu_si512(xr) : _mm512_maskz_loadu_epi8(0xffffffffull, xr);
      const __m512 f = _mm512_mul_ps(dw, _mm512_loadu_ps(xq.dpairrow(m0 + i) + 16 * p));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sdot(aw, neg, xv)), f, acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) out[i] = _mm512_reduce_add_ps(acc[i]);
}

struct LoadQ4_0 {
  ZQ_TARGET __m512i operator()(const uint8_t* a, const uint8_t* b, float* d0, float* d1) const {
    const BlockQ4_0* x = reinterpret_cast<const BlockQ4_0*>(a);
    const BlockQ4_0* y = reinterpret_cast<const BlockQ4_0*>(b);
    *d0 = h2f(x->d);
    *d1 = y ? h2f(y->d) : 0.f;
    const __m512i u = y ? join(nibbles16(x->qs), nibbles16(y->qs)) : _mm512_zextsi256_si512(nibbles16(x->qs));
    return _mm512_sub_epi8(u, _mm512_set1_epi8(8));  // a lone block's upper half: -8 against x = 0
  }
};

ZQ_TARGET inline float hsum256(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
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

// q8_0, eight blocks at a time. The levels go in as w + 128 (unsigned: a flip of the sign bit),
// so each product carries 128 x too: that is taken off once per block as 128 d_w d_x sum(x).
// The eight fp16 scales are collected by scalar loads (a gather is slow on these CPUs).
template <int MR, int NR>
ZQ_TARGET void kern_q8_0(const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  const int nb = xq.nb;
  __m512 acc[NR][MR][2];
  __m256 cacc[NR][MR];
  float ctail[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
      acc[r][i][0] = acc[r][i][1] = _mm512_setzero_ps(), cacc[r][i] = _mm256_setzero_ps(), ctail[r][i] = 0;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const __m512i pidx[4] = {_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                           _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
                           _mm512_set_epi32(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
                           _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6)};
  int b = 0;
  for (; b + 8 <= nb; b += 8)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const uint8_t* p = wr[r] + size_t(b) * 34;
      prefetch_block<272>(p);
      uint64_t h[2];
      for (int k = 0; k < 2; ++k) {
        uint16_t v[4];
        for (int j = 0; j < 4; ++j) std::memcpy(&v[j], p + 34 * (4 * k + j), 2);
        h[k] = uint64_t(v[0]) | uint64_t(v[1]) << 16 | uint64_t(v[2]) << 32 | uint64_t(v[3]) << 48;
      }
      const __m256 dw8 = _mm256_cvtph_ps(_mm_set_epi64x(int64_t(h[1]), int64_t(h[0])));
      __m512 f8[MR];  // d_w d_x per block
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        cacc[r][i] = _mm256_fmadd_ps(dw8, _mm256_loadu_ps(xq.dsumrow(m0 + i) + b), cacc[r][i]);
        f8[i] = _mm512_castps256_ps512(_mm256_mul_ps(dw8, _mm256_loadu_ps(xq.drow(m0 + i) + b)));
      }
      for (int k = 0; k < 4; ++k) {
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 68 * k + 2));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 68 * k + 36));
        const __m512i w = _mm512_xor_si512(join(lo, hi), flip);
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) {
          const __m512i si =
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_loadu_si512(xq.qrow(m0 + i) + 32 * b + 64 * k));
          acc[r][i][k & 1] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_permutexvar_ps(pidx[k], f8[i]), acc[r][i][k & 1]);
        }
      }
    }
  for (; b < nb; b += 2)  // the last < 8 blocks, a pair at a time (a lone last block: x masked)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const bool two = b + 1 < nb;
      const BlockQ8_0* x0 = reinterpret_cast<const BlockQ8_0*>(wr[r] + size_t(b) * 34);
      const float d0 = h2f(x0->d), d1 = two ? h2f(x0[1].d) : 0.f;
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0->qs));
      const __m512i w = _mm512_xor_si512(
          two ? join(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0[1].qs))) : _mm512_zextsi256_si512(lo),
          flip);
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
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
      out[r * MR + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][i][0], acc[r][i][1])) -
                        128.f * (hsum256(cacc[r][i]) + ctail[r][i]);
}

template <int MR, int NR>
ZQ_TARGET void kern_q4_0(const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) pairs_signed<MR>(wr[r], xq.nb, 18, xq, m0, out + r * MR, LoadQ4_0{});
}

// 256 x levels against a super-block's four unsigned level vectors w (64 each): each
// vpdpbusd lane (4 products) is scaled by its block's factor, f's element spread to the
// block's lanes by pidx[v]; two accumulators cover the fma latency.
ZQ_TARGET inline void dot_256(__m512* acc2, const __m512i* w, const int8_t* xr, const __m512i* pidx, __m512 f) {
  for (int v = 0; v < 4; ++v) {
    const __m512i si = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[v], _mm512_loadu_si512(xr + 64 * v));
    acc2[v & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_permutexvar_ps(pidx[v], f), acc2[v & 1]);
  }
}

// q4_k: per super-block two 64-byte loads of nibbles; the low nibbles (& 0x0F) and the high
// ones in place (& 0xF0, 16 q: x's scale for those blocks carries the 1/16) against x laid
// out in the same block order (XQ::qk). The 6-bit scales and mins are unpacked 4 bytes at a
// time in scalar code (a free port while the vector units work); scale, min, both fp16 and
// x's scales combine into one float per block, spread to the lanes of its block by a permute.
template <int MR, int NR>
ZQ_TARGET void kern_q4_k(const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  __m512 acc[NR][MR][2];
  __m256 macc[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[r][i][0] = acc[r][i][1] = _mm512_setzero_ps(), macc[r][i] = _mm256_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0F), hi4 = _mm512_set1_epi8(char(0xF0));
  // Lanes of block pair (v): blocks 0|2, 1|3, 4|6, 5|7 (the order of XQ::qk).
  const __m512i pidx[4] = {_mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0),
                           _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
                           _mm512_set_epi32(6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 4, 4, 4, 4),
                           _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 5, 5, 5, 5, 5, 5, 5, 5)};
  for (int s = 0; s < xq.nb / 8; ++s)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(wr[r]) + s;
      prefetch_block<144>(reinterpret_cast<const uint8_t*>(b));
      uint32_t dd, u[3];
      std::memcpy(&dd, b, 4);
      std::memcpy(u, b->scales, 12);
      const uint64_t sc = uint64_t(u[0] & 0x3f3f3f3fu) |
                          uint64_t((u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u)) << 32;
      const uint64_t mn = uint64_t(u[1] & 0x3f3f3f3fu) |
                          uint64_t(((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u)) << 32;
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(int(dd)));  // d, dmin
      const __m256 scd = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(sc)))),
                                       _mm256_broadcastss_ps(dm));
      const __m256 mnd = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(mn)))),
                                       _mm256_broadcastss_ps(_mm_movehdup_ps(dm)));
      const __m512i v0 = _mm512_loadu_si512(b->qs), v1 = _mm512_loadu_si512(b->qs + 64);
      const __m512i w[4] = {_mm512_and_si512(v0, lo4), _mm512_and_si512(v0, hi4), _mm512_and_si512(v1, lo4),
                            _mm512_and_si512(v1, hi4)};
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        macc[r][i] = _mm256_fmadd_ps(mnd, _mm256_loadu_ps(xq.dsumrow(m0 + i) + 8 * s), macc[r][i]);
        const __m512 f = _mm512_castps256_ps512(_mm256_mul_ps(scd, _mm256_loadu_ps(xq.dkrow(m0 + i) + 8 * s)));
        const int8_t* xr = xq.qkrow(m0 + i) + 256 * s;
        dot_256(acc[r][i], w, xr, pidx, f);
      }
    }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
      out[r * MR + i] =
          _mm512_reduce_add_ps(_mm512_add_ps(acc[r][i][0], acc[r][i][1])) - hsum256(macc[r][i]);
}

// q6_k: levels 0..63 (low nibble | two high bits << 4) go in unsigned; the offset of 32 is
// taken off per 16 levels as 32 d s d_x sum(x). A 64-byte load of ql holds 128 levels' low
// (& 0x0F) and high (>> 4) nibbles; the 32 bytes of qh, broadcast to both halves and shifted
// per half by a 64-bit variable shift, give each byte's two bits at bits 4-5.
template <int MR, int NR>
ZQ_TARGET void kern_q6_k(const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  __m512 acc[NR][MR][2], oacc[NR][MR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[r][i][0] = acc[r][i][1] = oacc[r][i] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i shl = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4), shr = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
  __m512i pidx[4];
  for (int v = 0; v < 4; ++v)
    pidx[v] = _mm512_set_epi32(4 * v + 3, 4 * v + 3, 4 * v + 3, 4 * v + 3, 4 * v + 2, 4 * v + 2, 4 * v + 2, 4 * v + 2,
                               4 * v + 1, 4 * v + 1, 4 * v + 1, 4 * v + 1, 4 * v, 4 * v, 4 * v, 4 * v);
  for (int s = 0; s < xq.nb / 8; ++s)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(wr[r]) + s;
      prefetch_block<210>(reinterpret_cast<const uint8_t*>(b));
      const __m512 scd = _mm512_mul_ps(
          _mm512_set1_ps(h2f(b->d)),
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)))));
      __m512i w[4];
      for (int n = 0; n < 2; ++n) {
        const __m512i ql = _mm512_loadu_si512(b->ql + 64 * n);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * n)));
        const __m512i h1 = _mm512_and_si512(_mm512_sllv_epi64(qh, shl), m30);
        const __m512i h2 = _mm512_and_si512(_mm512_srlv_epi64(qh, shr), m30);
        w[2 * n] = _mm512_ternarylogic_epi64(ql, h1, m4, 0xEC);  // (ql & 0x0F) | h1
        w[2 * n + 1] = _mm512_ternarylogic_epi64(_mm512_srli_epi16(ql, 4), h2, m4, 0xEC);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        oacc[r][i] = _mm512_fmadd_ps(scd, _mm512_loadu_ps(xq.s16row(m0 + i) + 16 * s), oacc[r][i]);
        const __m512 f = _mm512_mul_ps(scd, _mm512_loadu_ps(xq.d16row(m0 + i) + 16 * s));
        const int8_t* xr = xq.qrow(m0 + i) + 256 * s;
        dot_256(acc[r][i], w, xr, pidx, f);
      }
    }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
      out[r * MR + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][i][0], acc[r][i][1])) -
                        32.f * _mm512_reduce_add_ps(oacc[r][i]);
}

template <int MR, int NR>
void kern_native(QType t, const uint8_t* const* wr, const XQ& xq, int m0, float* out) {
  switch (t) {
    case QType::Q8_0: return kern_q8_0<MR, NR>(wr, xq, m0, out);
    case QType::Q4_0: return kern_q4_0<MR, NR>(wr, xq, m0, out);
    case QType::Q4_K: return kern_q4_k<MR, NR>(wr, xq, m0, out);
    case QType::Q6_K: return kern_q6_k<MR, NR>(wr, xq, m0, out);
    default: return;
  }
}

// W rows [n0, n1) against the M prepared x rows; each W row is read once (it stays in L1
// while groups of 4 x rows pass over it). The rows are cut into kStreams contiguous parts
// read side by side (see the kernels above).
void rows_range(QType t, float* y, int ldy, const XQ& xq, const uint8_t* W, int n0, int n1, float beta) {
  const size_t rb = quant::qtype_row_bytes(t, xq.K);
  const bool native = use_native();
  const int S = std::min(kStreams, n1 - n0);
  int start[kStreams + 1];
  for (int p = 0; p <= S; ++p) start[p] = n0 + int(int64_t(n1 - n0) * p / std::max(S, 1));
  int rows = 0;
  for (int p = 0; p < S; ++p) rows = std::max(rows, start[p + 1] - start[p]);
  float out[4 * kStreams];
  auto store = [&](int r, int m0, int mr, const float* o) {
    for (int i = 0; i < mr; ++i) {
      float* yo = y + size_t(m0 + i) * ldy + r;
      *yo = beta == 0.f ? o[i] : *yo * beta + o[i];
    }
  };
  int k = 0;
  // Decode: a row of every stream at once. Not q4_0 (a fallback type whose kernel is one
  // pair loop per row): it read 7 GB/s that way on 2 threads against 10 row by row.
  if (native && xq.M == 1 && S == kStreams && t != QType::Q4_0)
    for (const int common = start[1] - start[0]; k < common; ++k) {  // every stream has >= common rows
      const uint8_t* wr[kStreams];
      for (int p = 0; p < kStreams; ++p) wr[p] = W + size_t(start[p] + k) * rb;
      kern_native<1, kStreams>(t, wr, xq, 0, out);
      for (int p = 0; p < kStreams; ++p) store(start[p] + k, 0, 1, &out[p]);
    }
  for (; k < rows; ++k)
    for (int p = 0; p < S; ++p) {
      const int r = start[p] + k;
      if (r >= start[p + 1]) continue;
      const uint8_t* wr = W + size_t(r) * rb;
      for (int m0 = 0; m0 < xq.M; m0 += 4) {
        const int mr = std::min(4, xq.M - m0);
        if (!native)
          for (int i = 0; i < mr; ++i) out[i] = row_portable(t, wr, xq, m0 + i);
        else if (mr == 4)
          kern_native<4, 1>(t, &wr, xq, m0, out);
        else if (mr == 3)
          kern_native<3, 1>(t, &wr, xq, m0, out);
        else if (mr == 2)
          kern_native<2, 1>(t, &wr, xq, m0, out);
        else
          kern_native<1, 1>(t, &wr, xq, m0, out);
        store(r, m0, mr, out);
      }
    }
}

// Prefill: tiles of W rows dequantized to bf16 (all threads), each tile one oneDNN GEMM.
void gemm_tiles(QType t, float* y, int ldy, const float* x, int ldx, const uint8_t* W, int M, int N, int K, float beta) {
  const size_t rb = quant::qtype_row_bytes(t, K);
  const int tile = std::max(16, std::min(N, int((size_t(4) << 20) / (size_t(K) * 2))));  // ~4 MB of bf16
  static thread_local std::vector<bf16> tile_buf;
  tile_buf.resize(size_t(tile) * K);
  bf16* wt = tile_buf.data();  // (inside the region below, tile_buf would be each thread's own)
  for (int n0 = 0; n0 < N; n0 += tile) {
    const int nr = std::min(tile, N - n0);
#pragma omp parallel if (size_t(nr) * K > 65536)
    {
      std::vector<float> row(static_cast<size_t>(K));
#pragma omp for schedule(static)
      for (int r = 0; r < nr; ++r) {
        quant::dequantize_row(t, W + size_t(n0 + r) * rb, row.data(), K);
        convert_to_bf16(row.data(), &wt[size_t(r) * K], size_t(K));
      }
    }
    gemm_bf16_weights(M, nr, K, x, ldx, wt, beta, y + n0, ldy);
  }
}

}  // namespace

void quantize_activations(const float* x, int K, int8_t* q, float* d) {
  quantize_activation_sums(x, K, q, d, nullptr, nullptr);
}

const char* linear_quant_kernel() { return use_native() ? "avx512vnni" : "portable"; }
void linear_quant_force_portable(bool on) { g_portable = on; }
void linear_quant_set_gemm_rows(int rows) { g_gemm_rows = rows; }

void linear_quant(QType t, float* y, int ldy, const float* x, int ldx, const void* W, int M, int N, int K,
                  float beta) {
  if (M <= 0 || N <= 0) return;
  const int gr = g_gemm_rows.load(std::memory_order_relaxed);
  if (gr > 0 && M >= gr && bf16_gemm_supported() && !g_portable.load(std::memory_order_relaxed))
    return gemm_tiles(t, y, ldy, x, ldx, static_cast<const uint8_t*>(W), M, N, K, beta);
  if (size_t(N) * K > 65536 && !omp_in_parallel()) {
#pragma omp parallel
    linear_quant_team(t, y, ldy, x, ldx, W, M, N, K, beta);
    return;
  }
  static thread_local XQ xq;
  xq.prepare(t, x, ldx, M, K, use_native());
  rows_range(t, y, ldy, xq, static_cast<const uint8_t*>(W), 0, N, beta);
}

void linear_quant_team(QType t, float* y, int ldy, const float* x, int ldx, const void* W, int M, int N, int K,
                       float beta) {
  if (M <= 0 || N <= 0) return;
  static thread_local XQ xq;  // each thread quantizes x itself (a few KB): cheaper than a barrier
  xq.prepare(t, x, ldx, M, K, use_native());
  const int th = omp_get_thread_num(), nt = omp_get_num_threads();
  rows_range(t, y, ldy, xq, static_cast<const uint8_t*>(W), int(int64_t(N) * th / nt), int(int64_t(N) * (th + 1) / nt),
             beta);
}

}  // namespace zaya
