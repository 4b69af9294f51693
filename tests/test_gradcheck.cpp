// Finite-difference gradient checks: one table, one row per op. The kernels, then the
// sub-layers with their own backward: CCA whole, CCA split over two context-parallel shards
// (the conv's halo gradient, the previous x, the K/V gather), the MoE sub-layer (router with
// EDA carry, MoD skip class, gate gather, experts, Switch aux loss) and the experts alone,
// all in double at 1e-6; then a selection again through the float path (kF32Tol).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "check_util.h"
#include "gradcheck.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "model/cca.h"
#include "model/config.h"
#include "model/moe.h"
#include "model/params.h"

using namespace zaya;
using namespace zaya::test;
using V = std::vector<double>;
using VV = std::vector<V>;

static constexpr double kTol = 1e-6;

template <class T>
static std::vector<T> cast(const V& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
static void add_to(V& d, const std::vector<T>& g) {
  for (size_t k = 0; k < d.size(); ++k) d[k] += double(g[k]);
}
template <class T>
static const char* suffix() {
  return sizeof(T) == 4 ? "_f32" : "";
}

// ---------------------------------------------------------------- kernel rows

template <class T>
static OpCase rmsnorm_row() {
  const int N = 5, D = 7;
  auto fwd = [=](const VV& in, std::vector<T>& x, std::vector<T>& w, std::vector<T>& out, std::vector<T>& rstd) {
    x = cast<T>(in[0]), w = cast<T>(in[1]);
    out.assign(N * D, 0), rstd.assign(N, 0);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, D, 1e-5);
  };
  return {std::string("rmsnorm") + suffix<T>(), {N * D, D}, nullptr,
          [=](const VV& in, V& out) {
            std::vector<T> x, w, o, rstd;
            fwd(in, x, w, o, rstd);
            out.assign(o.begin(), o.end());
          },
          [=](const VV& in, const V& g, VV& d) {
            std::vector<T> x, w, o, rstd, gg = cast<T>(g), dx(N * D), dw(D);
            fwd(in, x, w, o, rstd);
            rmsnorm_backward(dx.data(), dw.data(), gg.data(), x.data(), w.data(), rstd.data(), N, D);
            add_to(d[0], dx), add_to(d[1], dw);
          }};
}

// A sub-layer's entry, fused forward and backward (merge_norm_forward / _backward): outputs x = rmsnorm(res) and
// res = res_merge(h, r) itself (the skip path's gradient reaches res directly), so one
// upstream gradient exercises both. with_r = false: the first sub-layer (no residual in).
template <class T>
static OpCase merge_norm_row(bool with_r) {
  const int N = 5, D = 7;
  struct Run {
    std::vector<T> h, r, hs, hb, rs, rb, w, res, x, rstd;
  };
  auto fwd = [=](const VV& in, Run& u) {
    u.h = cast<T>(in[0]), u.r = cast<T>(in[1]), u.hs = cast<T>(in[2]), u.hb = cast<T>(in[3]);
    u.rs = cast<T>(in[4]), u.rb = cast<T>(in[5]), u.w = cast<T>(in[6]);
    u.res.assign(N * D, 0), u.x.assign(N * D, 0), u.rstd.assign(N, 0);
    merge_norm_forward(u.res.data(), u.x.data(), u.rstd.data(), u.h.data(), with_r ? u.r.data() : nullptr,
                       u.hs.data(), u.hb.data(), u.rs.data(), u.rb.data(), u.w.data(), N, D, 1e-5);
  };
  return {std::string("merge_norm") + (with_r ? "" : "_first") + suffix<T>(),
          {N * D, N * D, D, D, D, D, D},
          nullptr,
          [=](const VV& in, V& out) {
            Run u;
            fwd(in, u);
            out.assign(u.x.begin(), u.x.end());
            out.insert(out.end(), u.res.begin(), u.res.end());
          },
          [=](const VV& in, const V& g, VV& d) {
            Run u;
            fwd(in, u);
            const std::vector<T> dx(g.begin(), g.begin() + N * D), dres(g.begin() + N * D, g.end());
            std::vector<T> dh(N * D, T(7)), dr(N * D, T(7)), dw(D), dhs(D), dhb(D), drs(D), drb(D);  // dh, dr overwritten
            merge_norm_backward(dh.data(), with_r ? dr.data() : nullptr, dw.data(), dhs.data(), dhb.data(), drs.data(),
                                drb.data(), dx.data(), dres.data(), u.res.data(), u.w.data(), u.rstd.data(),
                                u.h.data(), with_r ? u.r.data() : nullptr, u.hs.data(), u.hb.data(), u.rs.data(),
                                u.rb.data(), N, D);
            add_to(d[0], dh), add_to(d[2], dhs), add_to(d[3], dhb), add_to(d[6], dw);
            if (with_r) add_to(d[1], dr), add_to(d[4], drs), add_to(d[5], drb);
          }};
}

