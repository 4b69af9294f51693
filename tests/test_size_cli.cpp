// zaya size through the binary: every mode's --json, parameter counts equal `zaya params`,
// the KV acceptance figure for ZAYA1-base, the shape search placing ZAYA1-base, the MoE
// width table, one-line errors. Both commands print count_params; that formula itself is
// checked against the tensors the model allocates and the spec's table in test_param_count.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

using json = nlohmann::json;

namespace {

const std::string kBin = ZAYA_BIN;
const std::string kSrc = ZAYA_SOURCE_DIR;

struct Result {
  int rc = 0;
  std::string out;
};

Result run(const std::string& args, bool with_stderr = false) {
  std::string cmd = kBin + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  r.rc = pclose(p);
  return r;
}

json run_json(const std::string& args) {
  Result r = run(args);
  EXPECT_EQ(r.rc, 0) << args;
  return json::parse(r.out);
}

}  // namespace

TEST(SizeCli, BaseOnMi300xParamsEqualZayaParamsAndKvIsOneEighth) {
  const std::string cfg = kSrc + "/configs/zaya1-base.toml";
  json s = run_json("size --config " + cfg + " --hw " + kSrc + "/configs/hardware/mi300x.toml --json");
  json p = run_json("params --config " + cfg + " --json");
  for (const char* k : {"total", "active", "total_with_embedding", "active_with_embedding", "embedding"})
    EXPECT_EQ(s["params"][k], p[k]) << k;
  EXPECT_EQ(s["params"]["total"], 8303355728LL);
  EXPECT_EQ(s["kv_cache"]["values_per_token_per_layer"]["cca"], 512);
  EXPECT_EQ(s["kv_cache"]["values_per_token_per_layer"]["mha"], 4096);
  EXPECT_EQ(s["kv_cache"]["mha_over_cca"], 8);
  EXPECT_GT(s["step_time_s"].get<double>(), 0);
  EXPECT_GT(s["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(s["mfu"].get<double>(), 0);
  EXPECT_LT(s["mfu"].get<double>(), 1);
  EXPECT_GT(s["at_scale"]["days"].get<double>(), 0);
  EXPECT_TRUE(s["memory_per_rank"]["fits"].get<bool>());
  // The text report prints the breakdown.
  Result t = run("size --config " + cfg + " --hw " + kSrc + "/configs/hardware/mi300x.toml");
  EXPECT_EQ(t.rc, 0);
  for (const char* k : {"8,303,355,728", "753,608,528", "FLOPs per token", "Memory per rank", "CCA is 1/8",
                        "tokens/s per device", "MFU", "days to train"})
    EXPECT_NE(t.out.find(k), std::string::npos) << k;
}

TEST(SizeCli, TinyJsonMatchesHandComputedFlops) {
  json s = run_json("size --config " + kSrc + "/configs/zaya1-tiny.toml --hw " + kSrc +
                    "/configs/hardware/h100-sxm.toml --micro-batch 2 --seq 8 --dtype fp32 --json");
  EXPECT_DOUBLE_EQ(s["flops_per_token"]["forward"].get<double>(), 51168.0);
  EXPECT_DOUBLE_EQ(s["flops_per_token"]["training"].get<double>(), 153504.0);
  EXPECT_EQ(s["params"]["total"], 44342);
}

TEST(SizeCli, CheckModeJson) {
  json c = run_json("size --config " + kSrc + "/configs/zaya1-tiny.toml --hw " + kSrc +
                    "/configs/hardware/mi300x.toml --check --json");
  ASSERT_TRUE(c["rules"].is_array());
  bool vocab = false;
  for (auto& r : c["rules"])
    if (r["rule"] == "vocab size a multiple of 64") {
      vocab = true;
      EXPECT_EQ(r["status"], "warn");
      EXPECT_NE(r["fix"].get<std::string>().find("128"), std::string::npos);
    }
  EXPECT_TRUE(vocab);
}

TEST(SizeCli, SearchPlacesZaya1Base) {
  json s = run_json("size --search --total 8.3e9 --active 7.6e8 --hw " + kSrc + "/configs/hardware/mi300x.toml --json");
  EXPECT_GT(s["in_window"].get<int>(), 1);
  EXPECT_FALSE(s["pareto_front"].empty());
  const json& ref = s["reference"];
  EXPECT_EQ(ref["hidden_size"], 2048);
  EXPECT_EQ(ref["layers"], 40);
  EXPECT_EQ(ref["experts"], 16);
  EXPECT_TRUE(ref["in_window"].get<bool>());
  EXPECT_GE(ref["rank_train"].get<int>(), 1);
  EXPECT_LE(ref["rank_train"].get<int>(), s["in_window"].get<int>());
  EXPECT_GE(ref["rank_decode"].get<int>(), 1);
}

TEST(SizeCli, MoeWidthsTableAndPlot) {
  json m = run_json("size --moe-widths --config " + kSrc + "/configs/zaya1-base.toml --hw " + kSrc +
                    "/configs/hardware/mi300x.toml --json");
  ASSERT_TRUE(m["rows"].is_array());
  bool ref = false;
  for (auto& r : m["rows"]) {
    EXPECT_DOUBLE_EQ(r["experts"].get<double>() * r["ffn_hidden_size"].get<double>(), 16.0 * 4096);
    EXPECT_EQ(r["decode"].size(), 4u);  // batches 1, 8, 64, 256
    if (r["reference"].get<bool>()) {
      ref = true;
      EXPECT_EQ(r["experts"], 16);
      EXPECT_EQ(r["expert_width"], 2048);
      EXPECT_EQ(r["topk"], 1);
    }
  }
  EXPECT_TRUE(ref);
}

TEST(SizeCli, ProfileFromBenchDirAndNetworkJson) {
  json p = run_json("size --profile-from " + kSrc + "/tests/data/size/bench --network " + kSrc +
                    "/tests/data/size/cluster-a.txt --json");
  EXPECT_EQ(p["kind"], "cpu");
  EXPECT_DOUBLE_EQ(p["inter"]["bandwidth_GBps"].get<double>(), 39.93);
  EXPECT_EQ(p["measured_gemm_rows"], 6);
  json s = run_json("size --config " + kSrc + "/configs/zaya1-tiny.toml --profile-from " + kSrc +
                    "/tests/data/size/bench --dtype fp32 --json");
  EXPECT_TRUE(s["step"]["gemms"][0]["forward_call"]["from_table"].get<bool>());
}

TEST(SizeCli, OneLineErrors) {
  Result r = run("size --config " + kSrc + "/configs/zaya1-tiny.toml --hw /nonexistent.toml", true);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("/nonexistent.toml: cannot open"), std::string::npos);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
  r = run("size --config " + kSrc + "/configs/zaya1-tiny.toml --hw " + kSrc + "/configs/hardware/mi300x.toml --ep 3",
          true);
  EXPECT_NE(r.out.find("--ep 3"), std::string::npos);
  r = run("size --config " + kSrc + "/configs/zaya1-tiny.toml", true);
  EXPECT_NE(r.out.find("--hw"), std::string::npos);
  r = run("size --config " + kSrc + "/configs/zaya1-tiny.toml --hw " + kSrc +
              "/configs/hardware/mi300x.toml --check --search",
          true);
  EXPECT_NE(r.out.find("separate modes"), std::string::npos);
}
