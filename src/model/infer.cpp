#include "model/infer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "kernels/attention.h"
#include "kernels/attention_quant.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"
#include "kernels/norm.h"
#include "kernels/team_rows.h"
#include "model/cca.h"
#include "model/moe.h"

namespace zaya {

void Linear::row(int r, float* out) const {
  quant::dequantize_row(weight_qtype(dtype), static_cast<const uint8_t*>(w) + size_t(r) * row_bytes(), out, K);
}

void Linear::apply(float* y, int ldy, const float* x, int ldx, int M, float beta) const {
  if (dtype != WeightDType::BF16 && dtype != WeightDType::F32)
    linear_quant(weight_qtype(dtype), y, ldy, x, ldx, w, M, N, K, beta);
  else if (dtype == WeightDType::BF16)
    linear_bf16(y, ldy, x, ldx, static_cast<const bf16*>(w), M, N, K, beta);
  else
    gemm(Trans::N, Trans::T, M, N, K, 1.f, x, ldx, static_cast<const float*>(w), K, beta, y, ldy);
}

size_t Linear::apply_team(float* y, int ldy, const float* x, int ldx, int M, float beta, const float* cuts,
                          TeamSteal* steal) const {
  if (dtype == WeightDType::BF16)
    return size_t(linear_bf16_team(y, ldy, x, ldx, static_cast<const bf16*>(w), M, N, K, beta, cuts, steal)) *
           row_bytes();
  if (dtype != WeightDType::F32) {
    return size_t(linear_quant_team(weight_qtype(dtype), y, ldy, x, ldx, w, M, N, K, beta, cuts, steal)) * row_bytes();
  } else {
    // fp32: each thread an even slice of W's rows (BLAS runs single-threaded inside a
    // region; it need not sum a column the same way in slices of other widths).
    const RowRange r = team_rows(N, nullptr);
    if (r.n1 > r.n0)
      gemm(Trans::N, Trans::T, M, r.n1 - r.n0, K, 1.f, x, ldx, static_cast<const float*>(w) + size_t(r.n0) * K, K,
           beta, y + r.n0, ldy);
    return 0;
  }
}

// ---------------------------------------------------------------- model

InferModel::InferModel(const ModelConfig& cfg, WeightStore store) : cfg_(cfg), store_(std::move(store)) {
  const ModelLayout L = build_layout(cfg);
  std::unordered_map<size_t, const ParamInfo*> at;
  for (const ParamInfo& p : L.params.params) at[p.offset] = &p;
  auto mat = [&](size_t off) {
    const ParamInfo& p = *at.at(off);
    const WeightView& v = store_.get(p.name, p.shape);
    return Linear{v.dtype, v.data, int(p.shape[0]), int(v.numel() / size_t(p.shape[0]))};  // conv1: [C, hd*K1]
  };
  auto to_f32 = [&](const WeightView& v) {
    std::vector<float> f(v.numel());
    const int64_t K = v.shape.empty() ? 1 : v.shape.back();
    const size_t rows = f.size() / size_t(K), rb = v.bytes() / rows;
    for (size_t r = 0; r < rows; ++r)  // (the view may be unaligned: dequantize_row copies)
      quant::dequantize_row(weight_qtype(v.dtype), static_cast<const uint8_t*>(v.data) + r * rb, &f[r * size_t(K)], K);
    small_.push_back(std::move(f));
    return small_.back().data();
  };
  auto vec = [&](size_t off) -> const float* {
    if (off == kNone) return nullptr;
    const ParamInfo& p = *at.at(off);
    return to_f32(store_.get(p.name, p.shape));
  };
  auto res_scale = [&](const ResScaleOffsets& o) { return ResScale{vec(o.hs_scale), vec(o.hs_bias), vec(o.res_scale), vec(o.res_bias)}; };
  std::vector<float> init_bufs(L.buffers.total);
  init_buffers(L, init_bufs.data());
  embed = mat(L.embed);
  for (int n = 0; n < cfg.num_sublayers(); ++n) {
    const SublayerOffsets& so = L.sub[size_t(n)];
    Sublayer s;
    s.attention = so.attention;
    s.rs = res_scale(so.rs);
    s.norm = vec(so.norm);
    if (so.attention) {
      const CcaOffsets& o = so.cca;
      s.a = Attn{mat(o.wq), mat(o.wk), mat(o.wv1), mat(o.wv2), mat(o.wo), mat(o.conv1_w), vec(o.conv0_w), vec(o.conv0_b),
                 vec(o.conv1_b), vec(o.temp)};
      const Linear &q = s.a.q, &k = s.a.k, &v1 = s.a.v1;
      if (q.dtype == k.dtype && k.dtype == v1.dtype && q.K == k.K && k.K == v1.K &&
          static_cast<const char*>(q.w) + q.bytes() == k.w && static_cast<const char*>(k.w) + k.bytes() == v1.w)
        s.a.qkv1 = Linear{q.dtype, q.w, q.N + k.N + v1.N, q.K};
      // The grouped conv is split into per-group products by element offsets (attention()).
      if (s.a.conv1.dtype != WeightDType::BF16 && s.a.conv1.dtype != WeightDType::F32)
        fail(store_.origin, ": conv weights of sub-layer ", n, " are ", dtype_name(s.a.conv1.dtype),
             "; they must be bf16 or f32");
    } else {
      const RouterOffsets& r = so.moe.router;
      s.m.down = mat(r.down_w);
      s.m.mlp0 = mat(r.mlp0_w);
      s.m.mlp2 = mat(r.mlp2_w);
      s.m.mlp4 = mat(r.mlp4_w);
      s.m.down_b = vec(r.down_b);
      s.m.eda = vec(r.eda_scale);
      s.m.norm = vec(r.norm_w);
      s.m.mlp0_b = vec(r.mlp0_b);
      s.m.mlp2_b = vec(r.mlp2_b);
      for (size_t e = 0; e < so.moe.fc1.size(); ++e) {
        s.m.fc1.push_back(mat(so.moe.fc1[e]));
        s.m.fc2.push_back(mat(so.moe.fc2[e]));
      }
      const ParamInfo* bb = nullptr;
      for (const ParamInfo& p : L.buffers.params)
        if (p.offset == r.balancing_bias) bb = &p;
      ZAYA_CHECK(bb, "no balancing-bias buffer for sub-layer ", n);
      if (store_.find(bb->name)) {
        s.m.balancing_bias = to_f32(store_.get(bb->name, bb->shape));
      } else {
        log_warn(store_.origin, ": no '", bb->name, "'; using the initial balancing biases");
        small_.emplace_back(init_bufs.begin() + long(bb->offset), init_bufs.begin() + long(bb->offset + bb->numel));
        s.m.balancing_bias = small_.back().data();
      }
    }
    sub.push_back(std::move(s));
  }
  final_rs = res_scale(L.final_rs);
  final_norm = vec(L.final_norm);
  rope.build(cfg.rotary_dim(), cfg.max_position_embeddings, cfg.rope_theta);
}

uint64_t InferModel::stored_bytes() const {
  uint64_t b = 0;
  for (auto& [name, v] : store_.all()) b += v.bytes();
  return b;
}

// ---------------------------------------------------------------- decoder

InferDecoder::InferDecoder(const InferModel& m, int batch, int max_len, KvCacheDType kv)
    : m_(m), batch_(batch), max_len_(max_len) {
  ZAYA_CHECK(batch > 0 && max_len > 0, "decoder batch and length must be positive");
  kv16_ = kv == KvCacheDType::BF16 || (kv == KvCacheDType::Auto && m.embed.dtype != WeightDType::F32);
  ZAYA_CHECK(max_len <= m.cfg().max_position_embeddings, "decode length ", max_len,
             " exceeds max_position_embeddings ", m.cfg().max_position_embeddings);
  reset();
  last_BV_.assign(size_t(batch) * m.cfg().vocab_size, 0.f);
  last_.assign(size_t(batch) * m.cfg().hidden_size, 0.f);
}

void InferDecoder::reset() {
  const ModelConfig& c = m_.cfg();
  state_.cca.resize(size_t(c.num_layers));
  for (auto& cc : state_.cca) cc.init(c, batch_, max_len_);
  state_.len = 0;
  row_len_.assign(size_t(batch_), 0);
  if (kv16_) {  // K and V live in kv16c_: the fp32 arrays go
    kv16c_.resize(state_.cca.size());
    const size_t n = size_t(batch_) * c.num_kv_heads * max_len_ * c.head_dim;
    for (size_t li = 0; li < state_.cca.size(); ++li) {
      std::vector<float>().swap(state_.cca[li].k_BGSd);
      std::vector<float>().swap(state_.cca[li].v_BGSd);
      kv16c_[li].k.assign(n, bf16{0});
      kv16c_[li].v.assign(n, bf16{0});
    }
  }
}

void InferDecoder::profiled(DecodeProfile::Zone z, double t0) const {
  if (profile_) profile_->add(omp_get_thread_num(), z, now_seconds() - t0);
}

void InferDecoder::lin(const Linear& l, float* y, int ldy, const float* x, int ldx, int M, float beta, bool sync) {
  if (M <= 0) return;
  count_read(l);
  if (!team_) return l.apply(y, ldy, x, ldx, M, beta);
  const double t0 = now_seconds();
  const size_t b = l.apply_team(y, ldy, x, ldx, M, beta, balance_.cuts(), &steal_);
  const double t1 = now_seconds();
  const int th = omp_get_thread_num();
  if (b) balance_.add(th, t1 - t0, double(b));
  if (profile_) {
    const DecodeProfile::Zone z = &l == &m_.embed ? DecodeProfile::kHead : DecodeProfile::kProducts;
    profile_->add(th, z, t1 - t0);
    profile_->add_bytes(th, z, b ? double(b) : double(l.bytes()) / omp_get_num_threads());
  }
  if (sync) barrier();
}

void InferDecoder::barrier() {
  if (!team_) return;
  const double t0 = profile_ ? now_seconds() : 0;
  if (omp_get_num_threads() == sync_.size()) {
    sync_.wait(omp_get_thread_num());
  } else {  // a team with more threads than CPUs (SpinBarrier::fits), or fewer than asked for
#pragma omp barrier
  }
  profiled(DecodeProfile::kWait, t0);
}

template <class F>
void InferDecoder::serial(F&& f) {
  if (!team_) {
    f();
    return;
  }
  if (omp_get_thread_num() == 0) {
    const double t0 = profile_ ? now_seconds() : 0;
    f();
    profiled(DecodeProfile::kSerial, t0);
  }
  barrier();
}

void InferDecoder::reserve(int rows) {
  // moe()'s per-thread router rows: each thread of a team (at most kTeamRows rows), or the
  // calling thread alone (prefill). Checked on every call: the thread count may change.
  const size_t per_thread_rows =
      std::max(size_t(rows), size_t(omp_get_max_threads()) * size_t(std::min(rows, kTeamRows)));
  const size_t own = per_thread_rows * (4 * size_t(m_.cfg().router_hidden) + 1);
  if (router_own_.size() < own) router_own_.assign(own, 0.f);
  // moe()'s SwiGLU outputs, likewise one per thread of a team.
  const size_t act = per_thread_rows * size_t(m_.cfg().topk) * size_t(m_.cfg().ffn_hidden_size / 2);
  if (act_.size() < act) act_.assign(act, 0.f);
  if (rows <= cap_) return;
  const ModelConfig& c = m_.cfg();
  const size_t N = size_t(rows), D = c.hidden_size, C = c.conv_channels(), KD = size_t(c.num_kv_heads) * c.head_dim;
  const size_t QD = size_t(c.num_q_heads) * c.head_dim, R = c.router_hidden, NC = c.num_classes();
  const size_t S = N * c.topk, F = c.ffn_hidden_size, tall = N * C + size_t(batch_) * (c.conv_kernel1 - 1) * C;
  ytap_.assign(N * C * c.conv_kernel1, 0.f);
  for (auto* v : {&res_, &x_, &h_, &xf_, &xs_}) v->assign(N * D, 0.f);
  rstd_.assign(N, 0.f);
  pv_.assign(N * (C + KD), 0.f);
  qkpre_.assign(N * C, 0.f);
  qk_.assign(N * C, 0.f);
  y0_.assign(tall, 0.f);
  conv_.assign(tall, 0.f);
  norms_.assign(N * (c.num_q_heads + c.num_kv_heads), 0.f);
  attn_.assign(N * QD, 0.f);
  lse_.assign(N * c.num_q_heads, 0.f);
  for (auto* v : {&r_[0], &r_[1], &h0_, &pre_, &h2_, &rd_}) v->assign(N * R, 0.f);
  prob_.assign(N * NC, 0.f);
  gate_.assign(S, 0.f);
  choice_.assign(S, 0);
  slot_row_.assign(S, -1);
  xe_.assign(S * D, 0.f);
  ye_.assign(S * D, 0.f);
  u_.assign(S * F, 0.f);
  cap_ = rows;
}

void InferDecoder::attention(const InferModel::Attn& a, int li, int n) {
  const ModelConfig& c = m_.cfg();
  CcaCache<float>& cache = state_.cca[size_t(li)];
  const int B = batch_, N = B * n, D = c.hidden_size, QD = c.num_q_heads * c.head_dim;
  const int KD = c.num_kv_heads * c.head_dim, VH = KD / 2, C = c.conv_channels(), hd = c.head_dim;
  float* p = pv_.data();
  float* v = p + size_t(N) * C;
  const float* x = x_.data();
  // 1. q0 | k0 packed along channels; 4. values: val_proj1(x_t) | val_proj2(x_{t-1}). One
  // row: v follows p, so q | k | v1 can be one product.
  const bool fused = N == 1 && a.qkv1.N > 0;
  if (fused) {
    lin(a.qkv1, p, C + KD, x, D, N, 0.f, false);
  } else {
    lin(a.q, p, C, x, D, N, 0.f, false);
    lin(a.k, p + QD, C, x, D, N, 0.f, false);
  }
  // x shifted by one step per row, the cache's x_prev first: with one token per row, x_prev
  // itself (no copy, and no one-thread section to make it).
  const float* xs = cache.x_prev_BD.data();
  if (n > 1) {
    serial([&] {
      for (int b = 0; b < B; ++b) {
        std::memcpy(&xs_[size_t(b) * n * D], &cache.x_prev_BD[size_t(b) * D], sizeof(float) * D);
        std::memcpy(&xs_[(size_t(b) * n + 1) * D], x + size_t(b) * n * D, sizeof(float) * size_t(n - 1) * D);
      }
    });
    xs = xs_.data();
  }
  if (!fused) lin(a.v1, v, KD, x, D, N, 0.f, false);
  lin(a.v2, v + VH, KD, xs, D, N);
  // 2. causal convolution continuing the cached tail: the grouped hd x hd mix as one product
  // per (batch row, group) over the stored conv1 weights, whose rows [hd * K1] interleave the
  // taps: ytap_ holds the inputs in that order. Each task makes its own group's depthwise taps
  // first (its channels of y0_).
  const int G = C / hd, K1 = c.conv_kernel1, Tr = n + K1 - 1, HK = hd * K1;
  const ConvShape cs{B, n, C, hd, c.conv_kernel0, K1};
  const size_t esz = a.conv1.dtype == WeightDType::BF16 ? 2 : 4;
  // Decode (a team, every row at one position): the steps between the conv and the attention
  // run in the tasks beside them (the bias in the conv's, the rest in the attention's), not
  // on one thread while the others wait.
  const bool parts = team_ && !ragged_;
  split(B * G, [&](int bg) {
    const int b = bg / G, g = bg % G;
    causal_conv_depthwise_part(y0_.data(), p, cache.p_tail_BPC.data(), a.conv0_w, a.conv0_b, cs, b, g * hd,
                               (g + 1) * hd);
    for (int j = 0; j < n; ++j) {
      float* yt = &ytap_[((size_t(b) * n + j) * G + g) * HK];
      for (int k = 0; k < K1; ++k) {
        const float* y0 = &y0_[(size_t(b) * Tr + j + k) * C + size_t(g) * hd];
        for (int i = 0; i < hd; ++i) yt[i * K1 + k] = y0[i];
      }
    }
    const Linear w{a.conv1.dtype, static_cast<const char*>(a.conv1.w) + size_t(g) * hd * HK * esz, hd, HK};
    w.apply(&conv_[size_t(b) * Tr * C + size_t(g) * hd], C, &ytap_[size_t(b) * n * G * HK + size_t(g) * HK], G * HK, n);
    if (parts) causal_conv_bias_part(conv_.data(), a.conv1_b, cs, b, g * hd, (g + 1) * hd);
  });
  count_read(a.conv1);
  if (!parts) serial([&] { attention_core(a, li, n); });
  // 7. attention over the cache: (batch row, KV head) pairs split over the team. (The shape
  // counts this feed's rows; the cache's length moves on only after the attention.)
  const AttnShape as = cache.attn_shape(c, n);
  float* sc = scratch_.data();
  if (ragged_) {
    rows_attention(li, n);
  } else if (kv16_) {
    const bf16* k16 = kv16c_[size_t(li)].k.data();
    const bf16* v16 = kv16c_[size_t(li)].v.data();
    if (team_ || n <= kDirectAttnRows) {
      split(B * as.Hk, [&](int bg) {
        if (parts) attention_core(a, li, n, {bg / as.Hk, bg % as.Hk});
        attention_group_kv_bf16(attn_.data(), lse_.data(), qk_.data(), k16, v16, as, bg / as.Hk, bg % as.Hk,
                                sc + size_t(omp_get_thread_num()) * as.scratch_per_thread());
      });
    } else {  // prefill: the cached rows widened to fp32, then the blocked fp32 kernel
      kvw_.resize(2 * size_t(B) * as.Hk * as.Tk * hd);
      float* kw = kvw_.data();
      float* vw = kw + size_t(B) * as.Hk * as.Tk * hd;
      widen_kv_bf16(kw, k16, B, as.Hk, max_len_, as.Tk, hd);
      widen_kv_bf16(vw, v16, B, as.Hk, max_len_, as.Tk, hd);
      AttnShape w = as;
      w.kv_batch_rows = as.Tk;
      attention_forward(attn_.data(), lse_.data(), qk_.data(), kw, vw, w, sc);
    }
  } else if (team_) {
    split(B * as.Hk, [&](int bg) {
      if (parts) attention_core(a, li, n, {bg / as.Hk, bg % as.Hk});
      attention_forward_group(attn_.data(), lse_.data(), qk_.data(), cache.k_BGSd.data(), cache.v_BGSd.data(), as,
                              bg / as.Hk, bg % as.Hk, sc + size_t(omp_get_thread_num()) * as.scratch_per_thread());
    });
  } else {
    attention_forward(attn_.data(), lse_.data(), qk_.data(), cache.k_BGSd.data(), cache.v_BGSd.data(), as, sc);
  }
  // The conv tail and the last x into the cache, and its length: on one thread (in a team,
  // read again only by this layer's next feed). Rows at their own positions: advance().
  if (omp_get_thread_num() == 0) {
    cca_tail_append(cache, c, CcaDims{B, n, cache.len}, p, x);
    if (!ragged_) cache.len += n;
  }
  // 8. o_proj.
  lin(a.o, h_.data(), D, attn_.data(), QD, N);
}

template <class F>
void InferDecoder::split(int count, F&& f) {
  if (!team_) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < count; ++i) f(i);
    return;
  }
  const double t0 = profile_ ? now_seconds() : 0;
