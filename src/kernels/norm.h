// RMSNorm, the ZAYA1 residual-scaling merge and the token embedding, each a forward /
// backward pair over rows of width D. Convention (as llm.c): backward functions ACCUMULATE
// (+=) into input gradients and parameter gradients; callers zero them once per step.
#pragma once
#include <cstdint>

#include "core/bf16.h"

namespace zaya {

// out[N,D] = w * x / sqrt(mean(x^2) + eps); rstd[N] saved for backward. out16 (nullable):
// the same rows rounded to bf16 in the same pass (the bf16 products' copy, kernels/gemm.h).
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int N, int D, double eps, bf16* out16 = nullptr);
template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int N, int D);

// Residual-scaling merge (spec section 2): res_out = (h + hb) * hs [+ (res + rb) * rs].
// res == nullptr: the first sub-layer (res_out = scaled h). hs == nullptr: no scaling,
// res_out = h + res.
template <class T>
void res_merge_forward(T* res_out, const T* h, const T* res, const T* hs, const T* hb, const T* rs, const T* rb,
                       int N, int D);
// Gradients: dh, dres (nullable when res was null), dhs, dhb, drs, drb (nullable when unscaled).
template <class T>
void res_merge_backward(T* dh, T* dres, T* dhs, T* dhb, T* drs, T* drb, const T* dout, const T* h, const T* res,
                        const T* hs, const T* hb, const T* rs, const T* rb, int N, int D);

// A sub-layer's entry, fused: res_out = res_merge(h, res) and out = rmsnorm(res_out) in one
// pass over each row (the same values as res_merge_forward then rmsnorm_forward; res_out may
// alias res, as decode merges in place). Arguments as those two functions'; out16 as
// rmsnorm_forward's; out may be nullptr where out16 is given (the output kept only in bf16).
template <class T>
void merge_norm_forward(T* res_out, T* out, T* rstd, const T* h, const T* res, const T* hs, const T* hb, const T* rs,
                        const T* rb, const T* w, int N, int D, double eps, bf16* out16 = nullptr);

// The backward of a sub-layer's entry, fused: res = res_merge(h, r) then x = rmsnorm(res).
// From dx (gradient of x) and dres (nullable: the gradient reaching res from the layers
// above), one pass over the rows OVERWRITES dh and dr (dr nullable when r was null) with
// the gradients of h and r, and ACCUMULATES dw and dhs/dhb/drs/drb (nullable as in
// res_merge_backward). res and rstd are the forward's. Column sums go through per-thread
// partials reduced in thread order (the same result for the same thread count). It reads
// each row once where rmsnorm_backward + res_merge_backward made six passes.
template <class T>
void merge_norm_backward(T* dh, T* dr, T* dw, T* dhs, T* dhb, T* drs, T* drb, const T* dx, const T* dres,
                         const T* res, const T* w, const T* rstd, const T* h, const T* r, const T* hs, const T* hb,
                         const T* rs, const T* rb, int N, int D);

// out[N,D] = table[ids[i]].
template <class T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int N, int D);
template <class T>
void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int N, int D);

// dst[D] += sum_i a[i,D] * (b ? b[i,D] : 1)  (column reduction used by every dparam)
template <class T>
void colsum_product(T* dst, const T* a, const T* b, int N, int D, int lda, int ldb);

}  // namespace zaya
