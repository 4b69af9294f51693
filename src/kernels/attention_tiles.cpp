#include "kernels/attention_tiles.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>
#include <vector>

#include "core/bf16.h"  // to_bf16
#include "kernels/avx2_tile.h"
#include "kernels/avx2_util.h"
#include "kernels/avx512_tile.h"
#include "kernels/gemm.h"  // cpu_features, gemm_resolve
#include "kernels/gemm_avx512.h"  // gemm_bf16_avx512_usable
#include "kernels/vec_math.h"

namespace zaya {

namespace {

std::atomic<int> g_cap{int(KernelTier::Auto)};  // attention_tiles_force

// What the causal mask leaves of a product, for its tile of rows [i0, i0 + mr); query row r of
// a block sits at position base + r.
enum class Causal {
  Cols,         // rows queries, columns keys: panels past the tile's last row's keys skipped
  KeysTo,       // rows queries, the sum over keys p: p < base + i0 + mr
  QueriesFrom,  // rows keys, the sum over the block's queries p: p >= i0 - base
};

// Tile::tile<mr, NV> for a run-time mr in [1, Tile::kRows].
template <class Tile, int NV, size_t... I>
auto tile_fn(int mr, std::index_sequence<I...>) {
  static constexpr decltype(&Tile::template tile<1, NV>) fns[] = {&Tile::template tile<int(I) + 1, NV>...};
  return fns[mr - 1];
}
template <class Tile, int NV>
auto tile_fn(int mr) {
  return tile_fn<Tile, NV>(mr, std::make_index_sequence<Tile::kRows>{});
}

// B packed for the tiles: panels of W columns and `rows` rows each, contiguous (panel c / W at
// B + W rows (c / W)), columns past the last zero. Read in place at the strides of a head's
// rows (512 B to 1 KB apart) a panel's rows fall into a few L1 sets and evict each other.
// E: float, or uint32_t for bf16 pairs (rows then count pairs).
template <class E>
struct PanelsOf {
  const E* B;
  int rows;
  const E* panel(int j0) const { return B + size_t(j0) * rows; }
};
using Panels = PanelsOf<float>;
// B (K x N, element (p, j) at src[p sp + j sj]) into panels of W columns.
template <int W>
Panels pack_panels(float* dst, const float* src, int K, int N, long sp, long sj) {
  for (int j0 = 0; j0 < N; j0 += W) {
    float* d = dst + size_t(j0) * K;
    const int nj = std::min(W, N - j0);
    for (int p = 0; p < K; ++p, d += W) {
      const float* s = src + p * sp + j0 * sj;
      if (sj == 1)
        std::copy(s, s + nj, d);
      else
        for (int j = 0; j < nj; ++j) d[j] = s[j * sj];
      std::fill(d + nj, d + W, 0.f);
    }
  }
  return {dst, K};
}
// B = src (rows x cols at stride lds).
template <int W>
Panels pack(float* dst, const float* src, int rows, int cols, long lds) {
  return pack_panels<W>(dst, src, rows, cols, lds, 1);
}
// B = src^T (src rows x cols at stride lds; B cols x rows).
template <int W>
Panels pack_t(float* dst, const float* src, int rows, int cols, long lds) {
  return pack_panels<W>(dst, src, cols, rows, 1, lds);
}
// Floats pack / pack_t write for rows x cols (B's columns rounded up to W).
template <int W>
size_t packed_size(int rows, int cols) {
  return size_t(rows) * size_t((cols + W - 1) / W * W);
}

// The sum range [p0, p1) over the inner dimension that the causal mask leaves to the tile of
// rows [i0, i0 + mr) and columns from j0 of a product with inner size kd; false: the tile is
// wholly masked.
bool causal_range(Causal cz, int i0, int mr, int j0, int kd, int base, int& p0, int& p1) {
  p0 = 0, p1 = kd;
  if (cz == Causal::Cols && j0 > base + i0 + mr - 1) return false;
  if (cz == Causal::KeysTo) p1 = std::min(kd, base + i0 + mr);
  if (cz == Causal::QueriesFrom) p0 = std::clamp(i0 - base, 0, kd);
  return true;
}

// C[m x n] (+)= alpha * A B over the part the causal mask leaves (n % Tile::kLanes == 0), with
// a(i, p) = A[i ai + p ap] and B packed. Panels outside, so that a panel of B stays in L1
// while the row tiles pass over it. A tile of bf16 pairs (Tile::kStep 2) sums whole pairs of
// the inner dimension (kd elements): a pair straddling the mask's edge brings one product the
// mask zeroes in P or dS (those stay zero up to an even count), or a zero row of B.
template <class Tile, class E>
void product(int m, int n, int kd, float alpha, const E* A, long ai, long ap, PanelsOf<E> B, float* C, long ldc,
             bool acc, Causal cz, int base) {
  constexpr int MR = Tile::kRows, W = Tile::kPanel, S = Tile::kStep;
  for (int j0 = 0; j0 < n; j0 += W)
    for (int i0 = 0; i0 < m; i0 += MR) {
      const int mr = std::min(MR, m - i0);
      int p0, p1;
      if (!causal_range(cz, i0, mr, j0, kd, base, p0, p1)) continue;
      const auto f = n - j0 >= W ? tile_fn<Tile, 2>(mr) : tile_fn<Tile, 1>(mr);
      f(A + i0 * ai, ai, ap, B.panel(j0), p0 / S, (p1 + S - 1) / S, alpha, C + i0 * ldc + j0, ldc, acc);
    }
}

int round8(int n) { return (n + 7) & ~7; }
template <class Tile>
int round_lanes(int n) {
  return (n + Tile::kLanes - 1) / Tile::kLanes * Tile::kLanes;
}

// Per-thread buffers (kept between calls, grown as needed): the head's K^T and V packed and one
// block's P (forward); backward also V^T and K packed, one block's Q and dO packed and its dS.
// ld: Tk rounded up to 8, plus 16 (room for a row's last tile of any width).
struct Scratch {
  std::vector<float> kt, vt, kp, vp, qp, dop, p, dp;
  int ld = 0;
};
template <class Tile>
Scratch& thread_scratch(const AttnShape& s, bool backward) {
  constexpr int W = Tile::kPanel;
  static thread_local Scratch sc;
  // Rows of P and dS are read down their columns (P^T dO, dS^T Q): a row stride of a power of
  // two bytes would map those reads onto a few L1 sets; 17 lines past a multiple of 16 do not.
  sc.ld = round8(s.Tk) + 16;
  const int rb = attn_row_block(s);
  auto grow = [](std::vector<float>& b, size_t n) { b.resize(std::max(b.size(), n)); };
  grow(sc.kt, packed_size<W>(s.hd, s.Tk));
  grow(sc.vp, packed_size<W>(s.Tk, s.hd));
  grow(sc.p, size_t(rb) * sc.ld);
  if (backward) {
    grow(sc.vt, sc.kt.size()), grow(sc.kp, sc.vp.size()), grow(sc.dp, sc.p.size());
    grow(sc.qp, packed_size<W>(rb, s.hd)), grow(sc.dop, packed_size<W>(rb, s.hd));
  }
  return sc;
}

// f(b, g, scratch) for every (batch, KV head) pair, split over the threads, each with its own
// scratch: a pair's G query heads share its packed K and V, and accumulate dK/dV race-free.
// scratch(s, backward): this thread's buffers (thread_scratch<Tile>, bf16_scratch). Contiguous
// ranges of pairs per thread (attention.h, "Threads").
template <class Scr, class F>
void for_each_group(const AttnShape& s, bool backward, Scr& (*scratch)(const AttnShape&, bool), F&& f) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < s.B; ++b)
    for (int g = 0; g < s.Hk; ++g) f(b, g, scratch(s, backward));
}

