// bf16 training's split master weights (model/split_master.h): the split of an fp32 value
// into its bf16 weight and a 16-bit remainder comes back bit for bit; rows encode and decode
// in place; the products read the interleaved bf16 halves as the matrices they are; a bf16
// training step over the split weights equals one over a separate bf16 copy, bit for bit;
// ZeRO-1's cuts never fall inside a row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "test_util.h"
#include "core/rng.h"
#include "kernels/gemm.h"
#include "model/model.h"
#include "model/split_master.h"
#include "train/optim.h"

using namespace zaya;

namespace {

const std::string kTiny = ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml";

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

using test_util::PrecisionScope;

}  // namespace

// Every high half with the low halves at and around the rounding boundary, plus random
// patterns: split_join(split_hi(u), low(u)) == u for all of them (NaNs and infinities too),
// and for finite values the bf16 half is the nearest bf16 (ties away from zero), which is
// round-to-nearest-even's result wherever the low half is not exactly a tie.
TEST(SplitMaster, EveryBitPatternComesBackAndTheHalfIsTheNearestBf16) {
  std::vector<uint32_t> lows = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff};
  Philox rng(3, 5);
  for (int i = 0; i < 9; ++i) lows.push_back(uint32_t(rng.below(1 << 16)));
  size_t ties_differing = 0;
  for (uint32_t hi = 0; hi < (1u << 16); ++hi)
    for (uint32_t lo : lows) {
      const uint32_t u = hi << 16 | lo;
      const uint16_t h = split_hi(u);
      ASSERT_EQ(split_join(h, uint16_t(u)), u) << std::hex << u;
      const float f = float_of(u);
      if (!std::isfinite(f) || !std::isfinite(from_bf16(bf16{h}))) continue;
      const double err = std::fabs(double(from_bf16(bf16{h})) - double(f));
      const double below = std::fabs(double(from_bf16(bf16{uint16_t(hi)})) - double(f));
      const double above = std::fabs(double(from_bf16(bf16{uint16_t(hi + 1)})) - double(f));
      ASSERT_LE(err, std::min(below, above)) << std::hex << u;
      if (lo == 0x8000) {
        ASSERT_EQ(h, uint16_t(hi + 1)) << "a tie goes away from zero: " << std::hex << u;
        ties_differing += to_bf16(f).bits != h;
      } else {
        ASSERT_EQ(h, to_bf16(f).bits) << std::hex << u;
      }
    }
  EXPECT_GT(ties_differing, 0u);  // round-to-nearest-even sends half of the ties down
}

// Encoding a model's params in place splits exactly the product weights: their bf16 halves are
// to_bf16_weight of the values, everything else is untouched, and decoding restores every bit.
TEST(SplitMaster, RowsEncodeAndDecodeInPlace) {
  Model<float> m(load_model_config(kTiny));
  m.init(3);
  const std::vector<float> plain = m.params;
  const SplitMaster split(m.layout.params);
  ASSERT_FALSE(split.runs().empty());
  split.encode(m.params.data());
  size_t split_elems = 0;
  for (const ParamInfo& p : m.layout.params.params) {
    const int K = SplitMaster::row_of(p);
    const bool product = p.role == ParamRole::Matrix || p.role == ParamRole::ExpertMatrix ||
                         p.role == ParamRole::Embedding;
    ASSERT_EQ(K > 0, product) << p.name;
    if (!K) {
      for (size_t i = 0; i < p.numel; ++i) ASSERT_EQ(m.params[p.offset + i], plain[p.offset + i]) << p.name;
      continue;
    }
    split_elems += p.numel;
    const uint16_t* h = reinterpret_cast<const uint16_t*>(m.params.data() + p.offset);
    for (size_t i = 0; i < p.numel; ++i) {
      const size_t r = i / size_t(K), c = i % size_t(K);
      ASSERT_EQ(h[2 * K * r + c], to_bf16_weight(plain[p.offset + i]).bits) << p.name << " " << i;
      ASSERT_EQ(h[2 * K * r + K + c], uint16_t(bits_of(plain[p.offset + i]))) << p.name << " " << i;
    }
  }
  EXPECT_GT(split_elems, m.params.size() / 2);
  split.decode(m.params.data());
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(bits_of(m.params[i]), bits_of(plain[i])) << i;
}

