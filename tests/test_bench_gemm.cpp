// zaya bench gemm: shape lists, transformer presets against hand values, nominal peak rules,
// and a tiny timed run through zaya::gemm_with with the CSV header.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/common.h"
#include "bench/gemm_bench.h"
#include "core/error.h"
#include "model/config.h"

using namespace zaya::bench;
namespace fs = std::filesystem;

TEST(BenchGemm, IntLists) {
  EXPECT_EQ(parse_int_list("256:1024:256", "-m"), (std::vector<int64_t>{256, 512, 768, 1024}));
  EXPECT_EQ(parse_int_list("64:512:*2", "-m"), (std::vector<int64_t>{64, 128, 256, 512}));
  EXPECT_EQ(parse_int_list("1K, 2K,96", "-m"), (std::vector<int64_t>{1024, 2048, 96}));
  EXPECT_THROW(parse_int_list("12:4:1", "-m"), zaya::Error);
  EXPECT_THROW(parse_int_list("1:4", "-m"), zaya::Error);
  EXPECT_THROW(parse_int_list("1:8:*1", "-m"), zaya::Error);
  EXPECT_THROW(parse_int_list("abc", "-m"), zaya::Error);
  EXPECT_THROW(parse_int_list("", "-m"), zaya::Error);
  EXPECT_EQ(cartesian_shapes({1, 2}, {3}, {4, 5}).size(), 4u);
}

TEST(BenchGemm, TransformerPresetFromSmallConfig) {
  zaya::ModelConfig c = zaya::load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-small.toml");
  // D 512, hd 64, Hq 4, Hk 2, E 8 (+ skip), F 1024, R 128, V 8192, top-1.
  auto s = transformer_shapes(c, {512, 256, 0});
  auto find = [&](const std::string& n) {
    for (const auto& x : s)
      if (x.name == n) return x;
    ADD_FAILURE() << "no shape " << n;
    return GemmShape{};
  };
  auto is = [](const GemmShape& g, int64_t m, int64_t n, int64_t k) { return g.M == m && g.N == n && g.K == k; };
  EXPECT_TRUE(is(find("q_proj"), 512, 256, 512));
  EXPECT_TRUE(is(find("k_proj"), 512, 128, 512));
  EXPECT_TRUE(is(find("v_proj (val_proj1/2)"), 512, 64, 512));
  EXPECT_TRUE(is(find("o_proj"), 512, 512, 256));
  EXPECT_TRUE(is(find("attn_scores (per head)"), 256, 256, 64));
  EXPECT_TRUE(is(find("attn_context (per head)"), 256, 64, 256));
  EXPECT_TRUE(is(find("expert_fc1"), 64, 1024, 512));  // 512 tokens x top-1 / 8 experts
  EXPECT_TRUE(is(find("expert_fc2"), 64, 512, 512));
  EXPECT_TRUE(is(find("router_down_proj"), 512, 128, 512));
  EXPECT_TRUE(is(find("router_mlp (0, 2)"), 512, 128, 128));
  EXPECT_TRUE(is(find("router_mlp_out"), 512, 9, 128));
  EXPECT_TRUE(is(find("lm_head"), 512, 8192, 512));
  EXPECT_TRUE(is(transformer_shapes(c, {512, 256, 100})[6], 100, 1024, 512));
  EXPECT_THROW(transformer_shapes(c, {0, 256, 0}), zaya::Error);
}

TEST(BenchGemm, NominalFlopsPerCycle) {
  int f = 0, b = 0;
  std::string note;
  flops_per_cycle("AMD", 0x1A, true, true, true, false, f, b, note);  // Zen 5
  EXPECT_EQ(f, 64);
  EXPECT_EQ(b, 128);
  flops_per_cycle("AMD", 0x19, true, true, true, false, f, b, note);  // Zen 4: 256-bit pipes
  EXPECT_EQ(f, 32);
  EXPECT_EQ(b, 64);
  flops_per_cycle("Intel", 6, true, true, true, true, f, b, note);  // Sapphire Rapids, AMX
  EXPECT_EQ(f, 64);
  EXPECT_EQ(b, 1024);
  flops_per_cycle("Intel", 6, true, true, true, false, f, b, note);  // Emerald Rapids without AMX
  EXPECT_EQ(f, 64);
  EXPECT_EQ(b, 32);
  flops_per_cycle("AMD", 0x17, true, false, false, false, f, b, note);  // Zen 2
  EXPECT_EQ(f, 32);
  EXPECT_EQ(b, 32);
  CpuInfo ci;
  ci.cores = 2;
  ci.ghz = 2.0;
  ci.fp32_flops_per_cycle = 64;
  ci.bf16_flops_per_cycle = 128;
  EXPECT_DOUBLE_EQ(ci.nominal_tflops(false), 0.256);
  EXPECT_DOUBLE_EQ(ci.nominal_tflops(true), 0.512);
}

TEST(BenchGemm, TimesThroughTheTrainerPathAndChecks) {
  GemmShape s{"", 64, 48, 32};
  for (auto e : {zaya::GemmEngine::OpenBLAS, zaya::GemmEngine::OneDNN})
    for (auto [ta, tb] : {std::pair{zaya::Trans::N, zaya::Trans::T}, std::pair{zaya::Trans::T, zaya::Trans::N}})
      EXPECT_GT(time_gemm(e, zaya::GemmPrecision::F32, ta, tb, s, 0, 2, 0.0, true), 0.0);
  EXPECT_GT(time_gemm(zaya::GemmEngine::Auto, zaya::GemmPrecision::BF16, zaya::Trans::N, zaya::Trans::T, s, 0, 1, 0.0, true),
            0.0);
}

TEST(BenchGemm, RunWritesCsvWithEfficiency) {
  fs::path d = fs::temp_directory_path() / ("zaya_test_bench_gemm_" + std::to_string(::getpid()));
  GemmOptions o;
  o.shapes = cartesian_shapes({32, 64}, {64}, {32});
  o.min_iters = 1;
  o.min_time = 0;
  o.warmup = 0;
  o.peak_fp32 = 1.0;
  o.peak_bf16 = 2.0;
  o.csv = (d / "gemm.csv").string();
  FILE* devnull = std::fopen("/dev/null", "w");
  GemmResult r = run_gemm(o, devnull);
  std::fclose(devnull);
  ASSERT_EQ(r.rows.size(), 4u);
  ASSERT_EQ(r.best.size(), 2u);
  EXPECT_EQ(r.best[0].peak_source, "flag");
  for (const auto& row : r.rows) {
    EXPECT_GT(row.tflops, 0);
    double peak = row.dtype == "fp32" ? 1.0 : 2.0;
    EXPECT_NEAR(row.efficiency, row.tflops / peak, 1e-12);
    EXPECT_NEAR(row.tflops, 2.0 * row.M * row.N * row.K / (row.time_us * 1e-6) / 1e12, 1e-9 * row.tflops);
  }
  std::ifstream f(o.csv);
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header, "dtype,engine,M,N,K,time_us,tflops,efficiency");
  fs::remove_all(d);
  GemmOptions bad;
  EXPECT_THROW(bad.validate(), zaya::Error);  // no shapes
  bad.shapes = {{"", 0, 1, 1}};
  EXPECT_THROW(bad.validate(), zaya::Error);
  EXPECT_THROW(parse_precision("fp8"), zaya::Error);
  zaya::Trans ta, tb;
  EXPECT_THROW(parse_layout("nx", ta, tb), zaya::Error);
}
