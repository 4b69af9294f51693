// bf16 training paths against fp32 and double, with stated error bounds: the bf16 GEMM's
// shape bucketing (row tails, zero-padded depth) on oneDNN and the AMX kernel's own paths,
// attention's and the convolution's bf16 products, the weights' bf16 mirror (read in place of
// rounding, never stale), the optimizer's fused bf16 copy, a whole bf16 training step against
// fp32, and the vector row primitives of softmax and cross-entropy.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "check_util.h"
#include "test_util.h"
#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/attention_tiles.h"
#include "kernels/attention_bf16.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_avx512.h"
#include "kernels/loss.h"
#include "kernels/vec_math.h"
#include "model/model.h"
#include "train/optim.h"

using namespace zaya;

namespace {

const std::string kTiny = ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml";

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.f) {
  Philox rng(seed, 7);
  std::vector<float> v(n);
  for (auto& x : v) x = float(rng.normal()) * scale;
  return v;
}

float rb(float x) { return from_bf16(to_bf16(x)); }

using test_util::PrecisionScope;

// C = alpha op(A) op(B) + beta C0 in double over bf16-rounded operands (what the bf16 GEMM
// computes up to fp32 accumulation); also returns sum |terms| per element for the bound.
void reference(Trans ta, Trans tb, int M, int N, int K, float alpha, const std::vector<float>& A, int lda,
               const std::vector<float>& B, int ldb, float beta, const std::vector<float>& C0, int ldc,
               std::vector<double>& out, std::vector<double>& mag) {
  out.assign(size_t(M) * ldc, 0);
  mag.assign(size_t(M) * ldc, 0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0, m = 0;
      for (int k = 0; k < K; ++k) {
        const double a = rb(ta == Trans::N ? A[size_t(i) * lda + k] : A[size_t(k) * lda + i]);
        const double b = rb(tb == Trans::N ? B[size_t(k) * ldb + j] : B[size_t(j) * ldb + k]);
        s += a * b;
        m += std::fabs(a * b);
      }
      out[size_t(i) * ldc + j] = alpha * s + beta * C0[size_t(i) * ldc + j];
      mag[size_t(i) * ldc + j] = std::fabs(alpha) * m + std::fabs(beta * C0[size_t(i) * ldc + j]);
    }
}

}  // namespace

// ||a - b|| / ||b||.
static double normwise_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double(a[i] - b[i]) * (a[i] - b[i]), n += double(b[i]) * b[i];
  return std::sqrt(d / (n + 1e-30));
}

// Checks one bf16 product of `engine` against the double reference: every element within
// `bound` x (sum of |terms|) of the exact product of the bf16 operands, and nothing written
// past N in C's rows.
static void check_bf16_product(GemmEngine engine, Trans ta, Trans tb, int M, int N, int K, int lda, int ldb,
                               int ldc, float beta, double bound) {
  const auto A = randn(size_t(ta == Trans::N ? M : K) * lda, 1 + M);
  const auto B = randn(size_t(tb == Trans::N ? K : N) * ldb, 2 + N);
  auto C = randn(size_t(M) * ldc, 3 + K);
  const auto C0 = C;
  std::vector<double> ref, mag;
  reference(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, beta, C0, ldc, ref, mag);
  gemm_with(engine, GemmPrecision::BF16, ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  test_util::MaxError worst;  // +inf on any NaN or infinity
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      const size_t e = size_t(i) * ldc + j;
      worst.add_error(std::fabs(C[e] - ref[e]) / (mag[e] + 1e-30));
    }
    for (int j = N; j < ldc; ++j) ASSERT_EQ(C[size_t(i) * ldc + j], C0[size_t(i) * ldc + j]) << "wrote past N";
  }
  EXPECT_TRUE(worst.within(bound)) << gemm_engine_name(engine) << " ta " << int(ta) << " tb " << int(tb) << " M " << M
                          << " N " << N << " K " << K << " lda " << lda << " beta " << beta;
}