// A product reads an interleaved mirror as the matrix it holds: whole, a block of rows, and a
// block of columns inside the rows (the same leading dim), giving what a contiguous copy of
// the same bf16 values gives, bit for bit.
TEST(SplitMaster, ProductsReadTheInterleavedHalvesAsMatrices) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  const int M = 24, N = 40, K = 72;
  Philox rng(4, 4);
  std::vector<float> x(size_t(M) * K), W(size_t(N) * K), Ws(W.size()), y(size_t(M) * N), y_ref(y.size());
  for (auto& v : x) v = float(rng.normal());
  for (auto& v : W) v = float(rng.normal());
  std::vector<bf16> W16(W.size());
  for (size_t i = 0; i < W.size(); ++i) W16[i] = to_bf16_weight(W[i]);
  for (int r = 0; r < N; ++r) split_row_encode(&W[size_t(r) * K], K, &Ws[size_t(r) * K]);
  const Bf16Mirror contiguous{W.data(), W.size(), W16.data()};
  const Bf16Mirror interleaved{Ws.data(), Ws.size(), reinterpret_cast<const bf16*>(Ws.data()), K};
  struct Case {
    Trans tb;
    int n, k, row0, col0;
  };
  // x W^T over all of W; rows 8..31 of W; columns 16..55 of rows 4..35; then dX = dY W.
  for (const Case& cs : {Case{Trans::T, N, K, 0, 0}, Case{Trans::T, 24, K, 8, 0}, Case{Trans::T, 32, 40, 4, 16}}) {
    const size_t off = size_t(cs.row0) * K + size_t(cs.col0);
    gemm_set_bf16_mirror(contiguous);
    gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, cs.tb, M, cs.n, cs.k, 1.f, x.data(), K, W.data() + off,
              K, 0.f, y_ref.data(), N);
    gemm_set_bf16_mirror(interleaved);
    gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, cs.tb, M, cs.n, cs.k, 1.f, x.data(), K,
              Ws.data() + off, K, 0.f, y.data(), N);
    EXPECT_EQ(y, y_ref) << cs.n << " x " << cs.k << " at " << cs.row0 << ", " << cs.col0;
  }
  std::vector<float> dy(size_t(M) * N), dx(size_t(M) * K), dx_ref(dx.size());
  for (auto& v : dy) v = float(rng.normal());
  gemm_set_bf16_mirror(contiguous);
  gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, Trans::N, M, K, N, 1.f, dy.data(), N, W.data(), K, 0.f,
            dx_ref.data(), K);
  gemm_set_bf16_mirrors({interleaved});
  gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, Trans::N, M, K, N, 1.f, dy.data(), N, Ws.data(), K, 0.f,
            dx.data(), K);
  gemm_set_bf16_mirrors({});
  EXPECT_EQ(dx, dx_ref);
}

// Three bf16 training steps of the tiny model (AdamW and Muon) with the split master against
// the same steps with a separate bf16 copy: losses, gradients and weights equal bit for bit,
// and the split model holds no copy.
TEST(SplitMaster, TrainingStepsEqualTheSeparateCopyBitForBit) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  PrecisionScope bf16_on(GemmPrecision::BF16);
  const ModelConfig cfg = load_model_config(kTiny);
  const int B = 2, T = 16;
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Muon}) {
    SCOPED_TRACE(optimizer_kind_name(kind));
    Model<float> a(cfg), b(cfg);
    a.init(11);
    b.init(11);
    a.use_split_master(true);
    OptimizerSettings s;
    s.kind = kind;
    Optimizer oa(a.layout.params, s), ob(b.layout.params, s);
    Philox rng(12, 13);
    std::vector<int32_t> ids(size_t(B) * T + 1);
    for (int step = 0; step < 3; ++step) {
      for (auto& t : ids) t = int32_t(rng.below(cfg.vocab_size));
      const double la = a.forward(ids.data(), ids.data() + 1, B, T).loss;
      const double lb = b.forward(ids.data(), ids.data() + 1, B, T).loss;
      ASSERT_EQ(la, lb) << "step " << step;
      ASSERT_NE(a.split_master(), nullptr);
      EXPECT_TRUE(a.params_bf16.empty());
      a.backward(1.f, GradMode::Overwrite);
      b.backward(1.f, GradMode::Overwrite);
      ASSERT_EQ(a.grads, b.grads) << "step " << step;
      oa.step(a.params.data(), a.grads.data(), 1e-2, 1.0, a.bf16_weights(), a.split_master());
      bf16* p16 = b.bf16_weights();
      ASSERT_NE(p16, nullptr);
      ob.step(b.params.data(), b.grads.data(), 1e-2, 1.0, p16);
      b.mark_bf16_weights_current();
    }
    a.plain_master();
    EXPECT_EQ(a.split_master(), nullptr);
    for (size_t i = 0; i < a.params.size(); ++i) ASSERT_EQ(bits_of(a.params[i]), bits_of(b.params[i])) << i;
    EXPECT_EQ(oa.m(), ob.m());
    EXPECT_EQ(oa.v(), ob.v());
  }
}

