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
#include "core/error.h"
#include "kernels/avx2_util.h"
#include "kernels/gemm.h"
#include "kernels/linear_quant_xq.h"
#include "kernels/team_rows.h"

namespace zaya {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::QType;
using qkern::kStreams;
using qkern::XQ;

namespace {

std::atomic<int> g_cap{int(KernelTier::Auto)};  // linear_quant_force
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
bool cpu_avx2() {
  static const bool ok = cpu_avx2_fma() && __builtin_cpu_supports("f16c");
  return ok;
}
KernelTier cap() { return KernelTier(g_cap.load(std::memory_order_relaxed)); }

// The kernels this process runs: the best the CPU has, at most what linear_quant_force allows.
enum class Tier { Vnni512, Avx2, Portable };
Tier tier() {
  const KernelTier c = cap();
  if (c == KernelTier::Auto && cpu_vnni()) return Tier::Vnni512;
  if (c != KernelTier::Portable && cpu_avx2()) return Tier::Avx2;
  return Tier::Portable;
}
qkern::XLayout xlayout() {
  switch (tier()) {
    case Tier::Vnni512: return qkern::XLayout::Native;
    case Tier::Avx2: return qkern::XLayout::Avx2;
    default: return qkern::XLayout::Natural;
  }
}

// ---------------------------------------------------------------- x to int8

// One row of x to int8 levels in blocks of B = 32 (llama.cpp's q8, for q8_0 and q4_0) or 256
// (its q8_K, which the k-quant dot products take: a super-block's integer sums then need one
// float scale): scale amax / 127, round to nearest even; where asked, each block's scale times
// its level sum (dsum) and the level sums per 16 (bsum16, int16: |sum| <= 16 * 127).
void quantize_blocks_portable(const float* x, int K, int B, int8_t* q, float* d, float* dsum, int16_t* bsum16) {
  for (int b = 0; b < K / B; ++b) {
    const float* xb = x + size_t(B) * b;
    float amax = 0;
    for (int j = 0; j < B; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float s = amax / 127.f, is = s > 0 ? 1.f / s : 0.f;
    d[b] = s;
    int total = 0;
    for (int g = 0; g < B / 16; ++g) {
      int sum = 0;
      for (int j = 16 * g; j < 16 * g + 16; ++j) {
        q[size_t(B) * b + j] = int8_t(std::clamp(int(std::nearbyint(xb[j] * is)), -127, 127));
        sum += q[size_t(B) * b + j];
      }
      if (bsum16) bsum16[size_t(B / 16) * b + g] = int16_t(sum);
      total += sum;
    }
    if (dsum) dsum[b] = s * float(total);
  }
}

// The same values, bit for bit: the same float products, and vcvtps2dq rounds to nearest even
// as nearbyint does; a NaN lane is skipped by the max as std::max skips it.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_blocks_avx512(const float* x, int K, int B,
                                                                                 int8_t* q, float* d, float* dsum,
                                                                                 int16_t* bsum16) {
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int b = 0; b < K / B; ++b) {
    const float* xb = x + size_t(B) * b;
    __m512 m = _mm512_setzero_ps();
    for (int g = 0; g < B / 16; ++g) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * g)), m);
    const float amax = _mm512_reduce_max_ps(m);
    const float s = amax / 127.f, is = s > 0 ? 1.f / s : 0.f;
    d[b] = s;
    const __m512 vis = _mm512_set1_ps(is);
    int total = 0;
    for (int g = 0; g < B / 16; ++g) {
      const __m512i i = _mm512_max_epi32(
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * g), vis)), hi), lo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + size_t(B) * b + 16 * g), _mm512_cvtsepi32_epi8(i));
      const int sum = _mm512_reduce_add_epi32(i);
      if (bsum16) bsum16[size_t(B / 16) * b + g] = int16_t(sum);
      total += sum;
    }
    if (dsum) dsum[b] = s * float(total);
  }
}