int seen_keys(const AttnShape& s, int t) { return std::min(s.Tk - 1, s.q_pos0 + t) + 1; }

// Backward's middle step for a block's rows (P and dS rows ld apart, holding the scores and
// dP): P = exp(scores - lse), dS = P * (dP - rowdot(dO, O)) (o, dout: the block's O and dO
// rows, ldo apart). Past a row's keys both stay unread by the tiles of their own rows, but the
// tiles of P^T dO and dS^T Q span several keys (the bf16 pairs one more): zeros there up to
// zero_to, never what the panels left.
void probs_and_dscores(float* P, float* dS, int ld, const AttnShape& s, int t0, int rows, const float* lse_j,
                       const float* o, const float* dout, int zero_to) {
  float D[kAttnRowBlockLong];
  attention_rowdots(D, o, dout, rows, s.hd, s.ldo);
  for (int i = 0; i < rows; ++i) {
    const int seen = seen_keys(s, t0 + i);
    float* pr = P + size_t(i) * ld;
    float* dr = dS + size_t(i) * ld;
    row_exp_scale(pr, pr, seen, lse_j[t0 + i], 1.f);
    const float Dt = D[i];
#pragma omp simd
    for (int u = 0; u < seen; ++u) dr[u] = pr[u] * (dr[u] - Dt);
    std::fill(pr + seen, pr + zero_to, 0.f);
    std::fill(dr + seen, dr + zero_to, 0.f);
  }
}