// Causal conv: B=2, T=5, C=3 heads x hd 4 = 12, K0=2, K1=3 (general kernel sizes). With a
// halo (context parallel): the P=3 steps before the shard are an input, and dhalo its gradient.
template <class T>
static OpCase conv_row(bool with_halo) {
  const ConvShape s{2, 5, 12, 4, 2, 3};
  const size_t P = size_t(s.K0 - 1 + s.K1 - 1), tall = size_t(s.rows()) * s.C;
  std::vector<size_t> sizes{size_t(s.B) * s.T * s.C, size_t(s.C) * s.K0, size_t(s.C), size_t(s.C) * s.hd * s.K1,
                            size_t(s.C)};
  if (with_halo) sizes.push_back(size_t(s.B) * P * s.C);
  struct Run {
    std::vector<T> p, w0, b0, w1, b1, halo, out, y0, w1p;
  };
  auto fwd = [=](const VV& in, Run& r) {
    r.p = cast<T>(in[0]), r.w0 = cast<T>(in[1]), r.b0 = cast<T>(in[2]), r.w1 = cast<T>(in[3]), r.b1 = cast<T>(in[4]);
    if (with_halo) r.halo = cast<T>(in[5]);
    r.out.assign(tall, 0), r.y0.assign(tall, 0), r.w1p.assign(size_t(s.K1) * s.C * s.hd, 0);
    causal_conv_forward(r.out.data(), r.y0.data(), r.w1p.data(), r.p.data(), with_halo ? r.halo.data() : nullptr,
                        r.w0.data(), r.b0.data(), r.w1.data(), r.b1.data(), s);
  };
  return {std::string(with_halo ? "causal_conv_halo" : "causal_conv") + suffix<T>(), sizes, nullptr,
          [=](const VV& in, V& out) {
            Run r;
            fwd(in, r);
            out.assign(r.out.begin(), r.out.end());
          },
          [=](const VV& in, const V& g, VV& d) {
            Run r;
            fwd(in, r);
            std::vector<T> gt = cast<T>(g), dy0(tall), dw1p(r.w1p.size());
            for (int row = 0; row < s.rows(); ++row)  // junk rows carry no gradient
              if (row % s.rows_per_batch() >= s.T) std::fill(&gt[size_t(row) * s.C], &gt[size_t(row + 1) * s.C], T(0));
            std::vector<T> dp(d[0].size()), dw0(d[1].size()), db0(d[2].size()), dw1(d[3].size()), db1(d[4].size()),
                dhalo(with_halo ? d[5].size() : 0);
            causal_conv_backward(dp.data(), with_halo ? dhalo.data() : nullptr, dw0.data(), db0.data(), dw1.data(),
                                 db1.data(), dy0.data(), dw1p.data(), gt.data(), r.y0.data(), r.w1p.data(),
                                 r.w1.data(), r.p.data(), with_halo ? r.halo.data() : nullptr, r.w0.data(), s);
            add_to(d[0], dp), add_to(d[1], dw0), add_to(d[2], db0), add_to(d[3], dw1), add_to(d[4], db1);
            if (with_halo) add_to(d[5], dhalo);
          }};
}

// Attention with GQA (Hq 4, Hk 2), strided q inside a packed row, and a shard offset.
// Tq 4: the direct path (attention_forward_group, decode); Tq 6 and 70: the BLAS path.
template <class T>
static OpCase attention_row(int Tq, int q_pos0) {
  const AttnShape a{2, Tq, Tq + q_pos0, q_pos0, 4, 2, 3, 20, 6, 6, 12};
  const size_t nq = size_t(a.B) * a.Tq * a.ldq, nk = size_t(a.B) * a.Tk * a.ldk, no = size_t(a.B) * a.Tq * a.ldo;
  struct Run {
    std::vector<T> q, k, v, out, lse, scratch;
  };
  auto fwd = [=](const VV& in, Run& r) {
    r.q = cast<T>(in[0]), r.k = cast<T>(in[1]), r.v = cast<T>(in[2]);
    r.out.assign(no, 0), r.lse.assign(size_t(a.B) * a.Hq * a.Tq, 0), r.scratch.assign(a.scratch_elems(64), 0);
    attention_forward(r.out.data(), r.lse.data(), r.q.data(), r.k.data(), r.v.data(), a, r.scratch.data());
  };
  return {"attention_T" + std::to_string(Tq) + "_pos0_" + std::to_string(q_pos0) + suffix<T>(), {nq, nk, nk}, nullptr,
          [=](const VV& in, V& out) {
            Run r;
            fwd(in, r);
            out.assign(r.out.begin(), r.out.end());
          },
          [=](const VV& in, const V& g, VV& d) {
            Run r;
            fwd(in, r);
            std::vector<T> gg = cast<T>(g), dq(nq), dk(nk), dv(nk);
            attention_backward(dq.data(), dk.data(), dv.data(), gg.data(), r.out.data(), r.lse.data(), r.q.data(),
                               r.k.data(), r.v.data(), a, r.scratch.data());
            add_to(d[0], dq), add_to(d[1], dk), add_to(d[2], dv);
          }};
}

// ---------------------------------------------------------------- sub-layer rows

// The tiny model's shapes with a 3-tap grouped conv (P = 3: general kernel sizes).
static ModelConfig sub_cfg(int topk = 1) {
  ModelConfig c = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  c.conv_kernel1 = 3;
  c.topk = topk;
  return c;
}

// A sub-layer's own parameter tensors (those of sub-layer n whose name contains `part`) as
// separate inputs, packed back to back into a local W; offsets remap from the layout's.
struct SubParams {
  std::vector<size_t> global, local, numel;
  std::vector<double> scale;  // init: matrices 1/sqrt(fan-in), so activations stay O(1)
  std::vector<bool> around_one;  // norms and scales: 1 + 0.3 N(0,1)
  size_t total = 0;
  SubParams(const ModelLayout& L, int n, const std::string& part) {
    for (const ParamInfo& p : L.params.params)
      if (p.sublayer == n && p.name.find(part) != std::string::npos) {
        global.push_back(p.offset), local.push_back(total), numel.push_back(p.numel);
        const bool matrix = p.role == ParamRole::Matrix || p.role == ParamRole::ExpertMatrix;
        scale.push_back(matrix ? 1 / std::sqrt(double(p.shape.back())) : p.role == ParamRole::Conv ? 0.5 : 0.3);
        around_one.push_back(p.role == ParamRole::Norm || p.role == ParamRole::Scale);
        total += p.numel;
      }
  }
  size_t operator()(size_t g) const {
    if (g == kNone) return kNone;
    for (size_t i = 0; i < global.size(); ++i)
      if (global[i] == g) return local[i];
    ADD_FAILURE() << "offset " << g << " is not a tensor of this sub-layer";
    return 0;
  }
  // Inputs first.. are the tensors, in layout order.
  template <class T>
  std::vector<T> pack(const VV& in, size_t first) const {
    std::vector<T> W(total);
    for (size_t i = 0; i < numel.size(); ++i) std::copy(in[first + i].begin(), in[first + i].end(), &W[local[i]]);
    return W;
  }
  template <class T>
  void unpack_add(const std::vector<T>& dW, VV& d, size_t first) const {
    for (size_t i = 0; i < numel.size(); ++i)
      for (size_t j = 0; j < numel[i]; ++j) d[first + i][j] += double(dW[local[i] + j]);
  }
  void init(size_t i, V& v) const {
    for (auto& x : v) x = around_one[i] ? 1 + 0.3 * x : scale[i] * x;
  }
  void append_sizes(std::vector<size_t>& sizes) const { sizes.insert(sizes.end(), numel.begin(), numel.end()); }
};

