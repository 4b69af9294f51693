// Helpers shared by the test files: a temporary directory per test, the message of an error,
// the GEMM precision set for a scope.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/gemm.h"
#include "model/config.h"

namespace zaya::test_util {

// A fresh directory under the system temp dir (unique per suite, tag and process), removed
// at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir(const std::string& suite, const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("zaya_test_" + suite + "_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The message of the zaya::Error that f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Runs a shell command; returns what it printed on stdout and stores its wait status.
// A small ZAYA1 (two CCA + MoE pairs, 4 experts, top-2, MoD, EDA, half-rotary RoPE, 128
// positions) with the given widths; head dim = hidden / heads.
inline zaya::ModelConfig small_zaya_config(const std::string& name, int hidden, int vocab, int heads, int kv_groups,
                                           int ffn, double init_std) {
  const std::string toml = "name = \"" + name + "\"\nmodel_type = \"zaya\"\nhidden_size = " +
                           std::to_string(hidden) + "\nvocab_size = " + std::to_string(vocab) +
                           "\nnum_attention_heads = " + std::to_string(heads) + "\ncca_num_q_heads = " +
                           std::to_string(heads) + "\nnum_query_groups_list = " + std::to_string(kv_groups) +
                           "\nzaya_layers = [\"a\", 4, \"a\", 4]\nffn_hidden_size_list = " + std::to_string(ffn) +
                           "\nzaya_mlp_expansion = 16\nmoe_router_topk = 2\nzaya_use_mod = true\nzaya_use_eda = true\n"
                           "partial_rotary_factor = 0.5\nmax_position_embeddings = 128\n";
  zaya::ModelConfig c = zaya::parse_model_config_toml(toml, name);
  c.init_std = init_std;
  return c;
}

inline std::string command_output(const std::string& cmd, int* status) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  *status = pclose(p);
  return out;
}

// Writes a byte-level tokenizer.json (<pad> <eos> <bos> <unk>, then <0x00>..<0xFF>: 260
// pieces, no merges) and its tokenizer_config.json (adds <bos>, eos <eos>) into dir.
inline void write_byte_tokenizer(const std::string& dir) {
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  const char* specials[4] = {"<pad>", "<eos>", "<bos>", "<unk>"};
  for (int i = 0; i < 4; ++i) {
    vocab[specials[i]] = i;
    added.push_back({{"id", i}, {"content", specials[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 4 + b;
  }
  const nlohmann::json decoders = {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
  nlohmann::json tj = {{"version", "1.0"},
                       {"added_tokens", added},
                       {"normalizer", nullptr},
                       {"pre_tokenizer", nullptr},
                       {"post_processor", nullptr},
                       {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
                       {"model",
                        {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
                         {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  std::ofstream(dir + "/tokenizer.json") << tj.dump();
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"add_bos_token": true, "bos_token": "<bos>", "eos_token": "<eos>"})";
}

// Sets the GEMM precision for a scope and restores the previous one, whatever the test does.
struct PrecisionScope {
  GemmPrecision prev = gemm_settings().precision;
  explicit PrecisionScope(GemmPrecision p) { gemm_settings().precision = p; }
  ~PrecisionScope() { gemm_settings().precision = prev; }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;
};

}  // namespace zaya::test_util
