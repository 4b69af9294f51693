// zaya size's step model by zone (size/zones.h): the zone table against the profiler's zones of
// a real (tiny) training step, each cost term on constructed profiles (a zone's time scales as
// its FLOPs or bytes say), the kernel table's loading, and the interleaved measurement's
// re-measure of disagreeing rounds on a fake clock. No timing: accuracy is
// scripts/validate_size.sh's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "bench/interleaved.h"
#include "bench/kernels.h"
#include "bench/train_step.h"
#include "check_util.h"
#include "core/error.h"
#include "kernels/gemm.h"
#include "model/config.h"
#include "size/hardware.h"
#include "size/measured.h"
#include "size/step_time.h"
#include "size/workload.h"
#include "size/zones.h"

using namespace zaya;
using namespace zaya::size;
using zaya::test_util::MaxError;

namespace {

const std::string kHw = ZAYA_SOURCE_DIR "/configs/hardware";
const std::string kTiny = ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml";

::testing::AssertionResult rel_near(double got, double want, double tol = 1e-9) {
  MaxError e;
  e.add(got, want);
  return e.within(tol, true);
}

// A CPU profile with a kernel table: one row per kind, fp32.
HardwareProfile constructed() {
  HardwareProfile hw;
  hw.kind = "cpu";
  hw.peak_tflops["fp32"] = 1;
  hw.compute_units = 2;
  hw.gemm_efficiency = 0.5;
  hw.tiles = {{64, 64, 64, 1.0}};
  hw.memory_bandwidth_GBps = 20;
  hw.kernel_overhead_us = 0;
  hw.elementwise.kernels_GBps = 10;
  hw.kernel_table = {{"gemm_nt", "fp32", "avx512", {100, 100, 100}, 100},
                     {"gemm_nn", "fp32", "avx512", {100, 100, 100}, 120},
                     {"gemm_tn", "fp32", "avx512", {100, 100, 100}, 150},
                     {"attention_fwd", "fp32", "avx512", {2, 128, 4, 1, 64}, 1000},
                     {"attention_bwd", "fp32", "avx512", {2, 128, 4, 1, 64}, 2500},
                     {"conv_fwd", "fp32", "avx512", {2, 128, 384, 64, 2, 2}, 300},
                     {"conv_bwd", "fp32", "avx512", {2, 128, 384, 64, 2, 2}, 700}};
  return hw;
}

std::set<std::string> leaf_zones(const std::vector<prof::Row>& rows) {
  std::set<std::string> out;
  for (size_t i = 0; i < rows.size(); ++i)
    if (i + 1 == rows.size() || rows[i + 1].depth <= rows[i].depth) out.insert(rows[i].path);
  return out;
}

void expect_table_matches_profiler(bool bf16) {
  bench::TrainStepOptions o;
  o.batch = 1, o.seq = 16, o.steps = 1, o.warmup = 0, o.bf16 = bf16, o.profile = true;
  const GemmSettings saved = gemm_settings();
  const bench::TrainStepResult r = bench::measure_train_step(load_model_config(kTiny), o);
  gemm_settings() = saved;
  // The first step of a bf16 run also writes the weights' bf16 copy (its own zone).
  const bool first_bf16 = bf16 && bf16_gemm_supported();
  std::set<std::string> table;
  for (const ZoneSpec& z : zone_table())
    if (!z.bf16_first_step || first_bf16) table.insert(z.path);
  const std::set<std::string> prof = leaf_zones(r.profile);
  for (const std::string& p : prof) EXPECT_TRUE(table.count(p)) << "profiler zone with no cost term: " << p;
  for (const std::string& p : table) EXPECT_TRUE(prof.count(p)) << "cost term for a zone the step no longer has: " << p;
}

}  // namespace

TEST(SizeZones, TableMatchesTheProfilersZonesFp32) { expect_table_matches_profiler(false); }

TEST(SizeZones, TableMatchesTheProfilersZonesBf16) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no bf16 GEMM on this CPU";
  expect_table_matches_profiler(true);
}

TEST(SizeZones, GemmTermExactThenScaledByFlops) {
  HardwareProfile hw = constructed();
  std::string src;
  EXPECT_TRUE(rel_near(gemm_term(hw, "fp32", "nt", 100, 100, 100, &src), 100e-6));
  EXPECT_EQ(src, "measured");
  EXPECT_TRUE(rel_near(gemm_term(hw, "fp32", "nt", 200, 100, 100, &src), 200e-6));  // 2x the FLOPs
  EXPECT_EQ(src, "scaled");
  EXPECT_TRUE(rel_near(gemm_term(hw, "fp32", "tn", 100, 100, 400, &src), 600e-6));  // its own layout's rate
  // No row of the dtype: the GEMM model (finite, positive).
  const double m = gemm_term(hw, "fp32", "nt", 0, 100, 100);
  EXPECT_EQ(m, 0);
  hw.kernel_table.clear();
  const double fallback = gemm_term(hw, "fp32", "nt", 512, 512, 512, &src);
  EXPECT_EQ(src, "model");
  EXPECT_TRUE(std::isfinite(fallback) && fallback > 0);
}