// Odd row counts (a tail below the 64-row step) and odd depths (zero-padded) in every layout,
// with and without accumulation, on oneDNN and on the AMX kernel (where the CPU has AMX): each
// element within fp32 accumulation error of the exact product of the bf16 operands (2^-20 of
// the sum of |terms|, K <= 200).
TEST(GemmBf16, RowTailsAndPaddedDepthGiveTheSameProduct) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  std::vector<GemmEngine> engines{GemmEngine::OneDNN};
  if (amx_bf16_usable()) engines.push_back(GemmEngine::Amx);
  for (GemmEngine engine : engines)
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (auto [M, N, K] : {std::tuple{77, 40, 45}, std::tuple{130, 33, 200}, std::tuple{9, 64, 64},
                               std::tuple{64, 16, 1}, std::tuple{200, 24, 96}})
          for (float beta : {0.f, 1.f})
            check_bf16_product(engine, ta, tb, M, N, K, (ta == Trans::N ? K : M) + 3, (tb == Trans::N ? N : K) + 5,
                               N + 2, beta, 1.0 / (1 << 20));
}

// The AMX kernel's own paths: A read in place (K a multiple of 32, rows <= 2 KB apart) or
// packed (rows further apart, transposed, or K not a multiple of 32); K in several blocks
// (K > 2048, the later blocks adding into C); threads splitting rows (M >= N) or columns
// (a 16-row product of wide weights); row and column tails. Bound 2^-16 of the sum of
// |terms|: fp32 accumulation over up to 2,100 terms.
TEST(GemmAmx, InPlacePackedKBlocksAndSplitsAgreeWithTheReference) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "no AMX-BF16";
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T})
      for (auto [M, N, K, lda_extra] : {std::tuple{96, 64, 2112, 0}, std::tuple{40, 70, 2100, 0},
                                        std::tuple{16, 300, 64, 0}, std::tuple{50, 33, 1024, 1056},
                                        std::tuple{1, 5, 3, 0}, std::tuple{66, 130, 512, 0}})
        for (float beta : {0.f, 1.f})
          check_bf16_product(GemmEngine::Amx, ta, tb, M, N, K, (ta == Trans::N ? K : M) + lda_extra,
                             tb == Trans::N ? N : K, N, beta, 1.0 / (1 << 16));
}

// Attention with its products in bf16 on each of our bf16 kernels the CPU has (AMX,
// AVX512-BF16; causal row blocks, keys past the diagonal skipped) against the fp32 path: out,
// lse and the three input gradients within 1.5% normwise (bf16 operands, fp32 softmax and
// sums), for local attention with GQA and a row count that is no multiple of the 64-row
// block, for a context-parallel shard (queries 130.. against 200 gathered keys), at the
// demo model's head dim of 32, and past 256 keys (the long row blocks, attn_row_block).
TEST(AttentionBf16, MatchesFp32WithinBf16Rounding) {
  std::vector<GemmEngine> engines;
  if (amx_bf16_usable()) engines.push_back(GemmEngine::Amx);
  if (gemm_bf16_avx512_usable()) engines.push_back(GemmEngine::Avx512);
  if (engines.empty()) GTEST_SKIP() << "no AMX-BF16 / AVX512-BF16";
  // On the AVX512-BF16 kernel both bf16 paths: the register tiles (kernels/attention_tiles.h,
  // the default) and the per-block products (held there by the Portable cap); on AMX the latter.
  struct Path {
    GemmEngine engine;
    KernelTier cap;
  };
  std::vector<Path> paths;
  for (GemmEngine e : engines)
    for (KernelTier cap : {KernelTier::Auto, KernelTier::Portable})
      if (e == GemmEngine::Avx512 || cap == KernelTier::Auto) paths.push_back({e, cap});
  for (const auto [engine, cap] : paths)
  for (auto [Tq, Tk, q0, hd] : {std::tuple{150, 150, 0, 64}, std::tuple{70, 200, 130, 64}, std::tuple{100, 100, 0, 32},
                                 std::tuple{300, 300, 0, 64}, std::tuple{37, 101, 64, 16}}) {
    const int B = 2, Hq = 4, Hk = 2;
    const int ldq = Hq * hd + 8, ldk = Hk * hd, ldo = Hq * hd;
    AttnShape s{B, Tq, Tk, q0, Hq, Hk, hd, ldq, ldk, ldk, ldo};
    const auto q = randn(size_t(B) * Tq * ldq, 31), k = randn(size_t(B) * Tk * ldk, 32);
    const auto v = randn(size_t(B) * Tk * ldk, 33), dout = randn(size_t(B) * Tq * ldo, 34);
    struct Result {
      std::vector<float> out, lse, dq, dk, dv;
    };
    auto run = [&](GemmPrecision p) {
      PrecisionScope scope(p);
      Result r{std::vector<float>(size_t(B) * Tq * ldo), std::vector<float>(size_t(B) * Hq * Tq),
               std::vector<float>(q.size()), std::vector<float>(k.size()), std::vector<float>(v.size())};
      std::vector<float> scratch(s.scratch_elems(omp_get_max_threads()));
      attention_forward(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), s, scratch.data());
      attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), r.out.data(), r.lse.data(), q.data(),
                         k.data(), v.data(), s, scratch.data());
      return r;
    };
    const Result f = run(GemmPrecision::F32);
    gemm_settings().engine = engine;
    attention_tiles_force(cap);
    const Result h = run(GemmPrecision::BF16);
    bool tiles;
    {
      PrecisionScope scope(GemmPrecision::BF16);
      EXPECT_TRUE(attention_bf16_on());
      tiles = attention_bf16_tiles_on(s);
    }
    attention_tiles_force(KernelTier::Auto);
    gemm_settings().engine = GemmEngine::Auto;
    EXPECT_EQ(tiles, engine == GemmEngine::Avx512 && cap == KernelTier::Auto) << "hd " << hd;
    const char* path = tiles ? "AVX512-BF16 tiles" : "per-block products";
    for (auto [name, a, b] : {std::tuple{"out", &h.out, &f.out}, std::tuple{"lse", &h.lse, &f.lse},
                              std::tuple{"dq", &h.dq, &f.dq}, std::tuple{"dk", &h.dk, &f.dk},
                              std::tuple{"dv", &h.dv, &f.dv}}) {
      const double e = normwise_rel(*a, *b);
      EXPECT_LT(e, 0.015) << name << " Tq " << Tq << " Tk " << Tk << " hd " << hd << " " << gemm_engine_name(engine)
                          << " " << path;
      EXPECT_GT(e, 0.0) << name << ": the bf16 path was not taken";
    }
  }
}

