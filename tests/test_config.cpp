#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"

using namespace zaya;

static const char* kSmall = ZAYA_SOURCE_DIR "/configs/zaya1-small.toml";

TEST(Config, LoadsShippedConfigs) {
  ModelConfig s = load_model_config_toml(kSmall);
  EXPECT_EQ(s.hidden_size, 512);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.num_q_heads, 4);
  EXPECT_EQ(s.num_kv_heads, 2);
  EXPECT_EQ(s.num_layers, 4);
  EXPECT_EQ(s.num_experts, 8);
  EXPECT_EQ(s.num_classes(), 9);
  EXPECT_EQ(s.ffn_hidden_size, 1024);
  EXPECT_EQ(s.router_hidden, 128);
  ModelConfig b = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-base.toml");
  EXPECT_EQ(b.num_layers, 40);
  EXPECT_EQ(b.head_dim, 128);
  EXPECT_EQ(b.conv_channels(), 1280);
  EXPECT_EQ(b.rotary_dim(), 64);
}

static std::string error_of(const std::string& toml) {
  try {
    parse_model_config_toml(toml, "bad.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

static const std::string kOk =
    "hidden_size = 32\nvocab_size = 64\nnum_attention_heads = 4\ncca_num_q_heads = 4\n"
    "num_query_groups_list = 2\nzaya_layers = [\"a\", 4, \"a\", 4]\nffn_hidden_size_list = 16\n"
    "zaya_mlp_expansion = 8\n";

TEST(Config, BadConfigsNameTheField) {
  EXPECT_EQ(error_of(kOk), "");
  EXPECT_NE(error_of(kOk + "bogus = 1\n").find("unknown field 'bogus'"), std::string::npos);
  EXPECT_NE(error_of("vocab_size = 64\n").find("missing field 'hidden_size'"), std::string::npos);
  std::string heads = kOk;
  heads.replace(heads.find("num_query_groups_list = 2"), 25, "num_query_groups_list = 3");
  EXPECT_NE(error_of(heads).find("num_query_groups_list"), std::string::npos);
  std::string nominal = kOk;
  nominal.replace(nominal.find("num_attention_heads = 4"), 23, "num_attention_heads = 5");
  EXPECT_NE(error_of(nominal).find("num_attention_heads"), std::string::npos);
  EXPECT_NE(error_of(kOk + "cca_num_q_heads = [4, 0, 4]\n").find("bad.toml"), std::string::npos);
  std::string lists = kOk;
  lists.replace(lists.find("ffn_hidden_size_list = 16"), 25, "ffn_hidden_size_list = [16, 16, 16]");
  EXPECT_NE(error_of(lists).find("'ffn_hidden_size_list' has 3 entries"), std::string::npos);
  std::string topk = kOk + "moe_router_topk = 9\n";
  EXPECT_NE(error_of(topk).find("moe_router_topk"), std::string::npos);
  EXPECT_NE(error_of("hidden_size = [").find("TOML syntax error"), std::string::npos);
}

// Integers out of int's range are one-line errors, never a cast out of range (undefined) or a
// silent truncation (4294967328 read as 32); found by tests/fuzz's model_toml target.
TEST(Config, IntegersOutOfRangeNameTheField) {
  auto with = [](const std::string& value) {
    std::string t = kOk;
    t.replace(t.find("hidden_size = 32"), 16, "hidden_size = " + value);
    return error_of(t);
  };
  EXPECT_EQ(with("32.0"), "");
  for (const char* v : {"4294967328", "3e9", "2e+42", "-3e9", "32.5"})
    EXPECT_NE(with(v).find("field 'hidden_size' must be an integer"), std::string::npos) << v;
}

TEST(Config, HfJsonRoundTripAndLenient) {
  ModelConfig s = load_model_config_toml(kSmall);
  auto j = s.to_hf_json();
  j["torch_dtype"] = "bfloat16";
  j["transformers_version"] = "4.57.0";
  j["num_hidden_layers"] = 120;  // stale in the released config: ignored
  ModelConfig r = model_config_from_hf_json(j, "config.json");
  EXPECT_EQ(r.to_hf_json(), s.to_hf_json());
  ModelConfig t = parse_model_config_toml(s.to_toml(), "roundtrip.toml");
  EXPECT_EQ(t.to_hf_json(), s.to_hf_json());
}
