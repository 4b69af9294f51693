#include "kernels/attention_avx2_train.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "kernels/avx2_tile.h"
#include "kernels/avx2_util.h"
#include "kernels/gemm.h"  // cpu_features
#include "kernels/vec_math.h"

#define ZT __attribute__((target("avx2,fma")))

namespace zaya {

namespace {

std::atomic<int> g_cap{int(KernelTier::Auto)};  // attention_avx2_train_force

// What the causal mask leaves of a product, for its tile of rows [i0, i0 + mr); query row r of
// a block sits at position base + r.
enum class Causal {
  Cols,         // rows queries, columns keys: 16-key panels past the tile's last row's keys skipped
  KeysTo,       // rows queries, the sum over keys p: p < base + i0 + mr
  QueriesFrom,  // rows keys, the sum over the block's queries p: p >= i0 - base
};

// C[MR x 8 NV] (+)= alpha * sum over p in [p0, p1) of a(i, p) B[p, :] (avx2_tile.h).
template <int MR, int NV>
ZT void tile(const float* A, long ai, long ap, const float* B, int p0, int p1, float alpha, float* C, long ldc,
             bool acc) {
  TileAcc<MR, NV> t;
  tile_sum(t, A, ai, ap, B, p0, p1);
  const __m256 al = _mm256_set1_ps(alpha);
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* cp = C + i * ldc + 8 * v;
      __m256 r = _mm256_mul_ps(t.c[i][v], al);
      if (acc) r = _mm256_add_ps(r, _mm256_loadu_ps(cp));
      _mm256_storeu_ps(cp, r);
    }
}

template <int NV>
ZT void tile_rows(int mr, const float* A, long ai, long ap, const float* B, int p0, int p1, float alpha, float* C,
                  long ldc, bool acc) {
  switch (mr) {
    case 6: return tile<6, NV>(A, ai, ap, B, p0, p1, alpha, C, ldc, acc);
    case 5: return tile<5, NV>(A, ai, ap, B, p0, p1, alpha, C, ldc, acc);
    case 4: return tile<4, NV>(A, ai, ap, B, p0, p1, alpha, C, ldc, acc);
    case 3: return tile<3, NV>(A, ai, ap, B, p0, p1, alpha, C, ldc, acc);
    case 2: return tile<2, NV>(A, ai, ap, B, p0, p1, alpha, C, ldc, acc);
    default: return tile<1, NV>(A, ai, ap, B, p0, p1, alpha, C, ldc, acc);
  }
}

// B packed for the tiles: 16-column panels of `rows` rows each, contiguous (panel c / 16 at
// B + 16 rows (c / 16)), columns past the last zero. Read in place at the strides of a head's
// rows (512 B to 1 KB apart) a panel's rows fall into a few L1 sets and evict each other.
struct Panels {
  const float* B;
  int rows;
  const float* panel(int j0) const { return B + size_t(j0) * rows; }
};
// B = src (rows x cols at stride lds).
Panels pack(float* dst, const float* src, int rows, int cols, long lds) {
  pack_panels(dst, src, rows, cols, lds, 1);
  return {dst, rows};
}
// B = src^T (src rows x cols at stride lds; B cols x rows).
Panels pack_t(float* dst, const float* src, int rows, int cols, long lds) {
  pack_panels(dst, src, cols, rows, 1, lds);
  return {dst, cols};
}
// Floats pack / pack_t write for rows x cols (B's columns rounded up to 16).
size_t packed_size(int rows, int cols) { return size_t(rows) * size_t((cols + 15) & ~15); }

// C[m x n] (+)= alpha * A B over the part the causal mask leaves (n % 8 == 0), with
// a(i, p) = A[i ai + p ap] and B packed. Panels outside, so that a panel of B stays in L1
// while the row tiles pass over it.
ZT void product(int m, int n, int kd, float alpha, const float* A, long ai, long ap, Panels B, float* C, long ldc,
                bool acc, Causal cz, int base) {
  for (int j0 = 0; j0 < n; j0 += 16)
    for (int i0 = 0; i0 < m; i0 += kTileRows) {
      const int mr = std::min(kTileRows, m - i0);
      int p0 = 0, p1 = kd;
      if (cz == Causal::Cols && j0 > base + i0 + mr - 1) continue;
      if (cz == Causal::KeysTo) p1 = std::min(kd, base + i0 + mr);
      if (cz == Causal::QueriesFrom) p0 = std::clamp(i0 - base, 0, kd);
      const float* Ai = A + i0 * ai;
      float* Cij = C + i0 * ldc + j0;
      if (n - j0 >= 16)
        tile_rows<2>(mr, Ai, ai, ap, B.panel(j0), p0, p1, alpha, Cij, ldc, acc);
      else
        tile_rows<1>(mr, Ai, ai, ap, B.panel(j0), p0, p1, alpha, Cij, ldc, acc);
    }
}

int round8(int n) { return (n + 7) & ~7; }

// Per-thread buffers (kept between calls, grown as needed): the head's K^T and V packed and one
// block's P (forward); backward also V^T and K packed, one block's Q and dO packed and its dS.
// ld: Tk rounded up to 8, plus 16.
struct Scratch {
  std::vector<float> kt, vt, kp, vp, qp, dop, p, dp;
  int ld = 0;
};
Scratch& thread_scratch(const AttnShape& s, bool backward) {
  static thread_local Scratch sc;
  // Rows of P and dS are read down their columns (P^T dO, dS^T Q): a row stride of a power of
  // two bytes would map those reads onto a few L1 sets; 17 lines past a multiple of 16 do not.
  sc.ld = round8(s.Tk) + 16;
  const int rb = attn_row_block(s);
  auto grow = [](std::vector<float>& b, size_t n) { b.resize(std::max(b.size(), n)); };
  grow(sc.kt, packed_size(s.hd, s.Tk));
  grow(sc.vp, packed_size(s.Tk, s.hd));
  grow(sc.p, size_t(rb) * sc.ld);
  if (backward) {
    grow(sc.vt, sc.kt.size()), grow(sc.kp, sc.vp.size()), grow(sc.dp, sc.p.size());
    grow(sc.qp, packed_size(rb, s.hd)), grow(sc.dop, packed_size(rb, s.hd));
  }
  return sc;
}

// f(b, g, scratch) for every (batch, KV head) pair, split over the threads, each with its own
// scratch: a pair's G query heads share its packed K and V, and accumulate dK/dV race-free.
template <class F>
void for_each_group(const AttnShape& s, bool backward, F&& f) {
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int b = 0; b < s.B; ++b)
    for (int g = 0; g < s.Hk; ++g) f(b, g, thread_scratch(s, backward));
}