TEST(SizeZones, AttentionTermScalesAsCausalFlops) {
  const HardwareProfile hw = constructed();
  const double base = attention_term(hw, "fp32", 2, 128, 4, 1, 64, false);
  EXPECT_TRUE(rel_near(base, 1000e-6));
  EXPECT_TRUE(rel_near(attention_term(hw, "fp32", 2, 256, 4, 1, 64, false), 4 * base));  // T^2
  EXPECT_TRUE(rel_near(attention_term(hw, "fp32", 4, 128, 8, 2, 64, false), 4 * base));  // B Hq
  EXPECT_TRUE(rel_near(attention_term(hw, "fp32", 2, 128, 4, 1, 128, true), 2 * 2500e-6));  // hd, backward row
  EXPECT_TRUE(rel_near(attention_kernel_flops({2, 128, 4, 1, 64}), 2.0 * 2 * 4 * 128 * 128 * 64));
}

TEST(SizeZones, ConvTermScalesAsItsFlops) {
  const HardwareProfile hw = constructed();
  EXPECT_TRUE(rel_near(conv_term(hw, "fp32", {2, 128, 384, 64, 2, 2}, false), 300e-6));
  EXPECT_TRUE(rel_near(conv_term(hw, "fp32", {2, 512, 384, 64, 2, 2}, true), 4 * 700e-6));
  // FLOPs 2 B T C (K0 + hd K1): K1 3 instead of 2 -> (2 + 192) / (2 + 128).
  EXPECT_TRUE(rel_near(conv_term(hw, "fp32", {2, 128, 384, 64, 2, 3}, false), 300e-6 * 194.0 / 130.0));
  EXPECT_THROW(conv_term(hw, "fp32", {2, 128}, false), Error);
}

TEST(SizeZones, BytesTermIsBandwidthOrExpBound) {
  HardwareProfile hw = constructed();
  EXPECT_TRUE(rel_near(bytes_term(hw, 1e9, {}, 0), 0.1));  // 10 GB/s
  EXPECT_TRUE(rel_near(bytes_term(hw, 2e9, {}, 0), 0.2));
  hw.kernel_overhead_us = 5;
  EXPECT_TRUE(rel_near(bytes_term(hw, 1e9, {}, 4), 0.1 + 20e-6));
  hw.elementwise.exp_f32_per_s = 1e9;
  EXPECT_TRUE(rel_near(bytes_term(hw, 1e3, {5e8, 0}, 0), 0.5 + 0 * 1e-6 + 0));  // exp-bound
}

TEST(SizeZones, CrossEntropyTermIsTheLossKernelsBytesAndExps) {
  HardwareProfile hw = constructed();  // 10 GB/s
  const double N = 1000, V = 5000, NV = N * V;
  // No exp rate: the logits' bytes, fp32: read once forward, read and written backward.
  EXPECT_TRUE(rel_near(cross_entropy_term(hw, "fp32", N, V, false), NV * 4 / 1e10));
  EXPECT_TRUE(rel_near(cross_entropy_term(hw, "fp32", N, V, true), NV * 8 / 1e10));
  // bf16 (CPU): forward rounds the fp32 blocks into bf16 logits and reads them (8 bytes a
  // logit); backward reads and writes bf16 (4).
  EXPECT_TRUE(rel_near(cross_entropy_term(hw, "bf16", N, V, false), NV * 8 / 1e10));
  EXPECT_TRUE(rel_near(cross_entropy_term(hw, "bf16", N, V, true), NV * 4 / 1e10));
  // An exp a logit: forward's exps run after the max pass (added), backward's overlap its
  // stream (the longer of the two).
  hw.elementwise.exp_f32_per_s = 1e9;
  EXPECT_TRUE(rel_near(cross_entropy_term(hw, "fp32", N, V, false), NV * 4 / 1e10 + NV / 1e9));
  EXPECT_TRUE(rel_near(cross_entropy_term(hw, "fp32", N, V, true), NV / 1e9));
  EXPECT_TRUE(rel_near(cross_entropy_term(hw, "fp32", 2 * N, V, true), 2 * NV / 1e9));
}

