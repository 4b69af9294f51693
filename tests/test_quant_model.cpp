// zaya quantize end to end on a small random model whose rows fit the k-quant super-block:
// the mix (which tensor gets which type, fallbacks recorded), the values against the source,
// the file read back by the independent Python reader (tools/reference/gguf_reader.py),
// --keep, refusing to overwrite, a NaN scale in a file is a one-line error at load; and
// inference on the quantized directory: prefill + incremental == one pass, close to bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "core/rng.h"
#include "model/infer.h"
#include "quant/convert/quantize_model.h"
#include "quant/gguf.h"
#include "test_util.h"

using namespace zaya;
using quant::QType;
namespace fs = std::filesystem;

namespace {

// Every matrix row 256 wide except o_proj (Hq * hd = 128): k-quants fit, o_proj falls back.
ModelConfig small_cfg() {
  ModelConfig c = parse_model_config_toml(R"(
name = "quant-test"
model_type = "zaya"
hidden_size = 256
vocab_size = 300
num_attention_heads = 4
cca_num_q_heads = 2
num_query_groups_list = 1
zaya_layers = ["a", 4, "a", 4]
ffn_hidden_size_list = 512
zaya_mlp_expansion = 16
moe_router_topk = 1
zaya_use_mod = true
zaya_use_eda = true
partial_rotary_factor = 0.5
max_position_embeddings = 256
)",
                                          "quant-test");
  c.init_std = 0.05;
  return c;
}

// A random bf16 HF directory with a byte tokenizer (once per process).
const std::string& source_dir() {
  static test_util::TempDir dir("quant_model", "src");
  static bool made = false;
  if (!made) {
    Model<float> m(small_cfg());
    randomize_for_checks(m.layout, 5, m.params.data(), m.buffers.data());
    save_hf_dir(dir.str(), m, DType::BF16, 0, false);
    test_util::write_byte_tokenizer(dir.str());
    made = true;
  }
  static const std::string s = dir.str();
  return s;
}

QuantizeSummary quantize_to(const std::string& dst, QType t, std::vector<std::string> keep = {}) {
  QuantizeOptions o;
  o.type = t;
  o.keep = std::move(keep);
  o.progress = false;
  return quantize_model(source_dir(), dst, o);
}