struct CcaFix {
  ModelConfig c;
  ModelLayout L;
  SubParams sp;
  CcaOffsets o;
  RopeTable rope;
  CcaFix() : c(sub_cfg()), L(build_layout(c)), sp(L, 0, "self_attn") {
    const CcaOffsets& g = L.sub[0].cca;
    o = {sp(g.wq), sp(g.wk), sp(g.wv1), sp(g.wv2), sp(g.conv0_w), sp(g.conv0_b), sp(g.conv1_w), sp(g.conv1_b),
         sp(g.temp), sp(g.wo)};
    rope.build(c.rotary_dim(), c.max_position_embeddings, c.rope_theta);
  }
};

// The whole CCA sub-layer: x [B*T, D] and every CCA parameter (q, k, v1, v2, both convs with
// biases, temperature, o_proj); pos0 moves RoPE's positions.
template <class T>
static OpCase cca_row(int B, int Tn, int pos0) {
  auto f = std::make_shared<const CcaFix>();
  const int D = f->c.hidden_size;
  const size_t N = size_t(B) * Tn;
  std::vector<size_t> sizes{N * D};
  f->sp.append_sizes(sizes);
  struct Run {
    std::vector<T> x, W, out;
    CcaSaved<T> s;
    CcaScratch<T> k;
  };
  auto fwd = [=](const VV& in, Run& r) {
    r.x = cast<T>(in[0]), r.W = f->sp.pack<T>(in, 1), r.out.assign(N * D, 0);
    r.s.resize(f->c, B, Tn), r.k.resize(f->c, B, Tn);
    cca_forward(r.out.data(), r.x.data(), r.W.data(), f->o, f->c, CcaDims{B, Tn, pos0}, f->rope, r.s, r.k);
  };
  return {"cca_B" + std::to_string(B) + "_T" + std::to_string(Tn) + "_pos0_" + std::to_string(pos0) + suffix<T>(),
          sizes, [f](int i, V& v) { if (i > 0) f->sp.init(size_t(i - 1), v); },
          [=](const VV& in, V& out) {
            Run r;
            fwd(in, r);
            out.assign(r.out.begin(), r.out.end());
          },
          [=](const VV& in, const V& g, VV& d) {
            Run r;
            fwd(in, r);
            std::vector<T> gg = cast<T>(g), dx(N * D), dW(f->sp.total);
            cca_backward(dx.data(), dW.data(), gg.data(), r.x.data(), r.W.data(), f->o, f->c, CcaDims{B, Tn, pos0},
                         f->rope, r.s, r.k);
            add_to(d[0], dx);
            f->sp.unpack_add(dW, d, 1);
          }};
}

// Two context-parallel shards of one sequence run in turn in this process, as the MPI
// shards (parallel/context_parallel.h) would run side by side: shard 0's forward leaves its halo
// (last P pre-conv rows, last x) and its K/V in a mailbox for shard 1; shard 1's backward
// leaves the dK/dV of shard 0's rows and its halo gradients (dhalo, d x_prev) for shard 0.
template <class T>
struct Mailbox {
  std::vector<T> halo_p, halo_x, k0, v0, dk0, dv0, dhalo, dx_prev;
};
template <class T>
class PairShard : public SeqShard<T> {
 public:
  PairShard(int idx, Mailbox<T>& m) : idx_(idx), m_(m) {}
  int index() const override { return idx_; }
  int count() const override { return 2; }
  void halo(const T* p, const T* x, int B, int Tn, int C, int P, int D, T* halo_BPC, T* x_prev_BD) override {
    if (idx_ == 0) {
      m_.halo_p.resize(size_t(B) * P * C), m_.halo_x.resize(size_t(B) * D);
      for (int b = 0; b < B; ++b) {
        std::copy_n(p + (size_t(b) * Tn + Tn - P) * C, size_t(P) * C, &m_.halo_p[size_t(b) * P * C]);
        std::copy_n(x + (size_t(b) * Tn + Tn - 1) * D, D, &m_.halo_x[size_t(b) * D]);
      }
      std::fill_n(halo_BPC, size_t(B) * P * C, T(0)), std::fill_n(x_prev_BD, size_t(B) * D, T(0));
    } else {
      std::copy(m_.halo_p.begin(), m_.halo_p.end(), halo_BPC), std::copy(m_.halo_x.begin(), m_.halo_x.end(), x_prev_BD);
    }
  }
  void gather_kv(const T* k, int ldk, const T* v, int B, int Tn, int KD, T* k_all, T* v_all) override {
    const int Tk = (idx_ + 1) * Tn;
    if (idx_ == 0) m_.k0.resize(size_t(B) * Tn * KD), m_.v0.resize(size_t(B) * Tn * KD);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Tn; ++t) {
        const size_t own = (size_t(b) * Tk + size_t(idx_) * Tn + t) * KD, row = size_t(b) * Tn + t;
        std::copy_n(k + row * ldk, KD, k_all + own), std::copy_n(v + row * KD, KD, v_all + own);
        if (idx_ == 0) {
          std::copy_n(k + row * ldk, KD, &m_.k0[row * KD]), std::copy_n(v + row * KD, KD, &m_.v0[row * KD]);
        } else {
          const size_t first = (size_t(b) * Tk + t) * KD;
          std::copy_n(&m_.k0[row * KD], KD, k_all + first), std::copy_n(&m_.v0[row * KD], KD, v_all + first);
        }
      }
  }
  void reduce_kv_grads(const T* dk_all, const T* dv_all, int B, int Tn, int KD, T* dk, T* dv) override {
    const int Tk = (idx_ + 1) * Tn;
    if (idx_ == 1) m_.dk0.resize(size_t(B) * Tn * KD), m_.dv0.resize(size_t(B) * Tn * KD);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Tn; ++t)
        for (int j = 0; j < KD; ++j) {
          const size_t row = (size_t(b) * Tn + t) * KD + j, own = (size_t(b) * Tk + size_t(idx_) * Tn + t) * KD + j;
          if (idx_ == 1) {
            dk[row] = dk_all[own], dv[row] = dv_all[own];
            const size_t first = (size_t(b) * Tk + t) * KD + j;
            m_.dk0[row] = dk_all[first], m_.dv0[row] = dv_all[first];
          } else {
            dk[row] = dk_all[own] + m_.dk0[row], dv[row] = dv_all[own] + m_.dv0[row];
          }
        }
  }
  void halo_grads(const T* dhalo, const T* dx_prev, int B, int Tn, int C, int P, int D, T* dp, T* dx) override {
    if (idx_ == 1) {  // to shard 0; no shard after this one
      m_.dhalo.assign(dhalo, dhalo + size_t(B) * P * C), m_.dx_prev.assign(dx_prev, dx_prev + size_t(B) * D);
      return;
    }
    for (int b = 0; b < B; ++b) {  // shard 0's own dhalo is the padding's: dropped
      for (size_t j = 0; j < size_t(P) * C; ++j)
        dp[(size_t(b) * Tn + Tn - P) * C + j] += m_.dhalo[size_t(b) * P * C + j];
      for (int j = 0; j < D; ++j) dx[(size_t(b) * Tn + Tn - 1) * D + j] += m_.dx_prev[size_t(b) * D + j];
    }
  }

 private:
  int idx_;
  Mailbox<T>& m_;
};

