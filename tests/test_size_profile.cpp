// zaya size hardware profiles: the shipped TOML profiles, a profile measured from bench
// CSVs (tests/data/size/bench), nccl-tests text as the network part, the measured GEMM
// table, and the co-design rule checks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "model/config.h"
#include "size/gemm_model.h"
#include "size/hardware.h"
#include "size/measured.h"
#include "size/rules.h"
#include "size/step_time.h"

using namespace zaya;
using namespace zaya::size;

namespace {

const std::string kData = ZAYA_SOURCE_DIR "/tests/data/size";
const std::string kHw = ZAYA_SOURCE_DIR "/configs/hardware";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const RuleCheck& rule(const std::vector<RuleCheck>& rs, const std::string& starts) {
  for (auto& r : rs)
    if (r.rule.rfind(starts, 0) == 0) return r;
  throw std::runtime_error("no rule " + starts);
}

}  // namespace

TEST(SizeProfile, ShippedProfilesCarryTheVendorFigures) {
  HardwareProfile mi = load_hardware_profile(kHw + "/mi300x.toml");
  EXPECT_EQ(mi.peak("bf16"), 1307e12);
  EXPECT_EQ(mi.peak("fp32"), 163e12);
  EXPECT_EQ(mi.memory_GB, 192);
  EXPECT_EQ(mi.memory_bandwidth_GBps, 5300);
  EXPECT_EQ(mi.cache_MB, 256);
  EXPECT_EQ(mi.compute_units, 304);
  EXPECT_EQ(mi.inter.bandwidth_GBps, 45);  // Pollara 400 Gb/s = 50 GB/s, 90% as bus bandwidth
  HardwareProfile h100 = load_hardware_profile(kHw + "/h100-sxm.toml");
  EXPECT_EQ(h100.peak("bf16"), 989e12);
  EXPECT_EQ(h100.memory_GB, 80);
  EXPECT_EQ(h100.memory_bandwidth_GBps, 3350);
  EXPECT_EQ(h100.compute_units, 132);
  HardwareProfile h200 = load_hardware_profile(kHw + "/h200.toml");
  EXPECT_EQ(h200.peak("bf16"), 989e12);
  EXPECT_EQ(h200.memory_GB, 141);
  EXPECT_EQ(h200.memory_bandwidth_GBps, 4800);
  EXPECT_EQ(h200.compute_units, 132);
  // Round trip through TOML.
  HardwareProfile again = parse_hardware_profile(hardware_profile_to_toml(mi), "roundtrip.toml");
  EXPECT_EQ(again.tiles.size(), mi.tiles.size());
  EXPECT_EQ(again.peak("bf16"), mi.peak("bf16"));
  EXPECT_EQ(again.intra.latency_us, mi.intra.latency_us);
}

TEST(SizeProfile, BadProfilesNameTheField) {
  std::ifstream f(kHw + "/mi300x.toml");
  std::string text((std::istreambuf_iterator<char>(f)), {});
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return error_of([&] { parse_hardware_profile(t, "bad.toml"); });
  };
  EXPECT_NE(with("compute_units = 304", "compute_units = 0").find("'compute_units'"), std::string::npos);
  EXPECT_NE(with("compute_units = 304", "compute_units = 304\nbogus = 1").find("unknown field 'bogus'"), std::string::npos);
  EXPECT_NE(with("compute_units = 304", "compute_unit = 304").find("missing field 'compute_units'"), std::string::npos);
  EXPECT_NE(with("bandwidth_GBps = 5300", "bandwidth_GBps = \"fast\"").find("'bandwidth_GBps' must be a number"),
            std::string::npos);
  EXPECT_NE(with("gemm_efficiency = 0.60", "gemm_efficiency = 1.5").find("'gemm_efficiency'"), std::string::npos);
  EXPECT_NE(with("[network]", "[net]").find("[net]"), std::string::npos);
  EXPECT_NE(with("peak_tflops_fp8", "peak_tflops_fp6").find("fp6"), std::string::npos);
  EXPECT_NE(error_of([] { load_hardware_profile("/nonexistent/hw.toml"); }).find("/nonexistent/hw.toml"),
            std::string::npos);
}