template <class Tile>
void forward(float* out, float* lse, const float* q, const float* k, const float* v, const AttnShape& s) {
  constexpr int W = Tile::kPanel;
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  for_each_group(s, false, &thread_scratch<Tile>, [&](int b, int g, Scratch& sc) {
    const int ld = sc.ld;
    const Panels kt = pack_t<W>(sc.kt.data(), k + s.kv_offset(b, g, s.ldk), s.Tk, hd, s.ldk);
    const Panels vp = pack<W>(sc.vp.data(), v + s.kv_offset(b, g, s.ldv), s.Tk, hd, s.ldv);
    float* S = sc.p.data();
    for (int j = g * G; j < (g + 1) * G; ++j) {
      const float* qb = q + size_t(b) * s.Tq * s.ldq + size_t(j) * hd;
      float* ob = out + size_t(b) * s.Tq * s.ldo + size_t(j) * hd;
      float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int t0 = 0; t0 < s.Tq; t0 += rb) {
        const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows), base = s.q_pos0 + t0;
        product<Tile>(rows, round_lanes<Tile>(nk), hd, scale, qb + size_t(t0) * s.ldq, s.ldq, 1, kt, S, ld, false,
                      Causal::Cols, base);
        for (int i = 0; i < rows; ++i) {
          float* row = S + size_t(i) * ld;
          const int seen = seen_keys(s, t0 + i);
          lse_j[t0 + i] = row_softmax(row, seen);
          std::fill(row + seen, row + nk, 0.f);
        }
        product<Tile>(rows, hd, nk, 1.f, S, ld, 1, vp, ob + size_t(t0) * s.ldo, s.ldo, false, Causal::KeysTo, base);
      }
    }
  });
}

template <class Tile>
void backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse, const float* q,
              const float* k, const float* v, const AttnShape& s) {
  constexpr int W = Tile::kPanel;
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  for_each_group(s, true, &thread_scratch<Tile>, [&](int b, int g, Scratch& sc) {
    const int ld = sc.ld;
    const float* kb = k + s.kv_offset(b, g, s.ldk);
    const float* vb = v + s.kv_offset(b, g, s.ldv);
    const Panels kt = pack_t<W>(sc.kt.data(), kb, s.Tk, hd, s.ldk), vt = pack_t<W>(sc.vt.data(), vb, s.Tk, hd, s.ldv);
    const Panels kp = pack<W>(sc.kp.data(), kb, s.Tk, hd, s.ldk);
    float* dkb = dk + s.kv_offset(b, g, s.ldk);
    float* dvb = dv + s.kv_offset(b, g, s.ldv);
    float *P = sc.p.data(), *dS = sc.dp.data();
    for (int j = g * G; j < (g + 1) * G; ++j) {
      const size_t qoff = size_t(b) * s.Tq * s.ldq + size_t(j) * hd, ooff = size_t(b) * s.Tq * s.ldo + size_t(j) * hd;
      const float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int t0 = 0; t0 < s.Tq; t0 += rb) {
        const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows), base = s.q_pos0 + t0;
        const int nkr = round_lanes<Tile>(nk);
        const float* qr = q + qoff + size_t(t0) * s.ldq;
        const float* gr = dout + ooff + size_t(t0) * s.ldo;
        // P again from the saved lse; dP = dO V^T; dS = P * (dP - rowdot(dO, O)).
        product<Tile>(rows, nkr, hd, scale, qr, s.ldq, 1, kt, P, ld, false, Causal::Cols, base);
        product<Tile>(rows, nkr, hd, 1.f, gr, s.ldo, 1, vt, dS, ld, false, Causal::Cols, base);
        probs_and_dscores(P, dS, ld, s, t0, rows, lse_j, out + ooff + size_t(t0) * s.ldo, gr, nk);
        // dV += P^T dO;  dQ += scale dS K;  dK += scale dS^T Q (keys < nk only)
        const Panels dop = pack<W>(sc.dop.data(), gr, rows, hd, s.ldo), qp = pack<W>(sc.qp.data(), qr, rows, hd, s.ldq);
        product<Tile>(nk, hd, rows, 1.f, P, 1, ld, dop, dvb, s.ldv, true, Causal::QueriesFrom, base);
        product<Tile>(rows, hd, nk, scale, dS, ld, 1, kp, dq + qoff + size_t(t0) * s.ldq, s.ldq, true,
                      Causal::KeysTo, base);
        product<Tile>(nk, hd, rows, scale, dS, 1, ld, qp, dkb, s.ldk, true, Causal::QueriesFrom, base);
      }
    }
  });
}