#pragma omp for schedule(static) nowait
  for (int i = 0; i < count; ++i) f(i);
  profiled(DecodeProfile::kSplit, t0);
  barrier();
}

// Between the products: the conv's bias, q-k mean, L2 norms, RoPE, K and V into the cache.
// Rows at different positions take RoPE and their cache entries at their own positions. A
// part: steps 3-6 and the K, V append of one (batch row, KV head) alone (attention()'s
// decode tasks; the conv's tasks add its bias).
void InferDecoder::attention_core(const InferModel::Attn& a, int li, int n, CcaPart part) {
  const ModelConfig& c = m_.cfg();
  CcaCache<float>& cache = state_.cca[size_t(li)];
  const int QD = c.num_q_heads * c.head_dim, C = c.conv_channels();
  const CcaDims d{batch_, n, cache.len};
  const int* row_pos0 = ragged_ ? row_len_.data() : nullptr;
  const float* p = pv_.data();
  const float* v = p + size_t(batch_) * n * C;
  if (part.b < 0)
    causal_conv_bias(conv_.data(), a.conv1_b, ConvShape{batch_, n, C, c.head_dim, c.conv_kernel0, c.conv_kernel1});
  // 3. q-k mean, 5. L2 norm, 6. RoPE, then K, V and the tails into the cache.
  cca_qk_mean(qkpre_.data(), conv_.data(), p, c, d, part);
  float* qk = qk_.data();
  cca_qk_norm_rope(qk, norms_.data(), qkpre_.data(), a.temp, m_.rope, c, d, row_pos0, part);
  if (kv16_)
    cca_kv_append(kv16c_[size_t(li)].k.data(), kv16c_[size_t(li)].v.data(), max_len_, c, d, qk + QD, C, v, row_pos0,
                  part);
  else
    cca_kv_append(cache.k_BGSd.data(), cache.v_BGSd.data(), cache.capacity, c, d, qk + QD, C, v, row_pos0, part);
  if (part.b < 0 && ragged_) rows_scratch(n);
}

