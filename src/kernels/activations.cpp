#include "kernels/activations.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/vec_math.h"

namespace zaya {

template <class T>
static inline T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
template <class T>
static inline T gelu_grad(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}

template <class T>
void bias_gelu_forward(T* y, T* pre, const T* b, int N, int D) {
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    T* yi = y + size_t(i) * D;
    T* pi = pre + size_t(i) * D;
    for (int d = 0; d < D; ++d) pi[d] = yi[d] + (b ? b[d] : T(0));
    if constexpr (std::is_same_v<T, float>) {  // vector erff (kernels/vec_math.h)
      gelu_row(yi, pi, D);
    } else {
      for (int d = 0; d < D; ++d) yi[d] = gelu(pi[d]);
    }
  });
}

template <class T>
void gelu_backward(T* dpre, const T* dy, const T* pre, size_t n) {
  constexpr size_t kBlock = 4096;
  parallel_for(int64_t((n + kBlock - 1) / kBlock), [&](int64_t c) {
    const size_t b = size_t(c) * kBlock, e = std::min(n, b + kBlock);
    if constexpr (std::is_same_v<T, float>) {
      gelu_grad_row(dpre + b, dy + b, pre + b, int(e - b));
    } else {
      for (size_t k = b; k < e; ++k) dpre[k] = dy[k] * gelu_grad(pre[k]);
    }
  });
}

template <class T>
void swiglu_forward(T* a, const T* u, int N, int F, bf16* a16) {
  const int H = F / 2;
  ZAYA_CHECK(a || (a16 && std::is_same_v<T, float>), "swiglu_forward: no output");
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* ui = u + size_t(i) * F;
    if constexpr (std::is_same_v<T, float>) {  // vector expf (kernels/vec_math.h)
      thread_local std::vector<float> row;  // a's row when only its bf16 copy is kept
      if (!a) row.resize(size_t(H));
      float* ai = a ? a + size_t(i) * H : row.data();
      swiglu_row(ai, ui, ui + H, H);
      if (a16)
        for (int j = 0; j < H; ++j) a16[size_t(i) * H + j] = to_bf16(ai[j]);
    } else {
      T* ai = a + size_t(i) * H;
      for (int j = 0; j < H; ++j) {
        T g = ui[j];
        ai[j] = g / (T(1) + std::exp(-g)) * ui[H + j];
      }
    }
  });
}

template <class T>
void swiglu_backward(T* du, const T* da, const T* u, int N, int F, bf16* du16) {
  const int H = F / 2;
  ZAYA_CHECK(du || (du16 && std::is_same_v<T, float>), "swiglu_backward: no output");
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* ui = u + size_t(i) * F;
    const T* dai = da + size_t(i) * H;
    if constexpr (std::is_same_v<T, float>) {
      thread_local std::vector<float> row;  // du's row when only its bf16 copy is kept
      if (!du) row.resize(size_t(F));
      float* dui = du ? du + size_t(i) * F : row.data();
      swiglu_row_backward(dui, dui + H, dai, ui, ui + H, H);
      if (du16)
        for (int j = 0; j < F; ++j) du16[size_t(i) * F + j] = to_bf16(dui[j]);
    } else {
      T* dui = du + size_t(i) * F;
      for (int j = 0; j < H; ++j) {
        T g = ui[j], up = ui[H + j];
        T s = T(1) / (T(1) + std::exp(-g));
        T silu = g * s;
        dui[j] = dai[j] * up * s * (T(1) + g * (T(1) - s));
        dui[H + j] = dai[j] * silu;
      }
    }
  });
}

template <class T>
void softmax_forward(T* p, const T* z, int N, int K) {
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* zi = z + size_t(i) * K;
    T* pi = p + size_t(i) * K;
    T m = zi[0];
    for (int k = 1; k < K; ++k) m = std::max(m, zi[k]);
    T s = 0;
    for (int k = 0; k < K; ++k) s += (pi[k] = std::exp(zi[k] - m));
    for (int k = 0; k < K; ++k) pi[k] /= s;
  });
}

