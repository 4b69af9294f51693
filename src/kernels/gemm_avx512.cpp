#include "kernels/gemm_avx512.h"

// GCC 12's AVX-512 headers use _mm512_undefined_* inside inline intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>
#include <atomic>

#include "core/error.h"
#include "kernels/avx512_transpose.h"

// Compiled for AVX-512 whatever -march says; the fp32 paths run after gemm_f32_usable(), the
// bf16 ones after gemm_bf16_avx512_usable() said yes.
#define ZAYA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace zaya {

namespace {

constexpr int kMR = 12;   // rows of a register block of C
constexpr int kNR = 32;   // columns of a panel (two vectors)
constexpr int kKC = 512;  // K steps per pass: a block's packed A (24 KB) stays in L1
constexpr int kAGroup = 4;  // row blocks of A packed together
constexpr long kInPlaceStride = 2048;  // bytes between A's rows read in place
constexpr long kL2Panels = 768 * 1024;  // bytes of B panels a thread sweeps per row block
constexpr int kPackAhead = 8;  // rows of a cold operand prefetched ahead of the packing

// A 32-bit lane of the packed operands or of A read in place: a float, or a pair of bf16 (k,
// k+1) read as one. may_alias: bf16 storage is read through it.
typedef float lane32 __attribute__((may_alias));

int ceil_div(int a, int b) { return (a + b - 1) / b; }

__mmask16 cols_mask(int cols) { return cols >= 16 ? __mmask16(0xFFFF) : cols <= 0 ? 0 : __mmask16((1u << cols) - 1); }
__mmask32 elems_mask(long n) { return n >= 32 ? ~__mmask32(0) : n <= 0 ? 0 : __mmask32((1u << n) - 1); }

// Interleaves two rows of 32 bf16 (k and k + 1) into pairs: kPairLo takes columns 0-15,
// kPairHi 16-31 (_mm512_permutex2var_epi16 indices; 32 + c names the second row's c).
struct PairIdx {
  alignas(64) uint16_t lo[32], hi[32];
  PairIdx() {
    for (int c = 0; c < 16; ++c) lo[2 * c] = uint16_t(c), lo[2 * c + 1] = uint16_t(32 + c);
    for (int c = 0; c < 16; ++c) hi[2 * c] = uint16_t(16 + c), hi[2 * c + 1] = uint16_t(48 + c);
  }
};
const PairIdx kPairIdx;

// One product as the threads see it. K counts the kernel's steps along K: elements for fp32,
// pairs for bf16 (Kel the elements).
struct Job {
  int M, N, K, Kel, MB, NP;  // row blocks of kMR, panels of kNR
  bool bf;                   // bf16 operands (2 bytes), else fp32
  bool a_t;                  // A stored [k][i] (ta == T)
  const void* A;
  long lda;
  bool b_t;  // B stored [j][k] (tb == T)
  const void* B;
  long ldb;
  float* bp;  // packed panels: panel p's step k at bp + (p * K + k) * kNR
  float alpha, beta;
  float* C;
  long ldc;
  std::atomic<int>* next = nullptr;  // per K block: the next unit of rows x panels to take
  const float* af() const { return static_cast<const float*>(A); }
  const float* bf32() const { return static_cast<const float*>(B); }
  const bf16* ah() const { return static_cast<const bf16*>(A); }
  const bf16* bh() const { return static_cast<const bf16*>(B); }
};

// The lines of p[0, n) towards L1.
inline void prefetch_span(const float* p, int n) {
  for (int c = 0; c < n; c += 16) _mm_prefetch(reinterpret_cast<const char*>(p + c), _MM_HINT_T0);
}

// Steps [k0, k0 + kc) of panels [p0, p1) of op(B), each panel as [k][32] (zero columns past
// N). Packed one K block at a time, just before the block's products read them from L2; stored
// [k][j], each step's row is read once across all the panels (one run of memory, not a 128-byte
// piece per panel at the stride of B's rows), and the rows ahead are prefetched: B arrives cold
// from DRAM in the trainer (a weight gradient's 2048 x 512 activations).
ZAYA_AVX512 void pack_panels_f32(const Job& j, int p0, int p1, int k0, int kc) {
  if (p1 <= p0) return;
  const int k1 = k0 + kc;
  if (!j.b_t) {
    const int j0 = p0 * kNR, cols = std::min(p1 * kNR, j.N) - j0;
    for (int k = k0; k < k1; ++k) {
      const float* src = j.bf32() + size_t(k) * j.ldb + j0;
      if (k + kPackAhead < j.K)
        prefetch_span(src + kPackAhead * j.ldb, cols);
      for (int p = p0; p < p1; ++p) {
        const int c = (p - p0) * kNR;
        float* out = j.bp + (size_t(p) * j.K + k) * kNR;
        _mm512_store_ps(out, _mm512_maskz_loadu_ps(cols_mask(cols - c), src + c));
        _mm512_store_ps(out + 16, _mm512_maskz_loadu_ps(cols_mask(cols - c - 16), src + c + 16));
      }
    }
    return;
  }
  // [j][k]: 16 x 16 blocks transposed; K's and the columns' tails element by element.
  const int kfull = k0 + (kc / 16) * 16;
  for (int p = p0; p < p1; ++p) {
    float* out = j.bp + size_t(p) * j.K * kNR;
    const int jp = p * kNR, cols = std::min(kNR, j.N - jp);
    for (int half = 0; half < 2; ++half) {
      const int c0 = half * 16, cn = std::min(16, cols - c0);
      if (cn <= 0) {
        for (int k = k0; k < k1; ++k) _mm512_store_ps(out + size_t(k) * kNR + c0, _mm512_setzero_ps());
        continue;
      }
      for (int kb = k0; kb < kfull; kb += 16) {
        __m512i r[16];
        for (int c = 0; c < 16; ++c) {
          const float* src = j.bf32() + size_t(jp + c0 + c) * j.ldb + kb;
          if (c < cn && kb + 64 < kfull) _mm_prefetch(reinterpret_cast<const char*>(src + 64), _MM_HINT_T0);
          r[c] = c < cn ? _mm512_loadu_si512(src) : _mm512_setzero_si512();
        }
        transpose16(r);
        for (int q = 0; q < 16; ++q) _mm512_store_si512(out + size_t(kb + q) * kNR + c0, r[q]);
      }
      for (int k = kfull; k < k1; ++k)
        for (int c = 0; c < 16; ++c)
          out[size_t(k) * kNR + c0 + c] = c < cn ? j.bf32()[size_t(jp + c0 + c) * j.ldb + k] : 0.f;
    }
  }
}

// The same for bf16 B, steps (pairs) [k0, k0 + kc): lane c of step s holds (B[2s][c],
// B[2s+1][c]), the second zero past K.
ZAYA_AVX512 void pack_panels_bf16(const Job& j, int p0, int p1, int k0, int kc) {
  const int k1 = k0 + kc;
  for (int p = p0; p < p1; ++p) {
    float* out = j.bp + size_t(p) * j.K * kNR;
    const int jp = p * kNR, cols = std::min(kNR, j.N - jp);
    if (!j.b_t) {  // [k][j]: rows k and k + 1 interleaved
      const __mmask32 m = elems_mask(cols);
      const __m512i lo = _mm512_load_si512(kPairIdx.lo), hi = _mm512_load_si512(kPairIdx.hi);
      for (int s = k0; s < k1; ++s) {
        const bf16* src = j.bh() + size_t(2 * s) * j.ldb + jp;
        const __m512i r0 = _mm512_maskz_loadu_epi16(m, src);
        const __m512i r1 = 2 * s + 1 < j.Kel ? _mm512_maskz_loadu_epi16(m, src + j.ldb) : _mm512_setzero_si512();
        _mm512_store_si512(out + size_t(s) * kNR, _mm512_permutex2var_epi16(r0, lo, r1));
        _mm512_store_si512(out + size_t(s) * kNR + 16, _mm512_permutex2var_epi16(r0, hi, r1));
      }
      continue;
    }
    // [j][k]: a column's pairs lie next to each other; 16 x 16 blocks of pairs transposed, K's
    // tail masked (an odd K's last pair loads one element and a zero).
    for (int half = 0; half < 2; ++half) {
      const int c0 = half * 16, cn = std::min(16, cols - c0);
      if (cn <= 0) {
        for (int s = k0; s < k1; ++s) _mm512_store_si512(out + size_t(s) * kNR + c0, _mm512_setzero_si512());
        continue;
      }
      for (int s0 = k0; s0 < k1; s0 += 16) {
        const __mmask32 km = elems_mask(long(j.Kel) - 2 * s0);
        __m512i r[16];
        for (int c = 0; c < 16; ++c)
          r[c] = c < cn ? _mm512_maskz_loadu_epi16(km, j.bh() + size_t(jp + c0 + c) * j.ldb + 2 * s0)
                        : _mm512_setzero_si512();
        transpose16(r);
        for (int q = 0; q < std::min(16, k1 - s0); ++q) _mm512_store_si512(out + size_t(s0 + q) * kNR + c0, r[q]);
      }
    }
  }
}

// Row blocks i0.. (rows of them, up to kAGroup blocks) of op(A) over steps [k0, k0 + kc), each
// as [k][kMR] at out + block * kc * kMR: a block's elements for one k on one line, whatever A's
// stride (rows or K-steps 4 KB or more apart fall in one L1 set, and the LM head's 32 KB rows
// were re-read from L2 for every panel). Stored [k][i], the group's rows of one K-step are read
// together: 48 floats, three whole lines, where one block alone would use 48 of 64 bytes.
ZAYA_AVX512 void pack_a_f32(const Job& j, int i0, int rows, int k0, int kc, float* out) {
  const int blocks = ceil_div(rows, kMR);
  if (j.a_t) {
    for (int k = 0; k < kc; ++k) {
      const float* src = j.af() + size_t(k0 + k) * j.lda + i0;
      if (k0 + k + kPackAhead < j.K)
        prefetch_span(src + kPackAhead * j.lda, rows);
      for (int b = 0; b < blocks; ++b) {
        const __mmask16 rm = cols_mask(std::min(kMR, rows - b * kMR));
        _mm512_mask_storeu_ps(out + (size_t(b) * kc + k) * kMR, rm, _mm512_maskz_loadu_ps(rm, src + b * kMR));
      }
    }
    return;
  }
  for (int b = 0; b < blocks; ++b) {  // [i][k]: 16 K-steps of each row, transposed
    const int r0 = i0 + b * kMR, rb = std::min(kMR, rows - b * kMR);
    const __mmask16 rm = cols_mask(rb);
    float* o = out + size_t(b) * kc * kMR;
    for (int kb = 0; kb < kc; kb += 16) {
      const __mmask16 km = cols_mask(kc - kb);
      __m512i r[16];
      for (int c = 0; c < 16; ++c)
        r[c] = c < rb ? _mm512_castps_si512(_mm512_maskz_loadu_ps(km, j.af() + size_t(r0 + c) * j.lda + k0 + kb))
                      : _mm512_setzero_si512();
      transpose16(r);
      for (int q = 0; q < std::min(16, kc - kb); ++q)
        _mm512_mask_storeu_ps(o + size_t(kb + q) * kMR, rm, _mm512_castsi512_ps(r[q]));
    }
  }
}

// The same for bf16 A, pairs (A[i][2s], A[i][2s+1]) in the lanes, a zero past K.
ZAYA_AVX512 void pack_a_bf16(const Job& j, int i0, int rows, int k0, int kc, float* out) {
  const int blocks = ceil_div(rows, kMR);
  if (j.a_t) {  // [k][i]: the 12 rows' elements of K-steps 2s and 2s + 1 interleaved
    const __m512i lo = _mm512_load_si512(kPairIdx.lo);
    for (int s = 0; s < kc; ++s) {
      const long k = 2l * (k0 + s);
      const bf16* src = j.ah() + size_t(k) * j.lda + i0;
      const bool second = k + 1 < j.Kel;
      for (int b = 0; b < blocks; ++b) {
        const int rb = std::min(kMR, rows - b * kMR);
        const __mmask32 m = elems_mask(rb);
        const __m512i r0 = _mm512_maskz_loadu_epi16(m, src + b * kMR);
        const __m512i r1 = second ? _mm512_maskz_loadu_epi16(m, src + j.lda + b * kMR) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(out + (size_t(b) * kc + s) * kMR, cols_mask(rb), _mm512_permutex2var_epi16(r0, lo, r1));
      }
    }
    return;
  }
  for (int b = 0; b < blocks; ++b) {  // [i][k]: 16 pairs of each row, transposed
    const int r0 = i0 + b * kMR, rb = std::min(kMR, rows - b * kMR);
    const __mmask16 rm = cols_mask(rb);
    float* o = out + size_t(b) * kc * kMR;
    for (int sb = 0; sb < kc; sb += 16) {
      const long e0 = 2l * (k0 + sb);
      const __mmask32 km = elems_mask(std::min(2l * (kc - sb), long(j.Kel) - e0));
      __m512i r[16];
      for (int c = 0; c < 16; ++c)
        r[c] = c < rb ? _mm512_maskz_loadu_epi16(km, j.ah() + size_t(r0 + c) * j.lda + e0) : _mm512_setzero_si512();
      transpose16(r);
      for (int q = 0; q < std::min(16, kc - sb); ++q) _mm512_mask_storeu_epi32(o + size_t(sb + q) * kMR, rm, r[q]);
    }
  }
}

// C[MR rows, 32 columns (masked)] = alpha A[rows, k0..k0+kc) B-panel + beta C, A at `a` (its
// lane (r, k) at a[r * lda + k], or a[k * lda + r] when AT), the panel's rows from `b`. BF: the
// lanes are bf16 pairs, multiplied by dot products.
template <int MR, bool AT, bool BF>
ZAYA_AVX512 void block(const void* a_lanes, long lda, const float* b, int kc, float* C, long ldc, __mmask16 m0,
                       __mmask16 m1, float alpha, float beta) {
  const lane32* a = static_cast<const lane32*>(a_lanes);
  if (beta != 0.f) {  // C is read after the K loop: start its lines on the way now
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(C + size_t(r) * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(C + size_t(r) * ldc + 16), _MM_HINT_T0);
    }
  }
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) c0[r] = _mm512_setzero_ps(), c1[r] = _mm512_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(b + size_t(k) * kNR), b1 = _mm512_load_ps(b + size_t(k) * kNR + 16);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(AT ? a[size_t(k) * lda + r] : a[size_t(r) * lda + k]);
      if constexpr (BF) {
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)av, (__m512bh)b0);
        c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)av, (__m512bh)b1);
      } else {
        c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
      }
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) {
    float* c = C + size_t(r) * ldc;
    __m512 v0 = _mm512_mul_ps(va, c0[r]), v1 = _mm512_mul_ps(va, c1[r]);
    if (beta != 0.f) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), v1);
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
  }
}

