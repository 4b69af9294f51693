// Causal attention of training and prefill (attention.h's contract) on our own register tiles:
// fp32 8 x 32 on AVX-512 (kernels/avx512_tile.h), 6 x 16 on AVX2 (kernels/avx2_tile.h), and for
// bf16 training 8 x 32 on AVX512-BF16 (attention_bf16_tiles_on, below). The
// per-block products (attention.cpp) pack both operands on every call, and at these sizes
// (64-row blocks, head dim 64) packing is a large part of the work; here only the B side of each
// product is packed, into panels of the tile's width (K^T, V^T, K and V once per (batch, KV
// head), Q and dO once per block), and A is read where it lies:
//   - A's elements are broadcast at any two strides, so Q K^T, P V and dS K read Q, P and dS in
//     place, and P^T dO and dS^T Q read P and dS down their columns;
//   - the causal triangle is skipped per tile, not per 64-row block: a tile's scores stop at its
//     last row's last key, its P V and dS K sums at that key, and its rows of P^T dO and dS^T Q
//     start at the first query that sees the tile's keys;
//   - softmax, its statistics (lse) and the probabilities are the per-block path's (vec_math.h).
// attention_forward/backward<float> come here when attention_tiles_on(s).
#pragma once
#include "kernels/attention.h"
#include "kernels/kernel_tier.h"

namespace zaya {

// The tiles that run s, or nullptr (the per-block products): AVX-512 where the CPU has AVX-512F
// and hd % 16 == 0; AVX2 where it has AVX2 with FMA and no AVX-512 (there the per-block products
// are OpenBLAS's AVX2 kernels; with AVX-512 they are our 16-lane GEMM, faster than 8-lane tiles)
// and hd % 8 == 0. A cap (attention_tiles_force) holds a process at the AVX2 tiles (Avx2, also
// on an AVX-512 CPU) or at the per-block products (Portable), for tests and benches.
const char* attention_tiles_name(const AttnShape& s);
inline bool attention_tiles_on(const AttnShape& s) { return attention_tiles_name(s) != nullptr; }
void attention_tiles_force(KernelTier k);

// bf16 training (attention_bf16.h) on the AVX512-BF16 form of the 8 x 32 tile: where the bf16
// products run on the AVX512-BF16 kernel (not AMX), hd % 16 == 0, and no cap is set (Auto).
// The same plan in pairs of the inner dimension; operands rounded to bf16 as they are packed,
// P and dS also interleaved by query pairs for P^T dO and dS^T Q.
bool attention_bf16_tiles_on(const AttnShape& s);
void attention_forward_bf16_tiles(float* out, float* lse, const float* q, const float* k, const float* v,
                                  const AttnShape& s);
void attention_backward_bf16_tiles(float* dq, float* dk, float* dv, const float* dout, const float* out,
                                   const float* lse, const float* q, const float* k, const float* v,
                                   const AttnShape& s);

void attention_forward_tiles(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttnShape& s);
// Accumulates into dq, dk, dv.
void attention_backward_tiles(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                              const float* q, const float* k, const float* v, const AttnShape& s);

}  // namespace zaya