// CCA's convolution with bf16 products (stage 2 as one product per group over all taps)
// against the fp32 path: output and the input and weight gradients (and the halo's) within
// 1.5% normwise, for zaya1's two taps and for three taps with a halo, on both bf16 engines.
TEST(ConvBf16, MatchesFp32WithinBf16Rounding) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  for (auto [s, with_halo] : {std::pair{ConvShape{2, 37, 128, 64, 2, 2}, false},
                              std::pair{ConvShape{2, 20, 96, 32, 3, 3}, true}}) {
    const size_t P = size_t(s.K0 - 1 + s.K1 - 1), tall = size_t(s.rows()) * s.C;
    const auto p = randn(size_t(s.B) * s.T * s.C, 41), w0 = randn(size_t(s.C) * s.K0, 42, 0.5f);
    const auto b0 = randn(size_t(s.C), 43), w1 = randn(size_t(s.C) * s.hd * s.K1, 44, 0.2f), b1 = randn(size_t(s.C), 45);
    const auto halo = randn(size_t(s.B) * P * s.C, 46);
    auto g = randn(tall, 47);
    for (int row = 0; row < s.rows(); ++row)  // junk rows carry no gradient
      if (row % s.rows_per_batch() >= s.T) std::fill(&g[size_t(row) * s.C], &g[size_t(row + 1) * s.C], 0.f);
    struct Result {
      std::vector<float> out, dp, dw0, db0, dw1, db1, dhalo;
    };
    auto run = [&](GemmPrecision prec) {
      PrecisionScope scope(prec);
      Result r;
      std::vector<float> y0(tall), w1p(size_t(s.K1) * s.C * s.hd), dy0(tall), dw1p(w1p.size());
      r.out.assign(tall, 0);
      const float* h = with_halo ? halo.data() : nullptr;
      causal_conv_forward(r.out.data(), y0.data(), w1p.data(), p.data(), h, w0.data(), b0.data(), w1.data(), b1.data(),
                          s);
      r.dp.assign(p.size(), 0), r.dw0.assign(w0.size(), 0), r.db0.assign(b0.size(), 0), r.dw1.assign(w1.size(), 0);
      r.db1.assign(b1.size(), 0), r.dhalo.assign(halo.size(), 0);
      causal_conv_backward(r.dp.data(), with_halo ? r.dhalo.data() : nullptr, r.dw0.data(), r.db0.data(), r.dw1.data(),
                           r.db1.data(), dy0.data(), dw1p.data(), g.data(), y0.data(), w1p.data(), w1.data(), p.data(),
                           h, w0.data(), s);
      return r;
    };
    const Result f = run(GemmPrecision::F32);
    // The trainer's engine, oneDNN with its row and depth bucketing of the same bf16 operands,
    // and our AVX512-BF16 kernel (what CPUs without AMX run).
    for (GemmEngine engine : {GemmEngine::Auto, GemmEngine::OneDNN, GemmEngine::Avx512}) {
      gemm_settings().engine = engine;
      const Result h = run(GemmPrecision::BF16);
      gemm_settings().engine = GemmEngine::Auto;
      for (auto [name, a, b] : {std::tuple{"out", &h.out, &f.out}, std::tuple{"dp", &h.dp, &f.dp},
                                std::tuple{"dw0", &h.dw0, &f.dw0}, std::tuple{"dw1", &h.dw1, &f.dw1},
                                std::tuple{"dhalo", &h.dhalo, &f.dhalo}}) {
        if (!with_halo && std::string(name) == "dhalo") continue;
        const double e = normwise_rel(*a, *b);
        EXPECT_LT(e, 0.015) << name << " K1 " << s.K1 << " engine " << gemm_engine_name(engine);
        EXPECT_GT(e, 0.0) << name << ": the bf16 products were not used";
      }
    }
  }
}

