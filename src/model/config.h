// ModelConfig: the ZAYA1 hyper-parameters, named as in the HF config (spec section 6).
// Read from our TOML configs (strict: unknown keys are errors) or from an HF config.json
// (lenient: fields the model does not use are ignored, as real HF configs carry many).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zaya {

struct ModelConfig {
  std::string name = "zaya";
  int hidden_size = 0;            // D
  int vocab_size = 0;             // V
  int num_attention_heads = 0;    // nominal heads: head_dim = D / this
  int head_dim = 0;               // hd (derived unless given)
  int num_q_heads = 0;            // Hq  (cca_num_q_heads)
  int num_kv_heads = 0;           // Hk  (num_query_groups_list / num_key_value_heads)
  int num_layers = 0;             // L: pairs of (attention, MoE) sub-layers
  int num_experts = 0;            // E routed experts (the skip class is extra)
  int topk = 1;                   // moe_router_topk
  int ffn_hidden_size = 0;        // F: expert fc1 out (gate+up); fc2 in = F/2
  int router_hidden = 0;          // R: zaya_mlp_expansion
  int conv_kernel0 = 2, conv_kernel1 = 2;  // cca_time0, cca_time1
  bool use_mod = true;            // zaya_use_mod: skip class
  bool use_eda = true;            // zaya_use_eda
  bool scale_residual_merge = true;
  bool residual_in_fp32 = true;
  bool tie_word_embeddings = true;
  double norm_eps = 1e-5;
  double router_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  double partial_rotary_factor = 0.5;
  int max_position_embeddings = 4096;
  int pad_token_id = 0, eos_token_id = 1, bos_token_id = 2;
  double init_std = 0.02;         // training-from-scratch init (not an HF field)

  // Derived.
  int num_sublayers() const { return 2 * num_layers; }
  int num_classes() const { return num_experts + (use_mod ? 1 : 0); }  // router outputs
  int gqa_group() const { return num_q_heads / num_kv_heads; }
  int conv_channels() const { return (num_q_heads + num_kv_heads) * head_dim; }  // C
  int rotary_dim() const { return int(head_dim * partial_rotary_factor); }
  int conv_pad() const { return (conv_kernel0 - 1) + (conv_kernel1 - 1); }

  void validate() const;  // throws zaya::Error naming the field
  nlohmann::json to_hf_json() const;
  std::string to_toml() const;
};

// Strict TOML model config (configs/*.toml). `path` names the file in errors.
ModelConfig load_model_config_toml(const std::string& path);
ModelConfig parse_model_config_toml(const std::string& text, const std::string& path);
// Lenient HF config.json.
ModelConfig load_model_config_hf(const std::string& path);
ModelConfig model_config_from_hf_json(const nlohmann::json& j, const std::string& path);
// A model given as a TOML file, an HF directory or an HF config.json.
ModelConfig load_model_config(const std::string& path);

}  // namespace zaya
