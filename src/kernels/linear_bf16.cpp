#include "kernels/linear_bf16.h"

// GCC 12 warns about its own _mm512_undefined_* inside the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/gemm.h"
#include "kernels/team_rows.h"

namespace zaya {

namespace {

std::atomic<int> g_cap{int(KernelTier::Auto)};  // linear_bf16_force

// The kernels this process runs: the best the CPU has, at most what linear_bf16_force allows.
enum class Tier { Avx512Bf16, Avx2, Portable };
Tier tier() {
  const KernelTier c = KernelTier(g_cap.load(std::memory_order_relaxed));
  if (c == KernelTier::Auto && cpu_features().avx512_bf16) return Tier::Avx512Bf16;
  if (c != KernelTier::Portable && cpu_avx2_fma()) return Tier::Avx2;
  return Tier::Portable;
}
bool use_native() { return tier() == Tier::Avx512Bf16; }

// x rows rounded to bf16 at offset `lead` of rows of Kp elements (a multiple of 32: one
// vdpbf16ps step), zeros around them.
void round_rows(std::vector<bf16>& xb, const float* x, int ldx, int M, int K, int Kp, int lead = 0) {
  xb.resize(size_t(M) * Kp);
  for (int m = 0; m < M; ++m) {
    bf16* dst = xb.data() + size_t(m) * Kp;
    std::fill(dst, dst + lead, bf16{0});
    convert_to_bf16(x + size_t(m) * ldx, dst + lead, size_t(K));
    std::fill(dst + lead + K, dst + Kp, bf16{0});
  }
}

// x rows rounded to bf16 and held as floats (rows of K) for the fp32 kernels (AVX2, fp32 tiles).
void round_widen(std::vector<float>& xf, const float* x, int ldx, int M, int K) {
  xf.resize(size_t(M) * K);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) xf[size_t(m) * K + k] = from_bf16(to_bf16(x[size_t(m) * ldx + k]));
}

constexpr int kRows = 4;   // W rows per block (one block per task)
constexpr int kMBlock = 4;  // x rows per micro-kernel
constexpr int kMTile = 64;  // x rows kept hot (in L2) while W streams
constexpr int kGemmRows = 16;  // from this many x rows on, oneDNN's blocked GEMM (AMX where present)

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void block_native(float* y, int ldy, const bf16* xb, int Kp,
                                                                         const bf16* W, int n0, int nr, int m0,
                                                                         int mr, int K, float beta) {
  __m512 acc[kMBlock][kRows];
  for (int i = 0; i < kMBlock; ++i)
    for (int j = 0; j < kRows; ++j) acc[i][j] = _mm512_setzero_ps();
  const int full = K / 32, rem = K % 32;
  const __mmask32 tail = rem ? (__mmask32(1) << rem) - 1 : 0;
  for (int s = 0; s <= full; ++s) {
    if (s == full && !rem) break;
    const int k = s * 32;
    __m512i w[kRows];
    for (int j = 0; j < kRows; ++j) {
      const bf16* wr = W + size_t(n0 + std::min(j, nr - 1)) * K + k;
      w[j] = s < full ? _mm512_loadu_si512(wr) : _mm512_maskz_loadu_epi16(tail, wr);
      // The next block's rows, one block ahead: a row of a real model is a page or more, and
      // hardware prefetchers stop at page boundaries, so decode (one x row) would otherwise
      // wait on every new page. Prefetches never fault, past the end included.
      _mm_prefetch(reinterpret_cast<const char*>(wr + size_t(kRows) * K), _MM_HINT_T0);
    }
    for (int i = 0; i < mr; ++i) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + size_t(m0 + i) * Kp + k);
      for (int j = 0; j < kRows; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, (__m512bh)w[j]);
    }
  }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      float* o = y + size_t(m0 + i) * ldy + n0 + j;
      const float v = _mm512_reduce_add_ps(acc[i][j]);
      *o = beta == 0.f ? v : *o * beta + v;
    }
}

// Decode (a few x rows) is bound by the read of W. A thread's rows [n0, n1) are cut into
// kStreams contiguous parts read side by side, each with software prefetch kPrefetch bytes
// ahead (the hardware prefetchers stop at 4 KB pages and follow few streams deep enough):
// on this 2-core Zen 5 VM, replaying ZAYA1-base's decode reads (bench_decode_stream), 4
// streams with 1 KB prefetch read 56 GB/s against 44 GB/s for one stream with 2 KB prefetch,
// and a plain read of 4 streams beats one by 15%. x (<= MR rows) stays in L1.
constexpr int kPrefetch = 1024;