// An operand inside the mirror is read from it (the mirror's values show in the result), one
// outside it is rounded afresh; clearing the mirror goes back to rounding.
TEST(GemmBf16, MirroredOperandsAreReadFromTheMirror) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  const int M = 8, N = 16, K = 32;
  const auto x = randn(size_t(M) * K, 11);
  const auto W = randn(size_t(N) * K, 12);
  std::vector<bf16> mirror(W.size());
  for (size_t i = 0; i < W.size(); ++i) mirror[i] = to_bf16(2 * W[i]);  // deliberately not W
  std::vector<float> y(size_t(M) * N), y_plain(y.size());
  gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, Trans::T, M, N, K, 1.f, x.data(), K, W.data(), K, 0.f,
            y_plain.data(), N);
  gemm_set_bf16_mirror({W.data(), W.size(), mirror.data()});
  gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, Trans::T, M, N, K, 1.f, x.data(), K, W.data(), K, 0.f,
            y.data(), N);
  gemm_set_bf16_mirror({});
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], 2 * y_plain[i], 1e-5f * (1 + std::fabs(y[i])));
  gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, Trans::T, M, N, K, 1.f, x.data(), K, W.data(), K, 0.f,
            y.data(), N);
  EXPECT_EQ(y, y_plain);
}

// Activation copies (ActivationMirrorScope) are read like the weights' mirror, for A and for
// B, also through a zero-padded depth (an activation-by-activation product); gemm_bf16 reads
// bf16 operands as stored. Leaving the scope goes back to rounding.
TEST(GemmBf16, ActivationCopiesAndBf16OperandsAreReadAsStored) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  const int M = 70, N = 16, K = 40;  // a row tail; K not a multiple of 64: padded when A^T B
  const auto x = randn(size_t(M) * K, 21), W = randn(size_t(N) * K, 22), x2 = randn(size_t(M) * N, 23);
  std::vector<bf16> x16(x.size()), x16_twice(x.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i] = to_bf16(x[i]), x16_twice[i] = to_bf16(2 * x[i]);
  auto prod = [&](Trans ta, const float* A, int lda, const float* B, int ldb, int m, int n, int k, Trans tb) {
    std::vector<float> y(size_t(m) * n);
    gemm_with(GemmEngine::Auto, GemmPrecision::BF16, ta, tb, m, n, k, 1.f, A, lda, B, ldb, 0.f, y.data(), n);
    return y;
  };
  const auto y_plain = prod(Trans::N, x.data(), K, W.data(), K, M, N, K, Trans::T);
  const auto d_plain = prod(Trans::T, x.data(), K, x2.data(), N, K, N, M, Trans::N);  // depth M = 70: padded
  {
    ActivationMirrorScope scope({{x.data(), x.size(), x16_twice.data()}});  // deliberately 2x
    EXPECT_EQ(gemm_activation_copy(x.data() + K, size_t(K)), x16_twice.data() + K);
    const auto y = prod(Trans::N, x.data(), K, W.data(), K, M, N, K, Trans::T);
    const auto d = prod(Trans::T, x.data(), K, x2.data(), N, K, N, M, Trans::N);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], 2 * y_plain[i], 1e-5f * (1 + std::fabs(y[i])));
    for (size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], 2 * d_plain[i], 1e-5f * (1 + std::fabs(d[i])));
  }
  EXPECT_EQ(gemm_activation_copy(x.data(), x.size()), nullptr);
  EXPECT_EQ(prod(Trans::N, x.data(), K, W.data(), K, M, N, K, Trans::T), y_plain);
  // gemm_bf16 over the exact rounding: the same product, bit for bit, in both layouts, with
  // the bf16 operand as A or as B (and the padded depth).
  std::vector<float> y(size_t(M) * N), d(size_t(K) * N);
  gemm_bf16(Trans::N, Trans::T, M, N, K, 1.f, {nullptr, x16.data(), K}, {W.data(), nullptr, K}, 0.f, y.data(), N);
  EXPECT_EQ(y, y_plain);
  gemm_bf16(Trans::T, Trans::N, K, N, M, 1.f, {nullptr, x16.data(), K}, {x2.data(), nullptr, N}, 0.f, d.data(), N);
  EXPECT_EQ(d, d_plain);
  std::vector<bf16> x2_16(x2.size());
  for (size_t i = 0; i < x2.size(); ++i) x2_16[i] = to_bf16(x2[i]);
  gemm_bf16(Trans::T, Trans::N, K, N, M, 1.f, {x.data(), nullptr, K}, {nullptr, x2_16.data(), N}, 0.f, d.data(), N);
  EXPECT_EQ(d, d_plain);
}