void InferDecoder::moe(const InferModel::Moe& m, int n, const float* r_prev, float* r,
                       const std::function<void()>* then) {
  const ModelConfig& c = m_.cfg();
  const int N = batch_ * n, D = c.hidden_size, R = c.router_hidden, K = c.topk;
  const int E = c.num_experts, F = c.ffn_hidden_size;
  const float* x = x_.data();
  // Router. The down-projection and the two R x R products run on the team. Before and
  // between them every thread computes the router's input (bias, EDA, RMSNorm) and the GELU
  // for itself (R values a token, less work than a barrier and the other thread's data), so
  // no thread waits for another's elementwise step; thread 0 writes r, which the next MoE
  // sub-layer's EDA reads after the barriers below. One thread then runs the rest: the class logits (NC x R), softmax,
  // routing and dispatch. (All on one thread, the router read its 270 KB of bf16 weights
  // alone: 11.6 us a ZAYA1-base layer, 0.46 ms of a 15.5 ms q4_k token.)
  lin(m.down, rd_.data(), R, x, D, N);
  const RouterVectors<float> vectors{m.down_b, m.eda, m.norm, m.mlp0_b, m.mlp2_b, m.balancing_bias};
  const size_t NR = size_t(N) * R;
  const int th = team_ ? omp_get_thread_num() : 0;
  float* own = router_own_.data() + size_t(th) * (4 * NR + size_t(N));
  float *r_t = th == 0 ? r : own, *zn = own + NR, *h = own + 2 * NR, *pre = own + 3 * NR, *rstd = own + 4 * NR;
  router_input(r_t, zn, rstd, rd_.data(), r_prev, vectors, c, N);
  lin(m.mlp0, h0_.data(), R, zn, R, N);
  std::copy_n(h0_.data(), NR, h);
  bias_gelu_forward(h, pre, m.mlp0_b, N, R);
  lin(m.mlp2, h2_.data(), R, h, R, N);
  count_read(m.mlp4);
  serial([&] {
    bias_gelu_forward(h2_.data(), pre_.data(), m.mlp2_b, N, R);
    m.mlp4.apply(prob_.data(), m.mlp4.N, h2_.data(), R, N);
    router_choice(prob_.data(), choice_.data(), gate_.data(), m.balancing_bias, c, N);
    // Rows grouped by expert: each chosen expert's weights are read once for all its rows.
    expert_count_.resize(size_t(E));
    moe_dispatch(choice_.data(), c, N, expert_count_.data(), nullptr, slot_row_.data());
    expert_start_.assign(size_t(E) + 1, 0);
    for (int e = 0; e < E; ++e) expert_start_[size_t(e) + 1] = expert_start_[size_t(e)] + expert_count_[size_t(e)];
    moe_gather(xe_.data(), x, slot_row_.data(), N, K, D);
  });
  // Every chosen expert's fc1, one SwiGLU over all routed rows, then every fc2: the team
  // streams from one expert's weights to the next with no barrier in between (batched decode
  // routes its rows to up to B*K experts per layer).
  const int routed = int(expert_start_[size_t(E)]);
  for (int e = 0; e < E; ++e) {
    const int cnt = int(expert_count_[size_t(e)]);
    if (!cnt) continue;
    const size_t row = size_t(expert_start_[size_t(e)]);
    lin(m.fc1[size_t(e)], &u_[row * F], F, &xe_[row * D], D, cnt, 0.f, false);
  }
  barrier();
  // Every thread its own SwiGLU of all routed rows (F/2 values a row: less than a barrier).
  float* act = act_.data() + size_t(th) * routed * (F / 2);
  swiglu_forward(act, u_.data(), routed, F);
  for (int e = 0; e < E; ++e) {
    const int cnt = int(expert_count_[size_t(e)]);
    if (!cnt) continue;
    const size_t row = size_t(expert_start_[size_t(e)]);
    lin(m.fc2[size_t(e)], &ye_[row * D], D, &act[row * (F / 2)], F / 2, cnt, 0.f, false);
  }
  barrier();
  serial([&] {
    moe_combine(h_.data(), x, ye_.data(), gate_.data(), slot_row_.data(), N, K, D);
    if (then) (*then)();
  });
}

