#include "kernels/conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/parallel.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"

namespace zaya {

// Repack w1 [C, hd, K1] -> w1p [K1, C, hd].
template <class T>
static void pack_w1(T* w1p, const T* w1, const ConvShape& s) {
  for (int k = 0; k < s.K1; ++k)
    for (int o = 0; o < s.C; ++o)
      for (int i = 0; i < s.hd; ++i) w1p[(size_t(k) * s.C + o) * s.hd + i] = w1[(size_t(o) * s.hd + i) * s.K1 + k];
}

// Row j of batch row b, channels [c0, c1).
template <class T>
static void depthwise_row(T* y0, const T* p, const T* halo, const T* w0, const T* b0, const ConvShape& s, int b, int j,
                          int c0, int c1) {
  const int C = s.C, K0 = s.K0, P = s.K0 - 1 + s.K1 - 1;
  T* yr = y0 + (size_t(b) * s.rows_per_batch() + j) * C;
  for (int c = c0; c < c1; ++c) yr[c] = b0[c];
  for (int k = 0; k < K0; ++k) {  // one input row per tap (hoisted out of the channel loop)
    const int m = j + k;
    const T* src = m >= P ? p + (size_t(b) * s.T + (m - P)) * C : halo ? halo + (size_t(b) * P + m) * C : nullptr;
    if (!src) continue;  // zero padding
    for (int c = c0; c < c1; ++c) yr[c] += w0[size_t(c) * K0 + k] * src[c];
  }
}

template <class T>
void causal_conv_depthwise(T* y0, const T* p, const T* halo, const T* w0, const T* b0, const ConvShape& s) {
  const int Tr = s.rows_per_batch();
  parallel_for(int64_t(s.B) * Tr,
               [&](int64_t bj) { depthwise_row(y0, p, halo, w0, b0, s, int(bj / Tr), int(bj % Tr), 0, s.C); });
}

template <class T>
void causal_conv_depthwise_part(T* y0, const T* p, const T* halo, const T* w0, const T* b0, const ConvShape& s, int b,
                                int c0, int c1) {
  for (int j = 0; j < s.rows_per_batch(); ++j) depthwise_row(y0, p, halo, w0, b0, s, b, j, c0, c1);
}

// Stage 2 with bf16 products (bf16 training): one product per group over all K1 taps, K =
// K1 * hd, instead of one per (group, tap). Its operand is a bf16 copy of y0 laid out
// [row][group][tap][hd]: row r of group g holds y0 rows r .. r+K1-1 side by side. The
// weights likewise [C][tap][hd]. 12 products of K = 64 per layer become 6 of K = 128, and
// nothing is rounded inside a product.
static bool stage2_bf16() {
  return gemm_settings().precision == GemmPrecision::BF16 && bf16_gemm_supported();
}

static void taps_copy(std::vector<bf16>& y2, const float* y0, const ConvShape& s) {
  const int C = s.C, hd = s.hd, K1 = s.K1, G = C / hd, M = s.rows() - (K1 - 1);
  y2.resize(size_t(M) * C * K1);
  parallel_for(M, [&](int64_t r) {
    bf16* dst = y2.data() + size_t(r) * C * K1;
    for (int g = 0; g < G; ++g)
      for (int k = 0; k < K1; ++k)
        convert_to_bf16(y0 + size_t(r + k) * C + size_t(g) * hd, dst + (size_t(g) * K1 + k) * hd, size_t(hd));
  });
}

static void taps_weights(std::vector<bf16>& w2, const float* w1, const ConvShape& s) {
  w2.resize(size_t(s.C) * s.K1 * s.hd);
  for (int o = 0; o < s.C; ++o)
    for (int k = 0; k < s.K1; ++k)
      for (int i = 0; i < s.hd; ++i)
        w2[(size_t(o) * s.K1 + k) * s.hd + i] = to_bf16(w1[(size_t(o) * s.hd + i) * s.K1 + k]);
}

static void stage2_forward_bf16(float* out, const float* y0, const float* w1, const ConvShape& s) {
  const int C = s.C, hd = s.hd, W = s.K1 * hd, G = C / hd, M = s.rows() - (s.K1 - 1);
  static thread_local std::vector<bf16> y2, w2;
  taps_copy(y2, y0, s);
  taps_weights(w2, w1, s);
  for (int g = 0; g < G; ++g)
    gemm_bf16(Trans::N, Trans::T, M, hd, W, 1.f, GemmOperand{nullptr, y2.data() + size_t(g) * W, G * W},
              GemmOperand{nullptr, w2.data() + size_t(g) * hd * W, W}, 0.f, out + size_t(g) * hd, C);
}

// dw1 += dC_g^T Y2_g per group; dy0 = the taps' dY2 = dC_g W2_g folded back onto their rows.
static void stage2_backward_bf16(float* dy0, float* dw1, const float* dout, const float* y0, const float* w1,
                                 const ConvShape& s) {
  const int C = s.C, hd = s.hd, K1 = s.K1, W = K1 * hd, G = C / hd, rows = s.rows(), M = rows - (K1 - 1);
  static thread_local std::vector<bf16> y2, w2, d16;
  static thread_local std::vector<float> dw2, dy2;
  taps_copy(y2, y0, s);
  taps_weights(w2, w1, s);
  d16.resize(size_t(M) * C);
  convert_to_bf16(dout, d16.data(), d16.size());
  dw2.resize(size_t(C) * W);
  dy2.resize(size_t(M) * C * K1);
  // A group's two products write its own blocks of dw2 and dy2: the groups go side by side.
  // (Inside the region `y2` etc. would name each thread's own buffers: pointers taken here.)
  const bf16 *d16p = d16.data(), *y2p = y2.data(), *w2p = w2.data();
  float *dw2p = dw2.data(), *dy2w = dy2.data();
  gemm_side_by_side(G, 4.0 * hd * W * M * G, [&](int g) {
    const GemmOperand dc{nullptr, d16p + size_t(g) * hd, C};
    gemm_bf16(Trans::T, Trans::N, hd, W, M, 1.f, dc, GemmOperand{nullptr, y2p + size_t(g) * W, G * W}, 0.f,
              dw2p + size_t(g) * hd * W, W);
    gemm_bf16(Trans::N, Trans::N, M, W, hd, 1.f, dc, GemmOperand{nullptr, w2p + size_t(g) * hd * W, W}, 0.f,
              dy2w + size_t(g) * W, G * W);
  });
  for (int o = 0; o < C; ++o)
    for (int k = 0; k < K1; ++k)
      for (int i = 0; i < hd; ++i) dw1[(size_t(o) * hd + i) * K1 + k] += dw2[(size_t(o) * K1 + k) * hd + i];
  const float* dy2p = dy2.data();  // (inside the region, `dy2` would name each thread's own)
  parallel_for(rows, [&](int64_t m) {
    float* d = dy0 + size_t(m) * C;
    std::fill(d, d + C, 0.f);
    for (int k = 0; k < K1; ++k) {
      const int64_t r = m - k;
      if (r < 0 || r >= M) continue;
      const float* src = dy2p + size_t(r) * C * K1;
      for (int g = 0; g < G; ++g)
        for (int i = 0; i < hd; ++i) d[g * hd + i] += src[(size_t(g) * K1 + k) * hd + i];
    }
  });
}

// Stage 2 in bf16 when bf16 products are on (fp32 models only); false: the caller does it.
template <class T>
static bool try_stage2_forward_bf16(T* out, const T* y0, const T* w1, const ConvShape& s) {
  if constexpr (std::is_same_v<T, float>)
    if (stage2_bf16()) return stage2_forward_bf16(out, y0, w1, s), true;
  return false;
}
template <class T>
static bool try_stage2_backward_bf16(T* dy0, T* dw1, const T* dout, const T* y0, const T* w1, const ConvShape& s) {
  if constexpr (std::is_same_v<T, float>)
    if (stage2_bf16()) return stage2_backward_bf16(dy0, dw1, dout, y0, w1, s), true;
  return false;
}

template <class T>
void causal_conv_forward(T* out, T* y0, T* w1p, const T* p, const T* halo, const T* w0, const T* b0, const T* w1,
                         const T* b1, const ConvShape& s) {
  const int C = s.C, hd = s.hd, K1 = s.K1;
  causal_conv_depthwise(y0, p, halo, w0, b0, s);  // stage 1
  if (try_stage2_forward_bf16(out, y0, w1, s)) return causal_conv_bias(out, b1, s);
  pack_w1(w1p, w1, s);
  // Stage 2: per group and tap, one GEMM over all rows (rows that straddle batches are junk).
  // The groups write columns of their own: side by side, one thread each, as in backward.
  const int M = s.rows() - (K1 - 1), G = C / hd;
  auto group = [&](int g) {
    for (int k = 0; k < K1; ++k)
      gemm(Trans::N, Trans::T, M, hd, hd, T(1), y0 + size_t(k) * C + size_t(g) * hd, C,
           w1p + (size_t(k) * C + size_t(g) * hd) * hd, hd, k ? T(1) : T(0), out + size_t(g) * hd, C);
  };
  gemm_side_by_side_of<T>(G, 2.0 * hd * hd * M * G * K1, group);
  causal_conv_bias(out, b1, s);
}

// Row bj of the tall layout, channels [c0, c1): the bias, or zeros on a junk row.
template <class T>
static void bias_row(T* out, const T* b1, const ConvShape& s, int64_t bj, int c0, int c1) {
  T* o = out + size_t(bj) * s.C;
  if (bj % s.rows_per_batch() >= s.T)
    std::fill(o + c0, o + c1, T(0));
  else
    for (int c = c0; c < c1; ++c) o[c] += b1[c];
}

template <class T>
void causal_conv_bias(T* out, const T* b1, const ConvShape& s) {
  parallel_for(int64_t(s.B) * s.rows_per_batch(), [&](int64_t bj) { bias_row(out, b1, s, bj, 0, s.C); });
}

template <class T>
void causal_conv_bias_part(T* out, const T* b1, const ConvShape& s, int b, int c0, int c1) {
  const int Tr = s.rows_per_batch();
  for (int j = 0; j < Tr; ++j) bias_row(out, b1, s, int64_t(b) * Tr + j, c0, c1);
}

template <class T>
void causal_conv_backward(T* dp, T* dhalo, T* dw0, T* db0, T* dw1, T* db1, T* dy0, T* dw1p, const T* dout,
                          const T* y0, T* w1p, const T* w1, const T* p, const T* halo, const T* w0,
                          const ConvShape& s) {
  pack_w1(w1p, w1, s);
  const int Tr = s.rows_per_batch(), C = s.C, hd = s.hd, K0 = s.K0, K1 = s.K1, P = K0 - 1 + K1 - 1;
  const int M = s.rows() - (K1 - 1);
  colsum_product(db1, dout, (const T*)nullptr, s.rows(), C, C, 0);
  if (!try_stage2_backward_bf16(dy0, dw1, dout, y0, w1, s)) {
    // dy0: tap 0's product writes rows [0, M) (beta 0), so only the last K1 - 1 rows start at zero.
    std::memset(dy0 + size_t(M) * C, 0, sizeof(T) * size_t(K1 - 1) * C);
    std::memset(dw1p, 0, sizeof(T) * size_t(K1) * C * hd);
    const int G = C / hd;
    // Tasks with outputs of their own, side by side, one thread each (an hd x hd x M product
    // split over two threads ran slower than on one: 128 against 108 us at zaya1-small's
    // 64 x 64 x 2055 on AMD Zen 5, and an M x hd x hd one split by its hd columns worse):
    //   task g < G: dy0_g(shifted by k) += dc_g @ W_k[g] for k < K1 (the taps overlap in
    //     dy0: one after another; the groups' columns are disjoint), first as the longest;
    //   task G + g * K1 + k: dW_k[g] [hd_out, hd_in] += dc_g^T @ y0_g(shifted by k).
    auto task = [&](int i) {
      if (i < G) {
        for (int k = 0; k < K1; ++k)
          gemm(Trans::N, Trans::N, M, hd, hd, T(1), dout + size_t(i) * hd, C,
               w1p + (size_t(k) * C + size_t(i) * hd) * hd, hd, k ? T(1) : T(0), dy0 + size_t(k) * C + size_t(i) * hd,
               C);
        return;
      }
      const int g = (i - G) / K1, k = (i - G) % K1;
      gemm(Trans::T, Trans::N, hd, hd, M, T(1), dout + size_t(g) * hd, C, y0 + size_t(k) * C + size_t(g) * hd, C,
           T(1), dw1p + (size_t(k) * C + size_t(g) * hd) * hd, hd);
    };
    gemm_side_by_side_of<T>(G + G * K1, 4.0 * hd * hd * M * G * K1, task);
    for (int k = 0; k < K1; ++k)
      for (int o = 0; o < C; ++o)
        for (int i = 0; i < hd; ++i) dw1[(size_t(o) * hd + i) * K1 + k] += dw1p[(size_t(k) * C + o) * hd + i];
  }
  // Stage 1 backward, by rows: each dp / dhalo row gathers the taps that read it (race-free),
  // and each thread sums its rows' dw0/db0 terms, reduced at the end in thread order (the
  // same result for the same thread count). Walking dy0 per channel, strided by C, was
  // cache-bound: ~30% of the CCA backward.
  std::vector<T> w0t(size_t(K0) * C);  // [K0, C]
  for (int c = 0; c < C; ++c)
    for (int k = 0; k < K0; ++k) w0t[size_t(k) * C + c] = w0[size_t(c) * K0 + k];
  const int nth = omp_in_parallel() ? 1 : omp_get_max_threads();
  std::vector<T> part(size_t(nth) * (K0 + 1) * C, T(0));  // per thread: gw [K0, C], then gb [C]
  const int64_t rows = int64_t(s.B) * Tr;
#pragma omp parallel num_threads(nth)
  {
    T* acc = part.data() + size_t(omp_get_thread_num()) * (K0 + 1) * C;
#pragma omp for schedule(static)
    for (int64_t bj = 0; bj < rows; ++bj) {
      const int b = int(bj / Tr), j = int(bj % Tr);
      const T* g = dy0 + size_t(bj) * C;
      T* gb = acc + size_t(K0) * C;
      for (int c = 0; c < C; ++c) gb[c] += g[c];
      for (int k = 0; k < K0; ++k) {
        const int m = j + k;
        const T* src = m >= P ? p + (size_t(b) * s.T + (m - P)) * C : halo ? halo + (size_t(b) * P + m) * C : nullptr;
        if (!src) continue;
        T* gw = acc + size_t(k) * C;
        for (int c = 0; c < C; ++c) gw[c] += g[c] * src[c];
      }
    }
    // Padded row m is read by y0 rows j = m - k: dp for m >= P, dhalo for m < P.
    const int64_t padded_rows = int64_t(s.B) * (s.T + P);
#pragma omp for schedule(static)
    for (int64_t bm = 0; bm < padded_rows; ++bm) {
      const int b = int(bm / (s.T + P)), m = int(bm % (s.T + P));
      T* dst = m >= P ? dp + (size_t(b) * s.T + (m - P)) * C : dhalo ? dhalo + (size_t(b) * P + m) * C : nullptr;
      if (!dst) continue;
      for (int k = 0; k < K0; ++k) {
        const int j = m - k;
        if (j < 0 || j >= Tr) continue;
        const T* g = dy0 + (size_t(b) * Tr + j) * C;
        const T* wk = w0t.data() + size_t(k) * C;
        for (int c = 0; c < C; ++c) dst[c] += g[c] * wk[c];
      }
    }
  }
  for (int t = 0; t < nth; ++t) {
    const T* acc = part.data() + size_t(t) * (K0 + 1) * C;
    for (int c = 0; c < C; ++c) {
      for (int k = 0; k < K0; ++k) dw0[size_t(c) * K0 + k] += acc[size_t(k) * C + c];
      db0[c] += acc[size_t(K0) * C + c];
    }
  }
}

#define ZAYA_INST(T)                                                                                           \
  template void causal_conv_forward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                       const ConvShape&);                                                      \
  template void causal_conv_depthwise<T>(T*, const T*, const T*, const T*, const T*, const ConvShape&);       \
  template void causal_conv_depthwise_part<T>(T*, const T*, const T*, const T*, const T*, const ConvShape&, int, \
                                              int, int);                                                       \
  template void causal_conv_bias<T>(T*, const T*, const ConvShape&);                                          \
  template void causal_conv_bias_part<T>(T*, const T*, const ConvShape&, int, int, int);                      \
  template void causal_conv_backward<T>(T*, T*, T*, T*, T*, T*, T*, T*, const T*, const T*, T*, const T*,       \
                                        const T*, const T*, const T*, const ConvShape&);
ZAYA_INST(float)
ZAYA_INST(double)

}  // namespace zaya