TEST(SizeZones, ZonesScaleWithTheirWork) {
  const HardwareProfile hw = constructed();
  ModelConfig cfg = load_model_config(kTiny);
  RunLayout r = RunLayout::for_dtype("fp32");
  r.micro_batch = 2, r.seq = 64;
  auto zones = [&](int b) {
    RunLayout rb = r;
    rb.micro_batch = b;
    std::map<std::string, double> m;
    for (const ZoneCost& z : predict_zones(build_workload(cfg, rb), hw)) m[z.path] = z.seconds;
    return m;
  };
  auto z1 = zones(2), z2 = zones(4);
  EXPECT_EQ(z1.size(), zone_table().size());
  // Twice the tokens: products and attention (B linear at fixed T) double; the weight-only
  // zone (zero_grads) stays.
  for (const char* p : {"forward/cca/projections", "backward/lm_head+loss/lm_head", "forward/cca/attention",
                        "backward/cca/attention", "forward/cca/conv+qk_mean"})
    EXPECT_TRUE(rel_near(z2[p], 2 * z1[p], 1e-6)) << p;
  EXPECT_TRUE(rel_near(z2["backward/zero_grads"], z1["backward/zero_grads"]));
  // Backward's elementwise work moves 2x forward's bytes.
  EXPECT_TRUE(rel_near(z1["backward/cca/l2norm+rope"], 2 * z1["forward/cca/l2norm+rope"]));
}

TEST(SizeZones, SideBySideProductsUseOneThreadTimes) {
  HardwareProfile hw = constructed();
  hw.elementwise.kernels_GBps = 1e9;  // elementwise work ~0: the zones are their products
  ModelConfig cfg = load_model_config(kTiny);
  RunLayout r = RunLayout::for_dtype("fp32");
  r.micro_batch = 2, r.seq = 64;
  const Workload w = build_workload(cfg, r);
  auto zones = [&](const HardwareProfile& h) {
    std::map<std::string, double> m;
    for (const ZoneCost& z : predict_zones(w, h)) m[z.path] = z.seconds;
    return m;
  };
  const auto team = zones(hw);
  // Two threads, a product on one thread at 1.5x its time split over both.
  HardwareProfile two = hw;
  two.elementwise.threads = 2;
  for (const MeasuredKernel& k : hw.kernel_table)
    if (k.kind.rfind("gemm_", 0) == 0) {
      MeasuredKernel one = k;
      one.kind = "gemm1_" + k.kind.substr(5);
      one.time_us = 1.5 * k.time_us;
      two.kernel_table.push_back(one);
    }
  const auto side = zones(two);
  // Experts: all of a step's products shared over the threads, 1.5 / 2.
  for (const char* p : {"forward/moe/experts", "backward/moe/experts"})
    EXPECT_TRUE(rel_near(side.at(p), 0.75 * team.at(p), 1e-6)) << p;
  // Gradient pairs (nn 120, tn 150 at equal FLOPs): the longer of the two on its own thread,
  // 1.5 * 150 against 120 + 150 one after the other.
  for (const char* p : {"backward/cca/projections", "backward/moe/router"})
    EXPECT_TRUE(rel_near(side.at(p), 225.0 / 270.0 * team.at(p), 1e-6)) << p;
  // Products split over the threads stay as they were.
  for (const char* p : {"forward/cca/projections", "forward/moe/router", "backward/lm_head+loss/lm_head"})
    EXPECT_TRUE(rel_near(side.at(p), team.at(p), 1e-9)) << p;
}

TEST(SizeZones, StepIsTheSumOfZonesWithAKernelTable) {
  ModelConfig cfg = load_model_config(kTiny);
  RunLayout r = RunLayout::for_dtype("fp32");
  r.micro_batch = 2, r.seq = 64;
  const Workload w = build_workload(cfg, r);
  const StepPrediction p = predict_step(w, constructed());
  EXPECT_TRUE(p.by_zones);
  double sum = 0;
  for (const ZoneCost& z : p.zones) sum += z.seconds;
  EXPECT_TRUE(rel_near(p.step_s, sum));
  // Vendor profiles keep their aggregate model and still report every zone, finite.
  for (const char* f : {"/mi300x.toml", "/h100-sxm.toml"}) {
    RunLayout rb = RunLayout::for_dtype("bf16");
    rb.micro_batch = 1, rb.seq = 512;
    const StepPrediction v = predict_step(build_workload(cfg, rb), load_hardware_profile(kHw + f));
    EXPECT_FALSE(v.by_zones);
    EXPECT_EQ(v.zones.size(), zone_table().size());
    for (const ZoneCost& z : v.zones) EXPECT_TRUE(std::isfinite(z.seconds) && z.seconds >= 0) << f << " " << z.path;
  }
}