template <class T>
void softmax_backward(T* dz, const T* dp, const T* p, int N, int K) {
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    const T* pi = p + size_t(i) * K;
    const T* gi = dp + size_t(i) * K;
    T dot = 0;
    for (int k = 0; k < K; ++k) dot += pi[k] * gi[k];
    for (int k = 0; k < K; ++k) dz[size_t(i) * K + k] = pi[k] * (gi[k] - dot);
  });
}

// The longest rotated half a row's cos/sin are staged for (as T, once per row).
constexpr int kRopeMaxHalf = 512;

// Row `pos`'s cos and sin (sin times sign: -1 rotates back) as T, for every head of the row.
template <class T>
static int rope_row(T* c, T* s, const RopeTable& rt, int pos, double sign) {
  const int half = rt.rot / 2;
  const double* cp = &rt.cos_[size_t(pos) * half];
  const double* sp = &rt.sin_[size_t(pos) * half];
  for (int j = 0; j < half; ++j) c[j] = T(cp[j]), s[j] = T(sign * sp[j]);
  return half;
}

// One head vector's first 2 * half dims rotated in place.
template <class T>
static inline void rope_rotate(T* v, const T* c, const T* s, int half) {
#pragma omp simd
  for (int j = 0; j < half; ++j) {
    const T a = v[j], b = v[j + half];
    v[j] = a * c[j] - b * s[j];
    v[j + half] = b * c[j] + a * s[j];
  }
}

static void check_rope(const RopeTable& rt, int last_pos) {
  ZAYA_CHECK(last_pos <= rt.max_pos, "position ", last_pos, " exceeds the RoPE table (", rt.max_pos, ")");
  ZAYA_CHECK(rt.rot / 2 <= kRopeMaxHalf, "RoPE: ", rt.rot, " rotated dims, at most ", 2 * kRopeMaxHalf);
}

// Reductions go through `omp simd` lanes: a scalar chain of hd dependent adds per head vector
// was most of this pass's time.
template <class T>
void l2norm_forward(T* y, T* norms, const T* x, const T* temp, int N, int H, int hd, int ld, const RopeRows& rope) {
  const T root = T(std::sqrt(double(hd)));
  if (rope.table) check_rope(*rope.table, rope.pos0 + rope.T);
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    T c[kRopeMaxHalf], sn[kRopeMaxHalf];
    const int half = rope.table ? rope_row(c, sn, *rope.table, rope.pos0 + i % rope.T, 1.0) : 0;
    for (int h = 0; h < H; ++h) {
      const T* xv = x + size_t(i) * ld + size_t(h) * hd;
      T* yv = y + size_t(i) * ld + size_t(h) * hd;
      T ss = 0;
#pragma omp simd reduction(+ : ss)
      for (int d = 0; d < hd; ++d) ss += xv[d] * xv[d];
      T n = std::max(std::sqrt(ss), T(1e-12));
      norms[size_t(i) * H + h] = n;
      T s = root * (temp ? temp[h] : T(1)) / n;
#pragma omp simd
      for (int d = 0; d < hd; ++d) yv[d] = xv[d] * s;
      if (half) rope_rotate(yv, c, sn, half);
    }
  });
}