// Rows start[p] + r of W, r < count, for S streams p side by side, against exactly MR x rows:
// with S and MR fixed at compile time the S x MR accumulators and the S loaded vectors stay
// in registers (with run-time bounds GCC kept them on the stack, a store and a reload per
// vdpbf16ps). A tensor in a safetensors file starts wherever its header ends, so W's rows
// are rarely 64-byte aligned and every unaligned load would touch two cache lines: with
// lead > 0 (W is lead elements past a 64-byte boundary, K % 32 == 0, x shifted by lead) the
// loads are aligned, the first and last of each row masked to the row.
template <int S, int MR>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void stream_rows(float* y, int ldy, const bf16* xb, int Kp,
                                                                        const bf16* W, const int* start, int count,
                                                                        int K, float beta, int lead) {
  const int full = K / 32, rem = K % 32;
  const __mmask32 tail = rem ? (__mmask32(1) << rem) - 1 : 0;
  const __mmask32 first = ~((__mmask32(1) << lead) - 1), last = (__mmask32(1) << lead) - 1;
  for (int r = 0; r < count; ++r) {
    const bf16* wr[S];
    for (int p = 0; p < S; ++p) wr[p] = W + size_t(start[p] + r) * K - lead;
    __m512 acc[MR][S];  // one chain per (x row, stream): S chains cover vdpbf16ps latency
    for (int i = 0; i < MR; ++i)
      for (int p = 0; p < S; ++p) acc[i][p] = _mm512_setzero_ps();
    const auto step = [&](int k, const __m512i* w) __attribute__((target("avx512f,avx512bw,avx512bf16"))) {
      for (int i = 0; i < MR; ++i) {
        const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + size_t(i) * Kp + k);
        for (int p = 0; p < S; ++p) acc[i][p] = _mm512_dpbf16_ps(acc[i][p], xv, (__m512bh)w[p]);
      }
    };
    __m512i w[S];
    if (lead) {  // the row's first elements: lanes lead..31 of the first aligned chunk
      for (int p = 0; p < S; ++p) w[p] = _mm512_maskz_loadu_epi16(first, wr[p]);
      step(0, w);
    }
    for (int s = lead ? 1 : 0; s < full; ++s) {  // whole chunks
      const int k = s * 32;
      for (int p = 0; p < S; ++p) {
        _mm_prefetch(reinterpret_cast<const char*>(wr[p] + k) + kPrefetch, _MM_HINT_T0);  // never faults
        w[p] = _mm512_loadu_si512(wr[p] + k);
      }
      step(k, w);
    }
    if (lead) {  // the row's last elements: lanes 0..lead-1 of the chunk after
      for (int p = 0; p < S; ++p) w[p] = _mm512_maskz_loadu_epi16(last, wr[p] + size_t(full) * 32);
      step(full * 32, w);
    } else if (rem) {
      for (int p = 0; p < S; ++p) w[p] = _mm512_maskz_loadu_epi16(tail, wr[p] + size_t(full) * 32);
      step(full * 32, w);
    }
    for (int p = 0; p < S; ++p)
      for (int i = 0; i < MR; ++i) {
        float* o = y + size_t(i) * ldy + start[p] + r;
        const float v = _mm512_reduce_add_ps(acc[i][p]);
        *o = beta == 0.f ? v : *o * beta + v;
      }
  }
}

// x rows up to which decode uses the stream kernels (more go to the block kernel, then oneDNN).
constexpr int kStreamRows = 8;
constexpr int kStreams = 4;  // 8 streams read slower than 4 (45 against 56 GB/s)

// AVX2 (CPUs without AVX512-BF16): W widened to fp32 by a 16-bit shift, x rounded to bf16 as
// the other kernels round it and held widened (xf, rows of K), FMA; S streams as above. With
// 16 vector registers, S x MR accumulators stay at 8 or fewer.
constexpr int kAvx2StreamRows = 4;
template <int S, int MR>
__attribute__((target("avx2,fma"))) void stream_rows_avx2(float* y, int ldy, const float* xf, const bf16* W,
                                                          const int* start, int count, int K, float beta) {
  const int full = K / 8;
  for (int r = 0; r < count; ++r) {
    const bf16* wr[S];
    for (int p = 0; p < S; ++p) wr[p] = W + size_t(start[p] + r) * K;
    __m256 acc[MR][S];
    for (int i = 0; i < MR; ++i)
      for (int p = 0; p < S; ++p) acc[i][p] = _mm256_setzero_ps();
    for (int s = 0; s < full; ++s) {
      const int k = s * 8;
      for (int p = 0; p < S; ++p) {
        if (s % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(wr[p] + k) + kPrefetch, _MM_HINT_T0);
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wr[p] + k));
        const __m256 w = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        for (int i = 0; i < MR; ++i) acc[i][p] = _mm256_fmadd_ps(w, _mm256_loadu_ps(xf + size_t(i) * K + k), acc[i][p]);
      }
    }
    for (int p = 0; p < S; ++p)
      for (int i = 0; i < MR; ++i) {
        float v = hsum8(acc[i][p]);
        for (int k = full * 8; k < K; ++k) v += from_bf16(wr[p][k]) * xf[size_t(i) * K + k];
        float* o = y + size_t(i) * ldy + start[p] + r;
        *o = beta == 0.f ? v : *o * beta + v;
      }
  }
}

