// Block formats (quant/blocks.h) against reference dequantizers written here from the
// format definitions (element by element: which byte, which bits, which scale), fp16
// rounding against the CPU's F16C conversion, the decode kernels (kernels/linear_quant.h)
// against dequantize-then-dot, GGUF write/read and its one-line errors on malformed files.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/rng.h"
#include "kernels/gemm.h"
#include "kernels/linear_quant.h"
#include "quant/blocks.h"
#include "quant/gguf.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::quant;

namespace {

std::vector<float> gaussian(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  Philox r(seed, 3);
  for (auto& x : v) x = float(r.normal()) * scale;
  return v;
}

uint16_t u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Element e of a row, from the bytes, by the definition of each format.
float ref_element(QType t, const uint8_t* row, int64_t e) {
  switch (t) {
    case QType::Q8_0: {  // block: d (2 bytes), 32 int8
      const uint8_t* b = row + (e / 32) * 34;
      return fp16_to_fp32(u16(b)) * float(int8_t(b[2 + e % 32]));
    }
    case QType::Q4_0: {  // block: d, 16 bytes; element j < 16 the low nibble of byte j, else the high of j-16
      const uint8_t* b = row + (e / 32) * 18;
      const int j = int(e % 32);
      const int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
      return fp16_to_fp32(u16(b)) * float(q - 8);
    }
    case QType::Q4_K: {  // d, dmin, 12 scale bytes, 128 bytes of nibbles
      const uint8_t* b = row + (e / 256) * 144;
      const int i = int(e % 256), j = i / 32;  // sub-block
      const uint8_t* s = b + 4;
      // 6-bit scale and min of sub-block j: bytes 0-3 hold scales 0-3 (low 6 bits) and the
      // top 2 bits of scales 4-7; bytes 4-7 mins 0-3 and the top bits of mins 4-7; bytes
      // 8-11 the low 4 bits of scale (low nibble) and min (high nibble) of 4-7.
      int sc, mn;
      if (j < 4) sc = s[j] & 63, mn = s[4 + j] & 63;
      else sc = (s[8 + j - 4] & 15) | ((s[j - 4] >> 6) << 4), mn = (s[8 + j - 4] >> 4) | ((s[j] >> 6) << 4);
      const uint8_t byte = b[16 + 32 * (i / 64) + i % 32];
      const int q = (i % 64) < 32 ? (byte & 15) : (byte >> 4);
      return fp16_to_fp32(u16(b)) * float(sc) * float(q) - fp16_to_fp32(u16(b + 2)) * float(mn);
    }
    case QType::Q6_K: {  // ql[128], qh[64], int8 scales[16], d
      const uint8_t* b = row + (e / 256) * 210;
      const int i = int(e % 256), half = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
      // quarter 0: low nibble of ql[l], 1: low of ql[l+32], 2: high of ql[l], 3: high of ql[l+32];
      // the two high bits: bits 2*quarter.. of qh[l].
      const uint8_t* ql = b + 64 * half;
      const uint8_t* qh = b + 128 + 32 * half;
      const int lo = quarter == 0 ? ql[l] & 15 : quarter == 1 ? ql[l + 32] & 15 : quarter == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
      const int q = lo | (((qh[l] >> (2 * quarter)) & 3) << 4);
      return fp16_to_fp32(u16(b + 208)) * float(int8_t(b[192 + i / 16])) * float(q - 32);
    }
    default: return 0.f;
  }
}

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) e += double(a[i] - b[i]) * (a[i] - b[i]), s += double(a[i]) * a[i];
  return std::sqrt(e / s);
}

}  // namespace

// F16C's own conversions, as the reference (the test runs only where the CPU has F16C; a build
// without -march=native enables them per function).
__attribute__((target("f16c"))) static uint16_t f16c_round(float f) {
  return uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) static float f16c_widen(uint16_t h) { return _cvtsh_ss(h); }