// Both shards' forward, in order; x and out are [shard][B, Ts, D].
template <class T>
struct CpRun {
  std::vector<T> x, W, out;
  CcaSaved<T> s[2];
  CcaScratch<T> k;  // shared, as the model shares one across sub-layers
  Mailbox<T> m;
  PairShard<T> sh[2]{{0, m}, {1, m}};
  void forward(const CcaFix& f, int B, int Ts) {
    const size_t n = size_t(B) * Ts * f.c.hidden_size;
    out.assign(2 * n, 0);
    k.resize(f.c, B, Ts);
    for (int i = 0; i < 2; ++i) {
      s[i].resize(f.c, B, Ts);
      cca_forward(&out[i * n], &x[i * n], W.data(), f.o, f.c, CcaDims{B, Ts, i * Ts}, f.rope, s[i], k,
                  (CcaCache<T>*)nullptr, &sh[i]);
    }
  }
  void backward(const CcaFix& f, int B, int Ts, const std::vector<T>& dout, std::vector<T>& dx, std::vector<T>& dW) {
    const size_t n = size_t(B) * Ts * f.c.hidden_size;
    for (int i = 1; i >= 0; --i)  // the last shard first: its gradients flow back to the earlier one
      cca_backward(&dx[i * n], dW.data(), &dout[i * n], &x[i * n], W.data(), f.o, f.c, CcaDims{B, Ts, i * Ts}, f.rope,
                   s[i], k, &sh[i]);
  }
};

template <class T>
static OpCase cca_cp2_row(int B, int Ts) {
  auto f = std::make_shared<const CcaFix>();
  const size_t n = size_t(B) * Ts * f->c.hidden_size;
  std::vector<size_t> sizes{2 * n};
  f->sp.append_sizes(sizes);
  auto fwd = [=](const VV& in, CpRun<T>& r) {
    r.x = cast<T>(in[0]), r.W = f->sp.pack<T>(in, 1);
    r.forward(*f, B, Ts);
  };
  return {"cca_cp2_B" + std::to_string(B) + "_Ts" + std::to_string(Ts) + suffix<T>(), sizes,
          [f](int i, V& v) { if (i > 0) f->sp.init(size_t(i - 1), v); },
          [=](const VV& in, V& out) {
            CpRun<T> r;
            fwd(in, r);
            out.assign(r.out.begin(), r.out.end());
          },
          [=](const VV& in, const V& g, VV& d) {
            CpRun<T> r;
            fwd(in, r);
            std::vector<T> gg = cast<T>(g), dx(2 * n), dW(f->sp.total);
            r.backward(*f, B, Ts, gg, dx, dW);
            add_to(d[0], dx);
            f->sp.unpack_add(dW, d, 1);
          }};
}

// The MoE sub-layer of the second MoE (it has the EDA scale). Inputs: x, r_prev (the
// previous MoE's router state) and every router and expert tensor; outputs: the sub-layer
// output, this layer's router state r (its output weights are the dr_carry the next MoE's
// EDA sends back) and, with aux, the Switch aux loss (its weight is moe_backward's aux_scale).
struct MoeFix {
  ModelConfig c;
  ModelLayout L;
  SubParams sp;
  MoeOffsets o;
  std::vector<double> bias;  // balancing biases: a buffer, not differentiated
  MoeFix(int topk) : c(sub_cfg(topk)), L(build_layout(c)), sp(L, 3, "zaya_block") {
    const RouterOffsets& g = L.sub[3].moe.router;
    o.router = {sp(g.down_w), sp(g.down_b), sp(g.eda_scale), sp(g.norm_w), sp(g.mlp0_w),
                sp(g.mlp0_b), sp(g.mlp2_w), sp(g.mlp2_b), sp(g.mlp4_w), 0};
    for (size_t e = 0; e < L.sub[3].moe.fc1.size(); ++e)
      o.fc1.push_back(sp(L.sub[3].moe.fc1[e])), o.fc2.push_back(sp(L.sub[3].moe.fc2[e]));
    Philox r(5, 5);
    for (int e = 0; e < c.num_classes(); ++e) bias.push_back(0.05 * r.normal());
  }
};

