#include "kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/attention_tiles.h"
#include "kernels/attention_bf16.h"
#include "kernels/attention_group.h"
#include "kernels/gemm.h"
#include "kernels/vec_math.h"

namespace zaya {

// row[0, n) <- softmax(row[0, n)); returns the log-sum-exp.
template <class T>
static T softmax_row(T* row, int n) {
  T m = -std::numeric_limits<T>::infinity();
  for (int u = 0; u < n; ++u) m = std::max(m, row[u]);
  T sum = 0;
  for (int u = 0; u < n; ++u) sum += (row[u] = std::exp(row[u] - m));
  const T inv = T(1) / sum;
  for (int u = 0; u < n; ++u) row[u] *= inv;
  return m + std::log(sum);
}

// Rows [t0, t1) of S = scale * Q K^T (row stride Tk, columns < ncols computed) turned into
// probabilities using either a fresh max/sum (forward: writes lse) or a saved lse
// (backward). Columns past a row's causal window, up to ncols, are zeroed.
template <class T>
static void scores_to_probs(T* S, T* lse_row, bool have_lse, const AttnShape& s, int t0, int t1, int ncols) {
  for (int t = t0; t < t1; ++t) {
    T* row = S + size_t(t) * s.Tk;
    const int last = std::min(s.Tk - 1, s.q_pos0 + t);  // keys 0..last are visible
    if constexpr (std::is_same_v<T, float>) {  // vector expf (kernels/vec_math.h)
      if (!have_lse) {
        lse_row[t] = row_softmax(row, last + 1);
      } else {
        row_exp_scale(row, row, last + 1, lse_row[t], 1.f);
      }
    } else if (!have_lse) {
      lse_row[t] = softmax_row(row, last + 1);
    } else {
      const T l = lse_row[t];
      for (int u = 0; u <= last; ++u) row[u] = std::exp(row[u] - l);
    }
    for (int u = last + 1; u < ncols; ++u) row[u] = 0;
  }
}

template <class T>
void attention_forward_group(T* out, T* lse, const T* q, const T* k, const T* v, const AttnShape& s, int b, int g,
                             T* S) {
  if constexpr (std::is_same_v<T, float>) {
    if (attention_group_avx512_ok(s)) return attention_group_avx512(out, lse, q, k, v, s, b, g, S);
    if (attention_group_avx2_ok(s)) return attention_group_avx2(out, lse, q, k, v, s, b, g, S);
  }
  const int G = s.Hq / s.Hk, hd = s.hd, Tk = s.Tk;
  const T scale = T(1) / std::sqrt(T(hd));
  const T* kb = k + s.kv_offset(b, g, s.ldk);
  const T* vb = v + s.kv_offset(b, g, s.ldv);
  for (int t = 0; t < s.Tq; ++t) {
    const T* qg = q + (size_t(b) * s.Tq + t) * s.ldq + size_t(g) * G * hd;  // the group's G heads, adjacent
    T* og = out + (size_t(b) * s.Tq + t) * s.ldo + size_t(g) * G * hd;
    const int last = std::min(Tk - 1, s.q_pos0 + t);
    // Scores: each cached K row is read once for the G query heads.
    for (int u = 0; u <= last; ++u) {
      const T* kr = kb + size_t(u) * s.ldk;
      prefetch_row(kr + size_t(kAttnPrefetchRows) * s.ldk, hd);
      for (int jj = 0; jj < G; ++jj) {
        const T* qr = qg + size_t(jj) * hd;
        T d = 0;
#pragma omp simd reduction(+ : d)
        for (int i = 0; i < hd; ++i) d += qr[i] * kr[i];
        S[size_t(jj) * Tk + u] = d * scale;
      }
    }
    for (int jj = 0; jj < G; ++jj)
      lse[(size_t(b) * s.Hq + size_t(g) * G + jj) * s.Tq + t] = softmax_row(S + size_t(jj) * Tk, last + 1);
    // Values: likewise each V row once; the G output rows stay in L1.
    std::fill(og, og + size_t(G) * hd, T(0));
    for (int u = 0; u <= last; ++u) {
      const T* vr = vb + size_t(u) * s.ldv;
      prefetch_row(vr + size_t(kAttnPrefetchRows) * s.ldv, hd);
      for (int jj = 0; jj < G; ++jj) {
        const T pu = S[size_t(jj) * Tk + u];
        T* o = og + size_t(jj) * hd;
#pragma omp simd
        for (int i = 0; i < hd; ++i) o[i] += pu * vr[i];
      }
    }
  }
}

template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttnShape& s, T* scratch) {
  const int G = s.Hq / s.Hk, lq = s.ldq, lk = s.ldk, lv = s.ldv, lo = s.ldo, rb = attn_row_block(s);
  const T scale = T(1) / std::sqrt(T(s.hd));
  if (s.Tq <= kDirectAttnRows) {
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < s.B; ++b)
      for (int g = 0; g < s.Hk; ++g)
        attention_forward_group(out, lse, q, k, v, s, b, g, scratch + size_t(omp_get_thread_num()) * s.scratch_per_thread());
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (attention_bf16_on()) return attention_forward_bf16(out, lse, q, k, v, s);
    if (attention_tiles_on(s)) return attention_forward_tiles(out, lse, q, k, v, s);
  }