void quantize_blocks(const float* x, int K, int B, int8_t* q, float* d, float* dsum, int16_t* bsum16) {
  if (cap() == KernelTier::Auto && cpu_avx512())
    quantize_blocks_avx512(x, K, B, q, d, dsum, bsum16);
  else if (cap() != KernelTier::Portable && cpu_avx2())
    qkern::quantize_blocks_avx2(x, K, B, q, d, dsum, bsum16);
  else
    quantize_blocks_portable(x, K, B, q, d, dsum, bsum16);
}

}  // namespace

void qkern::XQ::prepare(QType t_, const float* x, int ldx, int M_, int K_, XLayout layout) {
  t = t_, M = M_, K = K_, nb = K / 32, np = (nb + 1) / 2;
  const bool kq = t == QType::Q4_K || t == QType::Q6_K;
  ns = kq ? K / 256 : nb;
  q.resize(size_t(M) * K);
  d.resize(size_t(M) * ns);
  if (kq) {
    bs16.resize(size_t(M) * K / 16);
    for (int m = 0; m < M; ++m)
      quantize_blocks(x + size_t(m) * ldx, K, 256, &q[size_t(m) * K], &d[size_t(m) * ns], nullptr,
                      &bs16[size_t(m) * K / 16]);
    if (t == QType::Q4_K) {
      bs32.resize(size_t(M) * nb);
      for (size_t b = 0; b < size_t(M) * nb; ++b) bs32[b] = int16_t(bs16[2 * b] + bs16[2 * b + 1]);
    }
  } else {
    dsum.resize(size_t(M) * nb);
    for (int m = 0; m < M; ++m)
      quantize_blocks(x + size_t(m) * ldx, K, 32, &q[size_t(m) * K], &d[size_t(m) * nb], &dsum[size_t(m) * nb],
                      nullptr);
  }
  // The AVX2 q4_k and q4_0 kernels: per pair of 32-blocks b, b + 1, b[0-15] b+1[0-15] b[16-31]
  // b+1[16-31] (zeros for the missing block of an odd count).
  if (layout == XLayout::Avx2 && (t == QType::Q4_K || t == QType::Q4_0)) {
    qk.assign(size_t(M) * np * 64, 0);
    for (int m = 0; m < M; ++m)
      for (int b = 0; b < nb; ++b)
        for (int h = 0; h < 2; ++h)
          std::memcpy(&qk[(size_t(m) * np + size_t(b / 2)) * 64 + 32 * size_t(h) + 16 * size_t(b % 2)],
                      &q[size_t(m) * K + 32 * size_t(b) + 16 * size_t(h)], 16);
  }
  // The AVX2 q6_k kernel holds a super-block's 16 scales even | odd (one shuffle of the
  // 16 bytes, then each vector's pair in one lane each): x's sums per 16 to match.
  if (layout == XLayout::Avx2 && t == QType::Q6_K)
    for (size_t s = 0; s < size_t(M) * ns; ++s) {
      int16_t* bs = &bs16[16 * s];
      int16_t even_odd[16];
      for (int j = 0; j < 8; ++j) even_odd[j] = bs[2 * j], even_odd[8 + j] = bs[2 * j + 1];
      std::copy(even_odd, even_odd + 16, bs);
    }
  if (layout != XLayout::Native) return;
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
    for (int m = 0; m < M; ++m)
      for (int b = 0; b < nb; ++b)
        std::memcpy(&qk[size_t(m) * K + size_t(b / 8) * 256 + size_t(b % 8) * 32],
                    &q[size_t(m) * K + size_t(b / 8) * 256 + size_t(kOrder[b % 8]) * 32], 32);
  }
}