template <class T>
struct MoeRun {
  std::vector<T> x, rp, W, bias, out;
  MoeSaved<T> s;
  std::unique_ptr<LocalExperts<T>> ex;
  void forward(const MoeFix& f, const VV& in, int N, bool aux) {
    x = cast<T>(in[0]), rp = cast<T>(in[1]), W = f.sp.pack<T>(in, 2), bias = cast<T>(f.bias);
    s.resize(f.c, N);
    s.aux_coeff = aux ? 0.3 : 0;
    ex = std::make_unique<LocalExperts<T>>(ExpertRange{0, f.c.num_experts}, 1);
    ex->resize(f.c, N * f.c.topk);
    out.assign(size_t(N) * f.c.hidden_size, 0);
    moe_forward(out.data(), x.data(), rp.data(), W.data(), bias.data(), f.o, f.c, N, 0, s, *ex);
  }
};

// Distance of every token's routing to a tie: the smallest gap between consecutive biased
// scores among its top k+1 (stricter than route_token's k-th vs (k+1)-th: with top-2 the
// order of an expert and the skip class inside the top 2 also decides, by the MoD rule).
// Negative when a class (each expert, the skip class) or, with top-2, the MoD rule's forced
// second skip is left unexercised.
template <class T>
static double moe_margin(const MoeFix& f, const MoeRun<T>& r, int N) {
  const int NC = f.c.num_classes(), K = f.c.topk, skip = f.c.num_experts;
  for (auto n : r.s.class_counts)
    if (n == 0) return -1;
  bool forced = K == 1;
  for (int i = 0; i < N; ++i) forced = forced || r.s.choice_NK[size_t(i) * K] == skip;
  if (!forced) return -1;
  double m = 1e300;
  for (int i = 0; i < N; ++i) {
    std::vector<double> v;
    for (int e = 0; e < NC; ++e) v.push_back(double(r.s.prob_NE[size_t(i) * NC + e]) + double(r.bias[e]));
    std::sort(v.begin(), v.end(), std::greater<>());
    for (int j = 0; j < K && j + 1 < NC; ++j) m = std::min(m, v[j] - v[j + 1]);
  }
  return m;
}

template <class T>
static OpCase moe_row(int topk, bool aux, int N) {
  auto f = std::make_shared<const MoeFix>(topk);
  const size_t D = f->c.hidden_size, R = f->c.router_hidden;
  std::vector<size_t> sizes{N * D, N * R};
  f->sp.append_sizes(sizes);
  OpCase op{"moe_top" + std::to_string(topk) + (aux ? "_aux" : "") + suffix<T>(), sizes,
            [f](int i, V& v) { if (i > 1) f->sp.init(size_t(i - 2), v); },
            [=](const VV& in, V& out) {
              MoeRun<T> r;
              r.forward(*f, in, N, aux);
              out.assign(r.out.begin(), r.out.end());
              out.insert(out.end(), r.s.r_NR.begin(), r.s.r_NR.end());
              if (aux) out.push_back(r.s.aux_loss);
            },
            [=](const VV& in, const V& g, VV& d) {
              MoeRun<T> r;
              r.forward(*f, in, N, aux);
              std::vector<T> dout(g.begin(), g.begin() + N * D), dr(g.begin() + N * D, g.begin() + N * (D + R));
              std::vector<T> dx(N * D), dW(f->sp.total);
              MoeScratch<T> k;
              k.resize(f->c, N);
              moe_backward(dx.data(), dW.data(), dr.data(), dout.data(), r.x.data(), r.rp.data(), r.W.data(), f->o,
                           f->c, N, 0, r.s, k, *r.ex, aux ? g.back() : 1.0);
              add_to(d[0], dx), add_to(d[1], dr);  // dr_carry on exit: the gradient of r_prev
              f->sp.unpack_add(dW, d, 2);
            }};
  op.margin = [=](const VV& in) {
    MoeRun<T> r;
    r.forward(*f, in, N, aux);
    return moe_margin(*f, r, N);
  };
  op.min_margin = 2e-3;
  return op;
}

// The experts alone behind the ExpertCompute seam: an expert-parallel slice (local experts
// 1..3 of 4, so counts are global and expert 0's rows are not this process's), one local
// expert with no rows, the second MoE sub-layer's saved activations.
template <class T>
static OpCase experts_row() {
  struct Fix {
    ModelConfig c = sub_cfg();
    ExpertRange range{1, 4};
    ModelLayout L = build_layout(c, range);
    SubParams sp{L, 1, "local_experts"};
    MoeOffsets o;
  };
  auto f = std::make_shared<Fix>();
  for (size_t e = 0; e < f->L.sub[1].moe.fc1.size(); ++e)
    f->o.fc1.push_back(f->sp(f->L.sub[1].moe.fc1[e])), f->o.fc2.push_back(f->sp(f->L.sub[1].moe.fc2[e]));
  const int64_t counts[4] = {5, 3, 0, 4};
  const size_t S = 7, D = f->c.hidden_size;
  std::vector<size_t> sizes{S * D};
  f->sp.append_sizes(sizes);
  auto fwd = [=](const VV& in, LocalExperts<T>& ex, std::vector<T>& x, std::vector<T>& W, std::vector<T>& y) {
    x = cast<T>(in[0]), W = f->sp.template pack<T>(in, 1), y.assign(S * D, 0);
    ex.resize(f->c, int(S));
    ex.forward(1, counts, x.data(), y.data(), W.data(), f->o);
  };
  return {std::string("experts_ep_slice") + suffix<T>(), sizes,
          [f](int i, V& v) { if (i > 0) f->sp.init(size_t(i - 1), v); },
          [=](const VV& in, V& out) {
            LocalExperts<T> ex(f->range, 2);
            std::vector<T> x, W, y;
            fwd(in, ex, x, W, y);
            out.assign(y.begin(), y.end());
          },
          [=](const VV& in, const V& g, VV& d) {
            LocalExperts<T> ex(f->range, 2);
            // Overwrite: every gradient this slice holds is written, whatever dW held (NaN).
            std::vector<T> x, W, y, gg = cast<T>(g), dx(S * D), dW(f->sp.total, std::numeric_limits<T>::quiet_NaN());
            fwd(in, ex, x, W, y);
            ex.backward(1, counts, x.data(), gg.data(), dx.data(), W.data(), dW.data(), f->o, GradMode::Overwrite);
            add_to(d[0], dx);
            f->sp.unpack_add(dW, d, 1);
          }};
}

