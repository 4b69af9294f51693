// Finite-difference gradient checks in double precision: one row per op (kernels), then
// the whole model on the tiny config (every parameter tensor, EDA, MoD, k = 1 and 2).
#include <gtest/gtest.h>

#include <cstring>

#include "gradcheck.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/loss.h"
#include "kernels/norm.h"

using namespace zaya;
using namespace zaya::test;
using V = std::vector<double>;
using VV = std::vector<V>;

static constexpr double kTol = 1e-6;

static std::vector<OpCase> op_table() {
  std::vector<OpCase> ops;
  const int N = 5, D = 7;
  ops.push_back({"rmsnorm", {N * D, D}, nullptr,
                 [=](const VV& in, V& out) {
                   out.assign(N * D, 0);
                   V rstd(N);
                   rmsnorm_forward(out.data(), rstd.data(), in[0].data(), in[1].data(), N, D, 1e-5);
                 },
                 [=](const VV& in, const V& g, VV& d) {
                   V out(N * D), rstd(N);
                   rmsnorm_forward(out.data(), rstd.data(), in[0].data(), in[1].data(), N, D, 1e-5);
                   rmsnorm_backward(d[0].data(), d[1].data(), g.data(), in[0].data(), in[1].data(), rstd.data(), N, D);
                 }});
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
  {
    // Causal conv: B=2, T=5, C=3 heads x hd 4 = 12, K0=2, K1=3 (general kernel sizes).
    ConvShape s{2, 5, 12, 4, 2, 3};
    auto fwd = [s](const VV& in, V& out_tall, V& y0, V& w1p) {
      out_tall.assign(size_t(s.rows()) * s.C, 0);
      y0.assign(out_tall.size(), 0);
      w1p.assign(size_t(s.K1) * s.C * s.hd, 0);
      causal_conv_forward(out_tall.data(), y0.data(), w1p.data(), in[0].data(), (const double*)nullptr,
                          in[1].data(), in[2].data(), in[3].data(), in[4].data(), s);
    };
    ops.push_back({"causal_conv", {size_t(s.B) * s.T * s.C, size_t(s.C) * s.K0, size_t(s.C), size_t(s.C) * s.hd * s.K1,
                                   size_t(s.C)},
                   nullptr,
                   [=](const VV& in, V& out) {
                     V y0, w1p;
                     fwd(in, out, y0, w1p);
                   },
                   [=](const VV& in, const V& g, VV& d) {
                     V out, y0, w1p, dy0(y0.size()), dw1p;
                     fwd(in, out, y0, w1p);
                     dy0.assign(y0.size(), 0);
                     dw1p.assign(w1p.size(), 0);
                     V gt = g;  // junk rows carry no gradient
                     for (int r = 0; r < s.rows(); ++r)
                       if (r % s.rows_per_batch() >= s.T) std::fill(&gt[size_t(r) * s.C], &gt[size_t(r + 1) * s.C], 0.0);
                     causal_conv_backward(d[0].data(), (double*)nullptr, d[1].data(), d[2].data(), d[3].data(),
                                          d[4].data(), dy0.data(), dw1p.data(), gt.data(), y0.data(), w1p.data(),
                                          in[3].data(), in[0].data(), (const double*)nullptr, in[1].data(), s);
                   }});
  }
  {
    // Attention with GQA (Hq 4, Hk 2), strided q inside a packed row, and a shard offset.
    // Tq 4: the direct path (attention_forward_group, decode); Tq 6: the BLAS path.
    for (auto [Tq, q_pos0] : {std::pair{4, 0}, std::pair{4, 3}, std::pair{6, 2}}) {
      AttnShape a{2, Tq, Tq + q_pos0, q_pos0, 4, 2, 3, 20, 6, 6, 12};
      const size_t nq = size_t(a.B) * a.Tq * a.ldq, nk = size_t(a.B) * a.Tk * a.ldk, no = size_t(a.B) * a.Tq * a.ldo;
      ops.push_back({"attention_T" + std::to_string(Tq) + "_pos0_" + std::to_string(q_pos0), {nq, nk, nk}, nullptr,
                     [=](const VV& in, V& out) {
                       out.assign(no, 0);
                       V lse(size_t(a.B) * a.Hq * a.Tq), scratch(a.scratch_elems(64));
                       attention_forward(out.data(), lse.data(), in[0].data(), in[1].data(), in[2].data(), a,
                                         scratch.data());
                     },
                     [=](const VV& in, const V& g, VV& d) {
                       V out(no), lse(size_t(a.B) * a.Hq * a.Tq), scratch(a.scratch_elems(64));
                       attention_forward(out.data(), lse.data(), in[0].data(), in[1].data(), in[2].data(), a,
                                         scratch.data());
                       attention_backward(d[0].data(), d[1].data(), d[2].data(), g.data(), out.data(), lse.data(),
                                          in[0].data(), in[1].data(), in[2].data(), a, scratch.data());
                     }});
    }
  }
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
  return ops;
}

class OpGrad : public ::testing::TestWithParam<size_t> {};

TEST_P(OpGrad, MatchesFiniteDifferences) {
  static const auto ops = op_table();
  const OpCase& op = ops[GetParam()];
  GradResult r = check_op(op);
  EXPECT_LT(r.max_rel_err, kTol) << r.worst;
}

INSTANTIATE_TEST_SUITE_P(Kernels, OpGrad, ::testing::Range<size_t>(0, op_table().size()),
                         [](const auto& info) { return op_table()[info.param].name; });


// A gradient check must be able to fail: a wrong backward is caught.
TEST(OpGrad, DetectsAWrongBackward) {
  OpCase op = op_table()[5];  // softmax
  op.backward = [](const VV& in, const V& g, VV& d) {
    for (size_t k = 0; k < in[0].size(); ++k) d[0][k] += 0.5 * g[k];
  };
  EXPECT_GT(check_op(op).max_rel_err, 1e-3);
}