TEST(QuantFp16, MatchesF16cRounding) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  Philox r(7, 1);
  std::vector<float> vals = {0.f, -0.f, 1.f, 65504.f, 65519.f, 65520.f, 1e-8f, 5.96e-8f, 2.98e-8f, 6.1e-5f, INFINITY, -INFINITY};
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = uint32_t(r.next_u64());
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    vals.push_back(f);
    vals.push_back(float(r.normal()) * 1e-3f);
  }
  for (float f : vals) {
    const uint16_t hw = f16c_round(f);
    ASSERT_EQ(fp32_to_fp16(f), hw) << f;
    if ((hw & 0x7c00) != 0x7c00) {
      ASSERT_EQ(fp16_to_fp32(hw), f16c_widen(hw));
    }
  }
  EXPECT_EQ(fp32_to_fp16(NAN) & 0x7c00, 0x7c00);
}

TEST(QuantBlocks, SizesAndTypeIds) {
  EXPECT_EQ(uint32_t(QType::Q4_0), 2u);
  EXPECT_EQ(uint32_t(QType::Q8_0), 8u);
  EXPECT_EQ(uint32_t(QType::Q4_K), 12u);
  EXPECT_EQ(uint32_t(QType::Q6_K), 14u);
  EXPECT_EQ(uint32_t(QType::BF16), 30u);
  EXPECT_EQ(qtype_row_bytes(QType::Q8_0, 64), 68u);
  EXPECT_EQ(qtype_row_bytes(QType::Q4_0, 64), 36u);
  EXPECT_EQ(qtype_row_bytes(QType::Q4_K, 512), 288u);
  EXPECT_EQ(qtype_row_bytes(QType::Q6_K, 512), 420u);
  QType t;
  EXPECT_TRUE(qtype_parse("Q4_K", &t) && t == QType::Q4_K);
  EXPECT_FALSE(qtype_parse("q5_1", &t));
}

// Quantize -> dequantize: dequantize_row equals the reference decoder of the bytes exactly,
// and the error is within what the format can do (relative RMS over Gaussian rows, and the
// per-element bound of the symmetric formats: half a step).
TEST(QuantBlocks, RoundTripAgainstReferenceDecoder) {
  struct Case {
    QType t;
    double max_rel_rms;
  };
  for (Case c : {Case{QType::Q8_0, 0.006}, Case{QType::Q4_0, 0.13}, Case{QType::Q4_K, 0.09}, Case{QType::Q6_K, 0.025}}) {
    const int64_t K = 1024;
    auto x = gaussian(size_t(K), uint64_t(c.t) + 11);
    for (int i = 0; i < 8; ++i) x[size_t(100 + i)] *= 6.f;  // outliers
    for (int i = 0; i < 32; ++i) x[size_t(512 + i)] = 0.f;   // an all-zero block
    std::vector<uint8_t> q(qtype_row_bytes(c.t, K));
    quantize_row(c.t, x.data(), q.data(), K);
    std::vector<float> y(static_cast<size_t>(K));
    dequantize_row(c.t, q.data(), y.data(), K);
    for (int64_t e = 0; e < K; ++e) ASSERT_EQ(y[size_t(e)], ref_element(c.t, q.data(), e)) << qtype_name(uint32_t(c.t)) << " element " << e;
    const double err = rel_rms(x, y);
    EXPECT_LT(err, c.max_rel_rms) << qtype_name(uint32_t(c.t));
    EXPECT_GT(err, 0.0);
    for (int i = 512; i < 544; ++i) EXPECT_EQ(y[size_t(i)], 0.f) << qtype_name(uint32_t(c.t));
    if (c.t == QType::Q8_0 || c.t == QType::Q4_0)
      for (int64_t e = 0; e < K; ++e) {
        const float d = std::fabs(fp16_to_fp32(u16(q.data() + (e / 32) * (c.t == QType::Q8_0 ? 34 : 18))));
        // Half a step (q4_0: a whole step for the side opposite the largest magnitude, whose
        // level 8 does not exist), plus the scale's fp16 rounding (the levels come from the
        // fp32 scale, as in llama.cpp) times the largest level.
        const float qmax = c.t == QType::Q8_0 ? 127.f : 8.f, steps = c.t == QType::Q8_0 ? 0.5f : 1.f;
        ASSERT_LE(std::fabs(x[size_t(e)] - y[size_t(e)]), steps * d * 1.001f + qmax * d * 0x1p-11f + 1e-6f) << e;
      }
  }
}

