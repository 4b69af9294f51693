// Causal attention of training and prefill (attention.h's contract) in fp32 on our own AVX2
// register tiles, for CPUs whose fp32 products are OpenBLAS's without AVX-512 (AMD Zen 2/3,
// Intel client cores). The per-block OpenBLAS products (attention.cpp) pack both operands on
// every call, and at these sizes (64-row blocks, head dim 64) packing is a large part of the
// work; here only the B side of each product is packed, into 16-column panels (K^T, V^T, K and V
// once per (batch, KV head), Q and dO once per block), and A is read where it lies:
//   - every product is a 6 x 16 tile (kernels/avx2_tile.h), A's elements broadcast at any two
//     strides, so Q K^T, P V and dS K read Q, P and dS in place, and P^T dO and dS^T Q read P
//     and dS down their columns;
//   - the causal triangle is skipped per 6-row tile, not per 64-row block: a tile's scores stop
//     at its last row's last key, its P V and dS K sums at that key, and its rows of P^T dO and
//     dS^T Q start at the first query that sees the tile's keys;
//   - softmax, its statistics (lse) and the probabilities are the BLAS path's (vec_math.h).
// attention_forward/backward<float> come here when attention_avx2_train_on(s).
#pragma once
#include "kernels/attention.h"
#include "kernels/kernel_tier.h"

namespace zaya {

// AVX2 and FMA without AVX-512F (where OpenBLAS's 16-lane kernels would be the peer, not
// measured against these tiles), hd % 8 == 0, and not capped by attention_avx2_train_force.
bool attention_avx2_train_on(const AttnShape& s);
// Tests and benches: Portable holds the process on the per-block BLAS path.
void attention_avx2_train_force(KernelTier k);

void attention_forward_avx2(float* out, float* lse, const float* q, const float* k, const float* v,
                            const AttnShape& s);
// Accumulates into dq, dk, dv.
void attention_backward_avx2(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                             const float* q, const float* k, const float* v, const AttnShape& s);

}  // namespace zaya