void InferDecoder::start_feed(int n) {
  ZAYA_CHECK(n > 0, "feed() needs at least one token");
  ZAYA_CHECK(state_.len + n <= max_len_, "decoder is full: ", state_.len, " + ", n, " tokens exceed ", max_len_);
  ragged_ = false;
  for (int b = 1; b < batch_; ++b) ragged_ = ragged_ || row_len_[size_t(b)] != row_len_[0];
  reserve(batch_ * n);
  if (!ragged_ && !state_.cca.empty()) {  // the attention's scratch, sized before any region
    const size_t need = state_.cca[0].attn_shape(m_.cfg(), n).scratch_elems(omp_get_max_threads());
    if (scratch_.size() < need) scratch_.assign(need, 0.f);
  }
  bytes_ = 0;
}

// Decode: one region for the whole token. Prefill: a region per product (compute-bound).
template <class F>
void InferDecoder::run_rows(int rows, F&& f) {
  if (rows <= kTeamRows && omp_get_max_threads() > 1) {
    team_ = true;
    const int nt = omp_get_max_threads();
    if (sync_.size() != nt && SpinBarrier::fits(nt)) sync_.reset(nt);  // (else libgomp's barrier)
    steal_.reset(nt);
    balance_.start(nt);
    if (profile_) profile_->start(nt);
#pragma omp parallel num_threads(nt)
    f();
    team_ = false;
    balance_.update();
    if (profile_) profile_->end_token();
  } else {
    f();
  }
}