// bf16 logits: the loss and log-sum-exp are those of the logits widened to fp32, and the
// gradient written over them is exactly the fp32 gradient of the widened logits rounded,
// ignored rows included, at a vocabulary with a tail.
TEST(TrainBf16, CrossEntropyOverBf16LogitsIsTheFp32OneOfTheRoundedLogits) {
  const int N = 6, V = 37;
  const auto z = randn(size_t(N) * V, 31, 3.f);
  const int32_t t[N] = {0, 36, kIgnoreIndex, 5, 17, 5};
  std::vector<bf16> z16(z.size());
  std::vector<float> zw(z.size());  // z16 widened
  for (size_t i = 0; i < z.size(); ++i) z16[i] = to_bf16(z[i]), zw[i] = from_bf16(z16[i]);
  std::vector<float> lse(N), lse16(N), g32(z.size());
  int count = 0, count16 = 0;
  const double loss = cross_entropy_forward(lse.data(), (float*)nullptr, zw.data(), t, N, V, &count);
  const double loss16 = cross_entropy_forward_bf16(lse16.data(), z16.data(), t, N, V, &count16);
  EXPECT_EQ(loss16, loss);
  EXPECT_EQ(count16, count);
  EXPECT_EQ(lse16, lse);
  cross_entropy_backward(g32.data(), zw.data(), lse.data(), t, N, V, 0.2f);
  cross_entropy_backward_bf16(z16.data(), lse16.data(), t, N, V, 0.2f);
  for (int i = 0; i < N; ++i)
    for (int v = 0; v < V; ++v)
      ASSERT_EQ(z16[size_t(i) * V + v].bits, to_bf16(g32[size_t(i) * V + v]).bits) << i << " " << v;
}

// The activation copies (norm outputs, expert inputs, SwiGLU's output and input gradient,
// the experts' output gradients, the LM head's bf16 gradient) hold exactly the values the
// products would round, so a bf16 step with them equals one without, bit for bit: loss and
// every gradient. A stale or misplaced copy would show here.
TEST(TrainBf16, ActivationCopiesLeaveTheStepBitForBit) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  PrecisionScope bf16_on(GemmPrecision::BF16);
  const ModelConfig cfg = load_model_config(kTiny);
  const int B = 4, T = 32;
  std::vector<int32_t> ids(size_t(B) * T + 1);
  Philox rng(40, 41);
  for (auto& t : ids) t = int32_t(rng.below(cfg.vocab_size));
  auto run = [&](bool copies, std::vector<float>& grads) {
    gemm_set_activation_copies(copies);
    Model<float> m(cfg);
    m.init(42);
    double loss = 0;
    for (int step = 0; step < 2; ++step) {  // the second step reuses every buffer
      loss = m.forward(ids.data(), ids.data() + 1, B, T).loss;
      m.zero_grads();
      m.backward();
    }
    EXPECT_EQ(m.activation_copies(), copies ? size_t(cfg.num_sublayers()) + 1 : 0u);
    grads = m.grads;
    gemm_set_activation_copies(true);
    return loss;
  };
  std::vector<float> g_on, g_off;
  const double l_on = run(true, g_on), l_off = run(false, g_off);
  EXPECT_EQ(l_on, l_off);
  ASSERT_EQ(g_on.size(), g_off.size());
  size_t differ = 0;
  for (size_t i = 0; i < g_on.size(); ++i) differ += g_on[i] != g_off[i];
  EXPECT_EQ(differ, 0u) << "of " << g_on.size() << " gradient entries";
}

