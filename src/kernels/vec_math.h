// Row primitives of softmax-shaped work in fp32 (cross-entropy over the vocabulary,
// attention probabilities): AVX-512 with glibc's vector expf (libmvec) where the CPU has
// AVX-512F, AVX2 (libmvec's 8-lane expf) where it has AVX2, a portable loop otherwise. GCC does not vectorise std::exp without -ffast-math,
// and a scalar expf per logit was ~30 ms of a zaya1-small step's cross-entropy.
// libmvec's expf is within 4 ulp of the correctly rounded value (glibc's documentation).
#pragma once
#include "kernels/kernel_tier.h"

namespace zaya {

float row_max(const float* x, int n);                // -inf for n == 0
float row_sum_exp(const float* x, int n, float shift);  // sum_i exp(x_i - shift)
// y_i = exp(x_i - shift), returning row_sum_exp's sum (the same value): one exponential per
// element where row_sum_exp + row_exp_scale compute two. y may alias x.
float row_exp_sum(float* y, const float* x, int n, float shift);
// row[0, n) <- softmax(row[0, n)) in place (one exponential per element), returning the
// log-sum-exp.
float row_softmax(float* row, int n);
// y_i = exp(x_i - shift) * scale; y may alias x.
void row_exp_scale(float* y, const float* x, int n, float shift, float scale);

// SwiGLU over one row: a_i = g_i / (1 + exp(-g_i)) * u_i, and its backward (overwrites dg,
// du): s = 1 / (1 + exp(-g)), dg = da u s (1 + g (1 - s)), du = da g s. The scalar loops
// left std::exp unvectorised: ~40% of the experts' elementwise time.
void swiglu_row(float* a, const float* g, const float* u, int n);
void swiglu_row_backward(float* dg, float* du, const float* da, const float* g, const float* u, int n);

// Exact (erf) GELU over one row: y_i = 0.5 x_i (1 + erf(x_i / sqrt 2)); the gradient row
// dx_i = dy_i (cdf_i + x_i pdf_i) (dx may alias dy). libmvec's erff where there is AVX-512 or AVX2.
void gelu_row(float* y, const float* x, int n);
void gelu_grad_row(float* dx, const float* dy, const float* x, int n);

// Tests: cap the tier for the whole process (kernels/kernel_tier.h).
void vec_math_force(KernelTier k);

}  // namespace zaya