TEST(QuantBlocks, BadScalesAreFound) {
  const int64_t K = 512;
  auto x = gaussian(size_t(K), 5);
  for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_K, QType::Q6_K}) {
    std::vector<uint8_t> q(qtype_row_bytes(t, K));
    quantize_row(t, x.data(), q.data(), K);
    EXPECT_EQ(first_bad_scale(t, q.data(), K), -1);
    const int bb = qtype_block_bytes(t);
    const size_t at = size_t(bb) + (t == QType::Q6_K ? 208 : 0);  // block 1's d
    const uint16_t nan = 0x7e00;
    std::memcpy(&q[at], &nan, 2);
    EXPECT_EQ(first_bad_scale(t, q.data(), K), 1) << qtype_name(uint32_t(t));
  }
}

// x's int8 levels per block of 32 (q8_0, q4_0) and 256 (the k-quants' q8_K): the AVX-512,
// AVX2 and portable loops give the same bits (levels and scales), levels round x / scale to
// nearest even (ties at .5 to even) and stay in [-127, 127], a zero block has scale 0, a NaN
// is skipped by the block's max, huge values do not overflow. (On a CPU without AVX-512,
// Auto runs the AVX2 loop: both rounds then check it.)
TEST(QuantKernels, ActivationQuantizationSameBitsEveryLoop) {
  for (const KernelTier kern : {KernelTier::Auto, KernelTier::Avx2})
    for (const int B : {32, 256}) {
      const int K = B * 9;
      auto x = gaussian(size_t(K), 77, 3.f);
      for (int j = 0; j < B; ++j) x[size_t(B + j)] = 0.f;                                 // block 1: zeros
      for (int j = 0; j < B; ++j) x[size_t(2 * B + j)] = float(j % 32 - 16) * 0.5f + 0.25f;  // block 2: ties
      x[size_t(2 * B)] = -127.f * 0.5f;  // amax 63.5, scale 0.5: levels 2 x, so x = k / 2 + 1 / 4 is a tie
      x[size_t(3 * B + 4)] = std::nanf("");                                             // block 3: a NaN
      for (int j = 0; j < B; ++j) x[size_t(4 * B + j)] = (j % 2 ? -1.f : 1.f) * 3e37f;  // block 4: huge
      std::vector<int8_t> qa(static_cast<size_t>(K)), qb(static_cast<size_t>(K));
      std::vector<float> da(size_t(K / B)), db(size_t(K / B));
      linear_quant_force(kern);
      quantize_activations(x.data(), K, B, qa.data(), da.data());
      linear_quant_force(KernelTier::Portable);
      quantize_activations(x.data(), K, B, qb.data(), db.data());
      linear_quant_force(KernelTier::Auto);
      for (int b = 0; b < K / B; ++b) {
        ASSERT_EQ(std::memcmp(&da[size_t(b)], &db[size_t(b)], 4), 0) << "B " << B << " block " << b;
        for (int j = 0; j < B; ++j) {
          const size_t k = size_t(B * b + j);
          ASSERT_EQ(qa[k], qb[k]) << "B " << B << " block " << b << " j " << j;
          if (k == size_t(3 * B + 4)) continue;
          const float s = da[size_t(b)];
          const int want = s > 0 ? int(std::nearbyint(x[k] * (1.f / s))) : 0;
          EXPECT_EQ(int(qa[k]), std::clamp(want, -127, 127)) << "B " << B << " block " << b << " j " << j;
          EXPECT_LE(std::abs(int(qa[k])), 127);
        }
      }
      EXPECT_EQ(da[1], 0.f);
      EXPECT_EQ(da[2], 0.5f);
      EXPECT_EQ(int(qa[size_t(2 * B + 1)]), -14);  // x -7.25: level -14.5, a tie, to even
      EXPECT_EQ(int(qa[size_t(2 * B + 3)]), -12);  // x -6.25: -12.5
      EXPECT_GT(da[3], 0.f);                       // the NaN left out of the max
    }
  EXPECT_EQ(activation_block(QType::Q8_0), 32);
  EXPECT_EQ(activation_block(QType::Q4_0), 32);
  EXPECT_EQ(activation_block(QType::Q4_K), 256);
  EXPECT_EQ(activation_block(QType::Q6_K), 256);
}