namespace {

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
    case QType::Q4_K: {  // per super-block: d dx sum_j sc_j (w_j . x_j) - dmin dx sum_j mn_j sum(x_j)
      const BlockQ4_K* b = reinterpret_cast<const BlockQ4_K*>(wr);
      const int16_t* bs = xq.bs16row(m);
      for (int i = 0; i < xq.ns; ++i) {
        for (int c = 0; c < 4; ++c)
          for (int l = 0; l < 32; ++l) lv[64 * c + l] = int8_t(b[i].qs[32 * c + l] & 0xF), lv[64 * c + 32 + l] = int8_t(b[i].qs[32 * c + l] >> 4);
        int64_t isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, mn;
          quant::q4k_scale_min(j, b[i].scales, &sc, &mn);
          isum += int64_t(sc) * dot32(lv + 32 * j, xq8 + 256 * i + 32 * j, 32);
          msum += int64_t(mn) * (bs[16 * i + 2 * j] + bs[16 * i + 2 * j + 1]);
        }
        acc += double(from_fp16(b[i].d) * dx[i]) * double(isum) - double(from_fp16(b[i].dmin) * dx[i]) * double(msum);
      }
      break;
    }
    case QType::Q6_K: {  // per super-block: d dx sum_s sc_s (w_s . x_s - 32 sum(x_s)), w = level + 32
      const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(wr);
      const int16_t* bs = xq.bs16row(m);
      for (int i = 0; i < xq.ns; ++i) {
        for (int n = 0; n < 2; ++n) {
          const uint8_t* ql = b[i].ql + 64 * n;
          const uint8_t* qh = b[i].qh + 32 * n;
          int8_t* o = lv + 128 * n;
          for (int l = 0; l < 32; ++l) {
            o[l] = int8_t((ql[l] & 0xF) | ((qh[l] & 3) << 4));
            o[l + 32] = int8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            o[l + 64] = int8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            o[l + 96] = int8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
          }
        }
        int64_t isum = 0;
        for (int g = 0; g < 16; ++g)
          isum += int64_t(b[i].scales[g]) * (dot32(lv + 16 * g, xq8 + 256 * i + 16 * g, 16) - 32 * bs[16 * i + g]);
        acc += double(from_fp16(b[i].d) * dx[i]) * double(isum);
      }
      break;
    }
    default: break;
  }
  return float(acc);
}

// W rows start[p] + k0 + r (r < count, p < S) against the M prepared x rows; each W row is
// read once (it stays in L1 while groups of 4 x rows pass over it). With one x row and S =
// kStreams, a row of every stream at once (see the kernels above).
void run_rows(QType t, float* y, int ldy, const XQ& xq, const uint8_t* W, const int* start, int S, int k0, int count,
              float beta) {
  const size_t rb = quant::qtype_row_bytes(t, xq.K);
  const Tier tr = tier();
  float out[4 * kStreams];
  auto store = [&](int r, int m0, int mr, const float* o) {
    for (int i = 0; i < mr; ++i) {
      float* yo = y + size_t(m0 + i) * ldy + r;
      *yo = beta == 0.f ? o[i] : *yo * beta + o[i];
    }
  };
  const bool together = tr != Tier::Portable && xq.M == 1 && S == kStreams;
  for (int k = k0; k < k0 + count; ++k) {
    if (together) {
      const uint8_t* wr[kStreams];
      for (int p = 0; p < kStreams; ++p) wr[p] = W + size_t(start[p] + k) * rb;
      if (tr == Tier::Vnni512)
        qkern::kern_avx512(t, 1, kStreams, wr, xq, 0, out);
      else
        qkern::kern_avx2(t, 1, kStreams, wr, xq, 0, out);
      for (int p = 0; p < kStreams; ++p) store(start[p] + k, 0, 1, &out[p]);
      continue;
    }
    for (int p = 0; p < S; ++p) {
      const int r = start[p] + k;
      const uint8_t* wr = W + size_t(r) * rb;
      for (int m0 = 0; m0 < xq.M; m0 += 4) {
        const int mr = std::min(4, xq.M - m0);
        if (tr == Tier::Portable)
          for (int i = 0; i < mr; ++i) out[i] = row_portable(t, wr, xq, m0 + i);
        else if (tr == Tier::Avx2)
          qkern::kern_avx2(t, mr, 1, &wr, xq, m0, out);
        else
          qkern::kern_avx512(t, mr, 1, &wr, xq, m0, out);
        store(r, m0, mr, out);
      }
    }
  }
}