template <class T>
void l2norm_backward(T* dx, T* dtemp, const T* dy, const T* x, const T* norms, const T* temp, int N, int H, int hd,
                     int ld, const RopeRows& rope) {
  const T root = T(std::sqrt(double(hd)));
  if (rope.table) check_rope(*rope.table, rope.pos0 + rope.T);
  // dtemp[h] = sum over rows of root * (g . x / n): reduce per head after the row loop.
  std::vector<T> dt_rows(dtemp ? size_t(N) * H : 0);
  const int half = rope.table ? rope.table->rot / 2 : 0;
  ZAYA_CHECK(!half || hd <= 2 * kRopeMaxHalf, "l2norm+RoPE: head dim ", hd, ", at most ", 2 * kRopeMaxHalf);
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    T c[kRopeMaxHalf], sn[kRopeMaxHalf], gbuf[2 * kRopeMaxHalf];  // gbuf: one head's dy, rotated back
    if (half) rope_row(c, sn, *rope.table, rope.pos0 + i % rope.T, -1.0);
    for (int h = 0; h < H; ++h) {
      const T* xv = x + size_t(i) * ld + size_t(h) * hd;
      const T* gv = dy + size_t(i) * ld + size_t(h) * hd;
      if (half) {  // the rotation is orthogonal: its backward rotates by the opposite angle
        std::copy_n(gv, hd, gbuf);
        rope_rotate(gbuf, c, sn, half);
        gv = gbuf;
      }
      T* dv = dx + size_t(i) * ld + size_t(h) * hd;
      const T n = norms[size_t(i) * H + h];
      const T tv = temp ? temp[h] : T(1);
      T gx = 0;
#pragma omp simd reduction(+ : gx)
      for (int d = 0; d < hd; ++d) gx += gv[d] * xv[d];
      gx /= n;  // g . xhat
      // y = root*t * xhat;  dx = root*t/n * (g - (g.xhat) xhat)   (norm clamp ignored: n > 1e-12)
      const T s = root * tv / n;
#pragma omp simd
      for (int d = 0; d < hd; ++d) dv[d] += s * (gv[d] - gx * xv[d] / n);
      if (dtemp) dt_rows[size_t(i) * H + h] = root * gx;
    }
  });
  if (dtemp)
    for (int h = 0; h < H; ++h) {
      T acc = 0;
      for (int i = 0; i < N; ++i) acc += dt_rows[size_t(i) * H + h];
      dtemp[h] += acc;
    }
}

void RopeTable::build(int rot_dim, int max_positions, double rope_theta) {
  if (rot == rot_dim && max_pos >= max_positions && theta == rope_theta) return;
  rot = rot_dim;
  max_pos = max_positions;
  theta = rope_theta;
  const int half = rot / 2;
  cos_.assign(size_t(max_pos) * half, 0);
  sin_.assign(size_t(max_pos) * half, 0);
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      double inv_freq = std::pow(theta, -2.0 * i / rot);
      double a = p * inv_freq;
      cos_[size_t(p) * half + i] = std::cos(a);
      sin_[size_t(p) * half + i] = std::sin(a);
    }
}

template <class T>
static void rope_apply(T* x, const RopeTable& rt, int N, int T_, int pos0, int H, int hd, int ld, double sign) {
  check_rope(rt, pos0 + T_);
  parallel_for(N, [&](int64_t i_) {
    const int i = int(i_);
    T c[kRopeMaxHalf], s[kRopeMaxHalf];
    const int half = rope_row(c, s, rt, pos0 + i % T_, sign);
    for (int h = 0; h < H; ++h) rope_rotate(x + size_t(i) * ld + size_t(h) * hd, c, s, half);
  });
}

template <class T>
void rope_forward(T* x, const RopeTable& rt, int N, int T_, int pos0, int H, int hd, int ld) {
  rope_apply(x, rt, N, T_, pos0, H, hd, ld, 1.0);
}

// The rotation is orthogonal: its backward is the rotation by the opposite angle.
template <class T>
void rope_backward(T* dx, const RopeTable& rt, int N, int T_, int pos0, int H, int hd, int ld) {
  rope_apply(dx, rt, N, T_, pos0, H, hd, ld, -1.0);
}

#define ZAYA_INST(T)                                                                           \
  template void bias_gelu_forward<T>(T*, T*, const T*, int, int);                              \
  template void gelu_backward<T>(T*, const T*, const T*, size_t);                              \
  template void swiglu_forward<T>(T*, const T*, int, int, bf16*);                                     \
  template void swiglu_backward<T>(T*, const T*, const T*, int, int, bf16*);                          \
  template void softmax_forward<T>(T*, const T*, int, int);                                    \
  template void softmax_backward<T>(T*, const T*, const T*, int, int);                         \
  template void l2norm_forward<T>(T*, T*, const T*, const T*, int, int, int, int, const RopeRows&); \
  template void l2norm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int, int, int, int,  \
                                   const RopeRows&);                                                    \
  template void rope_forward<T>(T*, const RopeTable&, int, int, int, int, int, int);           \
  template void rope_backward<T>(T*, const RopeTable&, int, int, int, int, int, int);
ZAYA_INST(float)
ZAYA_INST(double)

}  // namespace zaya