int seen_keys(const AttnShape& s, int t) { return std::min(s.Tk - 1, s.q_pos0 + t) + 1; }

}  // namespace

bool attention_avx2_train_on(const AttnShape& s) {
  const KernelTier cap = KernelTier(g_cap.load(std::memory_order_relaxed));
  if (cap == KernelTier::Portable || !cpu_avx2_fma() || s.hd % 8 != 0) return false;
  return cap == KernelTier::Avx2 || !cpu_features().avx512f;
}

void attention_avx2_train_force(KernelTier k) { g_cap.store(int(k), std::memory_order_relaxed); }

void attention_forward_avx2(float* out, float* lse, const float* q, const float* k, const float* v,
                            const AttnShape& s) {
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  for_each_group(s, false, [&](int b, int g, Scratch& sc) {
    const int ld = sc.ld;
    const Panels kt = pack_t(sc.kt.data(), k + s.kv_offset(b, g, s.ldk), s.Tk, hd, s.ldk);
    const Panels vp = pack(sc.vp.data(), v + s.kv_offset(b, g, s.ldv), s.Tk, hd, s.ldv);
    float* S = sc.p.data();
    for (int j = g * G; j < (g + 1) * G; ++j) {
      const float* qb = q + size_t(b) * s.Tq * s.ldq + size_t(j) * hd;
      float* ob = out + size_t(b) * s.Tq * s.ldo + size_t(j) * hd;
      float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int t0 = 0; t0 < s.Tq; t0 += rb) {
        const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows), base = s.q_pos0 + t0;
        product(rows, round8(nk), hd, scale, qb + size_t(t0) * s.ldq, s.ldq, 1, kt, S, ld, false, Causal::Cols,
                base);
        for (int i = 0; i < rows; ++i) {
          float* row = S + size_t(i) * ld;
          const int seen = seen_keys(s, t0 + i);
          lse_j[t0 + i] = row_softmax(row, seen);
          std::fill(row + seen, row + nk, 0.f);
        }
        product(rows, hd, nk, 1.f, S, ld, 1, vp, ob + size_t(t0) * s.ldo, s.ldo, false, Causal::KeysTo, base);
      }
    }
  });
}

