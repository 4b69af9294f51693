// Row primitives of softmax-shaped work in fp32 (cross-entropy over the vocabulary,
// attention probabilities): AVX-512 with glibc's vector expf (libmvec) where the CPU has
// AVX-512F, a portable loop otherwise. GCC does not vectorise std::exp without -ffast-math,
// and a scalar expf per logit was ~30 ms of a zaya1-small step's cross-entropy.
// libmvec's expf is within 4 ulp of the correctly rounded value (glibc's documentation).
#pragma once

namespace zaya {

float row_max(const float* x, int n);                // -inf for n == 0
float row_sum_exp(const float* x, int n, float shift);  // sum_i exp(x_i - shift)
// y_i = exp(x_i - shift) * scale; y may alias x.
void row_exp_scale(float* y, const float* x, int n, float shift, float scale);

// Tests: run the portable loops even where AVX-512 is available.
void vec_math_force_portable(bool on);

}  // namespace zaya