// GradMode::Overwrite gives the gradients of zero_grads() then Accumulate, bit for bit, over
// whatever grads held (NaN: an entry no product or zeroing pass wrote shows), and a second
// micro-batch's Accumulate adds to them alike. zaya1-small: its LM head's weight gradient is
// large enough to go to OpenBLAS in fp32 (gemm_avx512_suits), the experts' to our kernels; a
// short batch leaves experts without rows. fp32 and bf16 products.
TEST(TrainBf16, OverwriteGradsEqualZeroThenAccumulate) {
  const ModelConfig cfg = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-small.toml");
  const int B = 1, T = 12;
  std::vector<int32_t> ids(size_t(B) * T + 1);
  Philox rng(43, 44);
  for (auto& t : ids) t = int32_t(rng.below(cfg.vocab_size));
  Model<float> a(cfg), b(cfg);
  a.init(45), b.init(45);
  for (GemmPrecision p : {GemmPrecision::F32, GemmPrecision::BF16}) {
    if (p == GemmPrecision::BF16 && !bf16_gemm_supported()) continue;
    PrecisionScope scope(p);
    a.zero_grads();
    std::fill(b.grads.begin(), b.grads.end(), std::numeric_limits<float>::quiet_NaN());
    bool some_expert_idle = false;
    for (int micro = 0; micro < 2; ++micro) {
      const int32_t* in = ids.data() + micro;  // two different micro-batches
      a.forward(in, in + 1, B, T - 1);
      a.backward(0.5f);
      b.forward(in, in + 1, B, T - 1);
      b.backward(0.5f, micro == 0 ? GradMode::Overwrite : GradMode::Accumulate);
      for (const auto& counts : b.class_counts())
        for (size_t e = 0; e + 1 < counts.size(); ++e) some_expert_idle |= counts[e] == 0;
      size_t differ = 0;
      for (size_t i = 0; i < a.grads.size(); ++i)
        differ += std::memcmp(&a.grads[i], &b.grads[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << dtype_name(p) << " micro-batch " << micro << ", of " << a.grads.size();
    }
    EXPECT_TRUE(some_expert_idle) << "the case should leave an expert without rows";
  }
}

// The optimizer's fused pass leaves params_bf16 equal to the rounded params, for AdamW and Muon.
TEST(TrainBf16, OptimizerWritesTheRoundedWeightsInItsPass) {
  Model<float> m(load_model_config(kTiny));
  m.init(5);
  const auto g = randn(m.params.size(), 6, 1e-2f);
  std::copy(g.begin(), g.end(), m.grads.begin());
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Muon}) {
    OptimizerSettings s;
    s.kind = kind;
    Optimizer opt(m.layout.params, s);
    std::vector<bf16> p16(m.params.size(), bf16{0x7fc0});  // NaN everywhere: every element must be written
    opt.step(m.params.data(), m.grads.data(), 1e-2, 1.0, p16.data());
    for (size_t i = 0; i < p16.size(); ++i)
      ASSERT_EQ(p16[i].bits, to_bf16_weight(m.params[i]).bits) << optimizer_kind_name(kind) << " element " << i;
  }
}

// The model's mirror is never stale: after params change without the optimizer (as a test,
// a rollback or a load does), the next bf16 forward rounds them again. Its loss equals a
// fresh model's with the same params, bit for bit.
TEST(TrainBf16, ChangedParamsAreRoundedAgain) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  PrecisionScope bf16_on(GemmPrecision::BF16);
  const ModelConfig cfg = load_model_config(kTiny);
  Model<float> a(cfg), b(cfg);
  a.init(7);
  const int B = 2, T = 16;
  std::vector<int32_t> ids(size_t(B) * T + 1);
  Philox rng(8, 9);
  for (auto& t : ids) t = int32_t(rng.below(cfg.vocab_size));
  a.forward(ids.data(), ids.data() + 1, B, T);
  a.backward();
  a.mark_bf16_weights_current();  // as after a fused optimizer step...
  for (auto& p : a.params) p *= 1.5f;  // ...but the params then change behind its back
  a.invalidate_bf16_weights();     // what every loader does
  const double la = a.forward(ids.data(), ids.data() + 1, B, T).loss;
  b.params = a.params;
  b.buffers = a.buffers;
  const double lb = b.forward(ids.data(), ids.data() + 1, B, T).loss;
  EXPECT_EQ(la, lb);
  // backward ends the mirror's currency: a second forward after changing params (no mark)
  // rounds again too.
  a.backward();
  for (auto& p : a.params) p *= 0.5f;
  b.params = a.params;
  EXPECT_EQ(a.forward(ids.data(), ids.data() + 1, B, T).loss, b.forward(ids.data(), ids.data() + 1, B, T).loss);
}

