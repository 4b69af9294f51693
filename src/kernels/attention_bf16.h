// Causal attention of training and prefill (attention.h's contract) with its products in
// bf16 on our bf16 kernels (AMX, gemm_amx.h; else AVX512-BF16, gemm_avx512.h), for bf16 training:
//   - queries in blocks of attn_row_block(s) rows, each multiplied only against the keys it sees
//     (the causal half is skipped, not masked: about half of the products' work);
//   - Q, K, V and dO rounded to bf16 once per head, the probabilities and dS once per block;
//     softmax, its statistics (lse) and every sum stay fp32, as in FlashAttention's bf16 mode.
// attention_forward/backward<float> come here when attention_bf16_on().
#pragma once
#include "kernels/attention.h"

namespace zaya {


// bf16 products selected (gemm_settings().precision) and resolved to one of our kernels (AMX
// or AVX512-BF16).
bool attention_bf16_on();

void attention_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v,
                            const AttnShape& s);
// Accumulates into dq, dk, dv.
void attention_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                             const float* q, const float* k, const float* v, const AttnShape& s);

}  // namespace zaya
