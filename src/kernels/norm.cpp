#include "kernels/norm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace zaya {

template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int N, int D, double eps, bf16* out16) {
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* xi = x + size_t(i) * D;
    T* oi = out + size_t(i) * D;
    double ss = 0;  // accumulate in double: the norm is computed at least in fp32 (spec)
#pragma omp simd reduction(+ : ss)  // partial sums in vector lanes, not one scalar chain
    for (int d = 0; d < D; ++d) ss += double(xi[d]) * xi[d];
    T r = T(1.0 / std::sqrt(ss / D + eps));
    rstd[i] = r;
    for (int d = 0; d < D; ++d) oi[d] = w[d] * (xi[d] * r);
    if (out16) {
      bf16* o16 = out16 + size_t(i) * D;
      for (int d = 0; d < D; ++d) o16[d] = to_bf16(float(oi[d]));
    }
  });
}

template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int N, int D) {
  // y = w * x * r, r = (mean(x^2)+eps)^-1/2:  dx = r * (g*w - x * r^2 * mean(g*w*x))
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* xi = x + size_t(i) * D;
    const T* gi = dout + size_t(i) * D;
    T* dxi = dx + size_t(i) * D;
    const T r = rstd[i];
    double dot = 0;
#pragma omp simd reduction(+ : dot)  // partial sums in vector lanes, not one scalar chain
    for (int d = 0; d < D; ++d) dot += double(gi[d]) * w[d] * xi[d];
    const T c = T(dot / D) * r * r;
    for (int d = 0; d < D; ++d) dxi[d] += r * (gi[d] * w[d] - xi[d] * c);
  });
  // dw[d] += sum_i g[i,d] * x[i,d] * r[i]
  constexpr int kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int d0 = 0; d0 < D; d0 += kBlock) {
    const int d1 = d0 + kBlock < D ? d0 + kBlock : D;
    T acc[kBlock] = {};
    for (int i = 0; i < N; ++i) {
      const T* xi = x + size_t(i) * D;
      const T* gi = dout + size_t(i) * D;
      const T r = rstd[i];
      for (int d = d0; d < d1; ++d) acc[d - d0] += gi[d] * xi[d] * r;
    }
    for (int d = d0; d < d1; ++d) dw[d] += acc[d - d0];
  }
}

template <class T>
void colsum_product(T* dst, const T* a, const T* b, int N, int D, int lda, int ldb) {
  constexpr int kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int d0 = 0; d0 < D; d0 += kBlock) {
    const int d1 = d0 + kBlock < D ? d0 + kBlock : D;
    T acc[kBlock] = {};
    for (int i = 0; i < N; ++i) {
      const T* ai = a + size_t(i) * lda;
      if (b) {
        const T* bi = b + size_t(i) * ldb;
        for (int d = d0; d < d1; ++d) acc[d - d0] += ai[d] * bi[d];
      } else {
        for (int d = d0; d < d1; ++d) acc[d - d0] += ai[d];
      }
    }
    for (int d = d0; d < d1; ++d) dst[d] += acc[d - d0];
  }
}

template <class T>
void res_merge_forward(T* res_out, const T* h, const T* res, const T* hs, const T* hb, const T* rs, const T* rb,
                       int N, int D) {
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* hi = h + size_t(i) * D;
    const T* ri = res ? res + size_t(i) * D : nullptr;
    T* oi = res_out + size_t(i) * D;
    for (int d = 0; d < D; ++d) {
      T v = hs ? (hi[d] + hb[d]) * hs[d] : hi[d];
      if (ri) v += rs ? (ri[d] + rb[d]) * rs[d] : ri[d];
      oi[d] = v;
    }
  });
}