TEST(SizeZones, KernelShapesListEveryTermsKernels) {
  ModelConfig cfg = load_model_config(kTiny);
  RunLayout r = RunLayout::for_dtype("fp32");
  r.micro_batch = 2, r.seq = 64;
  const auto lines = zone_kernel_shapes(build_workload(cfg, r));
  int gemm = 0, attn = 0, conv = 0;
  for (const std::string& l : lines) {
    const bench::KernelShape k = bench::parse_kernel_shape(l, "test");
    gemm += k.kind == "gemm", attn += k.kind == "attention", conv += k.kind == "conv";
  }
  EXPECT_GT(gemm, 8);
  EXPECT_EQ(attn, 1);
  EXPECT_EQ(conv, 1);
  EXPECT_THROW(bench::parse_kernel_shape("gemm xx 1 2 3", "f:3"), Error);
  EXPECT_THROW(bench::parse_kernel_shape("attention 1 2 3 2 4", "f:4"), Error);  // 3 heads over 2
  EXPECT_THROW(bench::parse_kernel_shape("conv 1 2 3", "f:5"), Error);
}

TEST(SizeZones, KernelTableLoadsFromABenchDir) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("zaya_zones_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream((dir / "kernels-fp32.csv").string()) << bench::kKernelCsvHeader << "\n"
                                                     << "gemm_nt,fp32,avx512,64x32x16,10.0,1.1,5,0,0\n"
                                                     << "attention_fwd,fp32,avx512,1x64x2x1x64,50.0,1.0,5,1,0\n";
  std::ofstream((dir / "peak.json").string()) << R"({"fp32_tflops": 1.0, "triad_MBps": 20000})";
  const HardwareProfile hw = profile_from_bench_dir(dir.string());
  ASSERT_EQ(hw.kernel_table.size(), 2u);
  EXPECT_EQ(hw.kernel_table[1].dims, (std::vector<double>{1, 64, 2, 1, 64}));
  EXPECT_TRUE(rel_near(gemm_term(hw, "fp32", "nt", 64, 32, 16), 10e-6));
  std::ofstream((dir / "kernels-fp32.csv").string()) << bench::kKernelCsvHeader << "\n"
                                                     << "gemm_nt,fp32,avx512,64x32x16,-1,1.1,5,0,0\n";
  try {
    profile_from_bench_dir(dir.string());
    ADD_FAILURE() << "a negative time was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernels-fp32.csv"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// Fake clock: each item's call advances it by the item's scripted duration.
TEST(BenchInterleaved, DisagreeingRoundsAreRemeasuredAndFlagged) {
  double now = 0;
  int calls_b = 0, calls_c = 0;
  std::vector<bench::TimedItem> items = {
      {"steady", [&] { now += 1.0; }, 1},
      // One slow round (a descheduled thread) among five; steady when measured again.
      {"burst", [&] { now += (++calls_b == 3) ? 10.0 : 2.0; }, 1},
      // Never settles: alternating 1 and 5.
      {"noisy", [&] { now += (++calls_c % 2) ? 1.0 : 5.0; }, 1},
  };
  bench::InterleavedOptions o;
  o.rounds = 5, o.warmup = 0, o.max_remeasures = 2;
  const auto t = bench::measure_interleaved(items, o, [&] { return now; });
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].remeasures, 0);
  EXPECT_FALSE(t[0].flagged);
  EXPECT_TRUE(rel_near(t[0].seconds, 1.0));
  EXPECT_EQ(t[1].remeasures, 1);
  EXPECT_FALSE(t[1].flagged);
  EXPECT_TRUE(rel_near(t[1].seconds, 2.0));
  EXPECT_TRUE(rel_near(t[1].spread, 1.0));
  EXPECT_EQ(calls_b, 10);  // five rounds, then five again
  EXPECT_EQ(t[2].remeasures, 2);
  EXPECT_TRUE(t[2].flagged);
  EXPECT_TRUE(rel_near(t[2].spread, 5.0));
  // Rounds interleave: a round visits every item before the next round starts.
  std::vector<std::string> order;
  std::vector<bench::TimedItem> log = {{"a", [&] { order.push_back("a"); }, 1}, {"b", [&] { order.push_back("b"); }, 1}};
  double t0 = 0;
  o.rounds = 3;
  bench::measure_interleaved(log, o, [&] { return t0 += 1; });
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "a", "b", "a", "b"}));
  EXPECT_THROW(bench::measure_interleaved(log, {0}, [&] { return 0.0; }), Error);
}
