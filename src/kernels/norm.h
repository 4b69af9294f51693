// RMSNorm, the ZAYA1 residual-scaling merge and the token embedding, each a forward /
// backward pair over rows of width D. Convention (as llm.c): backward functions ACCUMULATE
// (+=) into input gradients and parameter gradients; callers zero them once per step.
#pragma once
#include <cstdint>

namespace zaya {

// out[N,D] = w * x / sqrt(mean(x^2) + eps); rstd[N] saved for backward.
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int N, int D, double eps);
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

// out[N,D] = table[ids[i]].
template <class T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int N, int D);
template <class T>
void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int N, int D);

// dst[D] += sum_i a[i,D] * (b ? b[i,D] : 1)  (column reduction used by every dparam)
template <class T>
void colsum_product(T* dst, const T* a, const T* b, int N, int D, int lda, int ldb);

}  // namespace zaya
