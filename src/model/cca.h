// CCA attention sub-layer (spec section 3): cca_forward / cca_backward over x [B*T, D].
#pragma once
#include <vector>

#include "kernels/activations.h"
#include "kernels/attention.h"
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
  // Context parallel only: the previous shard's halo and the gathered K/V of shards <= this.
  std::vector<T> halo_BPC, x_prev_BD, k_all_BSK, v_all_BSK;
  void resize(const ModelConfig& c, int B, int T_);
};

// Scratch shared by all attention sub-layers (forward and backward).
template <class T>
struct CcaScratch {
  std::vector<T> w1p, dw1p, attn;                       // packed conv weights, attention [T,T] tiles
  std::vector<T> d_attn_NQ, dqk_NC, dqk_pre_NC, dp_NC, dv_NV, dconv_tall, dy0_tall;
  std::vector<T> dvproj_NV;  // gradient of [val_proj1 x_t | val_proj2 x_t] (the shift undone)
  std::vector<T> dk_all_BSK, dv_all_BSK, dk_NK, dhalo_BPC, dx_prev_BD;  // context parallel
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
  std::vector<T> k_BGSd, v_BGSd;  // [B, Hk, capacity, hd]: head-major (AttnShape::kv_head_major)
  // The attention shape over the cache for `n` new query rows (len: the rows cached before).
  AttnShape attn_shape(const ModelConfig& c, int n) const;
  void init(const ModelConfig& c, int batch, int max_len);
};

// The sequence-shard seam (context parallel). This process holds positions
// [index()*T, (index()+1)*T) of every sequence; attention needs the K/V of every earlier
// shard, and the convolution and the value shift the last P pre-conv vectors and the last x
// of the previous shard. The model knows nothing of how they travel (parallel/context_parallel.h
// moves them over MPI); with no shard (or count() == 1) the sequence is whole.
template <class T>
class SeqShard {
 public:
  virtual ~SeqShard() = default;
  virtual int index() const = 0;
  virtual int count() const = 0;
  // Forward. Sends this shard's last P rows of p [B*T, C] and last row of x [B*T, D] (per
  // batch row) to the next shard; fills halo_BPC / x_prev_BD with the previous shard's
  // (zeros on the first shard: exactly the unsplit sequence's padding).
  virtual void halo(const T* p_NC, const T* x_ND, int B, int T_, int C, int P, int D, T* halo_BPC, T* x_prev_BD) = 0;
  // Forward. k [B*T, KD] (row stride ldk) and v [B*T, KD] of shards 0..index() into
  // k_all / v_all [B, (index()+1)*T, KD].
  virtual void gather_kv(const T* k, int ldk, const T* v, int B, int T_, int KD, T* k_all, T* v_all) = 0;
  // Backward. dk_all / dv_all [B, (index()+1)*T, KD] from every shard -> this shard's rows
  // summed over all shards, dk / dv [B*T, KD] (overwritten).
  virtual void reduce_kv_grads(const T* dk_all, const T* dv_all, int B, int T_, int KD, T* dk, T* dv) = 0;
  // Backward. Sends dhalo_BPC / dx_prev_BD to the previous shard; adds the next shard's into
  // this shard's last P rows of dp [B*T, C] and last row of dx [B*T, D] (per batch row).
  virtual void halo_grads(const T* dhalo_BPC, const T* dx_prev_BD, int B, int T_, int C, int P, int D, T* dp_NC,
                          T* dx_ND) = 0;
};

struct CcaDims {
  int B, T, pos0;  // pos0: position of the first token (sequence shards)
};

// Steps of cca_forward that the in-place inference path (model/infer.cpp) runs as they are,
// between its own products, over its own cache element type. Rows are b * d.T + t; row_pos0
// (nullable) gives each batch row its own first position (inference's rows at different
// positions), else every row starts at d.pos0.
// A part (b >= 0) restricts the next three to batch row b's rows and KV head g with its query
// heads: decode runs each (row, KV head) as one task of its team, beside that pair's attention.
struct CcaPart {
  int b = -1, g = 0;
};
// 3. The q-k mean: qk_pre [N, C] from the conv output (tall layout) and p [N, C].
template <class T>
void cca_qk_mean(T* qk_pre_NC, const T* conv_tall, const T* p_NC, const ModelConfig& c, const CcaDims& d,
                 CcaPart part = {});
// 5. L2 normalisation (k with its per-head temperature `temp`), 6. partial RoPE: qk [N, C]
// and the norms [N, Hq+Hk] from qk_pre (a part: its own [T, G + 1] block of norms, at
// (b Hk + g) T (G + 1)).
template <class T>
void cca_qk_norm_rope(T* qk_NC, T* norms_NH, const T* qk_pre_NC, const T* temp, const RopeTable& rope,
                      const ModelConfig& c, const CcaDims& d, const int* row_pos0 = nullptr, CcaPart part = {});
// The decode cache's K and V: k (row stride ldk) and v [N, KD] into head-major [B, Hk,
// capacity, hd] arrays at each row's positions. KV is T, or bf16 (rounded; T = float).
template <class T, class KV>
void cca_kv_append(KV* k_BGSd, KV* v_BGSd, int capacity, const ModelConfig& c, const CcaDims& d, const T* k_new,
                   int ldk, const T* v, const int* row_pos0 = nullptr, CcaPart part = {});
// The rest of the decode state: the last P pre-conv vectors p and the last x of every row.
template <class T>
void cca_tail_append(CcaCache<T>& cache, const ModelConfig& c, const CcaDims& d, const T* p, const T* x);
// Both, at cache.len (len not advanced): k with row stride C.
template <class T>
void cca_cache_append(CcaCache<T>& cache, const ModelConfig& c, const CcaDims& d, const T* k_new, const T* v,
                      const T* p, const T* x);

// x16_ND (T = float, bf16 products; nullable): x kept only in bf16, x_ND then nullptr. x feeds
// nothing but the projections' products (forward and weight gradients), which read it as
// stored; not with a decode cache or a sequence shard (they keep x's rows in fp32).
template <class T>
void cca_forward(T* out_ND, const T* x_ND, const T* W, const CcaOffsets& o, const ModelConfig& c, const CcaDims& d,
                 const RopeTable& rope, CcaSaved<T>& s, CcaScratch<T>& k, CcaCache<T>* cache = nullptr,
                 SeqShard<T>* shard = nullptr, const bf16* x16_ND = nullptr);
// Writes dx_ND (overwrites: its first product stores rather than adds) and accumulates into
// the parameter gradients dW (same layout as W). x16_ND: as cca_forward's.
template <class T>
void cca_backward(T* dx_ND, T* dW, const T* dout_ND, const T* x_ND, const T* W, const CcaOffsets& o,
                  const ModelConfig& c, const CcaDims& d, const RopeTable& rope, const CcaSaved<T>& s,
                  CcaScratch<T>& k, SeqShard<T>* shard = nullptr, const bf16* x16_ND = nullptr);

}  // namespace zaya