template <class T>
void res_merge_backward(T* dh, T* dres, T* dhs, T* dhb, T* drs, T* drb, const T* dout, const T* h, const T* res,
                        const T* hs, const T* hb, const T* rs, const T* rb, int N, int D) {
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* gi = dout + size_t(i) * D;
    T* dhi = dh + size_t(i) * D;
    T* dri = dres ? dres + size_t(i) * D : nullptr;
    for (int d = 0; d < D; ++d) {
      dhi[d] += hs ? gi[d] * hs[d] : gi[d];
      if (dri) dri[d] += rs ? gi[d] * rs[d] : gi[d];
    }
  });
  if (!hs) return;
  // d hs = sum g * (h + hb); d hb = sum g * hs. The bias is folded in with one extra
  // column sum: sum g*(h+hb) = sum g*h + hb * sum g.
  constexpr int kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int d0 = 0; d0 < D; d0 += kBlock) {
    const int d1 = d0 + kBlock < D ? d0 + kBlock : D;
    T gsum[kBlock] = {}, gh[kBlock] = {}, gr[kBlock] = {};
    for (int i = 0; i < N; ++i) {
      const T* gi = dout + size_t(i) * D;
      const T* hi = h + size_t(i) * D;
      const T* ri = res ? res + size_t(i) * D : nullptr;
      for (int d = d0; d < d1; ++d) {
        gsum[d - d0] += gi[d];
        gh[d - d0] += gi[d] * hi[d];
        if (ri) gr[d - d0] += gi[d] * ri[d];
      }
    }
    for (int d = d0; d < d1; ++d) {
      const T g = gsum[d - d0];
      dhs[d] += gh[d - d0] + hb[d] * g;
      dhb[d] += hs[d] * g;
      if (res && drs) {
        drs[d] += gr[d - d0] + rb[d] * g;
        drb[d] += rs[d] * g;
      }
    }
  }
}

// One row of merge_norm_forward. Absent scales read ones and absent biases zeros ((h + 0) * 1
// is h), so the loop has no branches; HasR: the merge has a residual input.
template <class T, bool HasR>
static T merge_norm_row_forward(T* resi, T* __restrict oi, bf16* __restrict o16, const T* hi, const T* ri,
                                const T* __restrict hs, const T* __restrict hb, const T* __restrict rs,
                                const T* __restrict rb, const T* __restrict w, int D, double eps) {
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int d = 0; d < D; ++d) {
    T v = (hi[d] + hb[d]) * hs[d];
    if constexpr (HasR) v += (ri[d] + rb[d]) * rs[d];
    resi[d] = v;
    ss += double(v) * v;
  }
  const T r = T(1.0 / std::sqrt(ss / D + eps));
  if (o16 && !oi) {  // the output kept only in bf16
#pragma omp simd
    for (int d = 0; d < D; ++d) o16[d] = to_bf16(float(w[d] * (resi[d] * r)));
  } else if (o16) {
#pragma omp simd
    for (int d = 0; d < D; ++d) {
      const T o = w[d] * (resi[d] * r);
      oi[d] = o;
      o16[d] = to_bf16(float(o));
    }
  } else {
#pragma omp simd
    for (int d = 0; d < D; ++d) oi[d] = w[d] * (resi[d] * r);
  }
  return r;
}

template <class T>
void merge_norm_forward(T* res_out, T* out, T* rstd, const T* h, const T* res, const T* hs, const T* hb, const T* rs,
                        const T* rb, const T* w, int N, int D, double eps, bf16* out16) {
  // Ones and zeros standing in for absent scales and biases (none needed when all are given).
  std::vector<T> unit(hs && rs ? 0 : 2 * size_t(D), T(0));
  std::fill(unit.begin(), unit.begin() + std::ptrdiff_t(unit.size() / 2), T(1));
  const T* ones = unit.data();
  const T* zeros = unit.data() + D;
  const T *hsv = hs ? hs : ones, *hbv = hs ? hb : zeros, *rsv = rs ? rs : ones, *rbv = rs ? rb : zeros;
  parallel_for(N, [&](int64_t i_) {
    const size_t o = size_t(i_) * D;
    bf16* o16 = out16 ? out16 + o : nullptr;
    T* oi = out ? out + o : nullptr;
    rstd[i_] = res ? merge_norm_row_forward<T, true>(res_out + o, oi, o16, h + o, res + o, hsv, hbv, rsv, rbv, w, D,
                                                     eps)
                   : merge_norm_row_forward<T, false>(res_out + o, oi, o16, h + o, nullptr, hsv, hbv, rsv, rbv, w, D,
                                                      eps);
  });
}

// One row of merge_norm_backward, all terms in one vector pass. Absent scales read ones and
// an absent dres zeros (x * 1 and 0 + x are exact), so the loop has no branches; HasR: the
// merge had a residual input (dr, r written and read).
template <class T, bool HasR>
static void merge_norm_row(T* __restrict dhi, T* __restrict dri, T* __restrict aw, T* __restrict ag,
                           T* __restrict ah, T* __restrict ar, const T* __restrict gi, const T* __restrict xi,
                           const T* __restrict di, const T* __restrict hi, const T* __restrict ri,
                           const T* __restrict w, const T* __restrict hs, const T* __restrict rs, T rr, int D) {
  double dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int d = 0; d < D; ++d) dot += double(gi[d]) * w[d] * xi[d];
  const T c = T(dot / D) * rr * rr;