void InferDecoder::advance(int n) {
  for (int& l : row_len_) l += n;
  state_.len += n;
  for (auto& cc : state_.cca) cc.len = state_.len;  // (the row-by-row path leaves it)
}

void InferDecoder::forward(const int32_t* tokens, int n, bool head) {
  const ModelConfig& c = m_.cfg();
  start_feed(n);
  const int N = batch_ * n, D = c.hidden_size, V = c.vocab_size;
  for (int i = 0; i < N; ++i)
    ZAYA_CHECK(tokens[i] >= 0 && tokens[i] < V, "token id ", tokens[i], " at position ", i,
               " is outside the vocabulary (", V, ")");
  // Embedding rows (only the rows of these tokens are read).
  for (int i = 0; i < N; ++i) m_.embed.row(tokens[i], &h_[size_t(i) * D]);  // a quantized row: dequantized
  bytes_ += uint64_t(N) * m_.embed.row_bytes();
  run_rows(N, [&] { layers(n, head); });
  advance(n);
}

void InferDecoder::run_sublayer(int s, const float* x_ND, int n, float* out_ND, const float* r_prev, float* r) {
  const ModelConfig& c = m_.cfg();
  ZAYA_CHECK(s >= 0 && s < c.num_sublayers(), "sub-layer ", s, " of ", c.num_sublayers());
  start_feed(n);
  const size_t ND = size_t(batch_) * n * c.hidden_size;
  std::copy_n(x_ND, ND, x_.data());
  const InferModel::Sublayer& L = m_.sub[size_t(s)];
  float* r_out = r ? r : r_[0].data();
  run_rows(batch_ * n, [&] {
    if (L.attention)
      attention(L.a, s / 2, n);
    else
      moe(L.m, n, r_prev, r_out);
  });
  std::copy_n(h_.data(), ND, out_ND);
  if (L.attention) advance(n);
}