// Elements between W and the 64-byte boundary before it, when every row starts as far from
// one (K % 32 == 0); 0 otherwise (then loads are unaligned).
int weight_lead(const bf16* W, int K) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(W);
  return K % 32 == 0 && a % 2 == 0 ? int(a % 64 / 2) : 0;
}

// Rows start[p] + k0 + r (r < count, p < S) against MR x rows: S the kernel's streams
// (decode_streams) or 1 (a share's extra rows).
template <int MR>
void steps_native(float* y, int ldy, const bf16* xl, int Kl, const bf16* W, const int* start, int S, int k0, int count,
                  int K, float beta, int lead) {
  int s[RowStreams::kMax];
  for (int p = 0; p < S; ++p) s[p] = start[p] + k0;
  if (S == kStreams) return stream_rows<kStreams, MR>(y, ldy, xl, Kl, W, s, count, K, beta, lead);
  if (S == 3) return stream_rows<3, MR>(y, ldy, xl, Kl, W, s, count, K, beta, lead);
  for (int p = 0; p < S; ++p) stream_rows<1, MR>(y, ldy, xl, Kl, W, s + p, count, K, beta, lead);
}
template <int MR>
void steps_avx2(float* y, int ldy, const float* xf, const bf16* W, const int* start, int S, int k0, int count, int K,
                float beta) {
  int s[RowStreams::kMax];
  for (int p = 0; p < S; ++p) s[p] = start[p] + k0;
  if (S == kStreams) return stream_rows_avx2<kStreams, MR>(y, ldy, xf, W, s, count, K, beta);
  if (S == 2) return stream_rows_avx2<2, MR>(y, ldy, xf, W, s, count, K, beta);
  for (int p = 0; p < S; ++p) stream_rows_avx2<1, MR>(y, ldy, xf, W, s + p, count, K, beta);
}

// A decode product's x on this thread, as the stream kernels read it: rounded to bf16 and
// shifted by W's lead (aligned loads of W), or for AVX2 rounded and widened. Each thread
// prepares x itself (a few KB): cheaper than a barrier.
struct DecodeX {
  const bf16* xl = nullptr;
  const float* xf = nullptr;
  int Kl = 0, lead = 0;
  int streams = kStreams;  // side by side: S x MR accumulators must stay in registers
};
DecodeX decode_x(const float* x, int ldx, const bf16* W, int M, int K) {
  DecodeX d;
  if (tier() == Tier::Avx2) {
    static thread_local std::vector<float> xf;
    round_widen(xf, x, ldx, M, K);
    d.xf = xf.data();
    d.streams = M <= 2 ? kStreams : 2;
    return d;
  }
  d.lead = weight_lead(W, K);
  d.Kl = (K + d.lead + 31) / 32 * 32;
  static thread_local std::vector<bf16> xl;
  round_rows(xl, x, ldx, M, K, d.Kl, d.lead);
  d.xl = xl.data();
  // Batched decode: 3 streams x up to 8 x rows keep 24 accumulators in registers (batch 8
  // on ZAYA1-base: 172-178 ms/step, 2 streams 194-204, the block kernel 236-241).
  d.streams = M <= 4 ? kStreams : 3;
  return d;
}
void decode_steps(const DecodeX& d, float* y, int ldy, const bf16* W, int M, int K, float beta, const int* start, int S,
                  int k0, int count) {
  if (d.xf) {
    switch (M) {
      case 1: return steps_avx2<1>(y, ldy, d.xf, W, start, S, k0, count, K, beta);
      case 2: return steps_avx2<2>(y, ldy, d.xf, W, start, S, k0, count, K, beta);
      case 3: return steps_avx2<3>(y, ldy, d.xf, W, start, S, k0, count, K, beta);
      default: return steps_avx2<4>(y, ldy, d.xf, W, start, S, k0, count, K, beta);
    }
  }
  switch (M) {
    case 1: return steps_native<1>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
    case 2: return steps_native<2>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
    case 3: return steps_native<3>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
    case 4: return steps_native<4>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
    case 5: return steps_native<5>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
    case 6: return steps_native<6>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
    case 7: return steps_native<7>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
    default: return steps_native<8>(y, ldy, d.xl, d.Kl, W, start, S, k0, count, K, beta, d.lead);
  }
}

