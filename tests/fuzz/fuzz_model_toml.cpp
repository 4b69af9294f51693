// libFuzzer target: a model config TOML (src/model/config.cpp: parse_model_config_toml, the
// strict reader behind load_model_config_toml). A config it accepts is also written back
// out (to_toml, to_hf_json) and read again.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ZAYA_FUZZ_EXPECT_ERRORS({
    const zaya::ModelConfig c = zaya::parse_model_config_toml(text, "model.toml");
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::parse_model_config_toml(c.to_toml(), "model.toml again"));
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::model_config_from_hf_json(c.to_hf_json(), "model.toml as HF"));
  });
  return 0;
}