void InferDecoder::layers(int n, bool head) {
  const ModelConfig& c = m_.cfg();
  const int N = batch_ * n, D = c.hidden_size;
  // Sub-layer s's entry: the residual merge and norm into x_ (s = the count: the final norm
  // into xf_). After an MoE sub-layer it runs in that sub-layer's last one-thread section.
  const auto enter = [&](int s) {
    if (s == c.num_sublayers()) {
      const InferModel::ResScale& fr = m_.final_rs;
      merge_norm_forward(res_.data(), xf_.data(), rstd_.data(), h_.data(), res_.data(), fr.hs, fr.hb, fr.rs, fr.rb,
                         m_.final_norm, N, D, c.norm_eps);
      if (head)  // the last position of each row
        for (int b = 0; b < batch_; ++b)
          std::memcpy(&last_[size_t(b) * D], &xf_[(size_t(b) * n + n - 1) * D], sizeof(float) * D);
      return;
    }
    const InferModel::ResScale& rs = m_.sub[size_t(s)].rs;
    merge_norm_forward(res_.data(), x_.data(), rstd_.data(), h_.data(), s ? res_.data() : nullptr, rs.hs, rs.hb, rs.rs,
                       rs.rb, m_.sub[size_t(s)].norm, N, D, c.norm_eps);
  };
  bool entered = false;
  int moe_index = 0;
  for (int s = 0; s < c.num_sublayers(); ++s) {
    const InferModel::Sublayer& L = m_.sub[size_t(s)];
    if (!entered) serial([&] { enter(s); });
    entered = !L.attention;
    if (L.attention) {
      attention(L.a, s / 2, n);
    } else {
      const std::function<void()> next = [&] { enter(s + 1); };
      moe(L.m, n, moe_index ? r_[(moe_index - 1) % 2].data() : nullptr, r_[moe_index % 2].data(), &next);
      ++moe_index;
    }
  }
  if (!entered) serial([&] { enter(c.num_sublayers()); });
  // LM head (the tied embedding).
  if (head) lin(m_.embed, last_BV_.data(), c.vocab_size, last_.data(), D, batch_);
}