// A bf16 training step (bf16 GEMM operands, fp32 accumulation, master weights and gradients)
// against fp32 on the tiny model: loss within 1e-2 relative, the whole gradient within 5e-2
// (max |g16 - g32| / max |g32| per tensor, over tensors with a gradient of note). bf16 has
// 8 mantissa bits (relative rounding 2^-9 = 2e-3 per operand); errors of a few 1e-3 compound
// over 6 sub-layers and the backward's products.
TEST(TrainBf16, StepMatchesFp32WithinBf16Rounding) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  const ModelConfig cfg = load_model_config(kTiny);
  const int B = 4, T = 32;
  std::vector<int32_t> ids(size_t(B) * T + 1);
  Philox rng(10, 11);
  for (auto& t : ids) t = int32_t(rng.below(cfg.vocab_size));
  // A route that bf16 rounding flips changes a token's expert, and so the gradients by O(1):
  // not rounding. The router MLP is scaled back to std init_std (from the init's 1 / sqrt(R)),
  // where no route of this batch sits that close to a tie, and the routes are checked equal.
  auto run = [&](GemmPrecision p, std::vector<float>& grads, std::vector<int64_t>& counts) {
    PrecisionScope scope(p);
    Model<float> m(cfg);
    m.init(12);
    const int R = cfg.router_hidden, NC = cfg.num_classes();
    const float to_std0 = float(cfg.init_std * std::sqrt(double(R)));
    for (const SublayerOffsets& so : m.layout.sub) {
      if (so.attention) continue;
      for (size_t w : {so.moe.router.mlp0_w, so.moe.router.mlp2_w})
        for (int i = 0; i < R * R; ++i) m.params[w + size_t(i)] *= to_std0;
      for (int i = 0; i < R * NC; ++i) m.params[so.moe.router.mlp4_w + size_t(i)] *= to_std0;
    }
    const double loss = m.forward(ids.data(), ids.data() + 1, B, T).loss;
    counts.clear();
    for (const auto& layer : m.class_counts()) counts.insert(counts.end(), layer.begin(), layer.end());
    m.zero_grads();
    m.backward();
    grads = m.grads;
    return loss;
  };
  std::vector<float> g32, g16;
  std::vector<int64_t> c32, c16;
  const double l32 = run(GemmPrecision::F32, g32, c32), l16 = run(GemmPrecision::BF16, g16, c16);
  ASSERT_EQ(c16, c32) << "bf16 rounding flipped a route: the gradients differ by more than rounding";
  EXPECT_NEAR(l16, l32, 1e-2 * std::fabs(l32));
  Model<float> m(cfg);
  double worst = 0;
  for (const ParamInfo& p : m.layout.params.params) {
    test_util::MaxError d;
    d.add(&g16[p.offset], &g32[p.offset], p.numel);
    ASSERT_TRUE(d.finite()) << p.name << ": " << d.describe();  // before the skip below reads scale
    if (d.scale < 1e-6) continue;  // tensors without a gradient of note (e.g. unrouted experts)
    worst = test_util::max_err(worst, d.rel());
    EXPECT_LT(d.rel(), 5e-2) << p.name;
  }
  EXPECT_GT(worst, 0.0);  // bf16 did run: some rounding shows
  EXPECT_LT(worst, 5e-2);
}

