// CCA attention sub-layer (spec section 3): cca_forward / cca_backward over x [B*T, D].
#pragma once
#include <vector>

#include "kernels/activations.h"
#include "model/params.h"

namespace zaya {

// What backward needs, per attention sub-layer, sized once per (B, T).
template <class T>
struct CcaSaved {
  std::vector<T> p_NC;          // packed pre-conv q0|k0 [N, C]
  std::vector<T> y0_tall;       // depthwise conv output [B*(T+K1-1), C]
  std::vector<T> conv_tall;     // grouped conv output [B*(T+K1-1), C]
  std::vector<T> qk_pre_NC;     // q|k after the q-k mean, before normalisation [N, C]
  std::vector<T> qk_NC;         // q|k normalised and rotated [N, C]
  std::vector<T> norms_NH;      // L2 norms [N, Hq+Hk]
  std::vector<T> v_NV;          // values [N, Hk*hd]
  std::vector<T> attn_NQ;       // attention output [N, Hq*hd]
  std::vector<T> lse_BHT;       // softmax log-sum-exp [B, Hq, T]
  void resize(const ModelConfig& c, int B, int T_);
};

// Scratch shared by all attention sub-layers (forward and backward).
template <class T>
struct CcaScratch {
  std::vector<T> w1p, dw1p, attn;                       // packed conv weights, attention [T,T] tiles
  std::vector<T> d_attn_NQ, dqk_NC, dqk_pre_NC, dp_NC, dv_NV, dconv_tall, dy0_tall;
  void resize(const ModelConfig& c, int B, int T_);
};

// Decode state of one attention sub-layer (spec section 3, "Decode"): the KV cache (post-
// RoPE k and v), the last P pre-conv packed vectors, and the previous token's x. A forward
// given a cache continues the sequence after cache.len tokens and appends to it. The same
// three pieces are what a context-parallel shard receives from its predecessor.
template <class T>
struct CcaCache {
  int B = 0, capacity = 0, len = 0;
  std::vector<T> p_tail_BPC;  // [B, P, C]
  std::vector<T> x_prev_BD;   // [B, D]
  std::vector<T> k_BSK, v_BSK;  // [B, capacity, Hk*hd]
  void init(const ModelConfig& c, int batch, int max_len);
};

struct CcaDims {
  int B, T, pos0;  // pos0: position of the first token (sequence shards)
};

template <class T>
void cca_forward(T* out_ND, const T* x_ND, const T* W, const CcaOffsets& o, const ModelConfig& c, const CcaDims& d,
                 const RopeTable& rope, CcaSaved<T>& s, CcaScratch<T>& k, CcaCache<T>* cache = nullptr);
// Accumulates into dx_ND and into the parameter gradients dW (same layout as W).
template <class T>
void cca_backward(T* dx_ND, T* dW, const T* dout_ND, const T* x_ND, const T* W, const CcaOffsets& o,
                  const ModelConfig& c, const CcaDims& d, const RopeTable& rope, const CcaSaved<T>& s,
                  CcaScratch<T>& k);

}  // namespace zaya