using BlockFn = void (*)(const void*, long, const float*, int, float*, long, __mmask16, __mmask16, float, float);

template <bool AT, bool BF, int... R>
constexpr std::array<BlockFn, sizeof...(R)> block_table(std::integer_sequence<int, R...>) {
  return {&block<R + 1, AT, BF>...};
}

// Whether A is read in place (see the header): row-major, rows near enough, and for bf16 its
// pairs whole and 4-byte aligned.
bool a_in_place(const Job& j) {
  if (j.a_t) return false;
  if (!j.bf) return j.lda * 4 <= kInPlaceStride;
  return j.lda * 2 <= kInPlaceStride && j.Kel % 2 == 0 && j.lda % 2 == 0 &&
         reinterpret_cast<uintptr_t>(j.A) % 4 == 0;
}

// K steps per pass. A stored [k][i] is gathered from rows far apart (the
// LM head's weight gradient reads its 64 MB logits gradient at a 32 KB stride) once per column
// chunk; where a K block's panels would need more than one chunk, a shorter block that fits
// them all in one reads A once (tn 8192 x 512 x 2048 on Zen 5, 1 / 2 threads: fp32 0.140 ->
// 0.164 / 0.277 -> 0.319 TFLOP/s, bf16 0.264 -> 0.303 / 0.389 -> 0.494). Not for A in rows: its packing reads whole lines, and the extra passes
// over C cost more there (nn 228 x 512 x 2048: 0.167 -> 0.151). Counted over all the panels,
// whatever the threads' split: the K blocks, and so the sums' order, do not depend on it.
int k_block(const Job& j) {
  if (!j.a_t || long(j.NP) * std::min(j.K, kKC) * kNR * 4 <= kL2Panels) return kKC;
  const int fit = int(kL2Panels / (long(j.NP) * kNR * 4)) / 16 * 16;
  return fit >= kKC / 2 ? fit : kKC;
}