#pragma omp parallel for collapse(2) schedule(static)  // contiguous ranges (attention.h, "Threads")
  for (int b = 0; b < s.B; ++b)
    for (int j = 0; j < s.Hq; ++j) {
      T* S = scratch + size_t(omp_get_thread_num()) * s.scratch_per_thread();
      const int g = j / G;
      const T* qb = q + size_t(b) * s.Tq * lq + size_t(j) * s.hd;
      const T* kb = k + s.kv_offset(b, g, lk);
      const T* vb = v + s.kv_offset(b, g, lv);
      T* ob = out + size_t(b) * s.Tq * lo + size_t(j) * s.hd;
      for (int t0 = 0; t0 < s.Tq; t0 += rb) {
        const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows);
        T* Sb = S + size_t(t0) * s.Tk;
        gemm_serial(Trans::N, Trans::T, rows, nk, s.hd, scale, qb + size_t(t0) * lq, lq, kb, lk, T(0), Sb, s.Tk);
        scores_to_probs(S, lse + (size_t(b) * s.Hq + j) * s.Tq, false, s, t0, t0 + rows, nk);
        gemm_serial(Trans::N, Trans::N, rows, s.hd, nk, T(1), Sb, s.Tk, vb, lv, T(0), ob + size_t(t0) * lo, lo);
      }
    }
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse, const T* q, const T* k,
                        const T* v, const AttnShape& s, T* scratch) {
  if constexpr (std::is_same_v<T, float>) {
    if (attention_bf16_on()) return attention_backward_bf16(dq, dk, dv, dout, out, lse, q, k, v, s);
    if (attention_tiles_on(s)) return attention_backward_tiles(dq, dk, dv, dout, out, lse, q, k, v, s);
  }
  const int G = s.Hq / s.Hk, lq = s.ldq, lk = s.ldk, lv = s.ldv, lo = s.ldo, rb = attn_row_block(s);
  const T scale = T(1) / std::sqrt(T(s.hd));
  // One task per (batch, KV head): the G query heads sharing it accumulate dK/dV race-free;
  // contiguous ranges of them per thread (attention.h, "Threads").
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < s.B; ++b)
    for (int g = 0; g < s.Hk; ++g) {
      T* P = scratch + size_t(omp_get_thread_num()) * s.scratch_per_thread();
      T* dP = P + size_t(s.Tq) * s.Tk;
      const T* kb = k + s.kv_offset(b, g, lk);
      const T* vb = v + s.kv_offset(b, g, lv);
      T* dkb = dk + s.kv_offset(b, g, lk);
      T* dvb = dv + s.kv_offset(b, g, lv);
      for (int j = g * G; j < (g + 1) * G; ++j) {
        const size_t qoff = size_t(b) * s.Tq * lq + size_t(j) * s.hd;
        const size_t ooff = size_t(b) * s.Tq * lo + size_t(j) * s.hd;
        T* lse_j = const_cast<T*>(lse) + (size_t(b) * s.Hq + j) * s.Tq;
        for (int t0 = 0; t0 < s.Tq; t0 += rb) {
          const int rows = std::min(rb, s.Tq - t0), nk = attn_block_keys(s, t0, rows);
          T* Pb = P + size_t(t0) * s.Tk;
          T* dSb = dP + size_t(t0) * s.Tk;
          const T* qr = q + qoff + size_t(t0) * lq;
          const T* gr = dout + ooff + size_t(t0) * lo;
          gemm_serial(Trans::N, Trans::T, rows, nk, s.hd, scale, qr, lq, kb, lk, T(0), Pb, s.Tk);
          scores_to_probs(P, lse_j, true, s, t0, t0 + rows, nk);
          // dP = dO V^T;  dS = P * (dP - rowdot(dO, O))
          gemm_serial(Trans::N, Trans::T, rows, nk, s.hd, T(1), gr, lo, vb, lv, T(0), dSb, s.Tk);
          T D[kAttnRowBlockLong];
          attention_rowdots(D, out + ooff + size_t(t0) * lo, gr, rows, s.hd, lo);
          for (int t = 0; t < rows; ++t) {
            const T Dt = D[t];
            const T* pr = Pb + size_t(t) * s.Tk;
            T* dr = dSb + size_t(t) * s.Tk;
#pragma omp simd
            for (int u = 0; u < nk; ++u) dr[u] = pr[u] * (dr[u] - Dt);
          }
          // dV += P^T dO;  dQ += scale dS K;  dK += scale dS^T Q (keys < nk only)
          gemm_serial(Trans::T, Trans::N, nk, s.hd, rows, T(1), Pb, s.Tk, gr, lo, T(1), dvb, lv);
          gemm_serial(Trans::N, Trans::N, rows, s.hd, nk, scale, dSb, s.Tk, kb, lk, T(1), dq + qoff + size_t(t0) * lq, lq);
          gemm_serial(Trans::T, Trans::N, nk, s.hd, rows, scale, dSb, s.Tk, qr, lq, T(1), dkb, lk);
        }
      }
    }
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*, const AttnShape&,
                                       float*);
template void attention_forward_group<float>(float*, float*, const float*, const float*, const float*,
                                             const AttnShape&, int, int, float*);
template void attention_forward_group<double>(double*, double*, const double*, const double*, const double*,
                                              const AttnShape&, int, int, double*);
template void attention_forward<double>(double*, double*, const double*, const double*, const double*,
                                        const AttnShape&, double*);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, const float*, const AttnShape&, float*);
template void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, const double*, const AttnShape&, double*);

}  // namespace zaya