// Float rows: the same checks through the float instantiations. Differences of a float
// forward carry rounding noise ~ u * S / h (u = 6e-8; S, the objective's rounding scale,
// is ~1e2 for a few hundred O(1) outputs) and, with the 4-point stencil, truncation
// ~ h^4 |f^(5)| / 30, negligible here: the measured error falls as 1/h (h = 1e-2: worst
// 5e-4, 3e-2: worst 2.1e-4, both on the CCA row). Routing rows take h = 1e-2 and draws
// whose routing margins are >= 2e-2: steps up to 2h must leave every token at least half its
// margin from a tie (one such step moved a margin by 5e-3; at h = 5e-3 the noise reached
// 6e-4); measured worst 1e-4. The bound 1e-3 sits 5x above that noise, while a wrong
// backward is off by O(1e-2) or more (the double rows hold every op to 1e-6; a float-only
// slip in a kernel shows here).
static constexpr double kF32Eps = 3e-2, kF32RoutingEps = 1e-2, kF32RoutingMargin = 2e-2, kF32Tol = 1e-3;

static std::vector<OpCase> op_table() {
  std::vector<OpCase> ops;
  const int N = 5, D = 7;
  ops.push_back(rmsnorm_row<double>());
  ops.push_back({"res_merge", {N * D, N * D, D, D, D, D}, nullptr,
                 [=](const VV& in, V& out) {
                   out.assign(N * D, 0);
                   res_merge_forward(out.data(), in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(),
                                     in[5].data(), N, D);
                 },
                 [=](const VV& in, const V& g, VV& d) {
                   res_merge_backward(d[0].data(), d[1].data(), d[2].data(), d[3].data(), d[4].data(), d[5].data(),
                                      g.data(), in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(),
                                      in[5].data(), N, D);
                 }});
  ops.push_back(merge_norm_row<double>(true));
  ops.push_back(merge_norm_row<double>(false));
  ops.push_back({"embedding", {11 * D}, nullptr,
                 [=](const VV& in, V& out) {
                   const int32_t ids[N] = {3, 0, 3, 10, 7};
                   out.assign(N * D, 0);
                   embedding_forward(out.data(), ids, in[0].data(), N, D);
                 },
                 [=](const VV&, const V& g, VV& d) {
                   const int32_t ids[N] = {3, 0, 3, 10, 7};
                   embedding_backward(d[0].data(), g.data(), ids, N, D);
                 }});
  ops.push_back({"bias_gelu", {N * D, D}, nullptr,
                 [=](const VV& in, V& out) {
                   out = in[0];
                   V pre(N * D);
                   bias_gelu_forward(out.data(), pre.data(), in[1].data(), N, D);
                 },
                 [=](const VV& in, const V& g, VV& d) {
                   V y = in[0], pre(N * D), dp(N * D);
                   bias_gelu_forward(y.data(), pre.data(), in[1].data(), N, D);
                   gelu_backward(dp.data(), g.data(), pre.data(), dp.size());
                   for (size_t k = 0; k < dp.size(); ++k) d[0][k] += dp[k];
                   colsum_product(d[1].data(), dp.data(), (const double*)nullptr, N, D, D, 0);
                 }});
  ops.push_back({"swiglu", {N * 2 * D}, nullptr,
                 [=](const VV& in, V& out) {
                   out.assign(N * D, 0);
                   swiglu_forward(out.data(), in[0].data(), N, 2 * D);
                 },
                 [=](const VV& in, const V& g, VV& d) { swiglu_backward(d[0].data(), g.data(), in[0].data(), N, 2 * D); }});
  ops.push_back({"softmax", {N * D}, nullptr,
                 [=](const VV& in, V& out) {
                   out.assign(N * D, 0);
                   softmax_forward(out.data(), in[0].data(), N, D);
                 },
                 [=](const VV& in, const V& g, VV& d) {
                   V p(N * D);
                   softmax_forward(p.data(), in[0].data(), N, D);
                   softmax_backward(d[0].data(), g.data(), p.data(), N, D);
                 }});
  // L2 norm with temperature over [N, H=3, hd=4], row stride 14 (padding columns unused).
  ops.push_back({"l2norm_temp", {N * 14, 3}, nullptr,
                 [=](const VV& in, V& out) {
                   out.assign(N * 14, 0);
                   V norms(N * 3);
                   l2norm_forward(out.data(), norms.data(), in[0].data(), in[1].data(), N, 3, 4, 14);
                 },
                 [=](const VV& in, const V& g, VV& d) {
                   V out(N * 14), norms(N * 3), gg = g;
                   for (int i = 0; i < N; ++i) gg[i * 14 + 12] = gg[i * 14 + 13] = 0;  // unused columns
                   l2norm_forward(out.data(), norms.data(), in[0].data(), in[1].data(), N, 3, 4, 14);
                   l2norm_backward(d[0].data(), d[1].data(), gg.data(), in[0].data(), norms.data(), in[1].data(), N, 3,
                                   4, 14);
                 }});
  // The fused pass CCA runs: L2 norm with temperature, then partial RoPE on each head (rot 4
  // of hd 8, H=2, row stride 19; rows at positions 3 + i % 4), one pass each way.
  ops.push_back({"l2norm_rope", {8 * 19, 2}, nullptr,
                 [=](const VV& in, V& out) {
                   RopeTable rt;
                   rt.build(4, 16, 10000.0);
                   out.assign(8 * 19, 0);
                   V norms(8 * 2);
                   l2norm_forward(out.data(), norms.data(), in[0].data(), in[1].data(), 8, 2, 8, 19, {&rt, 4, 3});
                 },
                 [=](const VV& in, const V& g, VV& d) {
                   RopeTable rt;
                   rt.build(4, 16, 10000.0);
                   V out(8 * 19), norms(8 * 2), gg = g;
                   for (int i = 0; i < 8; ++i) std::fill(&gg[i * 19 + 16], &gg[i * 19 + 19], 0.0);  // unused columns
                   l2norm_forward(out.data(), norms.data(), in[0].data(), in[1].data(), 8, 2, 8, 19, {&rt, 4, 3});
                   const V dy = gg;
                   l2norm_backward(d[0].data(), d[1].data(), gg.data(), in[0].data(), norms.data(), in[1].data(), 8, 2,
                                   8, 19, {&rt, 4, 3});
                   EXPECT_EQ(dy, gg);  // dy is read, not rotated in place
                 }});
  ops.push_back({"rope_partial", {2 * 4 * 2 * 8}, nullptr,
                 [=](const VV& in, V& out) {
                   RopeTable rt;
                   rt.build(4, 16, 10000.0);
                   out = in[0];
                   rope_forward(out.data(), rt, 8, 4, 3, 2, 8, 16);
                 },
                 [=](const VV&, const V& g, VV& d) {
                   RopeTable rt;
                   rt.build(4, 16, 10000.0);
                   V gg = g;
                   rope_backward(gg.data(), rt, 8, 4, 3, 2, 8, 16);
                   for (size_t k = 0; k < gg.size(); ++k) d[0][k] += gg[k];
                 }});
  ops.push_back({"cross_entropy", {N * D}, nullptr,
                 [=](const VV& in, V& out) {
                   const int32_t t[N] = {1, kIgnoreIndex, 6, 0, 2};
                   V lse(N);
                   int count;
                   out = {cross_entropy_forward(lse.data(), (double*)nullptr, in[0].data(), t, N, D, &count) / count};
                 },
                 [=](const VV& in, const V& g, VV& d) {
                   const int32_t t[N] = {1, kIgnoreIndex, 6, 0, 2};
                   V lse(N), dl(N * D);
                   int count;
                   cross_entropy_forward(lse.data(), (double*)nullptr, in[0].data(), t, N, D, &count);
                   cross_entropy_backward(dl.data(), in[0].data(), lse.data(), t, N, D, g[0] / count);
                   for (size_t k = 0; k < dl.size(); ++k) d[0][k] += dl[k];
                 }});
  ops.push_back(conv_row<double>(false));
  ops.push_back(conv_row<double>(true));
  // Tq 70: two causal row blocks (kAttnRowBlock 64), the second one short, with a shard offset.
  for (auto [Tq, q_pos0] : {std::pair{4, 0}, std::pair{4, 3}, std::pair{6, 2}, std::pair{70, 5}})
    ops.push_back(attention_row<double>(Tq, q_pos0));
  // Sub-layers: T 5 and 6 run attention's BLAS path, the shards' 4 rows its direct path.
  ops.push_back(cca_row<double>(2, 5, 0));
  ops.push_back(cca_row<double>(1, 6, 3));
  ops.push_back(cca_cp2_row<double>(2, 4));
  ops.push_back(moe_row<double>(1, false, 12));
  ops.push_back(moe_row<double>(2, true, 12));
  ops.push_back(experts_row<double>());
  std::vector<OpCase> f32{rmsnorm_row<float>(),        merge_norm_row<float>(true),   conv_row<float>(true),
                          attention_row<float>(6, 2),   cca_row<float>(2, 5, 0),       cca_cp2_row<float>(2, 4),
                          moe_row<float>(1, false, 12), moe_row<float>(2, true, 12),   experts_row<float>()};
  for (OpCase& op : f32) {
    op.eps = kF32Eps, op.tol = kF32Tol, op.four_point = true;
    if (op.margin) op.eps = kF32RoutingEps, op.min_margin = kF32RoutingMargin;
    ops.push_back(std::move(op));
  }
  return ops;
}