// W rows [n0, n1), as kStreams contiguous parts read side by side.
void rows_range(QType t, float* y, int ldy, const XQ& xq, const uint8_t* W, int n0, int n1, float beta) {
  run_streams({n0, n1}, kStreams, [&](const int* start, int S, int k0, int count) {
    run_rows(t, y, ldy, xq, W, start, S, k0, count, beta);
  });
}

// Prefill: tiles of W rows dequantized to bf16 (all threads), each tile one bf16 GEMM (the
// AMX kernel or oneDNN). Without a bf16 GEMM, linear_quant takes fp32 tiles instead.
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

int activation_block(QType t) { return t == QType::Q4_K || t == QType::Q6_K ? 256 : 32; }

void quantize_activations(const float* x, int K, int block, int8_t* q, float* d) {
  ZAYA_CHECK((block == 32 || block == 256) && K % block == 0, "quantize_activations: blocks of ", block,
             " (32 or 256) over ", K, " elements");
  quantize_blocks(x, K, block, q, d, nullptr, nullptr);
}

const char* linear_quant_kernel() {
  switch (tier()) {
    case Tier::Vnni512: return "avx512vnni";
    case Tier::Avx2: return "avx2";
    default: return "portable";
  }
}
void linear_quant_force(KernelTier k) { g_cap = int(k); }
void linear_quant_set_gemm_rows(int rows) { g_gemm_rows = rows; }

void linear_quant(QType t, float* y, int ldy, const float* x, int ldx, const void* W, int M, int N, int K,
                  float beta) {
  if (M <= 0 || N <= 0) return;
  const int gr = g_gemm_rows.load(std::memory_order_relaxed);
  if (gr > 0 && M >= gr && cap() != KernelTier::Portable) {
    if (bf16_gemm_supported()) return gemm_tiles(t, y, ldy, x, ldx, static_cast<const uint8_t*>(W), M, N, K, beta);
    // No bf16 GEMM (AVX2): the integer row kernels, each W row read once for 4 x rows at a
    // time, keep up with fp32 tiles on the fp32 GEMM until ~128 rows (q4_k, K 2048, Zen 3, 2
    // threads, over 65,536 W rows: 16 rows 25 against 51 ms, 64 rows 102 against 130, 128
    // rows 221 against 217-228, 256 rows 486-508 against 404-431).
    if (M >= 8 * gr) {
      const size_t rb = quant::qtype_row_bytes(t, K);
      return gemm_f32_row_tiles(M, N, K, x, ldx, beta, y, ldy, [&](int n, float* dst) {
        quant::dequantize_row(t, static_cast<const uint8_t*>(W) + size_t(n) * rb, dst, K);
      });
    }
  }
  if (size_t(N) * K > 65536 && !omp_in_parallel()) {
#pragma omp parallel
    linear_quant_team(t, y, ldy, x, ldx, W, M, N, K, beta);
    return;
  }
  static thread_local XQ xq;
  xq.prepare(t, x, ldx, M, K, xlayout());
  rows_range(t, y, ldy, xq, static_cast<const uint8_t*>(W), 0, N, beta);
}

int linear_quant_team(QType t, float* y, int ldy, const float* x, int ldx, const void* W, int M, int N, int K,
                      float beta, const float* cuts, TeamSteal* steal) {
  if (M <= 0 || N <= 0) return 0;
  static thread_local XQ xq;  // each thread quantizes x itself (a few KB): cheaper than a barrier
  xq.prepare(t, x, ldx, M, K, xlayout());
  // Claims of ~16 KB of W: a compare-and-swap each, ~0.5 us of reading.
  const int batch = std::max(1, int(16384 / (kStreams * quant::qtype_row_bytes(t, K))));
  return team_steps(N, cuts, kStreams, batch, steal, [&](const int* start, int S, int k0, int count) {
    run_rows(t, y, ldy, xq, static_cast<const uint8_t*>(W), start, S, k0, count, beta);
  });
}

}  // namespace zaya