// Rows [n0, n1) of a decode product on this thread (M <= the stream kernels' rows).
void decode_range(float* y, int ldy, const float* x, int ldx, const bf16* W, int M, int K, float beta, int n0,
                  int n1) {
  const DecodeX d = decode_x(x, ldx, W, M, K);
  run_streams({n0, n1}, d.streams, [&](const int* start, int S, int k0, int count) {
    decode_steps(d, y, ldy, W, M, K, beta, start, S, k0, count);
  });
}

void block_portable(float* y, int ldy, const bf16* xb, int Kp, const bf16* W, int n0, int nr, int m0, int mr, int K,
                    float beta) {
  float w[512];
  for (int j = 0; j < nr; ++j) {
    const bf16* wr = W + size_t(n0 + j) * K;
    float acc[kMBlock] = {};
    for (int k0 = 0; k0 < K; k0 += 512) {
      const int kn = std::min(512, K - k0);
      convert_from_bf16(wr + k0, w, size_t(kn));
      for (int i = 0; i < mr; ++i) {
        const bf16* xr = xb + size_t(m0 + i) * Kp + k0;
        float s = 0;
        for (int k = 0; k < kn; ++k) s += from_bf16(xr[k]) * w[k];
        acc[i] += s;
      }
    }
    for (int i = 0; i < mr; ++i) {
      float* o = y + size_t(m0 + i) * ldy + n0 + j;
      *o = beta == 0.f ? acc[i] : *o * beta + acc[i];
    }
  }
}

}  // namespace

const char* linear_bf16_kernel() {
  switch (tier()) {
    case Tier::Avx512Bf16: return "avx512bf16";
    case Tier::Avx2: return "avx2";
    default: return "portable";
  }
}
void linear_bf16_force(KernelTier k) { g_cap = int(k); }

namespace {

// x rows up to which decode runs the stream kernels (decode_range); 0: none (portable).
int stream_rows() {
  switch (tier()) {
    case Tier::Avx512Bf16: return kStreamRows;
    case Tier::Avx2: return kAvx2StreamRows;
    default: return 0;
  }
}

// Blocks [b0, b1) of kRows output rows against all M rows of x (rounded: xb, stride Kp).
void run_blocks(float* y, int ldy, const bf16* xb, int Kp, const bf16* W, int M, int N, int K, float beta, int b0,
                int b1) {
  const bool native = use_native();
  for (int b = b0; b < b1; ++b) {
    const int n0 = b * kRows, nr = std::min(kRows, N - n0);
    for (int m0 = 0; m0 < M; m0 += kMBlock) {
      const int mr = std::min(kMBlock, M - m0);
      if (native)
        block_native(y, ldy, xb, Kp, W, n0, nr, m0, mr, K, beta);
      else
        block_portable(y, ldy, xb, Kp, W, n0, nr, m0, mr, K, beta);
    }
  }
}

}  // namespace

// From kGemmRows x rows on, a GEMM: the bf16 GEMM over W in place where the CPU has one.
// Without it (AVX2), from kF32TileRows, W's rows widened to fp32 tiles for the fp32 GEMM
// (gemm_f32_row_tiles); fewer rows take the AVX2 stream kernel 4 at a time, which keeps up
// to there (K 2048, Zen 3, 2 threads: 16 rows 3.9 against 6.4 ms, 32 rows 10.3 against 11.2
// over 4,096 W rows; 64 rows 20.0 against 15.3, 128 rows 31.7 against 21.3).
constexpr int kF32TileRows = 64;
static bool use_gemm(int M) {
  static const bool own = [] {
    const char* e = std::getenv("ZAYA_BF16_GEMM");
    return e && !std::strcmp(e, "own");
  }();
  return M >= (bf16_gemm_supported() ? kGemmRows : kF32TileRows) && !own && tier() != Tier::Portable;
}

// x rounded to bf16 (this product's contract) as floats, then the fp32 tiles.
static void gemm_widened(float* y, int ldy, const float* x, int ldx, const bf16* W, int M, int N, int K, float beta) {
  static thread_local std::vector<float> xf;
  round_widen(xf, x, ldx, M, K);
  gemm_f32_row_tiles(M, N, K, xf.data(), K, beta, y, ldy,
                     [&](int n, float* dst) { convert_from_bf16(W + size_t(n) * K, dst, size_t(K)); });
}

