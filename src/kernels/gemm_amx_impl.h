// The AMX bf16 GEMM's kernel (gemm_amx.h: packing, tile blocking, edges, threads) as a
// template on its tile unit, included by two files:
//   gemm_amx.cpp           compiled for AMX and AVX-512: the tile operations are the
//                          instructions (ldtilecfg, tilezero, tileloadd, tdpbf16ps,
//                          tilestored, tilerelease), packing and C's write-out are vector code;
//   gemm_amx_emulated.cpp  compiled for the build's own ISA: the same kernel with the tile
//                          operations and the packing done in scalar C++, so tests check the
//                          kernel's logic against a reference on any x86-64 CPU.
// A tile unit is a class of static functions (tile numbers as template arguments, as the
// instructions take them): config(), zero<T>(), load<T>(base, stride_bytes), dp<C, A, B>()
// (C += A x B over bf16 pairs, fp32), store<T>(base, stride_bytes), release(), and kVector
// (true: pack and write C with AVX-512).
// Everything here is in an unnamed namespace: each including file has its own copy, compiled
// for its own ISA.
#pragma once
#include <omp.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "kernels/avx512_transpose.h"
#include "kernels/gemm.h"

namespace zaya {
namespace {

constexpr int kTile = 16;       // rows and fp32 columns of a tile
constexpr int kChunk = 32;      // K per tile multiply (16 pairs of bf16)
constexpr int kPanel = kTile * kChunk;  // elements of one packed B tile (1 KB)
constexpr long kInPlaceStride = 2048;    // bytes between A's rows read in place
constexpr int kKBlock = 64;              // K chunks per pass (2048 of K)
constexpr long kL2Panels = 1024 * 1024;  // bytes of B panels a thread keeps hot per column chunk

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// n elements of v from a 64-byte boundary (tile loads and packing stores stay within lines).
// v only grows: resizing down and up again would zero the difference on every call.
inline bf16* aligned_buffer(std::vector<bf16>& v, size_t n) {
  if (v.size() < n + 32) v.resize(n + 32);
  const uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((64 - p % 64) % 64) / sizeof(bf16);
}

inline uint32_t pair_of(uint16_t lo, uint16_t hi) { return uint32_t(lo) | uint32_t(hi) << 16; }

// Two rows of 16 bf16 interleaved into 16 pairs (lo from row a, hi from row b).
inline __m512i interleave16(const bf16* a, const bf16* b) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)a));
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)b));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

// An operand as stored: element (i, k) of op(X), i the row (of A) or column (of B), k along K.
struct Operand {
  const bf16* x;
  long ld;
  bool k_contiguous;  // X stored [i][k] (A not transposed, B transposed); else [k][i]
  int rows, K;
  uint16_t at(int i, int k) const {
    if (i >= rows || k >= K) return 0;
    return (k_contiguous ? x[size_t(i) * ld + k] : x[size_t(k) * ld + i]).bits;
  }
};

// The scalar packing: tiles at the edges (rows, columns or K past the operand read as zeros),
// and every tile on the emulated path.
inline void pack_rows16_scalar(const Operand& X, int i0, int k0, uint32_t* out32) {
  for (int i = 0; i < kTile; ++i)
    for (int p = 0; p < 16; ++p) out32[i * 16 + p] = pair_of(X.at(i0 + i, k0 + 2 * p), X.at(i0 + i, k0 + 2 * p + 1));
}
inline void pack_b_tile_scalar(const Operand& B, int j0, int k0, uint32_t* out32) {
  for (int p = 0; p < 16; ++p)
    for (int j = 0; j < kTile; ++j) out32[p * 16 + j] = pair_of(B.at(j0 + j, k0 + 2 * p), B.at(j0 + j, k0 + 2 * p + 1));
}