// ---- bf16 products (bf16 training on AVX512-BF16): the same plan over bf16 pairs. Operands
// are rounded to bf16 as they are packed (K, V once per (batch, KV head); Q, dO, P and dS once
// per block), as the per-block bf16 path rounds them (attention_bf16.h); sums stay fp32.

using Bf16Tile = Avx512Bf16Tile;
constexpr int kW16 = Bf16Tile::kPanel;

// The rounding and packing loops below run only where the bf16 tiles do (AVX512-BF16): compiled
// for AVX-512, the compiler vectorises to_bf16's integer rounding 16 lanes at a time.
#define ZAYA_PACK16 __attribute__((target("avx512f,avx512bw,avx512vl")))

uint32_t pair_bits(float lo, float hi) { return uint32_t(to_bf16(lo).bits) | uint32_t(to_bf16(hi).bits) << 16; }

using PairPanels = PanelsOf<uint32_t>;  // panels of kW16 columns, rows of bf16 pairs
// B (K x N, element (p, j) at src[p sp + j sj]) rounded into pair panels: pair row q of panel
// j0 / W holds (B[2q][j], B[2q + 1][j]); rows past K and columns past N zero.
ZAYA_PACK16 PairPanels pack_pairs(uint32_t* dst, const float* src, int K, int N, long sp, long sj) {
  const int Q = (K + 1) / 2;
  for (int j0 = 0; j0 < N; j0 += kW16) {
    uint32_t* d = dst + size_t(j0) * Q;
    const int nj = std::min(kW16, N - j0);
    for (int q = 0; q < Q; ++q, d += kW16) {
      const float* s0 = src + 2 * q * sp + j0 * sj;
      const float* s1 = 2 * q + 1 < K ? s0 + sp : nullptr;
      for (int j = 0; j < nj; ++j) d[j] = pair_bits(s0[j * sj], s1 ? s1[j * sj] : 0.f);
      std::fill(d + nj, d + kW16, 0u);
    }
  }
  return {dst, Q};
}
size_t pair_packed_size(int K, int N) { return size_t((K + 1) / 2) * size_t((N + kW16 - 1) / kW16 * kW16); }

// rows x cols (cols even) of fp32 (stride lds) rounded into pairs along the rows: dst[r ldd + c / 2].
ZAYA_PACK16 const uint32_t* round_rows(uint32_t* dst, long ldd, const float* src, long lds, int rows, int cols) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols / 2; ++c) dst[r * ldd + c] = pair_bits(src[r * lds + 2 * c], src[r * lds + 2 * c + 1]);
  return dst;
}
// Rows 2q and 2q + 1 of src (rows x cols, stride lds) interleaved into pairs: dst[q ldd + c].
// A row past the last reads zeros.
ZAYA_PACK16 const uint32_t* interleave_rows(uint32_t* dst, long ldd, const float* src, long lds, int rows, int cols) {
  for (int q = 0; q < (rows + 1) / 2; ++q) {
    const float* s0 = src + 2 * q * lds;
    uint32_t* d = dst + q * ldd;
    if (2 * q + 1 < rows)
      for (int c = 0; c < cols; ++c) d[c] = pair_bits(s0[c], s0[lds + c]);
    else
      for (int c = 0; c < cols; ++c) d[c] = pair_bits(s0[c], 0.f);
  }
  return dst;
}

