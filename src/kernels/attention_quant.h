// Decode attention over a bf16 KV cache (the in-place decoder's default cache): the same
// contract as attention_forward_group (kernels/attention.h) with K and V stored as bf16,
// widened to fp32 as they are read; scores, softmax and sums in fp32 (AVX-512 where the CPU
// or AVX2 has it: kernels/attention_group.h; a portable loop otherwise). Half the cache bytes
// per step (ZAYA1-base at 4,096 positions: ~170 MB read per token instead of ~340 MB).
#pragma once
#include "core/bf16.h"
#include "kernels/attention.h"

namespace zaya {

// One (batch row b, KV head g): its G = Hq/Hk query heads over keys [0, q_pos0 + t] for each
// query row t. k, v: head-major [B, Hk, kv_batch_rows, hd] (AttnShape::kv_offset), ld = hd.
// scratch: G * Tk floats.
void attention_group_kv_bf16(float* out, float* lse, const float* q, const bf16* k, const bf16* v, const AttnShape& s,
                             int b, int g, float* scratch);

// Rows [0, rows) of every (b, g) of a bf16 head-major cache of `cap` rows per (b, g), widened
// into an fp32 head-major array of `rows` rows per (b, g) (prefill runs the fp32 kernels on it).
void widen_kv_bf16(float* dst, const bf16* src, int B, int Hk, int cap, int rows, int hd);

}  // namespace zaya