// The decode kernel per type, every tier (AVX-512 VNNI, AVX2, portable; a tier the CPU lacks
// runs the next), against dequantize-then-dot over the same int8 activations (exact up to
// float summation order), on rows at odd addresses, odd block counts (a masked last pair),
// 1..7 x rows with strides, beta 0 and 1. One x row over 13 W rows runs the 4-stream path
// (rows of every stream at once) and the left-over row alone.
TEST(QuantKernels, MatchDequantizeThenDot) {
  for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_K, QType::Q6_K}) {
    // 32-blocks: 3, 5 and 9 blocks (q8_0: the pair tail alone, and a group of 8 + a lone block)
    for (int K : {qtype_block(t) == 32 ? 96 : 256, qtype_block(t) == 32 ? 160 : 768, qtype_block(t) == 32 ? 288 : 1024}) {
      const int N = 13, ldx = K + 5, ldy = N + 3;
      const size_t rb = qtype_row_bytes(t, K);
      std::vector<uint8_t> buf(size_t(N) * rb + 1);
      uint8_t* W = buf.data() + 1;  // every row unaligned
      auto wf = gaussian(size_t(N) * K, 21 + K);
      for (int n = 0; n < N; ++n) quantize_row(t, &wf[size_t(n) * K], W + size_t(n) * rb, K);
      std::vector<float> wd(size_t(N) * K);
      for (int n = 0; n < N; ++n) dequantize_row(t, W + size_t(n) * rb, &wd[size_t(n) * K], K);
      for (int M : {1, 2, 3, 4, 5, 7}) {
        auto x = gaussian(size_t(M) * ldx, 99 + M, 0.5f);
        std::vector<double> ref(size_t(M) * N), mag(size_t(M) * N);
        const int xb = activation_block(t);
        std::vector<int8_t> xq(static_cast<size_t>(K));
        std::vector<float> xd(size_t(K / xb));
        for (int m = 0; m < M; ++m) {
          quantize_activations(&x[size_t(m) * ldx], K, xb, xq.data(), xd.data());
          for (int n = 0; n < N; ++n) {
            double s = 0, a = 0;
            for (int k = 0; k < K; ++k) {
              const double xv = double(xd[size_t(k / xb)]) * xq[size_t(k)];
              s += double(wd[size_t(n) * K + k]) * xv;
              a += std::fabs(double(wd[size_t(n) * K + k]) * xv);
            }
            ref[size_t(m) * N + n] = s, mag[size_t(m) * N + n] = a;
          }
        }
        for (const KernelTier kern : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
          linear_quant_force(kern);
          for (float beta : {0.f, 1.f}) {
            std::vector<float> y(size_t(M) * ldy, 0.25f);
            linear_quant(t, y.data(), ldy, x.data(), ldx, W, M, N, K, beta);
            for (int m = 0; m < M; ++m) {
              for (int n = 0; n < N; ++n) {
                const double want = ref[size_t(m) * N + n] + (beta ? 0.25 : 0.0);
                ASSERT_NEAR(y[size_t(m) * ldy + n], want, 2e-5 * mag[size_t(m) * N + n] + 1e-6)
                    << qtype_name(uint32_t(t)) << " K=" << K << " M=" << M << " n=" << n << " kernel " << linear_quant_kernel();
              }
              for (int n = N; n < ldy; ++n) ASSERT_EQ(y[size_t(m) * ldy + n], 0.25f);  // nothing past N
            }
          }
        }
        linear_quant_force(KernelTier::Auto);
      }
    }
  }
  std::printf("decode kernel: %s\n", linear_quant_kernel());
}