#pragma omp simd
  for (int d = 0; d < D; ++d) {
    const T g = di[d] + rr * (gi[d] * w[d] - xi[d] * c);  // rmsnorm_backward's dx + the skip path's
    aw[d] += gi[d] * xi[d] * rr;
    dhi[d] = g * hs[d];
    ag[d] += g;
    ah[d] += g * hi[d];
    if constexpr (HasR) {
      dri[d] = g * rs[d];
      ar[d] += g * ri[d];
    }
  }
}

template <class T>
void merge_norm_backward(T* dh, T* dr, T* dw, T* dhs, T* dhb, T* drs, T* drb, const T* dx, const T* dres,
                         const T* res, const T* w, const T* rstd, const T* h, const T* r, const T* hs, const T* hb,
                         const T* rs, const T* rb, int N, int D) {
  const int nth = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Per thread: dw terms, column sums of the gradient g of res, of g*h and of g*r. Then D ones
  // and D zeros standing in for absent scales and an absent dres.
  std::vector<T> part(size_t(nth) * 4 * D + 2 * size_t(D), T(0));
  T* ones = part.data() + size_t(nth) * 4 * D;
  const T* zeros = ones + D;
  std::fill(ones, ones + D, T(1));
  const T* hsv = hs ? hs : ones;
  const T* rsv = rs ? rs : ones;
#pragma omp parallel num_threads(nth)
  {
    T* acc = part.data() + size_t(omp_get_thread_num()) * 4 * D;
    T *aw = acc, *ag = acc + D, *ah = acc + 2 * size_t(D), *ar = acc + 3 * size_t(D);
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      const size_t o = size_t(i) * D;
      const T* di = dres ? dres + o : zeros;
      if (dr)
        merge_norm_row<T, true>(dh + o, dr + o, aw, ag, ah, ar, dx + o, res + o, di, h + o, r + o, w, hsv, rsv,
                                rstd[i], D);
      else
        merge_norm_row<T, false>(dh + o, nullptr, aw, ag, ah, ar, dx + o, res + o, di, h + o, nullptr, w, hsv, rsv,
                                 rstd[i], D);
    }
  }
  for (int t = 0; t < nth; ++t) {
    const T* acc = part.data() + size_t(t) * 4 * D;
    for (int d = 0; d < D; ++d) {
      dw[d] += acc[d];
      if (!hs) continue;
      const T gs = acc[D + d];
      dhs[d] += acc[2 * size_t(D) + d] + hb[d] * gs;
      dhb[d] += hs[d] * gs;
      if (dr && drs) {
        drs[d] += acc[3 * size_t(D) + d] + rb[d] * gs;
        drb[d] += rs[d] * gs;
      }
    }
  }
}

template <class T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int N, int D) {
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    for (int d = 0; d < D; ++d) out[size_t(i) * D + d] = table[size_t(ids[i]) * D + d];
  });
}

template <class T>
void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int N, int D) {
  // Rows may repeat: parallelise over columns so no two threads touch one element.
#pragma omp parallel for schedule(static)
  for (int d0 = 0; d0 < D; d0 += 16) {
    const int d1 = d0 + 16 < D ? d0 + 16 : D;
    for (int i = 0; i < N; ++i)
      for (int d = d0; d < d1; ++d) dtable[size_t(ids[i]) * D + d] += dout[size_t(i) * D + d];
  }
}

#define ZAYA_INST(T)                                                                                              \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int, int, double, bf16*);                                 \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int, int);                    \
  template void colsum_product<T>(T*, const T*, const T*, int, int, int, int);                                    \
  template void res_merge_forward<T>(T*, const T*, const T*, const T*, const T*, const T*, const T*, int, int);   \
  template void res_merge_backward<T>(T*, T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*,   \
                                      const T*, const T*, int, int);                                              \
  template void merge_norm_forward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,     \
                                      const T*, int, int, double, bf16*);                                         \
  template void merge_norm_backward<T>(T*, T*, T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,         \
                                       const T*, const T*, const T*, const T*, const T*, const T*, const T*, int,   \
                                       int);                                                                        \
  template void embedding_forward<T>(T*, const int32_t*, const T*, int, int);                                     \
  template void embedding_backward<T>(T*, const T*, const int32_t*, int, int);
ZAYA_INST(float)
ZAYA_INST(double)

}  // namespace zaya
