// zaya bench mem: STREAM byte counting, validation (which must fail on a damaged array),
// the sweep, CSV header and the peak file merge.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "bench/mem_bench.h"
#include "core/error.h"

using namespace zaya::bench;
namespace fs = std::filesystem;

static std::string tmp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("zaya_test_bench_mem_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p.string();
}

TEST(BenchMem, StreamCountsBytesAsStream) {
  EXPECT_EQ(stream_bytes_per_element("copy"), 16);
  EXPECT_EQ(stream_bytes_per_element("scale"), 16);
  EXPECT_EQ(stream_bytes_per_element("add"), 24);
  EXPECT_EQ(stream_bytes_per_element("triad"), 24);
  EXPECT_THROW(stream_bytes_per_element("daxpy"), zaya::Error);
}

TEST(BenchMem, ValidationReplaysTheKernels) {
  // One pass by hand: a = 2; c = a = 2; b = 3c = 6; c = a + b = 8; a = b + 3c = 30.
  std::vector<double> a(100, 30.0), b(100, 6.0), c(100, 8.0);
  std::string msg;
  EXPECT_TRUE(stream_validate(a.data(), b.data(), c.data(), 100, 1, msg)) << msg;
  EXPECT_NE(msg.find("Solution Validates"), std::string::npos);
  b[42] = 6.5;
  EXPECT_FALSE(stream_validate(a.data(), b.data(), c.data(), 100, 1, msg));
  EXPECT_NE(msg.find("array b[]"), std::string::npos) << msg;
  EXPECT_FALSE(stream_validate(a.data(), b.data(), c.data(), 100, 2, msg));  // wrong pass count
}

TEST(BenchMem, RunValidatesAndRatesAreOrdered) {
  StreamRun r = run_stream(1 << 16, 4, 2);
  EXPECT_TRUE(r.valid) << r.validation;
  ASSERT_EQ(r.kernels.size(), 4u);
  EXPECT_EQ(r.kernels[3].name, "triad");
  for (const auto& k : r.kernels) {
    EXPECT_EQ(k.array_bytes, (1 << 16) * 8);
    EXPECT_GT(k.min_MBps, 0);
    EXPECT_GE(k.best_MBps, k.avg_MBps * 0.999999);
    EXPECT_GE(k.avg_MBps, k.min_MBps * 0.999999);
    EXPECT_NEAR(k.best_MBps, 1e-6 * stream_bytes_per_element(k.name) * (1 << 16) / k.min_time, 1e-6 * k.best_MBps);
  }
  StreamRun bad = run_stream(1 << 14, 3, 1, /*corrupt=*/true);
  EXPECT_FALSE(bad.valid);
  EXPECT_NE(bad.validation.find("Failed Validation on array a[]"), std::string::npos) << bad.validation;
}

TEST(BenchMem, SweepCoversTheRange) {
  auto pts = stream_sweep(8 << 10, 64 << 10, 1, 0.001);
  ASSERT_EQ(pts.size(), 4u);
  for (const auto& p : pts) {
    EXPECT_GT(p.best_MBps, 0);
    EXPECT_EQ(p.array_bytes * 3, p.working_set);
  }
  EXPECT_THROW(stream_sweep(64 << 10, 8 << 10, 1, 0.001), zaya::Error);
}

TEST(BenchMem, RunMemWritesCsvAndMergesPeak) {
  std::string d = tmp_dir("run");
  std::string peak = d + "/peak.json";
  zaya::bench::write_json_file(peak, {{"fp32_tflops", 0.25}});
  MemOptions o;
  o.array_bytes = 1 << 20;
  o.ntimes = 3;
  o.threads = 1;
  o.csv = d + "/mem.csv";
  o.peak_json = peak;
  FILE* devnull = std::fopen("/dev/null", "w");
  StreamRun r = run_mem(o, devnull);
  EXPECT_TRUE(r.valid);
  std::ifstream f(o.csv);
  std::string header, line;
  std::getline(f, header);
  EXPECT_EQ(header, "kernel,threads,array_bytes,best_MBps,avg_MBps,min_MBps");
  EXPECT_STREQ(kMemCsvHeader, header.c_str());
  int rows = 0;
  while (std::getline(f, line)) ++rows;
  EXPECT_EQ(rows, 4);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(peak));
  EXPECT_DOUBLE_EQ(j["fp32_tflops"].get<double>(), 0.25);  // kept
  EXPECT_NEAR(j["triad_MBps"].get<double>(), r.kernels[3].best_MBps, 1e-9);
  o.debug_corrupt = true;
  EXPECT_THROW(run_mem(o, devnull), zaya::Error);
  o.debug_corrupt = false;
  o.ntimes = 1;
  EXPECT_THROW(run_mem(o, devnull), zaya::Error);
  std::fclose(devnull);
  fs::remove_all(d);
}

TEST(BenchMem, CachesAreReadFromTheMachine) {
  CacheSizes c = detect_caches();
  if (c.last_level() == 0) GTEST_SKIP() << "this machine reports no cache sizes";
  EXPECT_GE(c.last_level(), c.l1d);
  if (c.l2 && c.l1d) {
    EXPECT_GT(c.l2, c.l1d);
  }
}

// The read-only rate counts whole aligned words only: an unaligned start and a range shorter
// than a word are not read past, and nothing to read rates 0.
TEST(BenchMem, ReadBandwidthOverUnalignedRanges) {
  std::vector<uint64_t> buf(size_t(1) << 19, 1);  // 4 MB
  const char* base = reinterpret_cast<const char*>(buf.data());
  const double gbs = read_bandwidth_gbs({{base + 2, buf.size() * 8 - 2}, {base, 5}}, 2, 2);
  EXPECT_GT(gbs, 0.1);
  EXPECT_LT(gbs, 1e4);
  EXPECT_EQ(read_bandwidth_gbs({{base + 1, 6}}, 1, 1), 0.0);
  EXPECT_EQ(read_bandwidth_gbs({}, 1, 1), 0.0);
}