// The 16 x 32 block (i0.., k0..) of X as 16 rows of 16 K-pairs, each row 64 bytes: out32[i * 16 + p]
// = (X(i0 + i, k0 + 2p), X(i0 + i, k0 + 2p + 1)). A's packed rows, and (transposed) B's panels.
template <bool Vec>
__attribute__((noinline)) void pack_rows16(const Operand& X, int i0, int k0, uint32_t* out32) {
  const bool full = Vec && i0 + kTile <= X.rows && k0 + kChunk <= X.K;
  if constexpr (!Vec) {
    pack_rows16_scalar(X, i0, k0, out32);
  } else if (full && X.k_contiguous) {
    for (int i = 0; i < kTile; ++i)
      _mm512_storeu_si512(out32 + i * 16, _mm512_loadu_si512(X.x + size_t(i0 + i) * X.ld + k0));
  } else if (full) {  // [k][i]: pairs of K rows interleaved, then transposed
    __m512i r[16];
    for (int p = 0; p < 16; ++p)
      r[p] = interleave16(X.x + size_t(k0 + 2 * p) * X.ld + i0, X.x + size_t(k0 + 2 * p + 1) * X.ld + i0);
    transpose16(r);
    for (int i = 0; i < kTile; ++i) _mm512_storeu_si512(out32 + i * 16, r[i]);
  } else {
    pack_rows16_scalar(X, i0, k0, out32);
  }
}

// The B tile (k0.., columns j0..) in the tile multiply's order: out32[p * 16 + j] = (B(k0 + 2p, j0 + j),
// B(k0 + 2p + 1, j0 + j)): the transpose of pack_rows16's block.
template <bool Vec>
__attribute__((noinline)) void pack_b_tile(const Operand& B, int j0, int k0, uint32_t* out32) {
  const bool full = Vec && j0 + kTile <= B.rows && k0 + kChunk <= B.K;
  if constexpr (!Vec) {
    pack_b_tile_scalar(B, j0, k0, out32);
  } else if (full && !B.k_contiguous) {  // [k][j]: pairs of rows interleaved
    for (int p = 0; p < 16; ++p)
      _mm512_storeu_si512(out32 + p * 16, interleave16(B.x + size_t(k0 + 2 * p) * B.ld + j0,
                                                       B.x + size_t(k0 + 2 * p + 1) * B.ld + j0));
  } else if (full) {  // [j][k]: 16 rows of 16 pairs, transposed
    __m512i r[16];
    for (int j = 0; j < kTile; ++j) r[j] = _mm512_loadu_si512(B.x + size_t(j0 + j) * B.ld + k0);
    transpose16(r);
    for (int p = 0; p < 16; ++p) _mm512_storeu_si512(out32 + p * 16, r[p]);
  } else {
    pack_b_tile_scalar(B, j0, k0, out32);
  }
}

// Where row tile mt of A lies: tile kc at base + kc * kstep, its rows stride bytes apart. In
// place that is (A + 16 mt lda, 32, 2 lda); packed, each tile is 1 KB of its own (512, 64).
struct ARows {
  const bf16* base;
  long kstep, stride;
};

// A finished block of C, written while the next block multiplies (the tile unit and the
// vector unit then work at once): C[rows, cols] = alpha acc + beta C, row by row.
struct Pending {
  const float* acc = nullptr;  // 32 x 32, row stride 32
  float* C = nullptr;
  long ldc = 0;
  int rows = 0, next = 0;  // rows, and rows written so far
  __mmask16 m0 = 0, m1 = 0;  // columns 0-15 and 16-31 that exist
  float alpha = 1, beta = 0;
};