void linear_bf16(float* y, int ldy, const float* x, int ldx, const bf16* W, int M, int N, int K, float beta) {
  if (M <= 0 || N <= 0) return;
  if (use_gemm(M))
    return bf16_gemm_supported() ? gemm_bf16_weights(M, N, K, x, ldx, W, beta, y, ldy)
                                 : gemm_widened(y, ldy, x, ldx, W, M, N, K, beta);
  const int Kp = (K + 31) / 32 * 32;
  if (M <= stream_rows()) {
    // Decode: the team split in a region of its own, or all rows on this thread for a small
    // W or a caller already inside a region (CCA's conv groups, split over the team).
    if (size_t(N) * K > 65536 && !omp_in_parallel()) {
#pragma omp parallel
      linear_bf16_team(y, ldy, x, ldx, W, M, N, K, beta);
      return;
    }
    return decode_range(y, ldy, x, ldx, W, M, K, beta, 0, N);
  }
  if (tier() == Tier::Avx2) {  // more x rows: the stream kernel, 4 at a time (W read once per 4)
    for (int m0 = 0; m0 < M; m0 += kAvx2StreamRows)
      linear_bf16(y + size_t(m0) * ldy, ldy, x + size_t(m0) * ldx, ldx, W, std::min(kAvx2StreamRows, M - m0), N, K,
                  beta);
    return;
  }
  static thread_local std::vector<bf16> xb;
  round_rows(xb, x, ldx, M, K, Kp);
  const int blocks = (N + kRows - 1) / kRows;
  for (int mt = 0; mt < M; mt += kMTile) {
    const int mr = std::min(M, mt + kMTile) - mt;
    const bf16* xt = xb.data() + size_t(mt) * Kp;
    float* yt = y + size_t(mt) * ldy;
#pragma omp parallel for schedule(static) if (size_t(N) * K * mr > 32768)
    for (int b = 0; b < blocks; ++b) run_blocks(yt, ldy, xt, Kp, W, mr, N, K, beta, b, b + 1);
  }
}

int linear_bf16_team_cut_rows() { return tier() == Tier::Avx2 ? std::numeric_limits<int>::max() : stream_rows(); }

int linear_bf16_team(float* y, int ldy, const float* x, int ldx, const bf16* W, int M, int N, int K, float beta,
                     const float* cuts, TeamSteal* steal) {
  if (M <= 0 || N <= 0) return 0;
  if (M <= stream_rows()) {
    // One contiguous share of rows per thread, its streams read on from claim to claim (2, 4
    // or geometrically shrinking ranges per thread, taken dynamically, were no faster: each
    // range's streams ramp up anew); steps of slower threads' shares after it.
    const DecodeX d = decode_x(x, ldx, W, M, K);
    const int batch = std::max(1, int(16384 / (size_t(d.streams) * K * sizeof(bf16))));  // claims of ~16 KB of W
    return team_steps(N, cuts, d.streams, batch, steal, [&](const int* start, int S, int k0, int count) {
      decode_steps(d, y, ldy, W, M, K, beta, start, S, k0, count);
    });
  }
  if (tier() == Tier::Avx2) {  // as linear_bf16: 4 x rows at a time over this thread's share
    const RowRange r = team_rows(N, cuts);
    for (int m0 = 0; m0 < M; m0 += kAvx2StreamRows)
      decode_range(y + size_t(m0) * ldy, ldy, x + size_t(m0) * ldx, ldx, W, std::min(kAvx2StreamRows, M - m0), K,
                   beta, r.n0, r.n1);
    return r.n1 - r.n0;
  }
  static thread_local std::vector<bf16> xb;
  const int Kp = (K + 31) / 32 * 32;
  round_rows(xb, x, ldx, M, K, Kp);
  // Dynamic chunks: a thread slowed down (the other tenants of a VM, a page walk) does not
  // hold the team at the barrier.
  const int blocks = (N + kRows - 1) / kRows, chunk = std::max(1, blocks / 16);
  const int chunks = (blocks + chunk - 1) / chunk;
  for (int mt = 0; mt < M; mt += kMTile) {
    const int mr = std::min(M, mt + kMTile) - mt;
#pragma omp for schedule(dynamic) nowait
    for (int ci = 0; ci < chunks; ++ci)
      run_blocks(y + size_t(mt) * ldy, ldy, xb.data() + size_t(mt) * Kp, Kp, W, mr, N, K, beta, ci * chunk,
                 std::min(blocks, (ci + 1) * chunk));
  }
  return 0;  // (dynamic blocks: not counted per thread)
}

}  // namespace zaya