TEST(SizeProfile, MeasuredProfileFromBenchCsvs) {
  HardwareProfile hw = profile_from_bench_dir(kData + "/bench");
  EXPECT_EQ(hw.kind, "cpu");
  EXPECT_DOUBLE_EQ(hw.peak("fp32"), 0.2e12);
  EXPECT_DOUBLE_EQ(hw.peak("bf16"), 0.4e12);
  EXPECT_DOUBLE_EQ(hw.memory_bandwidth_GBps, 22.5);  // peak.json triad, not the L1 sweep point
  EXPECT_EQ(hw.compute_units, 2);                    // threads in mem.csv
  EXPECT_DOUBLE_EQ(hw.gemm_efficiency, 0.75);
  EXPECT_EQ(hw.gemm_table.size(), 6u);
  EXPECT_DOUBLE_EQ(hw.elementwise.exp_f32_per_s, 5e8);  // elementwise.json
  EXPECT_DOUBLE_EQ(hw.elementwise.erf_f32_per_s, 5e7);
  EXPECT_DOUBLE_EQ(hw.kernel_overhead_us, 3.5);  // the measured parallel-region cost
  EXPECT_DOUBLE_EQ(hw.elementwise.kernels_GBps, 10.0);
  // AdamW rates per tensor size: interpolated in log n, clamped at the ends.
  EXPECT_DOUBLE_EQ(hw.elementwise.adamw_rate(1000), 1e8);
  EXPECT_NEAR(hw.elementwise.adamw_rate(10000), 5.5e8, 1e-3);
  EXPECT_DOUBLE_EQ(hw.elementwise.adamw_rate(10), 1e8);
  EXPECT_DOUBLE_EQ(hw.elementwise.adamw_rate(1e7), 1e9);
  // Network from comm.csv: best bus bandwidth, smallest message's time per ring step.
  EXPECT_NEAR(hw.intra.bandwidth_GBps, 7.9924, 1e-9);
  EXPECT_NEAR(hw.intra.latency_us, 4.06, 1e-9);
  EXPECT_EQ(hw.comm_table.size(), 6u);
  // An exact table shape: the better engine's 0.12 TFLOP/s.
  GemmTiming t = gemm_time(hw, "fp32", {256, 256, 256, 1});
  EXPECT_TRUE(t.from_table);
  EXPECT_NEAR(t.seconds, 2.0 * 256 * 256 * 256 / 0.12e12, 1e-12);
  // Between measured shapes the rate is interpolated between their rates.
  GemmTiming mid = gemm_time(hw, "fp32", {512, 512, 512, 1});
  double tf = 2.0 * 512 * 512 * 512 / mid.seconds / 1e12;
  EXPECT_GT(tf, 0.02);
  EXPECT_LT(tf, 0.15);
  // No fp16 rows: a one-line error naming the table and the dtype.
  EXPECT_NE(error_of([&] { gemm_time(hw, "fp16", {64, 64, 64, 1}); }).find("dtype fp16"), std::string::npos);
  // Collective time from the measured table: interpolated between 1 MiB and 64 MiB rows.
  double mid_bytes = (1048576.0 + 67108864.0) / 2;
  EXPECT_NEAR(collective_seconds(hw, "reduce_scatter", mid_bytes, 2), (69.54 + 4198.30) / 2 * 1e-6, 1e-9);
  // The written TOML profile reads back.
  HardwareProfile again = parse_hardware_profile(hardware_profile_to_toml(hw), "measured.toml");
  EXPECT_DOUBLE_EQ(again.memory_bandwidth_GBps, 22.5);
}

