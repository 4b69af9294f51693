#include "model/model.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/gemm.h"
#include "kernels/loss.h"
#include "kernels/norm.h"

namespace zaya {

template <class T>
Model<T>::Model(const ModelConfig& cfg, ExpertRange experts) : layout(build_layout(cfg, experts)) {
  params.assign(layout.params.total, T(0));
  grads.assign(layout.params.total, T(0));
  buffers.assign(layout.buffers.total, T(0));
  experts_ = std::make_unique<LocalExperts<T>>(layout.experts, cfg.num_layers);
  rope_.build(cfg.rotary_dim(), cfg.max_position_embeddings, cfg.rope_theta);
  // grads_ready(from) promises "everything >= from is final": that needs each sub-layer's
  // parameters above every earlier sub-layer's, which build_layout guarantees (checked).
  sub_begin_.assign(size_t(cfg.num_sublayers()), layout.params.total);
  for (const ParamInfo& p : layout.params.params)
    if (p.sublayer >= 0) sub_begin_[size_t(p.sublayer)] = std::min(sub_begin_[size_t(p.sublayer)], p.offset);
  for (const ParamInfo& p : layout.params.params)
    if (p.sublayer >= 0)
      for (int n = p.sublayer + 1; n < cfg.num_sublayers(); ++n)
        ZAYA_CHECK(p.offset + p.numel <= sub_begin_[size_t(n)], "layout: ", p.name, " overlaps sub-layer ", n);
  // Written by products under GradMode::Overwrite: the tied embedding (the LM head's dW comes
  // first in backward, the lookup's scatter adds to it at the end) and this process's experts;
  // every other tensor's span is zeroed first.
  for (const ParamInfo& p : layout.params.params)
    if (p.role != ParamRole::Embedding && p.role != ParamRole::ExpertMatrix) {
      if (!zeroed_on_overwrite_.empty() && zeroed_on_overwrite_.back().second == p.offset)
        zeroed_on_overwrite_.back().second += p.numel;  // adjacent tensors: one span
      else
        zeroed_on_overwrite_.push_back({p.offset, p.offset + p.numel});
    }
}

template <class T>
void Model<T>::init(uint64_t seed) {
  invalidate_bf16_weights();
  init_params(layout, seed, params.data());
  init_buffers(layout, buffers.data());
}

template <class T>
void Model<T>::set_experts(std::unique_ptr<ExpertCompute<T>> e) {
  experts_ = std::move(e);
  if (cap_B_) experts_->resize(cfg(), cap_B_ * cap_T_ * cfg().topk);
}

template <class T>
void Model<T>::set_rope_theta(double theta) {
  ZAYA_CHECK(theta > 0, "rope_theta must be positive, got ", theta);
  layout.cfg.rope_theta = theta;
  rope_.build(layout.cfg.rotary_dim(), layout.cfg.max_position_embeddings, theta);
}

template <class T>
void Model<T>::set_aux_loss_coeff(double coeff) {
  aux_coeff_ = coeff;
  for (size_t n = 1; n < acts_.size(); n += 2) acts_[n].moe.aux_coeff = coeff;
}

template <class T>
void Model<T>::use_split_master(bool on) {
  ZAYA_CHECK(!on || (std::is_same_v<T, float>), "the split master weights are for fp32 models");
  if (!on) {
    plain_master();
    split_.reset();
  } else if (!split_) {
    split_ = std::make_unique<SplitMaster>(layout.params);
    std::vector<bf16>().swap(params_bf16);
    bf16_current_ = false;
  }
}

template <class T>
void Model<T>::plain_master() {
  if constexpr (std::is_same_v<T, float>)
    if (split_encoded_) {
      ZAYA_PROFILE("bf16_weights");
      split_->decode(params.data());
    }
  split_encoded_ = false;
}

template <class T>
std::vector<Bf16Mirror> Model<T>::weight_mirrors() const {
  if constexpr (std::is_same_v<T, float>) {
    if (split_encoded_) return split_->mirrors(params.data());
    if (!params_bf16.empty()) return {{params.data(), params.size(), params_bf16.data()}};
  }
  return {};
}

template <class T>
bf16* Model<T>::bf16_weights() {
  if (!std::is_same_v<T, float> || gemm_settings().precision != GemmPrecision::BF16 || !bf16_gemm_supported() ||
      split_) {
    params_bf16.clear();
    bf16_current_ = false;
    return nullptr;
  }
  if (params_bf16.size() != params.size()) {
    params_bf16.resize(params.size());
    bf16_current_ = false;
  }
  return params_bf16.data();
}

namespace {
// Sets the model's weight mirrors for the span of a forward or backward, then restores.
struct MirrorScope {
  std::vector<Bf16Mirror> prev = gemm_bf16_mirrors();
  std::vector<Bf16Mirror> prev_acts = gemm_activation_mirrors();
  explicit MirrorScope(std::vector<Bf16Mirror> weights, const std::vector<Bf16Mirror>& acts = {}) {
    gemm_set_bf16_mirrors(std::move(weights));
    gemm_set_activation_mirrors(acts);
  }
  ~MirrorScope() {
    gemm_set_bf16_mirrors(prev);
    gemm_set_activation_mirrors(prev_acts);
  }
  MirrorScope(const MirrorScope&) = delete;
  MirrorScope& operator=(const MirrorScope&) = delete;
};
}  // namespace

namespace {
// Zeros [b, e) of g for each span, every thread an equal share of each.
template <class T>
void zero_spans(T* g, const std::vector<std::pair<size_t, size_t>>& spans) {
#pragma omp parallel
  {
    const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
    for (const auto& [b, e] : spans) std::fill(g + b + (e - b) * t / nt, g + b + (e - b) * (t + 1) / nt, T(0));
  }
}
}  // namespace

template <class T>
void Model<T>::zero_grads() {
  zero_spans(grads.data(), {{0, grads.size()}});
}

template <class T>
void Model<T>::reserve(int B, int T_) {
  ZAYA_CHECK(B > 0 && T_ > 0, "batch ", B, " x sequence ", T_, " must be positive");
  if (B * T_ <= cap_B_ * cap_T_ && B <= cap_B_ && T_ <= cap_T_) return;
  B = std::max(B, cap_B_);
  T_ = std::max(T_, cap_T_);
  const ModelConfig& c = cfg();
  const size_t N = size_t(B) * T_, D = c.hidden_size;
  inputs_.assign(N, 0);
  targets_.assign(N, 0);
  for (auto* v : {&emb_ND_, &res_final_ND_, &dx_ND_, &dxf_ND_, &dh_[0], &dh_[1], &dres_[0], &dres_[1]})
    v->assign(N * D, 0);
  rstd_f_N_.assign(N, 0);
  lse_N_.assign(N, 0);
  dr_carry_NR_.assign(N * c.router_hidden, 0);
  acts_.resize(c.num_sublayers());
  for (int n = 0; n < c.num_sublayers(); ++n) {
    auto& a = acts_[n];
    for (auto* v : {&a.res_ND, &a.out_ND}) v->assign(N * D, 0);  // (x_ND: forward sizes it, as it keeps it)
    a.rstd_N.assign(N, 0);
    if (n % 2 == 0)
      a.cca.resize(c, B, T_);
    else
      a.moe.resize(c, int(N)), a.moe.aux_coeff = aux_coeff_;
  }
  cca_scratch_.resize(c, B, T_);
  moe_scratch_.resize(c, int(N));
  experts_->resize(c, int(N) * c.topk);
  cap_B_ = B;
  cap_T_ = T_;
}

template <class T>
GemmOperand Model<T>::xf_operand() const {
  if constexpr (std::is_same_v<T, float>)
    return xf_bf16_only_ ? GemmOperand{nullptr, x16_.at(size_t(cfg().num_sublayers())).data(), cfg().hidden_size}
                         : GemmOperand{xf_ND_.data(), nullptr, cfg().hidden_size};
  return {};
}

// The LM head with bf16 products and targets: the product runs over blocks of vocabulary
// columns into one fp32 block (logits_NV_, ~4 MB), each block rounded into logits16_, so no
// [N, V] fp32 array is held (zaya1-small B=8 T=256: 64 MiB fp32 -> 32 MiB bf16 + the block).
// The embedding's rows are packed once whatever the blocks (a block is a run of them), and xf
// is read in place.
template <class T>
void Model<T>::lm_head_bf16(int N, int D, int V) {
  if constexpr (std::is_same_v<T, float>) {
    const int Vb = std::clamp(int((size_t(4) << 20) / (sizeof(float) * size_t(N)) / 64 * 64), 64, V);
    if (logits_NV_.capacity() > 2 * size_t(N) * Vb) std::vector<T>().swap(logits_NV_);  // an fp32 forward's [N, V]
    logits_NV_.resize(size_t(N) * Vb);
    logits16_.resize(size_t(N) * V);
    for (int v0 = 0; v0 < V; v0 += Vb) {
      const int vb = std::min(Vb, V - v0);
      {
        ZAYA_PROFILE("lm_head");
        gemm_bf16(Trans::N, Trans::T, N, vb, D, 1.f, xf_operand(), {p(layout.embed) + size_t(v0) * D, nullptr, D},
                  0.f, logits_NV_.data(), vb);
      }
      ZAYA_PROFILE("cross_entropy");
      parallel_for(N, [&](int64_t i) {
        convert_to_bf16(&logits_NV_[size_t(i) * vb], &logits16_[size_t(i) * V + v0], size_t(vb));
      });
    }
  } else {
    (void)N, (void)D, (void)V;
  }
}

template <class T>
static const T* opt(const std::vector<T>& v, size_t off) {
  return off == kNone ? nullptr : v.data() + off;
}

template <class T>
ForwardResult Model<T>::forward(const int32_t* inputs, const int32_t* targets, int B, int T_, int pos0,
                                DecodeState<T>* state) {
  const ModelConfig& c = cfg();
  if (state) pos0 = state->len;
  decoded_ = state != nullptr;
  ZAYA_CHECK(pos0 + T_ <= c.max_position_embeddings, "sequence end ", pos0 + T_,
             " exceeds max_position_embeddings ", c.max_position_embeddings);
  reserve(B, T_);
  B_ = B;
  S_ = T_;
  pos0_ = pos0;
  const int N = B * T_, D = c.hidden_size, V = c.vocab_size;
  for (int i = 0; i < N; ++i)
    ZAYA_CHECK(inputs[i] >= 0 && inputs[i] < V, "token id ", inputs[i], " at position ", i,
               " is outside the vocabulary (", V, ")");
  std::copy(inputs, inputs + N, inputs_.begin());
  if constexpr (std::is_same_v<T, float>) {
    if (split_) {
      if (gemm_settings().precision != GemmPrecision::BF16 || !bf16_gemm_supported()) {
        plain_master();  // fp32 products read params as they are
      } else if (!split_encoded_) {
        ZAYA_PROFILE("bf16_weights");
        split_->encode(params.data());
        split_encoded_ = true;
      }
    } else if (bf16_weights() && !bf16_current_) {
      ZAYA_PROFILE("bf16_weights");
      convert_to_bf16_weights(params.data(), params_bf16.data(), params.size());
    }
  }
  const bool bf16_products = split_encoded_ || !params_bf16.empty();  // the weights in bf16: copy or split
  bf16_for_backward_ = bf16_products;
  MirrorScope mirror(weight_mirrors());
  act_mirrors_.clear();
  x16_count_ = 0;
  const bool copies = std::is_same_v<T, float> && bf16_products && gemm_activation_copies_on();
  // The bf16 copy of a norm's output rows (nullptr without them), listed as a mirror of x
  // unless x is not kept (nullptr).
  auto x16 = [&](size_t slot, const T* x) -> bf16* {
    if constexpr (std::is_same_v<T, float>) {
      if (!copies) return nullptr;
      if (x16_.size() <= slot) x16_.resize(slot + 1);
      x16_[slot].resize(size_t(N) * D);
      if (x) act_mirrors_.push_back({x, size_t(N) * D, x16_[slot].data()});
      ++x16_count_;
      return x16_[slot].data();
    } else {
      (void)slot, (void)x;
      return nullptr;
    }
  };
  // An attention sub-layer's x feeds nothing but its projections' products: with the copies
  // on, and neither a decode cache nor a sequence shard (which keep x's rows), it is kept only
  // in bf16 (cca_forward's x16). zaya1-small B=8 T=256: 4 MiB fp32 per sub-layer not held.
  const bool cca_x16_only = copies && !state && !(shard_ && shard_->count() > 1);
  {
    ZAYA_PROFILE("embedding");
    if constexpr (std::is_same_v<T, float>)
      if (split_encoded_) split_rows_gather(emb_ND_.data(), inputs, p(layout.embed), N, D);
    if (!split_encoded_) embedding_forward(emb_ND_.data(), inputs, p(layout.embed), N, D);
  }
  const T* h = emb_ND_.data();
  const T* res = nullptr;
  const T* r_prev = nullptr;
  int moe_index = 0;
  double aux = 0;
  for (int n = 0; n < c.num_sublayers(); ++n) {
    const SublayerOffsets& so = layout.sub[n];
    SublayerActs<T>& a = acts_[n];
    ZAYA_PROFILE(so.attention ? "cca" : "moe");
    a.x_bf16_only = so.attention && cca_x16_only;
    if (a.x_bf16_only)
      std::vector<T>().swap(a.x_ND);
    else
      a.x_ND.resize(size_t(N) * D);
    T* x = a.x_bf16_only ? nullptr : a.x_ND.data();
    bf16* xc = nullptr;
    {
      ZAYA_PROFILE("res_merge+norm");
      xc = x16(size_t(n), x);
      merge_norm_forward(a.res_ND.data(), x, a.rstd_N.data(), h, res, opt(params, so.rs.hs_scale),
                         opt(params, so.rs.hs_bias), opt(params, so.rs.res_scale), opt(params, so.rs.res_bias),
                         p(so.norm), N, D, c.norm_eps, xc);
      gemm_set_activation_mirrors(act_mirrors_);
    }
    if (so.attention) {
      cca_forward(a.out_ND.data(), x, params.data(), so.cca, c, CcaDims{B, T_, pos0}, rope_, a.cca, cca_scratch_,
                  state ? &state->cca[size_t(n / 2)] : nullptr, state ? nullptr : shard_.get(),
                  a.x_bf16_only ? xc : nullptr);
    } else {
      moe_forward(a.out_ND.data(), a.x_ND.data(), r_prev, params.data(), buffers.data() + so.moe.router.balancing_bias,
                  so.moe, c, N, moe_index, a.moe, *experts_);
      r_prev = a.moe.r_NR.data();
      aux += a.moe.aux_loss;
      ++moe_index;
    }
    h = a.out_ND.data();
    res = a.res_ND.data();
  }
  ZAYA_PROFILE("lm_head+loss");
  const ResScaleOffsets& fr = layout.final_rs;
  logits_bf16_ = targets && bf16_products;
  // With the copies on and the logits in bf16, xf feeds nothing but the LM head's products:
  // it is kept only in bf16.
  xf_bf16_only_ = logits_bf16_ && copies;
  if (xf_bf16_only_)
    std::vector<T>().swap(xf_ND_);
  else
    xf_ND_.resize(size_t(N) * D);
  T* xf = xf_bf16_only_ ? nullptr : xf_ND_.data();
  bf16* xfc = x16(size_t(c.num_sublayers()), xf);
  merge_norm_forward(res_final_ND_.data(), xf, rstd_f_N_.data(), h, res, opt(params, fr.hs_scale),
                     opt(params, fr.hs_bias), opt(params, fr.res_scale), opt(params, fr.res_bias),
                     p(layout.final_norm), N, D, c.norm_eps, xfc);
  gemm_set_activation_mirrors(act_mirrors_);
  if (logits_bf16_) {
    lm_head_bf16(N, D, V);
  } else {
    ZAYA_PROFILE("lm_head");
    logits_NV_.resize(size_t(N) * V);
    gemm(Trans::N, Trans::T, N, V, D, T(1), xf_ND_.data(), D, p(layout.embed), D, T(0), logits_NV_.data(), V);
  }
  if (state) state->len += T_;
  ForwardResult r;
  r.aux_loss = aux;
  if (targets) {
    std::copy(targets, targets + N, targets_.begin());
    for (int i = 0; i < N; ++i)
      ZAYA_CHECK(targets[i] == kIgnoreIndex || (targets[i] >= 0 && targets[i] < V), "target id ", targets[i],
                 " at position ", i, " is outside the vocabulary (", V, ")");
    ZAYA_PROFILE("cross_entropy");
    if constexpr (std::is_same_v<T, float>)
      if (logits_bf16_) r.loss_sum = cross_entropy_forward_bf16(lse_N_.data(), logits16_.data(), targets, N, V, &r.count);
    if (!logits_bf16_)
      r.loss_sum = cross_entropy_forward(lse_N_.data(), (T*)nullptr, logits_NV_.data(), targets, N, V, &r.count);
    r.loss = r.count ? r.loss_sum / r.count : 0.0;
  } else {
    std::fill(targets_.begin(), targets_.begin() + N, kIgnoreIndex);
  }
  count_ = r.count;
  return r;
}

template <class T>
void Model<T>::backward(T loss_scale, GradMode mode) {
  const ModelConfig& c = cfg();
  const int B = B_, T_ = S_, N = B * T_, D = c.hidden_size, V = c.vocab_size;
  ZAYA_CHECK(N > 0, "backward() needs a forward() first");
  ZAYA_CHECK(!decoded_, "backward() after a decode forward is not supported");
  T* dW = grads.data();
  MirrorScope mirror(bf16_for_backward_ ? weight_mirrors() : std::vector<Bf16Mirror>{},
                     bf16_for_backward_ ? act_mirrors_ : std::vector<Bf16Mirror>{});
  bf16_current_ = bf16_for_backward_ = false;  // the caller updates params next
  // Loss and tied LM head (dlogits overwrite the logits buffer).
  T* dlogits = logits_NV_.data();
  const T scale = count_ ? loss_scale / T(count_) : T(0);
  const bool overwrite = mode == GradMode::Overwrite;
  if (overwrite) {
    ZAYA_PROFILE("zero_grads");
    zero_spans(dW, zeroed_on_overwrite_);
  }
  const T dW_beta = overwrite ? T(0) : T(1);  // of the products that write the direct spans
  {
    ZAYA_PROFILE("lm_head+loss");
    bool done = false;
    if constexpr (std::is_same_v<T, float>) {
      if (logits_bf16_) {
        // bf16 products: the gradient is written once, in bf16, over the bf16 logits, and
        // both products read it as stored.
        {
          ZAYA_PROFILE("cross_entropy");
          cross_entropy_backward_bf16(logits16_.data(), lse_N_.data(), targets_.data(), N, V, scale);
        }
        ZAYA_PROFILE("lm_head");
        const bf16* d16 = logits16_.data();
        gemm_bf16(Trans::N, Trans::N, N, D, V, 1.f, {nullptr, d16, V}, {p(layout.embed), nullptr, D}, 0.f,
                  dxf_ND_.data(), D);
        gemm_bf16(Trans::T, Trans::N, V, D, N, 1.f, {nullptr, d16, V}, xf_operand(),
                  float(dW_beta), dW + layout.embed, D);
        done = true;
      }
    }
    if (!done) {
      {
        ZAYA_PROFILE("cross_entropy");
        cross_entropy_backward(dlogits, logits_NV_.data(), lse_N_.data(), targets_.data(), N, V, scale);
      }
      ZAYA_PROFILE("lm_head");
      gemm(Trans::N, Trans::N, N, D, V, T(1), dlogits, V, p(layout.embed), D, T(0), dxf_ND_.data(), D);
      gemm(Trans::T, Trans::N, V, D, N, T(1), dlogits, V, xf_ND_.data(), D, dW_beta, dW + layout.embed, D);
    }
  }
  // Final norm and merge, then each sub-layer's entry: one fused pass (kernels/norm.h).
  auto merge_norm_back = [&](const ResScaleOffsets& rs, size_t norm, T* dh_prev, T* dres_prev, const T* dx,
                             const T* dres_in, const T* res_n, const T* rstd, const T* h_in, const T* res_in) {
    auto g = [&](size_t off) { return off == kNone ? nullptr : dW + off; };
    merge_norm_backward(dh_prev, dres_prev, dW + norm, g(rs.hs_scale), g(rs.hs_bias), g(rs.res_scale),
                        g(rs.res_bias), dx, dres_in, res_n, p(norm), rstd, h_in, res_in, opt(params, rs.hs_scale),
                        opt(params, rs.hs_bias), opt(params, rs.res_scale), opt(params, rs.res_bias), N, D);
  };
  const int L2 = c.num_sublayers();
  merge_norm_back(layout.final_rs, layout.final_norm, dh_[1].data(), dres_[1].data(), dxf_ND_.data(), nullptr,
                  res_final_ND_.data(), rstd_f_N_.data(), acts_[L2 - 1].out_ND.data(), acts_[L2 - 1].res_ND.data());
  int cur = 1;  // invariant in the loop: dh_[cur] = d out_n, dres_[cur] = d res_n
  std::fill(dr_carry_NR_.begin(), dr_carry_NR_.end(), T(0));
  int moe_index = c.num_layers - 1;
  for (int n = L2 - 1; n >= 0; --n) {
    const SublayerOffsets& so = layout.sub[n];
    SublayerActs<T>& a = acts_[n];
    T* dout = dh_[cur].data();
    T* dres_n = dres_[cur].data();
    T* dx = dx_ND_.data();
    ZAYA_PROFILE(so.attention ? "cca" : "moe");
    if (so.attention) {  // both write dx (not accumulate): no zero fill first
      cca_backward(dx, dW, dout, a.x_bf16_only ? nullptr : a.x_ND.data(), params.data(), so.cca, c,
                   CcaDims{B, T_, pos0_}, rope_, a.cca, cca_scratch_, shard_.get(),
                   a.x_bf16_only ? x16_[size_t(n)].data() : nullptr);
    } else {
      const T* r_prev = moe_index > 0 ? acts_[n - 2].moe.r_NR.data() : nullptr;
      moe_backward(dx, dW, dr_carry_NR_.data(), dout, a.x_ND.data(), r_prev, params.data(), so.moe, c, N,
                   moe_index, a.moe, moe_scratch_, *experts_, double(loss_scale), mode);
      --moe_index;
    }
    ZAYA_PROFILE("res_merge+norm");
    const T* h_in = n > 0 ? acts_[n - 1].out_ND.data() : emb_ND_.data();
    const T* res_in = n > 0 ? acts_[n - 1].res_ND.data() : nullptr;
    merge_norm_back(so.rs, so.norm, dh_[1 - cur].data(), n > 0 ? dres_[1 - cur].data() : nullptr, dx, dres_n,
                    a.res_ND.data(), a.rstd_N.data(), h_in, res_in);
    cur = 1 - cur;
    if (grads_ready) grads_ready(sub_begin_[size_t(n)]);
  }
  ZAYA_PROFILE("embedding");
  embedding_backward(dW + layout.embed, dh_[cur].data(), inputs_.data(), N, D);
}

template <class T>
void Model<T>::init_decode_state(DecodeState<T>& st, int batch, int max_len) const {
  ZAYA_CHECK(max_len <= cfg().max_position_embeddings, "decode length ", max_len, " exceeds max_position_embeddings ",
             cfg().max_position_embeddings);
  st.cca.resize(cfg().num_layers);
  for (auto& c : st.cca) c.init(cfg(), batch, max_len);
  st.len = 0;
}

template <class T>
std::vector<std::vector<int64_t>> Model<T>::class_counts() const {
  std::vector<std::vector<int64_t>> out;
  for (size_t n = 1; n < acts_.size(); n += 2) out.push_back(acts_[n].moe.class_counts);
  return out;
}

template <class T>
std::vector<std::vector<double>> Model<T>::class_prob_sums() const {
  std::vector<std::vector<double>> out;
  for (size_t n = 1; n < acts_.size(); n += 2) out.push_back(acts_[n].moe.class_prob);
  return out;
}

template <class T>
double Model<T>::min_routing_margin() const {
  double m = 1e300;
  for (size_t n = 1; n < acts_.size(); n += 2) m = std::min(m, acts_[n].moe.min_margin);
  return m;
}

template class Model<float>;
template class Model<double>;

}  // namespace zaya
