#include "model/config.h"

#include <cmath>
#include <limits>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "core/error.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// TOML -> JSON so that both config sources go through one field reader.
json toml_to_json(const toml::node& n) {
  if (auto t = n.as_table()) {
    json j = json::object();
    for (auto&& [k, v] : *t) j[std::string(k.str())] = toml_to_json(v);
    return j;
  }
  if (auto a = n.as_array()) {
    json j = json::array();
    for (auto&& v : *a) j.push_back(toml_to_json(v));
    return j;
  }
  if (auto v = n.as_integer()) return v->get();
  if (auto v = n.as_floating_point()) return v->get();
  if (auto v = n.as_boolean()) return v->get();
  if (auto v = n.as_string()) return v->get();
  return json();
}

struct Reader {
  const json& j;
  const std::string& where;
  bool strict;
  std::set<std::string> used;

  bool has(const char* k) { used.insert(k); return j.contains(k) && !j[k].is_null(); }
  const json& at(const char* k) {
    if (!has(k)) fail(where, ": missing field '", k, "'");
    return j[k];
  }
  // An int field: an integer, or a float with an integral value (HF configs write 1e-5 style
  // numbers), within int's range (checked before any cast: a cast out of range is undefined).
  int get_int(const json& v, const std::string& k) {
    constexpr double lo = std::numeric_limits<int>::min(), hi = std::numeric_limits<int>::max();
    if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(hi)) return int(v.get<uint64_t>());
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= int64_t(lo) &&
        v.get<int64_t>() <= int64_t(hi))
      return int(v.get<int64_t>());
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d >= lo && d <= hi && d == std::floor(d)) return int(d);
    }
    if (v.is_number()) fail(where, ": field '", k, "' must be an integer within int's range, got ", v.dump());
    fail(where, ": field '", k, "' must be an integer, got ", v.dump());
  }
  int req_int(const char* k) { return get_int(at(k), k); }
  void opt_int(const char* k, int& out) { if (has(k)) out = get_int(j[k], k); }
  void opt_double(const char* k, double& out) {
    if (!has(k)) return;
    if (!j[k].is_number()) fail(where, ": field '", k, "' must be a number, got ", j[k].dump());
    out = j[k].get<double>();
  }
  void opt_bool(const char* k, bool& out) {
    if (!has(k)) return;
    if (!j[k].is_boolean()) fail(where, ": field '", k, "' must be true or false, got ", j[k].dump());
    out = j[k].get<bool>();
  }
  void opt_string(const char* k, std::string& out) {
    if (!has(k)) return;
    if (!j[k].is_string()) fail(where, ": field '", k, "' must be a string");
    out = j[k].get<std::string>();
  }
  // A per-sub-layer field: a scalar, or a list as long as zaya_layers, read at the
  // sub-layers of one kind (`parity` 0 = attention, 1 = MoE) and required uniform.
  int per_layer(const char* k, size_t nsub, int parity, bool required, int dflt) {
    if (!has(k)) {
      if (required) fail(where, ": missing field '", k, "'");
      return dflt;
    }
    const json& v = j[k];
    if (!v.is_array()) return get_int(v, k);
    if (v.size() != nsub)
      fail(where, ": field '", k, "' has ", v.size(), " entries but zaya_layers has ", nsub);
    int val = -1;
    for (size_t i = parity; i < nsub; i += 2) {
      int x = get_int(v[i], k);
      if (val >= 0 && x != val)
        fail(where, ": field '", k, "' differs between sub-layers (", val, " vs ", x,
             " at index ", i, "); zaya.cpp supports uniform layers only");
      val = x;
    }
    return val;
  }
  void reject_unknown() {
    if (!strict) return;
    for (auto& [k, v] : j.items())
      if (!used.count(k)) fail(where, ": unknown field '", k, "'");
  }
};

