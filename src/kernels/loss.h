// Cross-entropy over the vocabulary with an ignore index, from logits [N, V].
#pragma once
#include <cstdint>

#include "core/bf16.h"

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

// bf16 logits (bf16 products): the LM head's output rounded to bf16 and kept only so, as
// PyTorch's autocast leaves it; the loss is that of the rounded logits. Forward: the same
// values as cross_entropy_forward over the logits widened to fp32. Backward: the values of
// cross_entropy_backward over the widened logits, each rounded to bf16, written over the
// logits: dlogits [N, V] in bf16, which the bf16 LM-head products read as stored.
double cross_entropy_forward_bf16(float* lse, const bf16* logits, const int32_t* targets, int N, int V, int* count);
void cross_entropy_backward_bf16(bf16* logits, const float* lse, const int32_t* targets, int N, int V, float scale);

}  // namespace zaya