// A team's rows cut anywhere (kernels/team_rows.h: the decoder moves the cuts by the
// threads' speeds) give the same bits as one thread: every row is summed alone, in one order.
TEST(QuantKernels, TeamCutsDoNotChangeResults) {
  const std::vector<std::vector<float>> cuts = {{}, {0.f, 0.5f, 1.f}, {0.f, 0.23f, 1.f}, {0.f, 0.9f, 1.f},
                                                {0.f, 0.1f, 0.15f, 1.f}, {0.f, 0.7f, 0.71f, 1.f}};
  // Every tier this CPU runs (the AVX2 kernels too where the CPU has better): a team's cut
  // moves rows between a kernel's unrolled shapes (four streams, one row), which must sum alike.
  struct Unforce {
    ~Unforce() { linear_quant_force(KernelTier::Auto); }
  } unforce;
  for (const KernelTier kern : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
    linear_quant_force(kern);
    for (QType t : {QType::Q8_0, QType::Q4_0, QType::Q4_K, QType::Q6_K}) {
      const int K = qtype_block(t) == 32 ? 288 : 768, N = 61;
      const size_t rb = qtype_row_bytes(t, K);
      std::vector<uint8_t> W(size_t(N) * rb);
      auto wf = gaussian(size_t(N) * K, 5 + K);
      for (int n = 0; n < N; ++n) quantize_row(t, &wf[size_t(n) * K], W.data() + size_t(n) * rb, K);
      for (int M : {1, 3}) {
        auto x = gaussian(size_t(M) * K, 7 + M, 0.5f);
        std::vector<float> one(size_t(M) * N, 0.f);
#pragma omp parallel num_threads(1)
        linear_quant_team(t, one.data(), N, x.data(), K, W.data(), M, N, K);
        for (const std::vector<float>& c : cuts) {
          const int threads = c.empty() ? 2 : int(c.size()) - 1;
          std::vector<float> team(one.size(), -1.f);
#pragma omp parallel num_threads(threads)
          linear_quant_team(t, team.data(), N, x.data(), K, W.data(), M, N, K, 0.f, c.empty() ? nullptr : c.data());
          ASSERT_EQ(team, one) << qtype_name(uint32_t(t)) << " " << linear_quant_kernel() << " M=" << M
                               << " threads=" << threads << (c.empty() ? " even" : " cut") << (c.size() > 1 ? c[1] : 0.f);
          // With stealing: ten products back to back in one region, no barrier between them.
          TeamSteal steal;
          steal.reset(threads);
          std::vector<std::vector<float>> ys(10, std::vector<float>(one.size(), -1.f));
#pragma omp parallel num_threads(threads)
          for (auto& y : ys)
            linear_quant_team(t, y.data(), N, x.data(), K, W.data(), M, N, K, 0.f, c.empty() ? nullptr : c.data(), &steal);
          for (const auto& y : ys)
            ASSERT_EQ(y, one) << qtype_name(uint32_t(t)) << " " << linear_quant_kernel() << " M=" << M
                              << " threads=" << threads << " stealing" << (c.empty() ? " even" : " cut") << (c.size() > 1 ? c[1] : 0.f);
        }
      }
    }
  }
}