// Thread t of nt: packs its share of B, meets the others, computes its blocks of C.
ZAYA_AVX512 void run_share(const Job& j, int t, int nt) {
  const bool split_n = nt > 1 && j.NP >= nt && (j.N > j.M || j.MB < nt);
  const int tm = split_n ? 1 : std::min(nt, j.MB), tn = split_n ? nt : 1;
  const int ti = t / tn, tj = t % tn;
  const int mb0 = int(long(j.MB) * ti / tm), mb1 = int(long(j.MB) * (ti + 1) / tm);
  const int np0 = int(long(j.NP) * tj / tn), np1 = int(long(j.NP) * (tj + 1) / tn);
  // Panels this thread packs, per K block: columns split, its own; rows split, a share of
  // all, then a barrier (every thread packs and meets it: run() caps nt at max(MB, NP)).
  const int p0 = split_n ? np0 : int(long(j.NP) * t / nt);
  const int p1 = split_n ? np1 : int(long(j.NP) * (t + 1) / nt);
  static constexpr auto kN = block_table<false, false>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto kT = block_table<true, false>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto kNb = block_table<false, true>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto kTb = block_table<true, true>(std::make_integer_sequence<int, kMR>{});
  const bool packed = !a_in_place(j);
  const auto& fns = j.bf ? (packed ? kTb : kNb) : (packed ? kT : kN);
  // In place, A's lanes: a row of lda elements is lda / 2 pairs.
  const long lda_lanes = j.bf ? j.lda / 2 : j.lda;
  static thread_local std::vector<float> apack;
  if (packed && apack.size() < size_t(kAGroup) * kKC * kMR) apack.resize(size_t(kAGroup) * kKC * kMR);
  const int KC = k_block(j);
  const int chunk = std::max(1, int(kL2Panels / (long(std::min(j.K, KC)) * kNR * 4)));
  for (int k0 = 0; k0 < j.K; k0 += KC) {
    const int kc = std::min(KC, j.K - k0);
    j.bf ? pack_panels_bf16(j, p0, p1, k0, kc) : pack_panels_f32(j, p0, p1, k0, kc);
    if (nt > 1 && !split_n) {
#pragma omp barrier
    }
    const float beta = k0 == 0 ? j.beta : 1.f;  // later K blocks add into C
    // Rows [g0, g1) of blocks against panels [c0, c1).
    auto compute = [&](int c0, int c1, int g0, int g1) {
      if (packed) {
        const int rows = std::min(j.M, g1 * kMR) - g0 * kMR;
        j.bf ? pack_a_bf16(j, g0 * kMR, rows, k0, kc, apack.data()) : pack_a_f32(j, g0 * kMR, rows, k0, kc, apack.data());
      }
      for (int mb = g0; mb < g1; ++mb) {
        const int i0 = mb * kMR, rows = std::min(kMR, j.M - i0);
        const lane32* a = packed ? apack.data() + size_t(mb - g0) * kc * kMR
                                 : static_cast<const lane32*>(j.A) + size_t(i0) * lda_lanes + k0;
        const long lda = packed ? kMR : lda_lanes;
        for (int p = c0; p < c1; ++p) {
          const int cols = std::min(kNR, j.N - p * kNR);
          fns[rows - 1](a, lda, j.bp + (size_t(p) * j.K + k0) * kNR, kc,
                        j.C + size_t(i0) * j.ldc + size_t(p) * kNR, j.ldc, cols_mask(cols), cols_mask(cols - 16),
                        j.alpha, beta);
        }
      }
    };
    // Rows split: the threads take units (a column chunk x a group of row blocks) from a
    // counter as they come free, not halves fixed in advance. A VM's two vCPUs run at
    // different speeds (here one ~10% slower), and fixed halves left the faster waiting at the
    // end of every product (Zen 5, 2 threads, fixed -> taken: nt 2048 x 1536 x 512 0.331 ->
    // 0.367-0.381 TFLOP/s, nn 2048 x 512 x 2048 0.306-0.310 -> 0.317-0.331, nt 3072^3
    // 0.286-0.321 -> 0.319-0.344). No sum changes order: a unit's C blocks add one K block,
    // and the next K block starts after the barrier that follows its packing. (Columns split
    // stays fixed: each thread packs only its own panels, and sharing them all cost the
    // few-row products 18-35%.)
    if (nt > 1 && !split_n) {
      const int ngroups = ceil_div(j.MB, kAGroup), units = ceil_div(j.NP, chunk) * ngroups;
      std::atomic<int>& next = j.next[k0 / KC];
      for (int u = next.fetch_add(1, std::memory_order_relaxed); u < units; u = next.fetch_add(1, std::memory_order_relaxed)) {
        const int c0 = (u / ngroups) * chunk, g0 = (u % ngroups) * kAGroup;
        compute(c0, std::min(j.NP, c0 + chunk), g0, std::min(j.MB, g0 + kAGroup));
      }
      continue;
    }
    for (int c0 = np0; c0 < np1; c0 += chunk)
      for (int g0 = mb0; g0 < mb1; g0 += kAGroup) compute(c0, std::min(np1, c0 + chunk), g0, std::min(mb1, g0 + kAGroup));
  }
}