void attention_backward_avx2(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                             const float* q, const float* k, const float* v, const AttnShape& s) {
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  for_each_group(s, true, [&](int b, int g, Scratch& sc) {
    const int ld = sc.ld;
    const float* kb = k + s.kv_offset(b, g, s.ldk);
    const float* vb = v + s.kv_offset(b, g, s.ldv);
    const Panels kt = pack_t(sc.kt.data(), kb, s.Tk, hd, s.ldk), vt = pack_t(sc.vt.data(), vb, s.Tk, hd, s.ldv);
    const Panels kp = pack(sc.kp.data(), kb, s.Tk, hd, s.ldk);
    float* dkb = dk + s.kv_offset(b, g, s.ldk);
    float* dvb = dv + s.kv_offset(b, g, s.ldv);
    float *P = sc.p.data(), *dS = sc.dp.data();
    for (int j = g * G; j < (g + 1) * G; ++j) {
      const size_t qoff = size_t(b) * s.Tq * s.ldq + size_t(j) * hd, ooff = size_t(b) * s.Tq * s.ldo + size_t(j) * hd;
      const float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int t0 = 0; t0 < s.Tq; t0 += rb) {
        const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows), base = s.q_pos0 + t0;
        const float* qr = q + qoff + size_t(t0) * s.ldq;
        const float* gr = dout + ooff + size_t(t0) * s.ldo;
        // P again from the saved lse; dP = dO V^T; dS = P * (dP - rowdot(dO, O)).
        product(rows, round8(nk), hd, scale, qr, s.ldq, 1, kt, P, ld, false, Causal::Cols, base);
        product(rows, round8(nk), hd, 1.f, gr, s.ldo, 1, vt, dS, ld, false, Causal::Cols, base);
        for (int i = 0; i < rows; ++i) {
          const int seen = seen_keys(s, t0 + i);
          float* pr = P + size_t(i) * ld;
          float* dr = dS + size_t(i) * ld;
          row_exp_scale(pr, pr, seen, lse_j[t0 + i], 1.f);
          const float* o = out + ooff + size_t(t0 + i) * s.ldo;
          const float* go = gr + size_t(i) * s.ldo;
          float Dt = 0;
#pragma omp simd reduction(+ : Dt)  // lanes, not a scalar chain of hd dependent adds
          for (int d = 0; d < hd; ++d) Dt += o[d] * go[d];
#pragma omp simd
          for (int u = 0; u < seen; ++u) dr[u] = pr[u] * (dr[u] - Dt);
          // Past a row's keys both stay unread by the tiles of their own rows, but the tiles
          // of P^T dO and dS^T Q span 6 keys: zeros there, never what the panels left.
          std::fill(pr + seen, pr + nk, 0.f);
          std::fill(dr + seen, dr + nk, 0.f);
        }
        // dV += P^T dO;  dQ += scale dS K;  dK += scale dS^T Q (keys < nk only)
        const Panels dop = pack(sc.dop.data(), gr, rows, hd, s.ldo), qp = pack(sc.qp.data(), qr, rows, hd, s.ldq);
        product(nk, hd, rows, 1.f, P, 1, ld, dop, dvb, s.ldv, true, Causal::QueriesFrom, base);
        product(rows, hd, nk, scale, dS, ld, 1, kp, dq + qoff + size_t(t0) * s.ldq, s.ldq, true, Causal::KeysTo,
                base);
        product(nk, hd, rows, scale, dS, 1, ld, qp, dkb, s.ldk, true, Causal::QueriesFrom, base);
      }
    }
  });
}

}  // namespace zaya