static const std::vector<OpCase>& ops() {
  static const std::vector<OpCase> table = op_table();
  return table;
}

class OpGrad : public ::testing::TestWithParam<size_t> {};

TEST_P(OpGrad, MatchesFiniteDifferences) {
  const OpCase& op = ops()[GetParam()];
  GradResult r = check_op(op);
  std::printf("  %-28s %6zu entries  worst error %.2e (bound %.0e)", op.name.c_str(), r.checked, r.max_rel_err, op.tol);
  if (op.margin) std::printf("  seed %llu, routing margin >= %.2e", (unsigned long long)r.seed, r.min_margin);
  std::printf("\n    worst at%s\n", r.worst.substr(op.name.size()).c_str());
  EXPECT_LT(r.max_rel_err, op.tol) << r.worst;
  // Routing is discontinuous: the draw must exercise every path, and no perturbed forward
  // may come near a tie (all took the same decisions as the unperturbed one).
  if (op.margin) {
    EXPECT_GE(r.min_margin, op.min_margin / 2) << "seed " << r.seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, OpGrad, ::testing::Range<size_t>(0, ops().size()),
                         [](const auto& info) { return ops()[info.param].name; });

// A gradient check must be able to fail: a wrong backward is caught.
TEST(OpGrad, DetectsAWrongBackward) {
  const auto it = std::find_if(ops().begin(), ops().end(), [](const OpCase& o) { return o.name == "softmax"; });
  ASSERT_NE(it, ops().end());
  OpCase op = *it;
  op.backward = [](const VV& in, const V& g, VV& d) {
    for (size_t k = 0; k < in[0].size(); ++k) d[0][k] += 0.5 * g[k];
  };
  EXPECT_GT(check_op(op).max_rel_err, 1e-3);
}

// The fused entry (merge_norm_forward) computes what res_merge_forward then rmsnorm_forward
// do: with and without the residual input, the scales, and in place (res_out aliasing res,
// as decode merges). Unscaled, bit for bit; scaled, the fused loop may contract
// (h + hb) hs + (r + rb) rs into one FMA where the branchy one rounds twice, so within an
// ulp of the terms. The bf16 copy is the fp32 output rounded (to_bf16) either way.
TEST(OpGrad, FusedMergeNormMatchesItsParts) {
  const int N = 9, D = 80;  // D: five 16-lane vectors
  Philox rng(5, 1);
  auto draw = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = float(rng.normal());
    return v;
  };
  const std::vector<float> h = draw(size_t(N) * D), r = draw(size_t(N) * D), hs = draw(D), hb = draw(D),
                           rs = draw(D), rb = draw(D), w = draw(D);
  for (int with_r = 0; with_r < 2; ++with_r)
    for (int scaled = 0; scaled < 2; ++scaled)
      for (int in_place = 0; in_place < 2; ++in_place) {
        if (in_place && !with_r) continue;
        const float* hsp = scaled ? hs.data() : nullptr;
        const float* hbp = scaled ? hb.data() : nullptr;
        const float* rsp = scaled ? rs.data() : nullptr;
        const float* rbp = scaled ? rb.data() : nullptr;
        std::vector<float> res1(size_t(N) * D), x1(res1.size()), rstd1(N), x2(res1.size()), rstd2(N);
        std::vector<float> res2 = in_place ? r : std::vector<float>(res1.size());  // in place: holds r
        std::vector<bf16> x1_16(res1.size()), x2_16(res1.size());
        res_merge_forward(res1.data(), h.data(), with_r ? r.data() : nullptr, hsp, hbp, rsp, rbp, N, D);
        rmsnorm_forward(x1.data(), rstd1.data(), res1.data(), w.data(), N, D, 1e-5, x1_16.data());
        const float* rin = !with_r ? nullptr : in_place ? res2.data() : r.data();
        merge_norm_forward(res2.data(), x2.data(), rstd2.data(), h.data(), rin, hsp, hbp, rsp, rbp, w.data(), N, D,
                           1e-5, x2_16.data());
        SCOPED_TRACE("with_r " + std::to_string(with_r) + " scaled " + std::to_string(scaled) + " in_place " +
                     std::to_string(in_place));
        for (size_t i = 0; i < x2.size(); ++i) ASSERT_EQ(to_bf16(x2[i]).bits, x2_16[i].bits) << i;
        if (!scaled) {
          EXPECT_EQ(0, std::memcmp(res1.data(), res2.data(), res1.size() * sizeof(float)));
          EXPECT_EQ(0, std::memcmp(x1.data(), x2.data(), x1.size() * sizeof(float)));
          EXPECT_EQ(0, std::memcmp(rstd1.data(), rstd2.data(), rstd1.size() * sizeof(float)));
          continue;
        }
        for (size_t i = 0; i < res1.size(); ++i) {
          const size_t d = i % D;
          const double terms = std::fabs((double(h[i]) + hb[d]) * hs[d]) + std::fabs((double(r[i]) + rb[d]) * rs[d]);
          ASSERT_NEAR(res1[i], res2[i], 2e-7 * terms) << i;
          ASSERT_NEAR(x1[i], x2[i], 1e-5) << i;
        }
        for (int i = 0; i < N; ++i) ASSERT_NEAR(rstd1[size_t(i)], rstd2[size_t(i)], 1e-6 * rstd1[size_t(i)]) << i;
      }
}