// Prefill: bf16 tiles of the dequantized weights on a bf16 GEMM where the CPU has one (from
// 16 rows; within bf16 rounding of x and W), fp32 tiles on the fp32 GEMM otherwise (from 128
// rows); against the fp32 product of x and the dequantized W.
TEST(QuantKernels, PrefillTilesMatchFp32Product) {
  const QType t = QType::Q4_K;
  const int N = 300, K = 512, M = 130;
  const size_t rb = qtype_row_bytes(t, K);
  std::vector<uint8_t> W(size_t(N) * rb);
  auto wf = gaussian(size_t(N) * K, 3);
  for (int n = 0; n < N; ++n) quantize_row(t, &wf[size_t(n) * K], &W[size_t(n) * rb], K);
  std::vector<float> wd(size_t(N) * K);
  for (int n = 0; n < N; ++n) dequantize_row(t, &W[size_t(n) * rb], &wd[size_t(n) * K], K);
  auto x = gaussian(size_t(M) * K, 4);
  std::vector<float> y(size_t(M) * N);
  linear_quant(t, y.data(), N, x.data(), K, W.data(), M, N, K);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0, a = 0;
      for (int k = 0; k < K; ++k) s += double(x[size_t(m) * K + k]) * wd[size_t(n) * K + k], a += std::fabs(double(x[size_t(m) * K + k]) * wd[size_t(n) * K + k]);
      ASSERT_NEAR(y[size_t(m) * N + n], s, 8e-3 * a) << m << " " << n;
    }
}

// ---------------------------------------------------------------- GGUF

namespace {

std::string write_sample(const std::string& path) {
  GgufWriter w;
  w.kv_string("general.architecture", "zaya");
  w.kv_u32("general.alignment", 32);
  w.kv_i32("test.i32", -5);
  w.kv_f32("test.f32", 1.5f);
  w.kv_bool("test.bool", true);
  w.kv_u64("test.u64", uint64_t(1) << 40);
  w.kv_strings("test.strs", {"a", "", "ccc"});
  w.kv_f32s("test.f32s", {1.f, -2.f});
  w.kv_i32s("test.i32s", {7, 8, 9});
  w.add_tensor("blk.0.q.weight", {64, 3}, QType::Q8_0);
  w.add_tensor("norm", {5}, QType::BF16);
  w.add_tensor("emb", {256, 2}, QType::Q6_K);
  w.begin(path);
  std::vector<uint8_t> a(3 * 68, 1), b(10, 2), c(2 * 210, 3);
  for (int r = 0; r < 3; ++r) w.write(a.data() + r * 68, 68);  // in pieces
  w.write(b.data(), b.size());
  w.write(c.data(), c.size());
  w.finish();
  return path;
}

std::vector<char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void spit(const std::string& p, const std::vector<char>& d) { std::ofstream(p, std::ios::binary).write(d.data(), long(d.size())); }

}  // namespace

TEST(Gguf, WriteThenRead) {
  test_util::TempDir dir("quant", "gguf");
  const std::string p = write_sample(dir / "x.gguf");
  // Only the file: no temporary of any name is left beside it.
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(p).parent_path())) {
    ++entries;
    EXPECT_EQ(e.path(), std::filesystem::path(p));
  }
  EXPECT_EQ(entries, 1u);
  GgufFile f(p);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "zaya");
  EXPECT_EQ(f.find("test.i32")->i, -5);
  EXPECT_EQ(f.find("test.f32")->f, 1.5);
  EXPECT_EQ(f.find("test.bool")->u, 1u);
  EXPECT_EQ(f.get_uint("test.u64"), uint64_t(1) << 40);
  EXPECT_EQ(f.find("test.strs")->strs, (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.find("test.i32s")->nums, (std::vector<double>{7, 8, 9}));
  ASSERT_EQ(f.tensors().size(), 3u);
  const auto& t = f.tensors();
  EXPECT_EQ(t[0].name, "blk.0.q.weight");
  EXPECT_EQ(t[0].ne, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(t[0].bytes, 204u);
  EXPECT_EQ(t[1].offset, 224u);  // 204 rounded up to 32
  EXPECT_EQ(t[2].type, QType::Q6_K);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  for (const auto& x : t) EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data) % 32, (reinterpret_cast<uintptr_t>(t[0].data)) % 32);
  EXPECT_EQ(t[0].data[0], 1);
  EXPECT_EQ(t[1].data[9], 2);
  EXPECT_EQ(t[2].data[419], 3);
  EXPECT_EQ(f.file_size(), f.data_offset() + t[2].offset + t[2].bytes);
}