// Per-thread buffers of the bf16 tiles, kept between calls. ld: Tk rounded up to 8, plus 16.
struct Bf16Scratch {
  std::vector<uint32_t> kt, vt, kp, vp, qp, dop, pi, dsi, qa, doa, p16, ds16;
  std::vector<float> p, dp;
  int ld = 0;
};
Bf16Scratch& bf16_scratch(const AttnShape& s, bool backward) {
  static thread_local Bf16Scratch sc;
  sc.ld = round8(s.Tk) + 16;
  const int rb = attn_row_block(s);
  auto grow = [](auto& b, size_t n) { b.resize(std::max(b.size(), n)); };
  grow(sc.kt, pair_packed_size(s.hd, s.Tk)), grow(sc.vp, pair_packed_size(s.Tk, s.hd));
  grow(sc.qa, size_t(rb) * s.hd), grow(sc.p, size_t(rb) * sc.ld), grow(sc.p16, size_t(rb) * sc.ld);
  if (backward) {
    grow(sc.vt, sc.kt.size()), grow(sc.kp, sc.vp.size()), grow(sc.doa, sc.qa.size()), grow(sc.dp, sc.p.size());
    grow(sc.ds16, sc.p16.size()), grow(sc.qp, pair_packed_size(rb, s.hd)), grow(sc.dop, sc.qp.size());
    grow(sc.pi, size_t(rb + 1) / 2 * sc.ld), grow(sc.dsi, sc.pi.size());
  }
  return sc;
}

}  // namespace

void attention_forward_bf16_tiles(float* out, float* lse, const float* q, const float* k, const float* v,
                                  const AttnShape& s) {
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  for_each_group(s, false, &bf16_scratch, [&](int b, int g, Bf16Scratch& sc) {
    const int ld = sc.ld;
    const PairPanels kt = pack_pairs(sc.kt.data(), k + s.kv_offset(b, g, s.ldk), hd, s.Tk, 1, s.ldk);
    const PairPanels vp = pack_pairs(sc.vp.data(), v + s.kv_offset(b, g, s.ldv), s.Tk, hd, s.ldv, 1);
    float* S = sc.p.data();
    for (int j = g * G; j < (g + 1) * G; ++j) {
      const float* qb = q + size_t(b) * s.Tq * s.ldq + size_t(j) * hd;
      float* ob = out + size_t(b) * s.Tq * s.ldo + size_t(j) * hd;
      float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int t0 = 0; t0 < s.Tq; t0 += rb) {
        const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows), base = s.q_pos0 + t0;
        const int nk2 = (nk + 1) & ~1;  // P zero up to an even count: the last pair's partner
        const uint32_t* qa = round_rows(sc.qa.data(), hd / 2, qb + size_t(t0) * s.ldq, s.ldq, rows, hd);
        product<Bf16Tile>(rows, round_lanes<Bf16Tile>(nk), hd, scale, qa, hd / 2, 1, kt, S, ld, false, Causal::Cols,
                      base);
        for (int i = 0; i < rows; ++i) {
          float* row = S + size_t(i) * ld;
          const int seen = seen_keys(s, t0 + i);
          lse_j[t0 + i] = row_softmax(row, seen);
          std::fill(row + seen, row + nk2, 0.f);
        }
        const uint32_t* pa = round_rows(sc.p16.data(), ld / 2, S, ld, rows, nk2);
        product<Bf16Tile>(rows, hd, nk, 1.f, pa, ld / 2, 1, vp, ob + size_t(t0) * s.ldo, s.ldo, false, Causal::KeysTo,
                      base);
      }
    }
  });
}

