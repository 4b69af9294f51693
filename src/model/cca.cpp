// CCA forward and backward. Steps are numbered as in spec section 3.
#include "model/cca.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "core/bf16.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"

namespace zaya {

template <class T>
void CcaSaved<T>::resize(const ModelConfig& c, int B, int T_) {
  const size_t N = size_t(B) * T_, C = c.conv_channels(), tall = size_t(B) * (T_ + c.conv_kernel1 - 1) * C;
  p_NC.assign(N * C, 0);
  y0_tall.assign(tall, 0);
  conv_tall.assign(tall, 0);
  qk_pre_NC.assign(N * C, 0);
  qk_NC.assign(N * C, 0);
  norms_NH.assign(N * (c.num_q_heads + c.num_kv_heads), 0);
  v_NV.assign(N * c.num_kv_heads * c.head_dim, 0);
  attn_NQ.assign(N * c.num_q_heads * c.head_dim, 0);
  lse_BHT.assign(N * c.num_q_heads, 0);
}

template <class T>
void CcaCache<T>::init(const ModelConfig& c, int batch, int max_len) {
  B = batch;
  capacity = max_len;
  len = 0;
  const size_t KD = size_t(c.num_kv_heads) * c.head_dim;
  p_tail_BPC.assign(size_t(batch) * c.conv_pad() * c.conv_channels(), 0);
  x_prev_BD.assign(size_t(batch) * c.hidden_size, 0);
  k_BGSd.assign(size_t(batch) * max_len * KD, 0);
  v_BGSd.assign(size_t(batch) * max_len * KD, 0);
}

template <class T>
AttnShape CcaCache<T>::attn_shape(const ModelConfig& c, int n) const {
  const int hd = c.head_dim, QD = c.num_q_heads * hd;
  AttnShape as{B, n, len + n, len, c.num_q_heads, c.num_kv_heads, hd, c.conv_channels(), hd, hd, QD, capacity};
  as.kv_head_major = true;
  return as;
}

template <class T>
void CcaScratch<T>::resize(const ModelConfig& c, int B, int T_) {
  const size_t N = size_t(B) * T_, C = c.conv_channels(), tall = size_t(B) * (T_ + c.conv_kernel1 - 1) * C;
  w1p.assign(size_t(c.conv_kernel1) * C * c.head_dim, 0);
  dw1p.assign(w1p.size(), 0);
  AttnShape a{B, T_, T_, 0, c.num_q_heads, c.num_kv_heads, c.head_dim, 0, 0, 0, 0};
  attn.assign(a.scratch_elems(omp_get_max_threads()), 0);
  d_attn_NQ.assign(N * c.num_q_heads * c.head_dim, 0);
  dqk_NC.assign(N * C, 0);
  dqk_pre_NC.assign(N * C, 0);
  dp_NC.assign(N * C, 0);
  dv_NV.assign(N * c.num_kv_heads * c.head_dim, 0);
  dvproj_NV.assign(N * c.num_kv_heads * c.head_dim, 0);
  dconv_tall.assign(tall, 0);
  dy0_tall.assign(tall, 0);
}

namespace {
struct Dims {
  int N, D, hd, Hq, Hk, G, QD, KD, VH, C, Tr;
  Dims(const ModelConfig& c, const CcaDims& d)
      : N(d.B * d.T), D(c.hidden_size), hd(c.head_dim), Hq(c.num_q_heads), Hk(c.num_kv_heads), G(Hq / Hk),
        QD(Hq * hd), KD(Hk * hd), VH(KD / 2), C(c.conv_channels()), Tr(d.T + c.conv_kernel1 - 1) {}
};
}  // namespace

template <class T, class KV>
void cca_kv_append(KV* k_cache, KV* v_cache, int capacity, const ModelConfig& c, const CcaDims& d, const T* k_new,
                   int ldk, const T* v, const int* row_pos0, CcaPart part) {
  const int KD = c.num_kv_heads * c.head_dim;
  const size_t hd = size_t(c.head_dim);
  auto store = [&](const T* src, KV* dst) {
    if constexpr (std::is_same_v<KV, T>)
      std::memcpy(dst, src, sizeof(T) * hd);
    else
      convert_to_bf16(src, dst, hd);
  };
  const int b0 = part.b >= 0 ? part.b : 0, b1 = part.b >= 0 ? part.b + 1 : d.B;
  const int g0 = part.b >= 0 ? part.g : 0, g1 = part.b >= 0 ? part.g + 1 : c.num_kv_heads;
  for (int b = b0; b < b1; ++b) {
    const int pos0 = row_pos0 ? row_pos0[b] : d.pos0;
    for (int t = 0; t < d.T; ++t) {
      const size_t row = size_t(b) * d.T + t;
      for (int g = g0; g < g1; ++g) {  // head-major: [B, Hk, capacity, hd]
        const size_t at = ((size_t(b) * c.num_kv_heads + g) * size_t(capacity) + size_t(pos0 + t)) * hd;
        store(k_new + row * ldk + g * hd, k_cache + at);
        store(v + row * KD + g * hd, v_cache + at);
      }
    }
  }
}

template <class T>
void cca_tail_append(CcaCache<T>& cache, const ModelConfig& c, const CcaDims& d, const T* p, const T* x) {
  const int C = c.conv_channels(), P = c.conv_pad(), D = c.hidden_size;
  const int keep = std::max(P - d.T, 0);  // old tail rows that stay (at the front)
  for (int b = 0; b < d.B; ++b) {
    // New tail = last P rows of (old tail ++ this chunk's p), in place.
    T* tail = &cache.p_tail_BPC[size_t(b) * P * C];
    std::memmove(tail, tail + size_t(P - keep) * C, sizeof(T) * keep * C);
    std::memcpy(tail + size_t(keep) * C, p + (size_t(b) * d.T + d.T - (P - keep)) * C, sizeof(T) * (P - keep) * C);
    std::memcpy(&cache.x_prev_BD[size_t(b) * D], x + (size_t(b) * d.T + d.T - 1) * D, sizeof(T) * D);
  }
}

// len is advanced by the caller.
template <class T>
void cca_cache_append(CcaCache<T>& cache, const ModelConfig& c, const CcaDims& d, const T* k_new, const T* v,
                      const T* p, const T* x) {
  const CcaDims at{d.B, d.T, cache.len};
  cca_kv_append(cache.k_BGSd.data(), cache.v_BGSd.data(), cache.capacity, c, at, k_new, c.conv_channels(), v);
  cca_tail_append(cache, c, d, p, x);
}

// 3. q-k mean: q_j = c_j + (q0_j + k0_g)/2;  k_g = c_g + mean_j (q0_j + k0_g)/2. Row i, KV head g.
template <class T>
static void qk_mean_group(T* qk_pre, const T* conv_tall, const T* p, const Dims& z, int T_, int i, int g) {
  const T* cr = conv_tall + (size_t(i / T_) * z.Tr + i % T_) * z.C;
  const T* pr = p + size_t(i) * z.C;
  T* qr = qk_pre + size_t(i) * z.C;
  // Channel chunks of 64 innermost (unit stride, vectorised); each sum runs over j in order.
  for (int e0 = 0; e0 < z.hd; e0 += 64) {
    const int ne = std::min(64, z.hd - e0);
    const T* k0 = pr + z.QD + g * z.hd + e0;
    T mk[64] = {};
    for (int j = g * z.G; j < (g + 1) * z.G; ++j) {
      const T* pj = pr + j * z.hd + e0;
      const T* cj = cr + j * z.hd + e0;
      T* qj = qr + j * z.hd + e0;
      for (int e = 0; e < ne; ++e) {
        const T m = (pj[e] + k0[e]) * T(0.5);
        qj[e] = cj[e] + m;
        mk[e] += m;
      }
    }
    for (int e = 0; e < ne; ++e) qr[z.QD + g * z.hd + e0 + e] = cr[z.QD + g * z.hd + e0 + e] + mk[e] / T(z.G);
  }
}

template <class T>
void cca_qk_mean(T* qk_pre, const T* conv_tall, const T* p, const ModelConfig& c, const CcaDims& d, CcaPart part) {
  const Dims z(c, d);
  if (part.b >= 0) {
    for (int t = 0; t < d.T; ++t) qk_mean_group(qk_pre, conv_tall, p, z, d.T, part.b * d.T + t, part.g);
    return;
  }
  parallel_for(z.N, [&](int64_t i) {
    for (int g = 0; g < z.Hk; ++g) qk_mean_group(qk_pre, conv_tall, p, z, d.T, int(i), g);
  });
}

template <class T>
void cca_qk_norm_rope(T* qk, T* norms, const T* qk_pre, const T* temp, const RopeTable& rope, const ModelConfig& c,
                      const CcaDims& d, const int* row_pos0, CcaPart part) {
  const Dims z(c, d);
  if (part.b >= 0) {  // KV head g's query heads, then its key; the part's own block of norms
    const RopeRows at{&rope, d.T, row_pos0 ? row_pos0[part.b] : d.pos0};
    const size_t r = size_t(part.b) * d.T * z.C, q = size_t(part.g) * z.G * z.hd, k = z.QD + size_t(part.g) * z.hd;
    T* nq = norms + (size_t(part.b) * z.Hk + part.g) * d.T * (z.G + 1);
    l2norm_forward(qk + r + q, nq, qk_pre + r + q, (const T*)nullptr, d.T, z.G, z.hd, z.C, at);
    l2norm_forward(qk + r + k, nq + size_t(d.T) * z.G, qk_pre + r + k, temp + part.g, d.T, 1, z.hd, z.C, at);
    return;
  }
  T* norms_k = norms + size_t(z.N) * z.Hq;
  if (!row_pos0) {
    const RopeRows at{&rope, d.T, d.pos0};
    l2norm_forward(qk, norms, qk_pre, (const T*)nullptr, z.N, z.Hq, z.hd, z.C, at);
    l2norm_forward(qk + z.QD, norms_k, qk_pre + z.QD, temp, z.N, z.Hk, z.hd, z.C, at);
    return;
  }
  for (int b = 0; b < d.B; ++b) {  // each batch row from its own position
    const RopeRows at{&rope, d.T, row_pos0[b]};
    const size_t r = size_t(b) * d.T;
    l2norm_forward(qk + r * z.C, norms + r * z.Hq, qk_pre + r * z.C, (const T*)nullptr, d.T, z.Hq, z.hd, z.C, at);
    l2norm_forward(qk + r * z.C + z.QD, norms_k + r * z.Hk, qk_pre + r * z.C + z.QD, temp, d.T, z.Hk, z.hd, z.C, at);
  }
}

// The fused products read [linear_q; linear_k] and [val_proj1; val_proj2] as one matrix each:
// build_layout puts each pair back to back.
static void check_fused_projections(const CcaOffsets& o, const Dims& z) {
  ZAYA_CHECK(o.wk == o.wq + size_t(z.QD) * z.D && o.wv2 == o.wv1 + size_t(z.VH) * z.D,
             "cca: linear_q/linear_k and val_proj1/val_proj2 must be adjacent in the parameter layout");
}

namespace {
// x [N, D] as the projections' operand: fp32, or (x16) kept only in bf16 and read as stored.
template <class T>
struct XOperand {
  const T* x;
  const bf16* x16;
  const Dims& z;
  void times_wt(const T* Wm, int n_out, T* y) const {  // y [N, n_out] = x Wm^T
    if constexpr (std::is_same_v<T, float>)
      if (x16)
        return gemm_bf16(Trans::N, Trans::T, z.N, n_out, z.D, 1.f, {nullptr, x16, z.D}, {Wm, nullptr, z.D}, 0.f, y,
                         n_out);
    gemm(Trans::N, Trans::T, z.N, n_out, z.D, T(1), x, z.D, Wm, z.D, T(0), y, n_out);
  }
  void add_dyt_times(const T* dy, int n_out, T* dWm) const {  // dWm [n_out, D] += dy^T x
    if constexpr (std::is_same_v<T, float>)
      if (x16)
        return gemm_bf16(Trans::T, Trans::N, n_out, z.D, z.N, 1.f, {dy, nullptr, n_out}, {nullptr, x16, z.D}, 1.f,
                         dWm, z.D);
    gemm(Trans::T, Trans::N, n_out, z.D, z.N, T(1), dy, n_out, x, z.D, T(1), dWm, z.D);
  }
};
}  // namespace

template <class T>
void cca_forward(T* out, const T* x, const T* W, const CcaOffsets& o, const ModelConfig& c, const CcaDims& d,
                 const RopeTable& rope, CcaSaved<T>& s, CcaScratch<T>& k, CcaCache<T>* cache, SeqShard<T>* shard,
                 const bf16* x16) {
  const Dims z(c, d);
  if (shard && shard->count() == 1) shard = nullptr;
  ZAYA_CHECK(!(shard && cache), "cca: a sequence shard and a decode cache do not mix");
  ZAYA_CHECK(!x16 || !(shard || cache), "cca: x in bf16 only does not mix with a sequence shard or a decode cache");
  const int P = c.conv_pad();
  if (shard) {
    ZAYA_CHECK(d.T >= P, "context parallel: ", d.T, " positions per shard, the convolution needs at least ", P);
    s.halo_BPC.assign(size_t(d.B) * P * z.C, T(0));
    s.x_prev_BD.assign(size_t(d.B) * z.D, T(0));
  }
  if (cache)
    ZAYA_CHECK(cache->B == d.B && cache->len + d.T <= cache->capacity, "decode cache holds ", cache->capacity,
               " positions; ", cache->len, " used, ", d.T, " more requested");
  T* p = s.p_NC.data();
  T* v = s.v_NV.data();
  check_fused_projections(o, z);
  // 1. q0, k0 projections, packed along channels: one product with [linear_q; linear_k].
  std::optional<prof::Zone> zone;
  zone.emplace("projections");
  const XOperand<T> xo{x, x16, z};
  xo.times_wt(W + o.wq, z.C, p);
  // 4. values: val_proj1(x_t) | val_proj2(x_{t-1}), x_{-1} = 0. One product with
  // [val_proj1; val_proj2] gives [W1 x_t | W2 x_t]; the second half then moves down a row.
  xo.times_wt(W + o.wv1, z.KD, v);
  if (shard) shard->halo(p, x, d.B, d.T, z.C, P, z.D, s.halo_BPC.data(), s.x_prev_BD.data());
  const T* x_prev = cache ? cache->x_prev_BD.data() : shard ? s.x_prev_BD.data() : nullptr;
  parallel_for(d.B, [&](int64_t b) {
    T* vb = v + size_t(b) * d.T * z.KD;
    for (int t = d.T - 1; t >= 1; --t)
      std::memcpy(vb + size_t(t) * z.KD + z.VH, vb + size_t(t - 1) * z.KD + z.VH, sizeof(T) * z.VH);
  });
  for (int b = 0; b < d.B; ++b) {
    T* vb = v + size_t(b) * d.T * z.KD;
    if (x_prev)  // the previous token's x continues the value shift
      gemm(Trans::N, Trans::T, 1, z.VH, z.D, T(1), x_prev + size_t(b) * z.D, z.D, W + o.wv2, z.D, T(0), vb + z.VH,
           z.KD);
    else
      std::memset(vb + z.VH, 0, sizeof(T) * z.VH);
  }
  // 2. causal depthwise + grouped convolution over time.
  zone.reset();
  zone.emplace("conv+qk_mean");
  ConvShape cs{d.B, d.T, z.C, z.hd, c.conv_kernel0, c.conv_kernel1};
  causal_conv_forward(s.conv_tall.data(), s.y0_tall.data(), k.w1p.data(), p,
                      cache ? cache->p_tail_BPC.data() : shard ? s.halo_BPC.data() : (const T*)nullptr, W + o.conv0_w,
                      W + o.conv0_b, W + o.conv1_w, W + o.conv1_b, cs);
  // 3. q-k mean.
  T* qk_pre = s.qk_pre_NC.data();
  cca_qk_mean(qk_pre, s.conv_tall.data(), p, c, d);
  // 5. L2 normalisation (k with its per-head temperature), 6. partial RoPE.
  zone.reset();
  zone.emplace("l2norm+rope");
  T* qk = s.qk_NC.data();
  cca_qk_norm_rope(qk, s.norms_NH.data(), qk_pre, W + o.temp, rope, c, d);
  // 7. causal GQA attention, 8. o_proj.
  zone.reset();
  zone.emplace("attention");
  if (shard) {
    // Queries of this shard against the keys of every shard up to it (causal).
    const int Tk = (shard->index() + 1) * d.T;
    s.k_all_BSK.resize(size_t(d.B) * Tk * z.KD);
    s.v_all_BSK.resize(size_t(d.B) * Tk * z.KD);
    shard->gather_kv(qk + z.QD, z.C, v, d.B, d.T, z.KD, s.k_all_BSK.data(), s.v_all_BSK.data());
    AttnShape as{d.B, d.T, Tk, shard->index() * d.T, z.Hq, z.Hk, z.hd, z.C, z.KD, z.KD, z.QD, Tk};
    k.attn.resize(std::max(k.attn.size(), as.scratch_elems(omp_get_max_threads())));
    attention_forward(s.attn_NQ.data(), s.lse_BHT.data(), qk, s.k_all_BSK.data(), s.v_all_BSK.data(), as,
                      k.attn.data());
  } else if (!cache) {
    AttnShape as{d.B, d.T, d.T, 0, z.Hq, z.Hk, z.hd, z.C, z.C, z.KD, z.QD};
    attention_forward(s.attn_NQ.data(), s.lse_BHT.data(), qk, qk + z.QD, v, as, k.attn.data());
  } else {
    cca_cache_append(*cache, c, d, qk + z.QD, v, p, x);
    const AttnShape as = cache->attn_shape(c, d.T);
    k.attn.resize(std::max(k.attn.size(), as.scratch_elems(omp_get_max_threads())));
    attention_forward(s.attn_NQ.data(), s.lse_BHT.data(), qk, cache->k_BGSd.data(), cache->v_BGSd.data(), as,
                      k.attn.data());
    cache->len += d.T;
  }
  zone.reset();
  zone.emplace("projections");
  gemm(Trans::N, Trans::T, z.N, z.D, z.QD, T(1), s.attn_NQ.data(), z.QD, W + o.wo, z.QD, T(0), out, z.D);
}

template <class T>
void cca_backward(T* dx, T* dW, const T* dout, const T* x, const T* W, const CcaOffsets& o, const ModelConfig& c,
                  const CcaDims& d, const RopeTable& rope, const CcaSaved<T>& s, CcaScratch<T>& k,
                  SeqShard<T>* shard, const bf16* x16) {
  const Dims z(c, d);
  const XOperand<T> xo{x, x16, z};
  if (shard && shard->count() == 1) shard = nullptr;
  const int P = c.conv_pad();
  // 8. o_proj
  std::optional<prof::Zone> zone;
  zone.emplace("projections");
  T* d_attn = k.d_attn_NQ.data();
  gemm_grads_side_by_side<T>(4.0 * z.N * z.QD * z.D, [&](int i) {
    if (i == 0) return gemm(Trans::N, Trans::N, z.N, z.QD, z.D, T(1), dout, z.D, W + o.wo, z.QD, T(0), d_attn, z.QD);
    gemm(Trans::T, Trans::N, z.D, z.QD, z.N, T(1), dout, z.D, s.attn_NQ.data(), z.QD, T(1), dW + o.wo, z.QD);
  });
  // 7. attention
  zone.reset();
  zone.emplace("attention");
  T* dqk = k.dqk_NC.data();
  T* dv = k.dv_NV.data();
  std::memset(dqk, 0, sizeof(T) * k.dqk_NC.size());
  std::memset(dv, 0, sizeof(T) * k.dv_NV.size());
  const T* qk = s.qk_NC.data();
  if (shard) {
    // dK/dV of every gathered position, then each shard's own rows summed over all shards.
    const int Tk = (shard->index() + 1) * d.T;
    k.dk_all_BSK.assign(size_t(d.B) * Tk * z.KD, T(0));
    k.dv_all_BSK.assign(size_t(d.B) * Tk * z.KD, T(0));
    AttnShape as{d.B, d.T, Tk, shard->index() * d.T, z.Hq, z.Hk, z.hd, z.C, z.KD, z.KD, z.QD, Tk};
    k.attn.resize(std::max(k.attn.size(), as.scratch_elems(omp_get_max_threads())));
    attention_backward(dqk, k.dk_all_BSK.data(), k.dv_all_BSK.data(), d_attn, s.attn_NQ.data(), s.lse_BHT.data(),
                       qk, s.k_all_BSK.data(), s.v_all_BSK.data(), as, k.attn.data());
    k.dk_NK.resize(size_t(z.N) * z.KD);
    shard->reduce_kv_grads(k.dk_all_BSK.data(), k.dv_all_BSK.data(), d.B, d.T, z.KD, k.dk_NK.data(), dv);
    for (int i = 0; i < z.N; ++i)
      std::memcpy(dqk + size_t(i) * z.C + z.QD, k.dk_NK.data() + size_t(i) * z.KD, sizeof(T) * z.KD);
  } else {
    AttnShape as{d.B, d.T, d.T, 0, z.Hq, z.Hk, z.hd, z.C, z.C, z.KD, z.QD};
    attention_backward(dqk, dqk + z.QD, dv, d_attn, s.attn_NQ.data(), s.lse_BHT.data(), qk, qk + z.QD,
                       s.v_NV.data(), as, k.attn.data());
  }
  // 6. RoPE, 5. normalisation
  zone.reset();
  zone.emplace("l2norm+rope");
  T* dpre = k.dqk_pre_NC.data();
  std::memset(dpre, 0, sizeof(T) * k.dqk_pre_NC.size());
  const T* norms = s.norms_NH.data();
  const RopeRows at{&rope, d.T, d.pos0};
  l2norm_backward(dpre, (T*)nullptr, dqk, s.qk_pre_NC.data(), norms, (const T*)nullptr, z.N, z.Hq, z.hd, z.C, at);
  l2norm_backward(dpre + z.QD, dW + o.temp, dqk + z.QD, s.qk_pre_NC.data() + z.QD, norms + size_t(z.N) * z.Hq,
                  W + o.temp, z.N, z.Hk, z.hd, z.C, at);
  // 3. q-k mean: the conv output gets the gradient as is; q0/k0 through m.
  zone.reset();
  zone.emplace("conv+qk_mean");
  T* dconv = k.dconv_tall.data();
  T* dp = k.dp_NC.data();
  parallel_for(d.B * z.Tr, [&](int64_t r_) {
    const int r = int(r_);
    const int b = r / z.Tr, t = r % z.Tr;
    T* dcr = dconv + size_t(r) * z.C;
    if (t >= d.T) {
      std::memset(dcr, 0, sizeof(T) * z.C);
      return;
    }
    const size_t i = size_t(b) * d.T + t;
    const T* g = dpre + i * z.C;
    std::memcpy(dcr, g, sizeof(T) * z.C);
    T* dpr = dp + i * z.C;
    for (int h = 0; h < z.Hk; ++h)
      for (int e0 = 0; e0 < z.hd; e0 += 64) {  // as in cca_qk_mean: unit stride innermost
        const int ne = std::min(64, z.hd - e0);
        T gk[64], dk0[64] = {};
        for (int e = 0; e < ne; ++e) gk[e] = g[z.QD + h * z.hd + e0 + e] / T(z.G);
        for (int j = h * z.G; j < (h + 1) * z.G; ++j) {
          const T* gj = g + j * z.hd + e0;
          T* dj = dpr + j * z.hd + e0;
          for (int e = 0; e < ne; ++e) {
            const T dm = (gj[e] + gk[e]) * T(0.5);
            dj[e] = dm;
            dk0[e] += dm;
          }
        }
        for (int e = 0; e < ne; ++e) dpr[z.QD + h * z.hd + e0 + e] = dk0[e];
      }
  });
  // 2. convolution
  ConvShape cs{d.B, d.T, z.C, z.hd, c.conv_kernel0, c.conv_kernel1};
  if (shard) {
    k.dhalo_BPC.assign(size_t(d.B) * P * z.C, T(0));
    k.dx_prev_BD.assign(size_t(d.B) * z.D, T(0));
    std::fill(dx, dx + size_t(z.N) * z.D, T(0));  // halo_grads adds into it before the products
  }
  causal_conv_backward(dp, shard ? k.dhalo_BPC.data() : (T*)nullptr, dW + o.conv0_w, dW + o.conv0_b, dW + o.conv1_w,
                       dW + o.conv1_b, k.dy0_tall.data(), k.dw1p.data(), dconv, s.y0_tall.data(), k.w1p.data(),
                       W + o.conv1_w, s.p_NC.data(), shard ? s.halo_BPC.data() : (const T*)nullptr, W + o.conv0_w,
                       cs);
  if (shard) {
    // The value shift's first row saw the previous shard's last x: its gradients (to wv2 and
    // to that x), then the halo gradients travel back and the next shard's arrive here.
    for (int b = 0; b < d.B; ++b) {
      const T* dvb = dv + size_t(b) * d.T * z.KD + z.VH;
      gemm(Trans::N, Trans::N, 1, z.D, z.VH, T(1), dvb, z.KD, W + o.wv2, z.D, T(0), &k.dx_prev_BD[size_t(b) * z.D],
           z.D);
      gemm(Trans::T, Trans::N, z.VH, z.D, 1, T(1), dvb, z.KD, &s.x_prev_BD[size_t(b) * z.D], z.D, T(1), dW + o.wv2,
           z.D);
    }
    shard->halo_grads(k.dhalo_BPC.data(), k.dx_prev_BD.data(), d.B, d.T, z.C, P, z.D, dp, dx);
  }
  // 1. projections ([linear_q; linear_k] as one matrix)
  zone.reset();
  zone.emplace("projections");
  gemm_grads_side_by_side<T>(4.0 * z.N * z.D * z.C, [&](int i) {
    if (i == 0)  // dx's first writer: stores, unless the halo's gradient is already in it
      return gemm(Trans::N, Trans::N, z.N, z.D, z.C, T(1), dp, z.C, W + o.wq, z.D, shard ? T(1) : T(0), dx, z.D);
    xo.add_dyt_times(dp, z.C, dW + o.wq);
  });
  // 4. values: undo the shift, dy_t = [dv_t (first half) | dv_{t+1} (second half)], the last
  // row of each sequence has no successor; then one product pair with [val_proj1; val_proj2].
  T* dy = k.dvproj_NV.data();
  parallel_for(d.B, [&](int64_t b) {
    for (int t = 0; t < d.T; ++t) {
      const size_t row = size_t(b) * d.T + t;
      std::memcpy(dy + row * z.KD, dv + row * z.KD, sizeof(T) * z.VH);
      if (t + 1 < d.T)
        std::memcpy(dy + row * z.KD + z.VH, dv + (row + 1) * z.KD + z.VH, sizeof(T) * z.VH);
      else
        std::memset(dy + row * z.KD + z.VH, 0, sizeof(T) * z.VH);
    }
  });
  gemm_grads_side_by_side<T>(4.0 * z.N * z.D * z.KD, [&](int i) {
    if (i == 0) return gemm(Trans::N, Trans::N, z.N, z.D, z.KD, T(1), dy, z.KD, W + o.wv1, z.D, T(1), dx, z.D);
    xo.add_dyt_times(dy, z.KD, dW + o.wv1);
  });
}

#define ZAYA_INST(T)                                                                                        \
  template void cca_qk_mean<T>(T*, const T*, const T*, const ModelConfig&, const CcaDims&, CcaPart);        \
  template void cca_qk_norm_rope<T>(T*, T*, const T*, const T*, const RopeTable&, const ModelConfig&,        \
                                    const CcaDims&, const int*, CcaPart);                                   \
  template void cca_kv_append<T, T>(T*, T*, int, const ModelConfig&, const CcaDims&, const T*, int, const T*,  \
                                    const int*, CcaPart);                                                   \
  template void cca_tail_append<T>(CcaCache<T>&, const ModelConfig&, const CcaDims&, const T*, const T*);     \
  template void cca_cache_append<T>(CcaCache<T>&, const ModelConfig&, const CcaDims&, const T*, const T*,     \
                                    const T*, const T*);                                                    \
  template struct CcaSaved<T>;                                                                              \
  template struct CcaScratch<T>;                                                                            \
  template struct CcaCache<T>;                                                                              \
  template void cca_forward<T>(T*, const T*, const T*, const CcaOffsets&, const ModelConfig&, const CcaDims&, \
                               const RopeTable&, CcaSaved<T>&, CcaScratch<T>&, CcaCache<T>*, SeqShard<T>*, \
                               const bf16*);                                                                \
  template void cca_backward<T>(T*, T*, const T*, const T*, const T*, const CcaOffsets&, const ModelConfig&,  \
                                const CcaDims&, const RopeTable&, const CcaSaved<T>&, CcaScratch<T>&,       \
                                SeqShard<T>*, const bf16*);
ZAYA_INST(float)
ZAYA_INST(double)
template void cca_kv_append<float, bf16>(bf16*, bf16*, int, const ModelConfig&, const CcaDims&, const float*, int,
                                         const float*, const int*, CcaPart);

}  // namespace zaya