void run(Job& j, bool serial) {
  j.MB = ceil_div(j.M, kMR), j.NP = ceil_div(j.N, kNR);
  // Only grows: resizing down and up again would zero the difference on every call.
  static thread_local std::vector<float> bp;
  const size_t need = size_t(j.NP) * j.K * kNR + 16;
  if (bp.size() < need) bp.resize(need);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(bp.data());
  j.bp = bp.data() + ((64 - addr % 64) % 64) / sizeof(float);
  // Inside a parallel region (per-head or per-expert work) the calling thread does it all.
  int nth = serial || omp_in_parallel() ? 1 : omp_get_max_threads();
  nth = std::max(1, std::min(nth, std::max(j.MB, j.NP)));
  if (nth == 1) return run_share(j, 0, 1);
  std::vector<std::atomic<int>> next(size_t(ceil_div(j.K, kKC / 2)));  // a counter per K block (k_block >= kKC / 2)
  j.next = next.data();
#pragma omp parallel num_threads(nth)
  run_share(j, omp_get_thread_num(), omp_get_num_threads());
}

Job make_job(bool bf, Trans ta, Trans tb, int M, int N, int K, float alpha, const void* A, long lda,
             const void* B, long ldb, float beta, float* C, long ldc) {
  Job j{};
  j.bf = bf;
  j.M = M, j.N = N, j.Kel = K, j.K = bf ? ceil_div(K, 2) : K;
  j.a_t = ta == Trans::T, j.A = A, j.lda = lda;
  j.b_t = tb == Trans::T, j.B = B, j.ldb = ldb;
  j.alpha = alpha, j.beta = beta, j.C = C, j.ldc = ldc;
  return j;
}

}  // namespace