ModelConfig from_fields(const json& j, const std::string& where, bool strict) {
  if (!j.is_object()) fail(where, ": expected a table of fields");
  Reader r{j, where, strict, {}};
  ModelConfig c;
  std::string mt = "zaya";
  r.opt_string("model_type", mt);
  if (mt != "zaya") fail(where, ": field 'model_type' is '", mt, "', expected 'zaya'");
  r.opt_string("name", c.name);
  c.hidden_size = r.req_int("hidden_size");
  c.vocab_size = r.req_int("vocab_size");
  c.num_attention_heads = r.req_int("num_attention_heads");
  r.opt_int("head_dim", c.head_dim);

  const json& layers = r.at("zaya_layers");
  if (!layers.is_array() || layers.empty() || layers.size() % 2)
    fail(where, ": field 'zaya_layers' must be a non-empty list of even length ('a', experts, 'a', experts, ...)");
  size_t nsub = layers.size();
  for (size_t i = 0; i < nsub; ++i) {
    const json& e = layers[i];
    if (i % 2 == 0) {
      if (!(e.is_string() && e.get<std::string>() == "a"))
        fail(where, ": zaya_layers[", i, "] must be 'a' (attention sub-layers sit at even indices), got ", e.dump());
    } else {
      if (!e.is_number_integer() || e.get<int>() <= 0)
        fail(where, ": zaya_layers[", i, "] must be a positive expert count, got ", e.dump());
      if (c.num_experts && e.get<int>() != c.num_experts)
        fail(where, ": zaya_layers[", i, "] has ", e.get<int>(), " experts but earlier MoE sub-layers have ",
             c.num_experts, "; zaya.cpp supports uniform layers only");
      c.num_experts = e.get<int>();
    }
  }
  c.num_layers = int(nsub / 2);
  c.num_q_heads = r.per_layer("cca_num_q_heads", nsub, 0, true, 0);
  int groups = r.per_layer("num_query_groups_list", nsub, 0, false, -1);
  int kvh = -1;
  r.opt_int("num_key_value_heads", kvh);
  if (groups < 0 && kvh < 0) fail(where, ": missing field 'num_query_groups_list' (or 'num_key_value_heads')");
  if (groups >= 0 && kvh >= 0 && groups != kvh)
    fail(where, ": 'num_query_groups_list' (", groups, ") and 'num_key_value_heads' (", kvh, ") disagree");
  c.num_kv_heads = groups >= 0 ? groups : kvh;
  c.ffn_hidden_size = r.per_layer("ffn_hidden_size_list", nsub, 1, true, 0);
  c.router_hidden = r.per_layer("zaya_mlp_expansion", nsub, 1, true, 0);
  r.opt_int("moe_router_topk", c.topk);
  r.opt_int("cca_time0", c.conv_kernel0);
  r.opt_int("cca_time1", c.conv_kernel1);
  r.opt_bool("zaya_use_mod", c.use_mod);
  r.opt_bool("zaya_use_eda", c.use_eda);
  r.opt_bool("scale_residual_merge", c.scale_residual_merge);
  r.opt_bool("residual_in_fp32", c.residual_in_fp32);
  r.opt_bool("tie_word_embeddings", c.tie_word_embeddings);
  r.opt_double("norm_epsilon", c.norm_eps);
  r.opt_double("router_norm_epsilon", c.router_norm_eps);
  r.opt_double("rope_theta", c.rope_theta);
  r.opt_double("partial_rotary_factor", c.partial_rotary_factor);
  r.opt_int("max_position_embeddings", c.max_position_embeddings);
  r.opt_int("pad_token_id", c.pad_token_id);
  r.opt_int("bos_token_id", c.bos_token_id);
  r.opt_int("eos_token_id", c.eos_token_id);
  r.opt_double("init_std", c.init_std);
  // Fields that must hold their one supported value.
  for (const char* k : {"add_bias_linear", "attention_bias", "lm_head_bias"}) {
    bool b = false;
    r.opt_bool(k, b);
    if (b) fail(where, ": field '", k, "' = true is not part of ZAYA1 (no biases there)");
  }
  bool glu = true;
  r.opt_bool("gated_linear_unit", glu);
  if (!glu) fail(where, ": field 'gated_linear_unit' must be true (SwiGLU experts)");
  std::string act = "swiglu";
  r.opt_string("activation_func", act);
  if (act != "swiglu") fail(where, ": field 'activation_func' is '", act, "', only 'swiglu' is supported");
  if (c.head_dim == 0 && c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads)
    fail(where, ": field 'num_attention_heads' (", c.num_attention_heads, ") does not divide hidden_size (",
         c.hidden_size, ")");
  if (c.head_dim == 0 && c.num_attention_heads > 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  r.reject_unknown();
  try {
    c.validate();
  } catch (const Error& e) {
    fail(where, ": ", e.what());
  }
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open file");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace

void ModelConfig::validate() const {
  auto pos = [](const char* k, long v) { if (v <= 0) fail("field '", k, "' must be positive, got ", v); };
  pos("hidden_size", hidden_size);
  pos("vocab_size", vocab_size);
  pos("num_attention_heads", num_attention_heads);
  pos("head_dim", head_dim);
  pos("cca_num_q_heads", num_q_heads);
  pos("num_query_groups_list", num_kv_heads);
  pos("zaya_layers (layers)", num_layers);
  pos("zaya_layers (experts)", num_experts);
  pos("ffn_hidden_size_list", ffn_hidden_size);
  pos("zaya_mlp_expansion", router_hidden);
  pos("cca_time0", conv_kernel0);
  pos("cca_time1", conv_kernel1);
  pos("max_position_embeddings", max_position_embeddings);
  if (num_classes() > 256) fail("zaya_layers: ", num_experts, " experts exceed the supported 255 (+ skip class)");
  if (conv_kernel0 > 8 || conv_kernel1 > 8) fail("fields 'cca_time0'/'cca_time1' must be at most 8");
  if (num_q_heads % num_kv_heads)
    fail("field 'num_query_groups_list' (", num_kv_heads, ") does not divide 'cca_num_q_heads' (", num_q_heads, ")");
  if (head_dim % 2) fail("head dim ", head_dim, " must be even (RoPE rotates pairs)");
  if (partial_rotary_factor <= 0 || partial_rotary_factor > 1)
    fail("field 'partial_rotary_factor' must be in (0, 1], got ", partial_rotary_factor);
  if (rotary_dim() % 2 || rotary_dim() <= 0)
    fail("field 'partial_rotary_factor': rotary dim ", rotary_dim(), " must be a positive even number");
  if ((num_kv_heads * head_dim) % 2) fail("Hk * head dim must be even (val_proj1/val_proj2 halves)");
  if (ffn_hidden_size % 2) fail("field 'ffn_hidden_size_list' (", ffn_hidden_size, ") must be even (gate and up halves)");
  if (topk < 1 || topk > num_classes())
    fail("field 'moe_router_topk' (", topk, ") must be between 1 and the number of router classes (", num_classes(), ")");
  if (rope_theta <= 0) fail("field 'rope_theta' must be positive");
  if (norm_eps <= 0 || router_norm_eps <= 0) fail("field 'norm_epsilon' must be positive");
  for (auto [k, v] : {std::pair{"pad_token_id", pad_token_id}, {"bos_token_id", bos_token_id}, {"eos_token_id", eos_token_id}})
    if (v < 0 || v >= vocab_size) fail("field '", k, "' (", v, ") is outside the vocabulary (", vocab_size, ")");
  if (!tie_word_embeddings) fail("field 'tie_word_embeddings' must be true (ZAYA1 ties the LM head)");
}

json ModelConfig::to_hf_json() const {
  json layers = json::array();
  for (int l = 0; l < num_layers; ++l) { layers.push_back("a"); layers.push_back(num_experts); }
  auto list = [&](int v) { return json(std::vector<int>(size_t(num_sublayers()), v)); };
  json j;
  j["model_type"] = "zaya";
  j["architectures"] = {"ZayaForCausalLM"};
  j["hidden_size"] = hidden_size;
  j["vocab_size"] = vocab_size;
  j["num_attention_heads"] = num_attention_heads;
  j["head_dim"] = head_dim;
  j["num_key_value_heads"] = num_kv_heads;
  j["cca_num_q_heads"] = list(num_q_heads);
  j["num_query_groups_list"] = list(num_kv_heads);
  j["zaya_layers"] = layers;
  j["num_hidden_layers"] = num_sublayers();
  j["ffn_hidden_size_list"] = list(ffn_hidden_size);
  j["zaya_mlp_expansion"] = list(router_hidden);
  j["moe_router_topk"] = topk;
  j["cca_time0"] = conv_kernel0;
  j["cca_time1"] = conv_kernel1;
  j["zaya_use_mod"] = use_mod;
  j["zaya_use_eda"] = use_eda;
  j["scale_residual_merge"] = scale_residual_merge;
  j["partial_rotary_factor"] = partial_rotary_factor;
  j["rope_theta"] = rope_theta;
  j["norm_epsilon"] = norm_eps;
  j["max_position_embeddings"] = max_position_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["pad_token_id"] = pad_token_id;
  j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_token_id;
  j["add_bias_linear"] = false;
  j["attention_bias"] = false;
  j["lm_head_bias"] = false;
  j["gated_linear_unit"] = true;
  j["activation_func"] = "swiglu";
  j["residual_in_fp32"] = residual_in_fp32;
  return j;
}

std::string ModelConfig::to_toml() const {
  std::ostringstream os;
  os << "name = \"" << name << "\"\nhidden_size = " << hidden_size << "\nvocab_size = " << vocab_size
     << "\nnum_attention_heads = " << num_attention_heads << "\nhead_dim = " << head_dim
     << "\ncca_num_q_heads = " << num_q_heads << "\nnum_query_groups_list = " << num_kv_heads
     << "\nzaya_layers = [";
  for (int l = 0; l < num_layers; ++l) os << (l ? ", " : "") << "\"a\", " << num_experts;
  os << "]\nffn_hidden_size_list = " << ffn_hidden_size << "\nzaya_mlp_expansion = " << router_hidden
     << "\nmoe_router_topk = " << topk << "\ncca_time0 = " << conv_kernel0 << "\ncca_time1 = " << conv_kernel1
     << "\nzaya_use_mod = " << (use_mod ? "true" : "false") << "\nzaya_use_eda = " << (use_eda ? "true" : "false")
     << "\nscale_residual_merge = " << (scale_residual_merge ? "true" : "false")
     << "\npartial_rotary_factor = " << partial_rotary_factor << "\nrope_theta = " << rope_theta
     << "\nnorm_epsilon = " << norm_eps << "\nrouter_norm_epsilon = " << router_norm_eps
     << "\nmax_position_embeddings = " << max_position_embeddings << "\npad_token_id = " << pad_token_id
     << "\nbos_token_id = " << bos_token_id << "\neos_token_id = " << eos_token_id << "\ninit_std = " << init_std
     << "\n";
  return os.str();
}

ModelConfig parse_model_config_toml(const std::string& text, const std::string& path) {
  toml::table t;
  try {
    t = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail(path, ":", e.source().begin.line, ": TOML syntax error: ", e.description());
  }
  return from_fields(toml_to_json(t), path, /*strict=*/true);
}

ModelConfig load_model_config_toml(const std::string& path) {
  return parse_model_config_toml(read_file(path), path);
}

ModelConfig model_config_from_hf_json(const json& j, const std::string& path) {
  return from_fields(j, path, /*strict=*/false);
}

ModelConfig load_model_config_hf(const std::string& path) {
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::parse_error& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
  return model_config_from_hf_json(j, path);
}

ModelConfig load_model_config(const std::string& path) {
  if (fs::is_directory(path)) return load_model_config_hf((fs::path(path) / "config.json").string());
  if (fs::path(path).extension() == ".json") return load_model_config_hf(path);
  return load_model_config_toml(path);
}

}  // namespace zaya
