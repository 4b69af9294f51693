// Pointwise and row-wise kernels: GELU, SwiGLU, softmax, scaled L2 normalisation, partial
// NeoX RoPE. Backward functions ACCUMULATE (+=) into gradients (see norm.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/bf16.h"

namespace zaya {

// y = x + b (row bias, nullable) then exact erf GELU, in place over [N, D]; pre-activation saved in `pre`.
template <class T>
void bias_gelu_forward(T* y, T* pre, const T* b, int N, int D);
template <class T>
void gelu_backward(T* dpre, const T* dy, const T* pre, size_t n);  // dpre = dy * gelu'(pre) (overwrites)

// a[N, F/2] = silu(u[:, :F/2]) * u[:, F/2:]
template <class T>
// a16 (nullable): a in bf16 too; with a16, a may be null (only the bf16 copy is kept; float).
void swiglu_forward(T* a, const T* u, int N, int F, bf16* a16 = nullptr);
template <class T>
// Overwrites du, and du16 (nullable: du in bf16; with du16, du may be null; float).
void swiglu_backward(T* du, const T* da, const T* u, int N, int F, bf16* du16 = nullptr);

// Row softmax over [N, K], computed in at least fp32.
template <class T>
void softmax_forward(T* p, const T* z, int N, int K);
// dz = p * (dp - sum(p * dp)) (overwrites dz)
template <class T>
void softmax_backward(T* dz, const T* dp, const T* p, int N, int K);

// Partial NeoX RoPE on the first `rot` dims of each head of x [N, H, hd] (row stride ld).
// cos/sin tables [max_pos, rot/2].
struct RopeTable {
  int rot = 0, max_pos = 0;
  double theta = 0;
  std::vector<double> cos_, sin_;
  void build(int rot_dim, int max_positions, double rope_theta);
};
// Where rows sit: row i has position pos0 + i % T. table == nullptr: no rotation.
struct RopeRows {
  const RopeTable* table = nullptr;
  int T = 1, pos0 = 0;
};

// y = scale_h * x / max(||x||, 1e-12) per head vector of hd values; x [N, H, hd] with row
// stride ld (elements) for x and y. scale_h = sqrt(hd) * (temp ? temp[h] : 1). norms [N, H]
// saved. With rope.table, y is then rotated in the same pass (CCA's q/k: normalise, rotate).
template <class T>
void l2norm_forward(T* y, T* norms, const T* x, const T* temp, int N, int H, int hd, int ld, const RopeRows& rope = {});
// dx += ..., dtemp += ... (dtemp nullable); dy is the gradient of the (rotated, with
// rope.table) output: it is rotated back per head vector on the way, dy left unchanged.
template <class T>
void l2norm_backward(T* dx, T* dtemp, const T* dy, const T* x, const T* norms, const T* temp, int N, int H, int hd,
                     int ld, const RopeRows& rope = {});

// RoPE alone, in place: rows at positions pos0 + i % T_.
template <class T>
void rope_forward(T* x, const RopeTable& rt, int N, int T_, int pos0, int H, int hd, int ld);
template <class T>
void rope_backward(T* dx, const RopeTable& rt, int N, int T_, int pos0, int H, int hd, int ld);  // in place on dx

}  // namespace zaya