bool gemm_f32_usable() { return cpu_features().avx512f; }
bool gemm_bf16_avx512_usable() { return cpu_features().avx512f && cpu_features().avx512_bf16; }

bool gemm_avx512_suits(Trans ta, int M, int N, int K) {
  return ta == Trans::N || (long(M) * N < (4l << 20) && K <= 4096);
}

namespace {

template <class T>
void run_checked(bool usable, const char* no_cpu, Trans ta, Trans tb, int M, int N, int K, float alpha, const T* A,
                 long lda, const T* B, long ldb, float beta, float* C, long ldc, bool serial) {
  ZAYA_CHECK(usable, no_cpu);
  if (M <= 0 || N <= 0 || K <= 0) return;
  Job j = make_job(std::is_same_v<T, bf16>, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  run(j, serial);
}

}  // namespace

void gemm_f32_avx512(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, long lda,
                     const float* B, long ldb, float beta, float* C, long ldc, bool serial) {
  run_checked(gemm_f32_usable(), "gemm_f32_avx512: this CPU has no AVX-512", ta, tb, M, N, K, alpha, A, lda, B, ldb,
              beta, C, ldc, serial);
}

void gemm_bf16_avx512(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda,
                      const bf16* B, long ldb, float beta, float* C, long ldc, bool serial) {
  run_checked(gemm_bf16_avx512_usable(), "gemm_bf16_avx512: this CPU has no AVX512-BF16", ta, tb, M, N, K, alpha, A,
              lda, B, ldb, beta, C, ldc, serial);
}

}  // namespace zaya