TEST(SizeProfile, BenchDirErrorsNameTheFile) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "zaya_size_bad_bench";
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_NE(error_of([&] { profile_from_bench_dir(dir.string()); }).find("gemm.csv: missing"), std::string::npos);
  std::ofstream(dir / "gemm.csv") << "M,N,K,tflops\n1,2,3,4\n";
  EXPECT_NE(error_of([&] { profile_from_bench_dir(dir.string()); }).find("gemm.csv: header is 'M,N,K,tflops'"),
            std::string::npos);
  std::ofstream(dir / "gemm.csv") << "dtype,engine,M,N,K,time_us,tflops,efficiency\nfp32,openblas,64,64,x,1,0.1,0.5\n";
  EXPECT_NE(error_of([&] { profile_from_bench_dir(dir.string()); }).find("column 'K'"), std::string::npos);
  std::ofstream(dir / "gemm.csv") << "dtype,engine,M,N,K,time_us,tflops,efficiency\nfp32,openblas,64,64,64,1,0.1,0.5\n";
  EXPECT_NE(error_of([&] { profile_from_bench_dir(dir.string()); }).find("no memory bandwidth"), std::string::npos);
  std::ofstream(dir / "peak.json") << "{\"triad_MBps\": 1000}";
  std::ofstream(dir / "elementwise.json") << "{\"adamw_rates\": [[10, 1], [5, 1]]}";
  EXPECT_NE(error_of([&] { profile_from_bench_dir(dir.string()); }).find("'adamw_rates'"), std::string::npos);
  std::ofstream(dir / "elementwise.json") << "{\"exp_f32_per_s\": \"fast\"}";
  EXPECT_NE(error_of([&] { profile_from_bench_dir(dir.string()); }).find("elementwise.json: field 'exp_f32_per_s'"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(SizeProfile, NcclTestsOutputAsTheNetwork) {
  std::ifstream f(kData + "/cluster-a.txt");
  std::string text((std::istreambuf_iterator<char>(f)), {});
  NcclTestsRun run = parse_nccl_tests_output(text, "cluster-a.txt");
  EXPECT_EQ(run.op, "all_reduce");  // no name in the file: busbw / algbw = 2(n-1)/n
  EXPECT_EQ(run.nranks, 8);
  EXPECT_EQ(run.hosts, 2);
  EXPECT_DOUBLE_EQ(run.avg_busbw_GBps, 17.2345);
  ASSERT_EQ(run.rows.size(), 7u);
  EXPECT_DOUBLE_EQ(run.rows.back().size_bytes, 1073741824.0);
  EXPECT_DOUBLE_EQ(run.rows.back().busbw_GBps, 39.93);
  EXPECT_TRUE(run.rows.back().inter_node);
  HardwareProfile hw = load_hardware_profile(kHw + "/mi300x.toml");
  apply_nccl_tests_file(hw, kData + "/cluster-a.txt");
  EXPECT_DOUBLE_EQ(hw.inter.bandwidth_GBps, 39.93);
  EXPECT_NEAR(hw.inter.latency_us, 84.0 / 14, 1e-12);  // 2(n-1) ring steps
  EXPECT_EQ(hw.devices_per_node, 4);
  EXPECT_EQ(hw.intra.bandwidth_GBps, 315);  // intra-node part kept from the TOML profile
  // Named collectives and the reduce-scatter / all-gather inference from the redop column.
  EXPECT_EQ(normalise_collective_name("all_reduce_perf"), "all_reduce");
  EXPECT_EQ(normalise_collective_name("AllGather"), "all_gather");
  std::string rs = "#  Rank  0 Group  0 Pid 1 on h device 0 [0x1] X\n#  Rank  1 Group  0 Pid 2 on h device 1 [0x2] X\n"
                   "  1048576  131072  float  none  -1  100.0  10.49  5.24  0  100.0  10.49  5.24  0\n";
  EXPECT_EQ(parse_nccl_tests_output(rs, "x.txt").op, "all_gather");
  EXPECT_NE(error_of([] { parse_nccl_tests_output("# nothing here\n", "empty.txt"); }).find("empty.txt: no nccl-tests"),
            std::string::npos);
}

TEST(SizeProfile, RuleChecksWithFixes) {
  HardwareProfile mi = load_hardware_profile(kHw + "/mi300x.toml");
  ModelConfig tiny = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  RunLayout r;
  r.seq = 512;
  auto rs = check_rules(tiny, r, mi);
  const RuleCheck& vocab = rule(rs, "vocab size");
  EXPECT_FALSE(vocab.pass);
  EXPECT_NE(vocab.fix.find("pad vocab_size to 128"), std::string::npos);
  EXPECT_FALSE(rule(rs, "head dim").pass);
  EXPECT_NE(rule(rs, "head dim").fix.find("head dim 64"), std::string::npos);
  EXPECT_FALSE(rule(rs, "hidden size").pass);
  EXPECT_NE(rule(rs, "hidden size").fix.find("hidden_size 256"), std::string::npos);
  EXPECT_TRUE(rule(rs, "(b*a)/t").pass);
  ModelConfig base = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-base.toml");
  auto rb = check_rules(base, RunLayout{}, mi);
  EXPECT_TRUE(rule(rb, "vocab size").pass);  // 262272 = 64 * 4098
  EXPECT_TRUE(rule(rb, "head dim").pass);
  EXPECT_TRUE(rule(rb, "hidden size").pass);
  EXPECT_TRUE(rule(rb, "expert FFN widths").pass);
  EXPECT_TRUE(rule(rb, "b*s/cp").pass);
  EXPECT_FALSE(rule(rb, "value projection halves").pass);  // 128 on a 256 width multiple
  EXPECT_NE(rule(rb, "value projection halves").fix.find("fuse"), std::string::npos);
  bool waves = false;
  for (auto& x : rb)
    if (x.rule.rfind("wave quantisation of experts.fc1", 0) == 0) waves = true;
  EXPECT_TRUE(waves);
  EXPECT_EQ(round_up(96, 64), 128);
  EXPECT_EQ(pow2_factor(4096 * 3), 4096);
}
