// libFuzzer target: an HF config.json (src/model/config.cpp: load_model_config_hf, i.e.
// JSON parse + model_config_from_hf_json). A config it accepts is also written back out
// (to_hf_json, to_toml) and the TOML form parsed again.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ZAYA_FUZZ_EXPECT_ERRORS({
    const nlohmann::json j = nlohmann::json::parse(data, data + size);
    const zaya::ModelConfig c = zaya::model_config_from_hf_json(j, "config.json");
    (void)c.to_hf_json().dump();
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::parse_model_config_toml(c.to_toml(), "config.json as TOML"));
    (void)c.conv_channels(), (void)c.gqa_group(), (void)c.rotary_dim();
  });
  return 0;
}
