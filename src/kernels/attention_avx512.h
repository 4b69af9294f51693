// AVX-512 form of attention_forward_group for float (decode): see attention_avx512.cpp.
#pragma once
#include "kernels/attention.h"

namespace zaya {

// Whether attention_group_avx512 runs for this shape on this CPU (AVX-512F, hd % 16 == 0).
bool attention_group_avx512_ok(const AttnShape& s);
// The (batch row b, KV head g) task of attention_forward_group, same contract (scratch:
// G * Tk floats); the caller checks attention_group_avx512_ok first.
void attention_group_avx512(float* out, float* lse, const float* q, const float* k, const float* v, const AttnShape& s,
                            int b, int g, float* scratch);
// Tests: run the portable loop even where AVX-512 is available.
void attention_group_force_portable(bool on);

}  // namespace zaya