// The optimizer updates split rows in any cut, a row's start and end included: two ranges
// cut in the middle of embedding rows give the one-range result.
TEST(SplitMaster, AdamWOverCutRowsEqualsOneRange) {
  Model<float> m(load_model_config(kTiny));
  m.init(2);
  Philox rng(5, 6);
  for (auto& g : m.grads) g = float(rng.normal() * 1e-2);
  const SplitMaster split(m.layout.params);
  std::vector<float> whole = m.params, cut = m.params;
  Optimizer one(m.layout.params, OptimizerSettings{});
  one.step(whole.data(), m.grads.data(), 1e-2);
  split.encode(cut.data());
  const ParamInfo& e = m.layout.params.params[m.layout.params.index.at("model.embed_tokens.weight")];
  const size_t mid = e.offset + e.numel / 2 + size_t(e.shape[1]) / 3;  // inside a row
  for (const FlatRange& r : {FlatRange{0, mid}, FlatRange{mid, m.params.size()}}) {
    Optimizer part(m.layout.params, OptimizerSettings{}, r);
    part.step(cut.data(), m.grads.data(), 1e-2, 1.0, nullptr, &split);
  }
  split.decode(cut.data());
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(bits_of(cut[i]), bits_of(whole[i])) << i;
}

// ZeRO-1's ranges: contiguous, covering, and never cutting a row of a split tensor.
TEST(SplitMaster, ShardCutsFallBetweenRows) {
  ModelConfig cfg = load_model_config(kTiny);
  const ModelLayout L = build_layout(cfg);
  for (int world = 2; world <= 9; ++world) {
    const auto ranges = shard_ranges(L.params, world, true);
    ASSERT_EQ(ranges.front().begin, 0u);
    ASSERT_EQ(ranges.back().end, L.params.total);
    for (size_t r = 1; r < ranges.size(); ++r) {
      ASSERT_EQ(ranges[r].begin, ranges[r - 1].end);
      const size_t cut = ranges[r].begin;
      for (const ParamInfo& p : L.params.params) {
        const int K = SplitMaster::row_of(p);
        if (K && cut > p.offset && cut < p.offset + p.numel) {
          EXPECT_EQ((cut - p.offset) % size_t(K), 0u) << "world " << world << " cut " << cut << " in " << p.name;
        }
      }
    }
  }
}

// An operand that starts inside split weights but is not a block of their rows (a leading dim
// other than the row, or columns past a row's end) stops with an error: its fp32 storage holds
// no plain values to round instead.
TEST(SplitMaster, AnOperandAcrossSplitRowsIsAnError) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  const int K = 32, N = 8, M = 4;
  std::vector<float> Ws(size_t(N) * K, 0.f), x(size_t(M) * 2 * K, 1.f), y(size_t(M) * N);
  gemm_set_bf16_mirrors({{Ws.data(), Ws.size(), reinterpret_cast<const bf16*>(Ws.data()), K}});
  auto product = [&](const float* W, int n, int k, int ld) {
    gemm_with(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, Trans::T, M, n, k, 1.f, x.data(), 2 * K, W, ld, 0.f,
              y.data(), N);
  };
  EXPECT_NO_THROW(product(Ws.data(), N, K, K));
  EXPECT_NO_THROW(product(Ws.data() + 8, N, K - 8, K));  // columns 8.. of every row
  EXPECT_THROW(product(Ws.data(), N / 2, 2 * K, 2 * K), Error);  // two rows as one
  EXPECT_THROW(product(Ws.data() + 8, N, K, K), Error);          // past each row's end
  gemm_set_bf16_mirrors({});
}
