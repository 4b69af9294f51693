#include "kernels/attention_quant.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention_group.h"

namespace zaya {

void attention_group_kv_bf16(float* out, float* lse, const float* q, const bf16* k, const bf16* v, const AttnShape& s,
                             int b, int g, float* S) {
  if (attention_group_avx512_ok_bf16(s)) return attention_group_avx512(out, lse, q, k, v, s, b, g, S);
  if (attention_group_avx2_ok_bf16(s)) return attention_group_avx2(out, lse, q, k, v, s, b, g, S);
  const int G = s.Hq / s.Hk, hd = s.hd, Tk = s.Tk;
  const float scale = 1.f / std::sqrt(float(hd));
  const bf16* kb = k + s.kv_offset(b, g, s.ldk);
  const bf16* vb = v + s.kv_offset(b, g, s.ldv);
  for (int t = 0; t < s.Tq; ++t) {
    const float* qg = q + (size_t(b) * s.Tq + t) * s.ldq + size_t(g) * G * hd;  // the group's G heads, adjacent
    float* og = out + (size_t(b) * s.Tq + t) * s.ldo + size_t(g) * G * hd;
    const int last = std::min(Tk - 1, s.q_pos0 + t);
    // Scores: each cached K row is read (and widened) once for the G query heads.
    for (int u = 0; u <= last; ++u) {
      const bf16* kr = kb + size_t(u) * s.ldk;
      prefetch_row(kr + size_t(kAttnPrefetchRows) * s.ldk, hd);
      for (int jj = 0; jj < G; ++jj) {
        const float* qr = qg + size_t(jj) * hd;
        float d = 0;
#pragma omp simd reduction(+ : d)
        for (int i = 0; i < hd; ++i) d += qr[i] * from_bf16(kr[i]);
        S[size_t(jj) * Tk + u] = d * scale;
      }
    }
    for (int jj = 0; jj < G; ++jj) {
      float* row = S + size_t(jj) * Tk;
      float mx = -INFINITY;
      for (int u = 0; u <= last; ++u) mx = std::max(mx, row[u]);
      float sum = 0;
      for (int u = 0; u <= last; ++u) sum += row[u] = std::exp(row[u] - mx);
      const float inv = 1.f / sum;
      for (int u = 0; u <= last; ++u) row[u] *= inv;
      lse[(size_t(b) * s.Hq + size_t(g) * G + jj) * s.Tq + t] = mx + std::log(sum);
    }
    // Values: likewise each V row once; the G output rows stay in L1.
    std::fill(og, og + size_t(G) * hd, 0.f);
    for (int u = 0; u <= last; ++u) {
      const bf16* vr = vb + size_t(u) * s.ldv;
      prefetch_row(vr + size_t(kAttnPrefetchRows) * s.ldv, hd);
      for (int jj = 0; jj < G; ++jj) {
        const float pu = S[size_t(jj) * Tk + u];
        float* o = og + size_t(jj) * hd;
#pragma omp simd
        for (int i = 0; i < hd; ++i) o[i] += pu * from_bf16(vr[i]);
      }
    }
  }
}

void widen_kv_bf16(float* dst, const bf16* src, int B, int Hk, int cap, int rows, int hd) {
#pragma omp parallel for collapse(2) schedule(static) if (size_t(B) * Hk * rows * hd > 65536 && !omp_in_parallel())
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < Hk; ++g)
      convert_from_bf16(src + (size_t(b) * Hk + g) * cap * hd, dst + (size_t(b) * Hk + g) * rows * hd,
                        size_t(rows) * hd);
}

}  // namespace zaya