// The two in-process shards compute the unsplit sequence (so the cca_cp2 rows check the
// function context parallelism means): same outputs as one CCA over all 2*Ts positions.
TEST(OpGrad, PairShardsMatchTheWholeSequence) {
  const CcaFix f;
  const int B = 2, Ts = 4, D = f.c.hidden_size;
  const size_t n = size_t(B) * Ts * D;
  Philox rng(3, 3);
  VV in(1 + f.sp.numel.size());
  in[0].resize(2 * n);
  for (auto& v : in[0]) v = rng.normal();
  for (size_t i = 0; i < f.sp.numel.size(); ++i) {
    in[1 + i].resize(f.sp.numel[i]);
    for (auto& v : in[1 + i]) v = rng.normal();
    f.sp.init(i, in[1 + i]);
  }
  CpRun<double> cp;
  cp.x = in[0], cp.W = f.sp.pack<double>(in, 1);
  cp.forward(f, B, Ts);
  std::vector<double> x(2 * n), out(2 * n);  // [B, 2*Ts, D] from [shard][B, Ts, D]
  for (int i = 0; i < 2; ++i)
    for (int b = 0; b < B; ++b)
      std::copy_n(&in[0][i * n + size_t(b) * Ts * D], size_t(Ts) * D, &x[(size_t(b) * 2 * Ts + size_t(i) * Ts) * D]);
  CcaSaved<double> s;
  CcaScratch<double> k;
  s.resize(f.c, B, 2 * Ts), k.resize(f.c, B, 2 * Ts);
  cca_forward(out.data(), x.data(), cp.W.data(), f.o, f.c, CcaDims{B, 2 * Ts, 0}, f.rope, s, k);
  test_util::MaxError worst;  // +inf on any NaN or infinity
  for (int i = 0; i < 2; ++i)
    for (int b = 0; b < B; ++b)
      worst.add(&cp.out[i * n + size_t(b) * Ts * D], &out[(size_t(b) * 2 * Ts + size_t(i) * Ts) * D], size_t(Ts) * D);
  EXPECT_TRUE(worst.within(1e-12));
}