// The names in a directory, sorted (hidden ones included).
std::vector<std::string> entries_of(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST(QuantModel, MixFallbacksAndValues) {
  test_util::TempDir out("quant_model", "q4k");
  const std::string dst = out / "m";
  const QuantizeSummary s = quantize_to(dst, QType::Q4_K);
  EXPECT_TRUE(fs::exists(dst + "/model.gguf") && fs::exists(dst + "/config.json") && fs::exists(dst + "/tokenizer.json"));
  EXPECT_EQ(entries_of(out.path), std::vector<std::string>{"m"});  // no staging directory left
  ASSERT_EQ(s.fallbacks.size(), 2u);  // the two o_proj
  EXPECT_NE(s.fallbacks[0].find("o_proj.weight: q4_k -> q4_0"), std::string::npos) << s.fallbacks[0];
  EXPECT_LT(s.dst_bytes, s.src_bytes / 3);
  const WeightStore q = open_hf_weights(dst), b = open_hf_weights(source_dir());
  auto type_of = [&](const std::string& n) { return q.find(n)->dtype; };
  EXPECT_EQ(type_of("model.embed_tokens.weight"), WeightDType::Q6_K);
  EXPECT_EQ(type_of("model.layers.0.self_attn.qkv.linear_q.weight"), WeightDType::Q4_K);
  EXPECT_EQ(type_of("model.layers.0.self_attn.o_proj.weight"), WeightDType::Q4_0);
  EXPECT_EQ(type_of("model.layers.1.zaya_block.experts.local_experts.2.linear_fc2.weight"), WeightDType::Q4_K);
  EXPECT_EQ(type_of("model.layers.1.zaya_block.router.router_mlp.0.weight"), WeightDType::BF16);
  EXPECT_EQ(type_of("model.layers.1.zaya_block.router.router_mlp.4.weight"), WeightDType::BF16);
  EXPECT_EQ(type_of("model.layers.1.zaya_block.router.down_proj.weight"), WeightDType::Q4_K);
  EXPECT_EQ(type_of("model.layers.0.self_attn.qkv.conv_qk.1.weight"), WeightDType::BF16);
  EXPECT_EQ(type_of("model.layers.0.input_norm.weight"), WeightDType::BF16);
  EXPECT_EQ(type_of("model.layers.1.zaya_block.router.balancing_biases"), WeightDType::F32);
  EXPECT_EQ(q.all().size(), b.all().size());
  // Every tensor: same shape; values within the format's error of the source.
  for (const auto& [name, v] : b.all()) {
    const WeightView& w = *q.find(name);
    ASSERT_EQ(w.shape, v.shape) << name;
    const int64_t K = v.shape.back();
    const size_t rows = v.numel() / size_t(K);
    std::vector<float> a(static_cast<size_t>(K)), c(static_cast<size_t>(K));
    double e = 0, n2 = 0;
    for (size_t r = 0; r < rows; ++r) {
      quant::dequantize_row(weight_qtype(v.dtype), static_cast<const uint8_t*>(v.data) + r * v.bytes() / rows, a.data(), K);
      quant::dequantize_row(weight_qtype(w.dtype), static_cast<const uint8_t*>(w.data) + r * w.bytes() / rows, c.data(), K);
      for (int64_t k = 0; k < K; ++k) e += double(a[size_t(k)] - c[size_t(k)]) * (a[size_t(k)] - c[size_t(k)]), n2 += double(a[size_t(k)]) * a[size_t(k)];
    }
    const double rel = n2 > 0 ? std::sqrt(e / n2) : std::sqrt(e);
    const double bound = w.dtype == WeightDType::Q4_K || w.dtype == WeightDType::Q4_0 ? 0.13
                         : w.dtype == WeightDType::Q6_K                                ? 0.03
                                                                                        : 0.0;
    EXPECT_LE(rel, bound + 1e-12) << name << " " << dtype_name(w.dtype);
  }
}

TEST(QuantModel, KeepAndTypesOfOtherMixes) {
  test_util::TempDir out("quant_model", "keep");
  quantize_to(out / "a", QType::Q8_0, {"lm_head", "o_proj"});
  const WeightStore a = open_hf_weights(out / "a");
  EXPECT_EQ(a.find("model.embed_tokens.weight")->dtype, WeightDType::BF16);
  EXPECT_EQ(a.find("model.layers.0.self_attn.o_proj.weight")->dtype, WeightDType::BF16);
  EXPECT_EQ(a.find("model.layers.0.self_attn.qkv.linear_k.weight")->dtype, WeightDType::Q8_0);
  quantize_to(out / "b", QType::Q8_0);
  EXPECT_EQ(open_hf_weights(out / "b").find("model.embed_tokens.weight")->dtype, WeightDType::Q8_0);
  // An existing destination is refused without --force; nothing is written.
  const std::string e = test_util::error_of([&] { quantize_to(out / "b", QType::Q4_0); });
  EXPECT_NE(e.find("exists"), std::string::npos) << e;
  EXPECT_EQ(open_hf_weights(out / "b").find("model.layers.0.self_attn.qkv.linear_k.weight")->dtype, WeightDType::Q8_0);
  EXPECT_EQ(entries_of(out.path), (std::vector<std::string>{"a", "b"}));  // no staging directory left
}

// The file read back by tools/reference/gguf_reader.py (written from the GGUF spec): the
// same tensor infos, offsets, alignment and data start as our reader, the metadata a zaya
// model carries, and the same values decoded.
TEST(QuantModel, IndependentPythonReaderAgrees) {
  int st = 0;  // python3 is a dependency (tools/install_deps.sh): its absence fails, not skips
  test_util::command_output("python3 -c 'import json, struct' 2>/dev/null", &st);
  ASSERT_EQ(st, 0) << "python3 unavailable";
  test_util::TempDir out("quant_model", "py");
  quantize_to(out / "m", QType::Q4_K);
  const std::string path = out / "m/model.gguf";
  const std::string js = test_util::command_output(
      "python3 " ZAYA_SOURCE_DIR "/tools/reference/gguf_reader.py " + path + " --json --check-zaya", &st);
  ASSERT_EQ(st, 0) << js;
  const nlohmann::json j = nlohmann::json::parse(js);
  quant::GgufFile f(path);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["alignment"], f.alignment());
  EXPECT_EQ(j["data_start"], f.data_offset());
  EXPECT_EQ(j["file_size"], f.file_size());
  ASSERT_EQ(j["tensors"].size(), f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& t = f.tensors()[i];
    const auto& p = j["tensors"][i];
    EXPECT_EQ(p["name"], t.name);
    EXPECT_EQ(p["offset"], t.offset);
    EXPECT_EQ(p["nbytes"], t.bytes);
    EXPECT_EQ(p["type_id"], uint32_t(t.type));
    EXPECT_EQ(p["dims"].get<std::vector<int64_t>>(), t.ne);
  }
  const auto& m = j["metadata"];
  EXPECT_EQ(m["general.architecture"], "zaya");
  EXPECT_EQ(m["tokenizer.ggml.model"], "llama");
  EXPECT_EQ(m["tokenizer.ggml.tokens"]["array_len"], 260);
  EXPECT_EQ(m["zaya.embedding_length"], 256);
  EXPECT_EQ(m["general.file_type"], 14);
  for (const char* name : {"token_embd.weight", "blk.0.attn_qkv.linear_q.weight", "blk.0.attn_output.weight",
                           "blk.1.ffn_exp.0.linear_fc1.weight", "output_norm.weight"}) {
    const std::string vals =
        test_util::command_output("python3 " ZAYA_SOURCE_DIR "/tools/reference/gguf_reader.py " + path + " --dequant " + name, &st);
    ASSERT_EQ(st, 0) << vals;
    const auto pv = nlohmann::json::parse(vals).get<std::vector<double>>();
    const quant::GgufTensor* t = nullptr;
    for (const auto& x : f.tensors())
      if (x.name == name) t = &x;
    ASSERT_TRUE(t);
    std::vector<float> ours(static_cast<size_t>(t->ne[0]));
    quant::dequantize_row(t->type, t->data, ours.data(), t->ne[0]);
    for (size_t k = 0; k < pv.size(); ++k) EXPECT_FLOAT_EQ(float(pv[k]), ours[k]) << name << " " << k;
  }
}