// The row primitives, every tier (AVX-512, AVX2, portable; a tier the CPU lacks runs the
// next), against double at lengths with and without tails.
TEST(VecMath, RowPrimitivesMatchDouble) {
  for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
    vec_math_force(tier);
    for (int n : {1, 5, 15, 16, 17, 31, 32, 33, 100, 257}) {
      const auto x = randn(size_t(n), 20 + n, 3.f);
      double m = -INFINITY;
      for (float v : x) m = std::max(m, double(v));
      EXPECT_EQ(row_max(x.data(), n), float(m));
      double s = 0;
      for (float v : x) s += std::exp(double(v) - m);
      EXPECT_NEAR(row_sum_exp(x.data(), n, float(m)), s, 1e-6 * s) << n;
      std::vector<float> y(size_t(n) + 1, -7.f);  // one past n: must stay untouched
      row_exp_scale(y.data(), x.data(), n, float(m), 0.25f);
      for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], 0.25 * std::exp(double(x[i]) - m), 1e-6) << n << " " << i;
      EXPECT_EQ(y[n], -7.f);
      // row_exp_sum: row_sum_exp's sum to the bit, row_exp_scale's exponentials (scale 1),
      // in place as the attention softmax calls it.
      std::vector<float> e(x.begin(), x.end()), e1(static_cast<size_t>(n));
      e.push_back(-7.f);
      row_exp_scale(e1.data(), x.data(), n, float(m), 1.f);
      EXPECT_EQ(row_exp_sum(e.data(), e.data(), n, float(m)), row_sum_exp(x.data(), n, float(m))) << n;
      for (int i = 0; i < n; ++i) EXPECT_EQ(e[i], e1[i]) << n << " " << i;
      EXPECT_EQ(e[n], -7.f);
    }
  }
  vec_math_force(KernelTier::Auto);
}

// The SwiGLU rows (AVX-512 and AVX2 with libmvec's expf, and the portable loops) against
// double, with tails, large |g| (exp overflows to inf: silu -> -0 and 0 gradient) and the
// element past n untouched.
TEST(VecMath, SwigluRowsMatchDouble) {
  for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
    vec_math_force(tier);
    for (int n : {1, 15, 16, 17, 33, 257}) {
      auto g = randn(size_t(n), 40 + n, 4.f);
      const auto u = randn(size_t(n), 90 + n, 1.f), da = randn(size_t(n), 140 + n, 1.f);
      g[0] = -120.f;
      std::vector<float> a(size_t(n) + 1, -7.f), dg(size_t(n) + 1, -7.f), du(size_t(n) + 1, -7.f);
      swiglu_row(a.data(), g.data(), u.data(), n);
      swiglu_row_backward(dg.data(), du.data(), da.data(), g.data(), u.data(), n);
      for (int i = 0; i < n; ++i) {
        const double gi = g[i], s = 1 / (1 + std::exp(-gi));
        EXPECT_NEAR(a[i], gi * s * u[i], 2e-6 * (1 + std::fabs(gi * s * u[i]))) << n << " " << i;
        const double dgi = double(da[i]) * u[i] * s * (1 + gi * (1 - s)), dui = double(da[i]) * gi * s;
        EXPECT_NEAR(dg[i], dgi, 2e-6 * (1 + std::fabs(dgi))) << n << " " << i;
        EXPECT_NEAR(du[i], dui, 2e-6 * (1 + std::fabs(dui))) << n << " " << i;
      }
      EXPECT_EQ(a[n], -7.f);
      EXPECT_EQ(dg[n], -7.f);
      EXPECT_EQ(du[n], -7.f);
    }
  }
  vec_math_force(KernelTier::Auto);
}

// The GELU rows (libmvec's erff and expf in 16 and 8 lanes, and the portable loops) against
// double; dx may alias dy, as the router's backward calls it.
TEST(VecMath, GeluRowsMatchDouble) {
  for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
    vec_math_force(tier);
    for (int n : {1, 15, 16, 17, 33, 257}) {
      auto x = randn(size_t(n), 60 + n, 3.f);
      x[0] = -30.f;
      const auto dy = randn(size_t(n), 160 + n, 1.f);
      std::vector<float> y(size_t(n) + 1, -7.f), dx(dy);
      dx.push_back(-7.f);
      gelu_row(y.data(), x.data(), n);
      gelu_grad_row(dx.data(), dx.data(), x.data(), n);
      for (int i = 0; i < n; ++i) {
        const double xi = x[i], cdf = 0.5 * (1 + std::erf(xi / std::sqrt(2.0)));
        const double pdf = std::exp(-0.5 * xi * xi) / std::sqrt(2 * M_PI);
        EXPECT_NEAR(y[i], xi * cdf, 2e-6 * (1 + std::fabs(xi))) << n << " " << i;
        EXPECT_NEAR(dx[i], dy[i] * (cdf + xi * pdf), 2e-6 * (1 + std::fabs(dy[i]))) << n << " " << i;
      }
      EXPECT_EQ(y[n], -7.f);
      EXPECT_EQ(dx[n], -7.f);
    }
  }
  vec_math_force(KernelTier::Auto);
}