template <bool Vec>
__attribute__((always_inline)) inline void write_rows(Pending& p, int upto) {
  const float beta = p.beta;
  if constexpr (!Vec) {  // as the vector code rounds: alpha acc, then one fma with beta C
    for (upto = std::min(upto, p.rows); p.next < upto; ++p.next) {
      float* c = p.C + size_t(p.next) * p.ldc;
      const float* a = p.acc + p.next * 32;
      for (int j = 0; j < 32; ++j) {
        if (!((j < 16 ? p.m0 >> j : p.m1 >> (j - 16)) & 1)) continue;
        c[j] = beta != 0.f ? std::fma(beta, c[j], p.alpha * a[j]) : p.alpha * a[j];
      }
    }
    return;
  }
  const __m512 va = _mm512_set1_ps(p.alpha), vb = _mm512_set1_ps(beta);
  for (upto = std::min(upto, p.rows); p.next < upto; ++p.next) {
    float* c = p.C + size_t(p.next) * p.ldc;
    const float* a = p.acc + p.next * 32;
    __m512 v0 = _mm512_mul_ps(va, _mm512_load_ps(a)), v1 = _mm512_mul_ps(va, _mm512_load_ps(a + 16));
    if (beta != 0.f) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(p.m0, c), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(p.m1, c + 16), v1);
    }
    _mm512_mask_storeu_ps(c, p.m0, v0);
    _mm512_mask_storeu_ps(c + 16, p.m1, v1);
  }
}