const float* InferDecoder::feed(const int32_t* tokens, int n) {
  forward(tokens, n, true);
  return last_BV_.data();
}

std::vector<double> InferDecoder::logprobs(const int32_t* ids, int n, int chunk) {
  ZAYA_CHECK(batch_ == 1, "logprobs() needs a batch-1 decoder");
  ZAYA_CHECK(chunk > 0, "chunk must be positive");
  const int D = m_.cfg().hidden_size, V = m_.cfg().vocab_size, rows = 32;
  std::vector<double> lp;
  std::vector<float> logits(size_t(rows) * V);
  for (int t0 = 0; t0 + 1 < n; t0 += chunk) {
    const int len = std::min(chunk, n - 1 - t0);  // positions whose next token is known
    forward(ids + t0, len, false);
    for (int r0 = 0; r0 < len; r0 += rows) {
      const int m = std::min(rows, len - r0);
      lin(m_.embed, logits.data(), V, &xf_[size_t(r0) * D], D, m);
      for (int i = 0; i < m; ++i) {
        const float* z = &logits[size_t(i) * V];
        const double mx = *std::max_element(z, z + V);
        double s = 0;
        for (int v = 0; v < V; ++v) s += std::exp(double(z[v]) - mx);
        lp.push_back(double(z[ids[t0 + r0 + i + 1]]) - mx - std::log(s));
      }
    }
  }
  return lp;
}

