// Vector forms of attention_forward_group (decode) over a float or a bf16 KV cache: AVX-512
// (attention_avx512.cpp) and AVX2 (attention_avx2.cpp), the same scheme in 16 and 8 lanes.
// attention_forward_group and attention_group_kv_bf16 run the best the CPU has for the shape,
// their portable loops otherwise.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/bf16.h"
#include "kernels/attention.h"
#include "kernels/kernel_tier.h"

namespace zaya {

// The longest head a bf16 cache's kernel takes (16 widened K rows live on its stack).
constexpr int kAttnBf16MaxHd = 512;
// Whether attention_group_avx512 runs for this shape on this CPU (AVX-512F, hd % 16 == 0;
// with a bf16 cache also hd <= kAttnBf16MaxHd), and attention_group_avx2 (AVX2 and FMA,
// hd % 8 == 0, the same bound), as far as attention_group_force allows.
bool attention_group_avx512_ok(const AttnShape& s);
inline bool attention_group_avx512_ok_bf16(const AttnShape& s) {
  return s.hd <= kAttnBf16MaxHd && attention_group_avx512_ok(s);
}
bool attention_group_avx2_ok(const AttnShape& s);
inline bool attention_group_avx2_ok_bf16(const AttnShape& s) {
  return s.hd <= kAttnBf16MaxHd && attention_group_avx2_ok(s);
}
// The kernel the group task runs for this shape: "avx512", "avx2" or "portable".
const char* attention_group_kernel(const AttnShape& s, bool bf16_cache);
// The (batch row b, KV head g) task of attention_forward_group, same contract (scratch:
// G * Tk floats); the caller checks attention_group_avx512_ok(_bf16) first. A bf16 cache's
// rows are widened exactly as they are read: the same sums as the float kernel over the
// widened cache.
void attention_group_avx512(float* out, float* lse, const float* q, const float* k, const float* v, const AttnShape& s,
                            int b, int g, float* scratch);
void attention_group_avx512(float* out, float* lse, const float* q, const bf16* k, const bf16* v, const AttnShape& s,
                            int b, int g, float* scratch);
void attention_group_avx2(float* out, float* lse, const float* q, const float* k, const float* v, const AttnShape& s,
                          int b, int g, float* scratch);
void attention_group_avx2(float* out, float* lse, const float* q, const bf16* k, const bf16* v, const AttnShape& s,
                          int b, int g, float* scratch);
// Tests and benches: cap the tier for the whole process (kernels/kernel_tier.h).
void attention_group_force(KernelTier k);

// The vector forms' driver for one (batch row b, KV head g) task: per query row, the scores
// of its visible keys for the G heads, their softmax (the log-sum-exp into lse) and the values,
// each by the form's own kernel.
template <class T, class Scores, class Softmax, class Values>
void attention_group_rows(float* out, float* lse, const float* q, const T* k, const T* v, const AttnShape& s, int b,
                          int g, float* S, Scores scores, Softmax softmax_row, Values values) {
  const int G = s.Hq / s.Hk, hd = s.hd;
  const float scale = 1.f / std::sqrt(float(hd));
  const T* kb = k + s.kv_offset(b, g, s.ldk);
  const T* vb = v + s.kv_offset(b, g, s.ldv);
  for (int t = 0; t < s.Tq; ++t) {
    const float* qg = q + (size_t(b) * s.Tq + t) * s.ldq + size_t(g) * G * hd;
    float* og = out + (size_t(b) * s.Tq + t) * s.ldo + size_t(g) * G * hd;
    const int n = std::min(s.Tk - 1, s.q_pos0 + t) + 1;  // visible keys
    scores(S, s.Tk, qg, kb, s.ldk, hd, G, n, scale);
    for (int j = 0; j < G; ++j)
      lse[(size_t(b) * s.Hq + size_t(g) * G + j) * s.Tq + t] = softmax_row(S + size_t(j) * s.Tk, n);
    values(og, S, s.Tk, vb, s.ldv, hd, G, n);
  }
}

// Decode reads cached K/V rows of hd elements one after another; the hardware prefetchers
// do not run far enough ahead of such short reads (at 512 cached positions decode waited
// on them more than on the math), so both forms prefetch the row kAttnPrefetchRows ahead.
// Prefetches never fault (past the end included).
constexpr int kAttnPrefetchRows = 8;
template <class T>
inline void prefetch_row(const T* p, int n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t off = 0; off < sizeof(T) * size_t(n); off += 64) __builtin_prefetch(c + off);
}

}  // namespace zaya