// C block (2 x 2 tiles at most) = the A row tiles a0/a1 times the B panels b0/b1 over the K
// chunks [kc0, kc1), left in acc (32 x 32); meanwhile the previous block `prev` is written out.
template <class Tiles, int RM, int RN>
void tile_block(ARows a0, ARows a1, const bf16* b0, const bf16* b1, int kc0, int kc1, float* acc,
                         Pending& prev) {
  Tiles::template zero<0>();
  if constexpr (RN > 1) Tiles::template zero<1>();
  if constexpr (RM > 1) Tiles::template zero<2>();
  if constexpr (RM > 1 && RN > 1) Tiles::template zero<3>();
  const int per_chunk = ceil_div(prev.rows, kc1 - kc0);
  // The rows of C that block will read (beta != 0) or write: fetched now, written during the
  // multiplies below (a large C, as the LM head's dW, is not in cache: 0.66x oneDNN without).
  for (int r = 0; r < prev.rows; ++r) {
    _mm_prefetch((const char*)(prev.C + size_t(r) * prev.ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(prev.C + size_t(r) * prev.ldc + 16), _MM_HINT_T0);
  }
  for (int kc = kc0; kc < kc1; ++kc) {
    // oneDNN's order: tiles are not renamed, so a load waits for the multiplies still reading
    // the tile it overwrites; A1 is loaded once A0's first multiply is under way.
    Tiles::template load<4>(a0.base + kc * a0.kstep, a0.stride);
    Tiles::template load<6>(b0 + size_t(kc) * kPanel, 64);
    if constexpr (RN > 1) Tiles::template load<7>(b1 + size_t(kc) * kPanel, 64);
    Tiles::template dp<0, 4, 6>();
    if constexpr (RM > 1) Tiles::template load<5>(a1.base + kc * a1.kstep, a1.stride);
    if constexpr (RN > 1) Tiles::template dp<1, 4, 7>();
    if constexpr (RM > 1) Tiles::template dp<2, 5, 6>();
    if constexpr (RM > 1 && RN > 1) Tiles::template dp<3, 5, 7>();
    write_rows<Tiles::kVector>(prev, (kc - kc0 + 1) * per_chunk);
  }
  write_rows<Tiles::kVector>(prev, prev.rows);
  Tiles::template store<0>(acc, 32 * 4);
  if constexpr (RN > 1) Tiles::template store<1>(acc + 16, 32 * 4);
  if constexpr (RM > 1) Tiles::template store<2>(acc + 16 * 32, 32 * 4);
  if constexpr (RM > 1 && RN > 1) Tiles::template store<3>(acc + 16 * 32 + 16, 32 * 4);
}

// One product as the threads see it: operands, packed buffers and the blocking.
struct Job {
  int M, N, MT, NT, MP, NP, kchunks, chunk_panels, packed_tiles, first_packed;
  Operand a, b;
  bf16 *bpd, *apd;
  float alpha, beta;
  float* C;
  long ldc;
  ARows arows(int mt) const {
    if (mt < first_packed) return {a.x + size_t(mt) * kTile * a.ld, kChunk, a.ld * 2};
    return {apd + size_t(mt - first_packed) * kchunks * kPanel, kPanel, 64};
  }
};

// Thread t of nt: packs its share, meets the others, multiplies its blocks.
template <class Tiles>
void run_share(const Job& j, int t, int nt) {
  const int MP = j.MP, NP = j.NP, MT = j.MT, NT = j.NT, M = j.M, N = j.N, kchunks = j.kchunks;
  const bool split_n = nt > 1 && NP >= nt && (N > M || MP < nt);
  const int tm = split_n ? 1 : std::min(nt, MP), tn = split_n ? nt : 1;
  const int ti = t / tn, tj = t % tn;
  const int mp0 = int(long(MP) * ti / tm), mp1 = int(long(MP) * (ti + 1) / tm);
  const int np0 = int(long(NP) * tj / tn), np1 = int(long(NP) * (tj + 1) / tn);
  // Packing: B by this thread's own column pairs when columns are split, else a contiguous
  // share of all panels; A's packed tiles a contiguous share.
  const int tiles_b = NT * kchunks;
  const int b0 = split_n ? std::min(NT, 2 * np0) * kchunks : int(long(tiles_b) * t / nt);
  const int b1 = split_n ? (t < tm * tn ? std::min(NT, 2 * np1) * kchunks : b0) : int(long(tiles_b) * (t + 1) / nt);
  for (int i = b0; i < b1; ++i)
    pack_b_tile<Tiles::kVector>(j.b, (i / kchunks) * kTile, (i % kchunks) * kChunk, (uint32_t*)(j.bpd + size_t(i) * kPanel));
  const int tiles_a = j.packed_tiles * kchunks;
  for (int i = int(long(tiles_a) * t / nt); i < int(long(tiles_a) * (t + 1) / nt); ++i)
    pack_rows16<Tiles::kVector>(j.a, (j.first_packed + i / kchunks) * kTile, (i % kchunks) * kChunk,
                (uint32_t*)(j.apd + size_t(i) * kPanel));
  if (nt > 1) {
#pragma omp barrier
  }
  if (t >= tm * tn) return;
  Tiles::config();
  // K in blocks of kKBlock chunks, so that a row pair's A and a column pair's panels stay in
  // L1/L2 whatever K is; the second block on adds into C.
  alignas(64) float accs[2][32 * 32];
  Pending prev;
  int which = 0;
  for (int kb = 0; kb < kchunks; kb += kKBlock) {
    const int kb1 = std::min(kchunks, kb + kKBlock);
    for (int c0 = np0; c0 < np1; c0 += j.chunk_panels / 2) {
      const int c1 = std::min(np1, c0 + j.chunk_panels / 2);
      for (int mp = mp0; mp < mp1; ++mp) {
        const int mt = 2 * mp;
        const bool two_m = mt + 1 < MT;
        const ARows a0 = j.arows(mt), a1 = two_m ? j.arows(mt + 1) : a0;
        for (int np = c0; np < c1; ++np) {
          const int jt = 2 * np;
          const bool two_n = jt + 1 < NT;
          const bf16* p0 = j.bpd + size_t(jt) * kchunks * kPanel;
          const bf16* p1 = two_n ? p0 + size_t(kchunks) * kPanel : p0;
          float* acc = accs[which];
          if (two_m && two_n)
            tile_block<Tiles, 2, 2>(a0, a1, p0, p1, kb, kb1, acc, prev);
          else if (two_m)
            tile_block<Tiles, 2, 1>(a0, a1, p0, p1, kb, kb1, acc, prev);
          else if (two_n)
            tile_block<Tiles, 1, 2>(a0, a1, p0, p1, kb, kb1, acc, prev);
          else
            tile_block<Tiles, 1, 1>(a0, a1, p0, p1, kb, kb1, acc, prev);
          const int cols = std::min(32, N - jt * kTile);
          prev.acc = acc;
          prev.C = j.C + size_t(mt) * kTile * j.ldc + size_t(jt) * kTile;
          prev.ldc = j.ldc;
          prev.rows = std::min(32, M - mt * kTile);
          prev.next = 0;
          prev.m0 = cols >= 16 ? 0xFFFF : __mmask16((1u << cols) - 1);
          prev.m1 = cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : __mmask16((1u << (cols - 16)) - 1);
          prev.alpha = j.alpha;
          prev.beta = kb == 0 ? j.beta : 1.f;
          which ^= 1;
        }
      }
    }
  }
  write_rows<Tiles::kVector>(prev, prev.rows);
  // Hand the tile state back (as oneDNN does): a thread holding it makes the kernel save and
  // restore 8 KB of tiles at every context switch, and it was measured to slow the trainer's
  // other work between products (a step at 2 threads 20% slower).
  Tiles::release();
}


// C[M, N] = alpha op(A) op(B) + beta C on tile unit Tiles (gemm_amx_bf16's contract).
template <class Tiles>
void gemm_amx_run(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda, const bf16* B,
                  long ldb, float beta, float* C, long ldc) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  Job j;
  j.M = M, j.N = N;
  const int Kp = ceil_div(K, kChunk) * kChunk;
  j.kchunks = Kp / kChunk;
  j.MT = ceil_div(M, kTile), j.NT = ceil_div(N, kTile);
  j.MP = ceil_div(j.MT, 2), j.NP = ceil_div(j.NT, 2);
  j.a = Operand{A, lda, ta == Trans::N, M, K};
  j.b = Operand{B, ldb, tb == Trans::T, N, K};
  j.alpha = alpha, j.beta = beta, j.C = C, j.ldc = ldc;
  // A in place when its rows are K-contiguous, whole tiles of K, and at most kInPlaceStride
  // bytes apart; else, and for a last partial row tile, packed tile by tile (each tile 1 KB,
  // rows 64 bytes apart). The 16 rows of a tile 4 KB or more apart fall in one L1 set: the
  // LM head's gradient (rows 32 KB apart): 0.50-0.52 TFLOP/s in place, 0.64-0.66 packed (2 threads).
  const bool a_in_place = ta == Trans::N && K % kChunk == 0 && lda * 2 <= kInPlaceStride;
  j.packed_tiles = a_in_place ? (M % kTile ? 1 : 0) : j.MT;
  j.first_packed = j.MT - j.packed_tiles;
  static thread_local std::vector<bf16> bp, ap;
  j.bpd = aligned_buffer(bp, size_t(j.NT) * j.kchunks * kPanel);
  j.apd = aligned_buffer(ap, size_t(j.packed_tiles) * j.kchunks * kPanel);
  // Columns in chunks whose packed panels (a K block's 32 x 16 x kKBlock bf16 each) fit kL2Panels.
  j.chunk_panels = std::max(2, int(kL2Panels / (long(std::min(j.kchunks, kKBlock)) * kPanel * 2)) / 2 * 2);
  // Threads split the rows (each reads all of B and its share of A) when A is at least as
  // large as B, else the columns (each packs and reads only its own panels of B: the
  // experts' 256-row products, whose weights are the larger operand). Inside a parallel
  // region (attention per head) the calling thread does it all, with no nested region.
  int nth = omp_in_parallel() ? 1 : omp_get_max_threads();
  nth = std::max(1, std::min(nth, std::max(j.MP, j.NP)));
  if (nth == 1) return run_share<Tiles>(j, 0, 1);
#pragma omp parallel num_threads(nth)
  run_share<Tiles>(j, omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace
}  // namespace zaya