void InferDecoder::feed_all_logits(const int32_t* tokens, int n, const std::function<void(int, const float*)>& f,
                                   const std::function<bool(int)>& want) {
  const int D = m_.cfg().hidden_size, V = m_.cfg().vocab_size, rows = 32, N = batch_ * n;
  forward(tokens, n, false);
  std::vector<float> logits(size_t(std::min(rows, N)) * V);
  if (!want) {
    for (int r0 = 0; r0 < N; r0 += rows) {
      const int m = std::min(rows, N - r0);
      lin(m_.embed, logits.data(), V, &xf_[size_t(r0) * D], D, m);
      for (int i = 0; i < m; ++i) f(r0 + i, &logits[size_t(i) * V]);
    }
    return;
  }
  std::vector<int> keep;  // the wanted rows, gathered 32 at a time
  for (int r = 0; r < N; ++r)
    if (want(r)) keep.push_back(r);
  std::vector<float> x(size_t(std::min<size_t>(rows, keep.size())) * D);
  for (size_t k0 = 0; k0 < keep.size(); k0 += rows) {
    const int m = int(std::min<size_t>(rows, keep.size() - k0));
    for (int i = 0; i < m; ++i) std::memcpy(&x[size_t(i) * D], &xf_[size_t(keep[k0 + i]) * D], sizeof(float) * D);
    lin(m_.embed, logits.data(), V, x.data(), D, m);
    for (int i = 0; i < m; ++i) f(keep[k0 + i], &logits[size_t(i) * V]);
  }
}

}  // namespace zaya