// A tokenizer with more pieces than the model has embedding rows: one line naming both
// counts, and nothing written (generate and eval would refuse the file).
TEST(QuantModel, TokenizerLargerThanTheVocabularyIsAnError) {
  test_util::TempDir out("quant_model", "tok");
  ModelConfig c = small_cfg();
  c.vocab_size = 200;  // the byte tokenizer has 256 byte pieces and its specials
  Model<float> m(c);
  randomize_for_checks(m.layout, 5, m.params.data(), m.buffers.data());
  save_hf_dir(out / "src", m, DType::BF16, 0, false);
  QuantizeOptions o;
  o.type = QType::Q8_0;
  o.progress = false;
  o.tokenizer = source_dir() + "/tokenizer.json";
  const std::string e = test_util::error_of([&] { quantize_model(out / "src", out / "q", o); });
  EXPECT_NE(e.find("pieces but the model's vocabulary is 200"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(out / "q"));
  EXPECT_EQ(entries_of(out.path), (std::vector<std::string>{"src"}));
}

TEST(QuantModel, NanScaleAndTruncationAreOneLineErrors) {
  test_util::TempDir out("quant_model", "nan");
  quantize_to(out / "m", QType::Q8_0);
  const std::string path = out / "m/model.gguf";
  uint64_t at = 0;
  {
    quant::GgufFile f(path);
    for (const auto& t : f.tensors())
      if (t.name == "blk.2.attn_qkv.linear_k.weight") at = f.data_offset() + t.offset + 34 * 3;  // block 3's d
  }
  ASSERT_GT(at, 0u);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(long(at));
    const uint16_t nan = 0x7e00;
    f.write(reinterpret_cast<const char*>(&nan), 2);
  }
  std::string e = test_util::error_of([&] { open_hf_weights(out / "m"); });
  EXPECT_NE(e.find("blk.2.attn_qkv.linear_k.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("NaN or infinite scale"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  fs::resize_file(path, fs::file_size(path) - 100);
  e = test_util::error_of([&] { open_hf_weights(out / "m"); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}
