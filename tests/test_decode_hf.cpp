// Decoding and HF-format I/O: prefill + incremental decode equals the full forward;
// export -> load gives identical logits; `zaya score` output; bad safetensors inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/hf.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/decode.h"
#include "check_util.h"

using namespace zaya;
namespace fs = std::filesystem;

static ModelConfig tiny() {
  ModelConfig c = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  c.init_std = 0.2;
  return c;
}

static std::string tmpdir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("zaya_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

TEST(Decode, PrefillThenStepsEqualsFullForward) {
  for (int topk : {1, 2}) {
    ModelConfig c = tiny();
    c.topk = topk;
    Model<double> m(c);
    randomize_for_checks(m.layout, 3, m.params.data(), m.buffers.data());
    const int B = 2, T = 11, prefill = 4;
    std::vector<int32_t> ids(B * T);
    Philox r(5, 1);
    for (auto& v : ids) v = int32_t(r.below(c.vocab_size));
    m.forward(ids.data(), nullptr, B, T);
    std::vector<double> full(m.logits(), m.logits() + size_t(B) * T * c.vocab_size);
    Decoder<double> dec(m, B, T);
    test_util::MaxError worst;
    auto compare = [&](const double* last, int t) {
      for (int b = 0; b < B; ++b)
        worst.add(&last[size_t(b) * c.vocab_size], &full[(size_t(b) * T + t) * c.vocab_size], size_t(c.vocab_size));
    };
    std::vector<int32_t> chunk(B * prefill);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < prefill; ++t) chunk[b * prefill + t] = ids[b * T + t];
    compare(dec.feed(chunk.data(), prefill), prefill - 1);
    for (int t = prefill; t < T; ++t) {
      int32_t step[B];
      for (int b = 0; b < B; ++b) step[b] = ids[b * T + t];
      compare(dec.feed(step, 1), t);
    }
    EXPECT_EQ(dec.pos(), T);
    EXPECT_TRUE(worst.within(1e-10)) << "top-k " << topk;
    EXPECT_THROW(dec.feed(chunk.data(), 1), Error);  // full
  }
}

TEST(HfIo, ExportThenLoadGivesIdenticalLogits) {
  ModelConfig c = tiny();
  c.num_attention_heads = 8;  // HF code needs Hq = nominal heads / 2
  c.head_dim = 8;
  Model<float> a(c);
  randomize_for_checks(a.layout, 9, a.params.data(), a.buffers.data());
  std::string dir = tmpdir("hf_roundtrip");
  save_hf_dir(dir, a, DType::F32, /*max_shard_bytes=*/20000);  // several shards + index
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model.safetensors.index.json"));
  Model<float> b(load_model_config(dir));
  load_hf_weights(dir, b);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.buffers, b.buffers);
  std::vector<int32_t> ids = {1, 5, 9, 33, 2, 7, 7, 80};
  a.forward(ids.data(), nullptr, 1, 8);
  b.forward(ids.data(), nullptr, 1, 8);
  for (size_t i = 0; i < size_t(8) * c.vocab_size; ++i) ASSERT_EQ(a.logits()[i], b.logits()[i]);
  // A missing shard is an error naming it.
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("model-00002", 0) == 0) fs::remove(e.path());
  try {
    load_hf_weights(dir, b);
    FAIL() << "no error for a missing shard";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model-00002"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(HfIo, ExportRefusesConfigsTheHfCodeCannotLoad) {
  ModelConfig c = tiny();  // Hq = 4 = nominal heads: not HF-loadable
  Model<float> m(c);
  std::string dir = tmpdir("hf_refuse");
  EXPECT_THROW(save_hf_dir(dir, m, DType::BF16), Error);
  fs::remove_all(dir);
}

// Writes raw bytes as a file.
static void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}
static std::string with_header(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = char(n >> (8 * i));
  return s + header + std::string(data_bytes, '\0');
}
static std::string st_error(const std::string& bytes) {
  std::string p = tmpdir("st") + "/bad.safetensors";
  write_bytes(p, bytes);
  try {
    SafetensorsFile f(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ValidatesLikeTheFormatRules) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(st_error(with_header(ok, 8)), "");
  EXPECT_NE(st_error("abc").find("truncated"), std::string::npos);
  EXPECT_NE(st_error(with_header(ok, 4)).find("'a'"), std::string::npos);  // past the data section
  EXPECT_NE(st_error(with_header(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8)).find("dtype"),
            std::string::npos);
  EXPECT_NE(st_error(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("'a'"),
            std::string::npos);
  EXPECT_NE(st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)).find("contiguous"),
            std::string::npos);
  EXPECT_NE(st_error(with_header("[1,2]", 0)).find("'{'"), std::string::npos);
  EXPECT_NE(st_error(with_header("{\"a\":", 0)).find("JSON"), std::string::npos);
  std::string huge(8, '\0');
  huge[4] = 1;  // 2^32-byte header
  EXPECT_NE(st_error(huge).find("100 MB"), std::string::npos);
}

TEST(Score, CliPrintsLogprobsAndLoss) {
  ModelConfig c = tiny();
  Model<float> m(c);
  randomize_for_checks(m.layout, 4, m.params.data(), m.buffers.data());
  std::string dir = tmpdir("score");
  save_hf_dir(dir, m, DType::F32, 0, false);
  {
    std::ofstream f(dir + "/ids.txt");
    f << "3 17 42\n9 1";
  }
  std::string cmd = std::string(ZAYA_BIN) + " score --model " + dir + " --ids " + dir + "/ids.txt --json";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  auto j = nlohmann::json::parse(out);
  std::vector<int32_t> ids = {3, 17, 42, 9, 1};
  auto r = m.forward(ids.data(), ids.data() + 1, 1, 4);
  ASSERT_EQ(j["logprobs"].size(), 4u);
  EXPECT_EQ(j["tokens"], 4);
  EXPECT_NEAR(j["loss"].get<double>(), r.loss, 1e-6);
  double sum = 0;
  for (auto& v : j["logprobs"]) sum -= v.get<double>();
  EXPECT_NEAR(sum / 4, r.loss, 1e-6);
  // Bad input: an out-of-vocabulary id is a one-line error and a non-zero exit.
  {
    std::ofstream f(dir + "/bad.txt");
    f << "3 100000";
  }
  std::string bad = std::string(ZAYA_BIN) + " score --model " + dir + " --ids " + dir + "/bad.txt 2>&1";
  p = popen(bad.c_str(), "r");
  out.clear();
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(pclose(p), 0);
  EXPECT_NE(out.find("outside the vocabulary"), std::string::npos) << out;
  fs::remove_all(dir);
}
