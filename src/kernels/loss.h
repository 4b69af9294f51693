// Cross-entropy over the vocabulary with an ignore index, from logits [N, V].
#pragma once
#include <cstdint>

namespace zaya {

constexpr int32_t kIgnoreIndex = -100;

// Returns the SUM of -log p(target) over rows whose target != kIgnoreIndex and sets
// *count to their number. lse[N] (log-sum-exp per row) is saved for backward; logprob[N]
// (nullable) receives log p(target) (0 for ignored rows).
template <class T>
double cross_entropy_forward(T* lse, T* logprob, const T* logits, const int32_t* targets, int N, int V, int* count);
// dlogits = (softmax - onehot) * scale for counted rows, 0 for ignored ones. May alias logits.
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets, int N, int V, T scale);

// The same gradient rounded to bf16, written in place: row i's bf16 values occupy the first
// half of logits row i's bytes, so the result is a bf16 [N, V] matrix with leading dimension
// 2V at (bf16*)logits, for the bf16 LM-head products to read as stored (no fp32 dlogits
// written and no second rounding per product; no memory beyond the logits). The values are
// exactly those of cross_entropy_backward rounded to bf16.
void cross_entropy_backward_bf16_inplace(float* logits, const float* lse, const int32_t* targets, int N, int V,
                                         float scale);

}  // namespace zaya
