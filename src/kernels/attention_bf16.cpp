#include "kernels/attention_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/bf16.h"
#include "kernels/attention_tiles.h"
#include "kernels/gemm.h"
#include "kernels/vec_math.h"

namespace zaya {

bool attention_bf16_on() {
  const GemmEngine e = gemm_resolve(GemmPrecision::BF16);
  return gemm_settings().precision == GemmPrecision::BF16 && (e == GemmEngine::Amx || e == GemmEngine::Avx512);
}

namespace {

// rows x hd of a strided fp32 operand, rounded into a contiguous bf16 block.
void round_rows(bf16* dst, const float* src, int rows, int hd, int ld) {
  for (int r = 0; r < rows; ++r) convert_to_bf16(src + size_t(r) * ld, dst + size_t(r) * hd, size_t(hd));
}

int last_key(const AttnShape& s, int t) { return std::min(s.Tk - 1, s.q_pos0 + t); }

// Per-thread buffers: the head's bf16 operands and one block's scores.
struct Scratch {
  std::vector<bf16> q16, k16, v16, do16, p16, ds16;
  std::vector<float> p, dp;
  void size(const AttnShape& s) {
    q16.resize(size_t(s.Tq) * s.hd), do16.resize(q16.size());
    k16.resize(size_t(s.Tk) * s.hd), v16.resize(k16.size());
    p.resize(size_t(attn_row_block(s)) * s.Tk), dp.resize(p.size());
    p16.resize(p.size()), ds16.resize(p.size());
  }
};
// This thread's scratch, sized for s, holding (batch b, KV head g)'s K and V in bf16.
Scratch& group_scratch(const float* k, const float* v, const AttnShape& s, int b, int g) {
  static thread_local Scratch sc;
  sc.size(s);
  round_rows(sc.k16.data(), k + s.kv_offset(b, g, s.ldk), s.Tk, s.hd, s.ldk);
  round_rows(sc.v16.data(), v + s.kv_offset(b, g, s.ldv), s.Tk, s.hd, s.ldv);
  return sc;
}

// f(b, g, scratch) for every (batch, KV head) pair, split over the threads: each pair's G
// query heads share its K and V (rounded once) and accumulate dK/dV race-free. Contiguous
// ranges of pairs per thread (attention.h, "Threads").
template <class F>
void for_each_group(const float* k, const float* v, const AttnShape& s, F&& f) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < s.B; ++b)
    for (int g = 0; g < s.Hk; ++g) f(b, g, group_scratch(k, v, s, b, g));
}

}  // namespace

void attention_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v,
                            const AttnShape& s) {
  if (attention_bf16_tiles_on(s)) return attention_forward_bf16_tiles(out, lse, q, k, v, s);
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  const GemmEngine e = gemm_resolve(GemmPrecision::BF16);  // Amx or Avx512 (attention_bf16_on)
  for_each_group(k, v, s, [&](int b, int g, Scratch& sc) {
    for (int j = g * G; j < (g + 1) * G; ++j) {
      round_rows(sc.q16.data(), q + size_t(b) * s.Tq * s.ldq + size_t(j) * hd, s.Tq, hd, s.ldq);
      float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int r0 = 0; r0 < s.Tq; r0 += rb) {
        const int rows = std::min(rb, s.Tq - r0), n = attn_block_keys(s, r0, rows);
        float* S = sc.p.data();
        gemm_bf16_kernel(e, Trans::N, Trans::T, rows, n, hd, scale, sc.q16.data() + size_t(r0) * hd, hd,
                         sc.k16.data(), hd, 0.f, S, n);
        for (int i = 0; i < rows; ++i) {
          float* row = S + size_t(i) * n;
          const int seen = last_key(s, r0 + i) + 1;
          lse_j[r0 + i] = row_softmax(row, seen);
          std::fill(row + seen, row + n, 0.f);
        }
        convert_to_bf16(S, sc.p16.data(), size_t(rows) * n);
        gemm_bf16_kernel(e, Trans::N, Trans::N, rows, hd, n, 1.f, sc.p16.data(), n, sc.v16.data(), hd, 0.f,
                         out + (size_t(b) * s.Tq + r0) * s.ldo + size_t(j) * hd, s.ldo);
      }
    }
  });
}

