#include "kernels/conv.h"

#include <cstring>

#include "core/parallel.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"

namespace zaya {

// Value of the padded input at padded step m of batch b, channel c.
template <class T>
static inline T padded(const T* p, const T* halo, const ConvShape& s, int b, int m, int c) {
  const int P = s.K0 - 1 + s.K1 - 1;
  if (m >= P) return p[(size_t(b) * s.T + (m - P)) * s.C + c];
  return halo ? halo[(size_t(b) * P + m) * s.C + c] : T(0);
}

// Repack w1 [C, hd, K1] -> w1p [K1, C, hd].
template <class T>
static void pack_w1(T* w1p, const T* w1, const ConvShape& s) {
  for (int k = 0; k < s.K1; ++k)
    for (int o = 0; o < s.C; ++o)
      for (int i = 0; i < s.hd; ++i) w1p[(size_t(k) * s.C + o) * s.hd + i] = w1[(size_t(o) * s.hd + i) * s.K1 + k];
}

template <class T>
void causal_conv_depthwise(T* y0, const T* p, const T* halo, const T* w0, const T* b0, const ConvShape& s) {
  const int Tr = s.rows_per_batch(), C = s.C, K0 = s.K0, P = s.K0 - 1 + s.K1 - 1;
  parallel_for(int64_t(s.B) * Tr, [&](int64_t bj) {
    const int b = int(bj / Tr), j = int(bj % Tr);
    T* yr = y0 + size_t(bj) * C;
    for (int c = 0; c < C; ++c) yr[c] = b0[c];
    for (int k = 0; k < K0; ++k) {  // one input row per tap (as padded(), hoisted out of the channel loop)
      const int m = j + k;
      const T* src = m >= P ? p + (size_t(b) * s.T + (m - P)) * C : halo ? halo + (size_t(b) * P + m) * C : nullptr;
      if (!src) continue;  // zero padding
      for (int c = 0; c < C; ++c) yr[c] += w0[size_t(c) * K0 + k] * src[c];
    }
  });
}

template <class T>
void causal_conv_forward(T* out, T* y0, T* w1p, const T* p, const T* halo, const T* w0, const T* b0, const T* w1,
                         const T* b1, const ConvShape& s) {
  const int Tr = s.rows_per_batch(), C = s.C, hd = s.hd, K1 = s.K1;
  causal_conv_depthwise(y0, p, halo, w0, b0, s);  // stage 1
  pack_w1(w1p, w1, s);
  // Stage 2: per group and tap, one GEMM over all rows (rows that straddle batches are junk).
  const int M = s.rows() - (K1 - 1);
  for (int g = 0; g < C / hd; ++g)
    for (int k = 0; k < K1; ++k)
      gemm(Trans::N, Trans::T, M, hd, hd, T(1), y0 + size_t(k) * C + size_t(g) * hd, C,
           w1p + (size_t(k) * C + size_t(g) * hd) * hd, hd, k ? T(1) : T(0), out + size_t(g) * hd, C);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < s.B; ++b)
    for (int j = 0; j < Tr; ++j) {
      T* o = out + (size_t(b) * Tr + j) * C;
      if (j >= s.T) {
        std::memset(o, 0, sizeof(T) * C);
      } else {
        for (int c = 0; c < C; ++c) o[c] += b1[c];
      }
    }
}

template <class T>
void causal_conv_backward(T* dp, T* dhalo, T* dw0, T* db0, T* dw1, T* db1, T* dy0, T* dw1p, const T* dout,
                          const T* y0, T* w1p, const T* w1, const T* p, const T* halo, const T* w0,
                          const ConvShape& s) {
  pack_w1(w1p, w1, s);
  const int Tr = s.rows_per_batch(), C = s.C, hd = s.hd, K0 = s.K0, K1 = s.K1, P = K0 - 1 + K1 - 1;
  const int M = s.rows() - (K1 - 1);
  colsum_product(db1, dout, (const T*)nullptr, s.rows(), C, C, 0);
  std::memset(dy0, 0, sizeof(T) * size_t(s.rows()) * C);
  std::memset(dw1p, 0, sizeof(T) * size_t(K1) * C * hd);
  for (int g = 0; g < C / hd; ++g)
    for (int k = 0; k < K1; ++k) {
      const T* dcg = dout + size_t(g) * hd;
      // dW_k[g] [hd_out, hd_in] += dc_g^T @ y0_g(shifted by k)
      gemm(Trans::T, Trans::N, hd, hd, M, T(1), dcg, C, y0 + size_t(k) * C + size_t(g) * hd, C, T(1),
           dw1p + (size_t(k) * C + size_t(g) * hd) * hd, hd);
      // dy0_g(shifted by k) += dc_g @ W_k[g]
      gemm(Trans::N, Trans::N, M, hd, hd, T(1), dcg, C, w1p + (size_t(k) * C + size_t(g) * hd) * hd, hd, T(1),
           dy0 + size_t(k) * C + size_t(g) * hd, C);
    }
  for (int k = 0; k < K1; ++k)
    for (int o = 0; o < C; ++o)
      for (int i = 0; i < hd; ++i) dw1[(size_t(o) * hd + i) * K1 + k] += dw1p[(size_t(k) * C + o) * hd + i];
  // Stage 1 backward: parallel over channels (each channel's dw0/db0 is private to it).
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    T gb = 0, gw[8] = {};
    for (int b = 0; b < s.B; ++b)
      for (int j = 0; j < Tr; ++j) {
        const T g = dy0[(size_t(b) * Tr + j) * C + c];
        gb += g;
        for (int k = 0; k < K0; ++k) {
          const int m = j + k;
          gw[k] += g * padded(p, halo, s, b, m, c);
          const T gx = g * w0[size_t(c) * K0 + k];
          if (m >= P)
            dp[(size_t(b) * s.T + (m - P)) * C + c] += gx;
          else if (dhalo)
            dhalo[(size_t(b) * P + m) * C + c] += gx;
        }
      }
    db0[c] += gb;
    for (int k = 0; k < K0; ++k) dw0[size_t(c) * K0 + k] += gw[k];
  }
}

#define ZAYA_INST(T)                                                                                           \
  template void causal_conv_forward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                       const ConvShape&);                                                      \
  template void causal_conv_depthwise<T>(T*, const T*, const T*, const T*, const T*, const ConvShape&);       \
  template void causal_conv_backward<T>(T*, T*, T*, T*, T*, T*, T*, T*, const T*, const T*, T*, const T*,       \
                                        const T*, const T*, const T*, const ConvShape&);
ZAYA_INST(float)
ZAYA_INST(double)

}  // namespace zaya