void attention_backward_bf16_tiles(float* dq, float* dk, float* dv, const float* dout, const float* out,
                                   const float* lse, const float* q, const float* k, const float* v,
                                   const AttnShape& s) {
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  for_each_group(s, true, &bf16_scratch, [&](int b, int g, Bf16Scratch& sc) {
    const int ld = sc.ld;
    const float* kb = k + s.kv_offset(b, g, s.ldk);
    const float* vb = v + s.kv_offset(b, g, s.ldv);
    const PairPanels kt = pack_pairs(sc.kt.data(), kb, hd, s.Tk, 1, s.ldk);
    const PairPanels vt = pack_pairs(sc.vt.data(), vb, hd, s.Tk, 1, s.ldv);
    const PairPanels kp = pack_pairs(sc.kp.data(), kb, s.Tk, hd, s.ldk, 1);
    float* dkb = dk + s.kv_offset(b, g, s.ldk);
    float* dvb = dv + s.kv_offset(b, g, s.ldv);
    float *P = sc.p.data(), *dS = sc.dp.data();
    for (int j = g * G; j < (g + 1) * G; ++j) {
      const size_t qoff = size_t(b) * s.Tq * s.ldq + size_t(j) * hd, ooff = size_t(b) * s.Tq * s.ldo + size_t(j) * hd;
      const float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int t0 = 0; t0 < s.Tq; t0 += rb) {
        const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows), base = s.q_pos0 + t0;
        const int nk2 = (nk + 1) & ~1, nkr = round_lanes<Bf16Tile>(nk);
        const float* qr = q + qoff + size_t(t0) * s.ldq;
        const float* gr = dout + ooff + size_t(t0) * s.ldo;
        const uint32_t* qa = round_rows(sc.qa.data(), hd / 2, qr, s.ldq, rows, hd);
        const uint32_t* doa = round_rows(sc.doa.data(), hd / 2, gr, s.ldo, rows, hd);
        // P again from the saved lse; dP = dO V^T; dS = P * (dP - rowdot(dO, O)).
        product<Bf16Tile>(rows, nkr, hd, scale, qa, hd / 2, 1, kt, P, ld, false, Causal::Cols, base);
        product<Bf16Tile>(rows, nkr, hd, 1.f, doa, hd / 2, 1, vt, dS, ld, false, Causal::Cols, base);
        probs_and_dscores(P, dS, ld, s, t0, rows, lse_j, out + ooff + size_t(t0) * s.ldo, gr, nk2);
        // P and dS in bf16 by rows (P V, dS K) and interleaved by query pairs (P^T dO, dS^T Q).
        const uint32_t* ds16 = round_rows(sc.ds16.data(), ld / 2, dS, ld, rows, nk2);
        const uint32_t* pi = interleave_rows(sc.pi.data(), ld, P, ld, rows, nk);
        const uint32_t* dsi = interleave_rows(sc.dsi.data(), ld, dS, ld, rows, nk);
        const PairPanels dop = pack_pairs(sc.dop.data(), gr, rows, hd, s.ldo, 1);
        const PairPanels qp = pack_pairs(sc.qp.data(), qr, rows, hd, s.ldq, 1);
        // dV += P^T dO;  dQ += scale dS K;  dK += scale dS^T Q (keys < nk only)
        product<Bf16Tile>(nk, hd, rows, 1.f, pi, 1, ld, dop, dvb, s.ldv, true, Causal::QueriesFrom, base);
        product<Bf16Tile>(rows, hd, nk, scale, ds16, ld / 2, 1, kp, dq + qoff + size_t(t0) * s.ldq, s.ldq, true,
                      Causal::KeysTo, base);
        product<Bf16Tile>(nk, hd, rows, scale, dsi, 1, ld, qp, dkb, s.ldk, true, Causal::QueriesFrom, base);
      }
    }
  });
}

namespace {

bool avx512_tiles_on(const AttnShape& s) { return cpu_features().avx512f && s.hd % Avx512Tile::kLanes == 0; }

}  // namespace

const char* attention_tiles_name(const AttnShape& s) {
  const KernelTier cap = KernelTier(g_cap.load(std::memory_order_relaxed));
  if (cap == KernelTier::Portable) return nullptr;
  if (cap == KernelTier::Auto && avx512_tiles_on(s)) return Avx512Tile::kName;
  if (!cpu_avx2_fma() || s.hd % Avx2Tile::kLanes != 0) return nullptr;
  return cap == KernelTier::Avx2 || !cpu_features().avx512f ? Avx2Tile::kName : nullptr;
}

void attention_tiles_force(KernelTier k) { g_cap.store(int(k), std::memory_order_relaxed); }

bool attention_bf16_tiles_on(const AttnShape& s) {
  return KernelTier(g_cap.load(std::memory_order_relaxed)) == KernelTier::Auto && gemm_bf16_avx512_usable() &&
         gemm_resolve(GemmPrecision::BF16) == GemmEngine::Avx512 && s.hd % Bf16Tile::kLanes == 0;
}


void attention_forward_tiles(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttnShape& s) {
  if (attention_tiles_name(s) == Avx512Tile::kName) return forward<Avx512Tile>(out, lse, q, k, v, s);
  forward<Avx2Tile>(out, lse, q, k, v, s);
}

void attention_backward_tiles(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                              const float* q, const float* k, const float* v, const AttnShape& s) {
  if (attention_tiles_name(s) == Avx512Tile::kName) return backward<Avx512Tile>(dq, dk, dv, dout, out, lse, q, k, v, s);
  backward<Avx2Tile>(dq, dk, dv, dout, out, lse, q, k, v, s);
}

}  // namespace zaya