void attention_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                             const float* q, const float* k, const float* v, const AttnShape& s) {
  if (attention_bf16_tiles_on(s)) return attention_backward_bf16_tiles(dq, dk, dv, dout, out, lse, q, k, v, s);
  const int G = s.Hq / s.Hk, hd = s.hd, rb = attn_row_block(s);
  const float scale = 1.f / std::sqrt(float(hd));
  const GemmEngine e = gemm_resolve(GemmPrecision::BF16);  // Amx or Avx512 (attention_bf16_on)
  for_each_group(k, v, s, [&](int b, int g, Scratch& sc) {
    float* dkb = dk + s.kv_offset(b, g, s.ldk);
    float* dvb = dv + s.kv_offset(b, g, s.ldv);
    for (int j = g * G; j < (g + 1) * G; ++j) {
      const size_t qoff = size_t(b) * s.Tq * s.ldq + size_t(j) * hd, ooff = size_t(b) * s.Tq * s.ldo + size_t(j) * hd;
      round_rows(sc.q16.data(), q + qoff, s.Tq, hd, s.ldq);
      round_rows(sc.do16.data(), dout + ooff, s.Tq, hd, s.ldo);
      const float* lse_j = lse + (size_t(b) * s.Hq + j) * s.Tq;
      for (int r0 = 0; r0 < s.Tq; r0 += rb) {
        const int rows = std::min(rb, s.Tq - r0), n = attn_block_keys(s, r0, rows);
        const bf16* qb = sc.q16.data() + size_t(r0) * hd;
        const bf16* dob = sc.do16.data() + size_t(r0) * hd;
        float *P = sc.p.data(), *dP = sc.dp.data();
        // P again from the saved lse; dP = dO V^T; dS = P * (dP - rowdot(dO, O)).
        gemm_bf16_kernel(e, Trans::N, Trans::T, rows, n, hd, scale, qb, hd, sc.k16.data(), hd, 0.f, P, n);
        gemm_bf16_kernel(e, Trans::N, Trans::T, rows, n, hd, 1.f, dob, hd, sc.v16.data(), hd, 0.f, dP, n);
        float D[kAttnRowBlockLong];  // rowdot(dO, O), the rows' loads overlapping (attention_tiles.cpp)
        attention_rowdots(D, out + ooff + size_t(r0) * s.ldo, dout + ooff + size_t(r0) * s.ldo, rows, hd, s.ldo);
        for (int i = 0; i < rows; ++i) {
          const int t = r0 + i, seen = last_key(s, t) + 1;
          float* pr = P + size_t(i) * n;
          float* dr = dP + size_t(i) * n;
          row_exp_scale(pr, pr, seen, lse_j[t], 1.f);
          const float Dt = D[i];
#pragma omp simd
          for (int u = 0; u < seen; ++u) dr[u] = pr[u] * (dr[u] - Dt);
          std::fill(pr + seen, pr + n, 0.f);
          std::fill(dr + seen, dr + n, 0.f);
        }
        convert_to_bf16(P, sc.p16.data(), size_t(rows) * n);
        convert_to_bf16(dP, sc.ds16.data(), size_t(rows) * n);
        // dV += P^T dO;  dQ += scale dS K;  dK += scale dS^T Q  (keys [0, n) only)
        gemm_bf16_kernel(e, Trans::T, Trans::N, n, hd, rows, 1.f, sc.p16.data(), n, dob, hd, 1.f, dvb, s.ldv);
        gemm_bf16_kernel(e, Trans::N, Trans::N, rows, hd, n, scale, sc.ds16.data(), n, sc.k16.data(), hd, 1.f,
                         dq + qoff + size_t(r0) * s.ldq, s.ldq);
        gemm_bf16_kernel(e, Trans::T, Trans::N, n, hd, rows, scale, sc.ds16.data(), n, qb, hd, 1.f, dkb, s.ldk);
      }
    }
  });
}

}  // namespace zaya