TEST(Gguf, NamesMapBothWays) {
  for (std::string n : {"model.embed_tokens.weight", "model.final_norm.weight",
                        "model.layers.79.zaya_block.experts.local_experts.15.linear_fc1.weight",
                        "model.layers.3.self_attn.qkv.conv_qk.1.weight", "model.layers.2.self_attn.o_proj.weight",
                        "model.layers.5.zaya_block.router.router_mlp.0.bias", "model.res_scale.hidden_states_scale"}) {
    const std::string g = gguf_name_from_hf(n);
    EXPECT_LT(g.size(), 64u) << g;
    EXPECT_EQ(hf_name_from_gguf(g), n);
  }
  EXPECT_EQ(gguf_name_from_hf("model.layers.79.zaya_block.experts.local_experts.15.linear_fc1.weight"),
            "blk.79.ffn_exp.15.linear_fc1.weight");
}

// Malformed files: one line naming the file and what is wrong, never a crash.
TEST(Gguf, MalformedFilesGiveOneLineErrors) {
  test_util::TempDir dir("quant", "bad");
  const std::string good = write_sample(dir / "good.gguf");
  const auto bytes = slurp(good);
  const size_t data_off = GgufFile(good).data_offset();
  auto expect_error = [&](const std::vector<char>& d, const std::string& want) {
    const std::string p = dir / "bad.gguf";
    spit(p, d);
    const std::string e = test_util::error_of([&] { GgufFile f(p); });
    EXPECT_NE(e.find(want), std::string::npos) << "got: " << e;
    EXPECT_NE(e.find(p), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  // Truncated: in the data, in the header, and a file shorter than a header.
  expect_error(std::vector<char>(bytes.begin(), bytes.end() - 1), "truncated");
  expect_error(std::vector<char>(bytes.begin(), bytes.begin() + long(data_off) - 40), "truncated");
  expect_error(std::vector<char>(bytes.begin(), bytes.begin() + 10), "truncated");
  auto d = bytes;
  d[0] = 'X';
  expect_error(d, "not a GGUF file");
  d = bytes;
  d[4] = 9;
  expect_error(d, "version 9");
  d = bytes;  // tensor_count absurd
  d[15] = 0x7f;
  expect_error(d, "tensor_count");
  // Find the first tensor info (its name) and corrupt what follows it.
  const std::string name = "blk.0.q.weight";
  const size_t at = size_t(std::search(bytes.begin(), bytes.end(), name.begin(), name.end()) - bytes.begin()) + name.size();
  d = bytes;  // dims[0] = 65: not a whole number of q8_0 blocks (a bad block count)
  d[at + 4] = 65;
  expect_error(d, "not a whole number of blocks");
  d = bytes;  // type 99
  d[at + 4 + 16] = 99;
  expect_error(d, "ggml type 99");
  d = bytes;  // offset 1: misaligned
  d[at + 4 + 16 + 4] = 1;
  expect_error(d, "not a multiple of the alignment");
  d = bytes;  // dims[1] = 3000: the tensor runs past the end
  d[at + 4 + 8] = char(0xb8), d[at + 4 + 9] = 0x0b;
  expect_error(d, "runs past the end");
}
